// kolo-bench's pieces without processes: flag parsing (both the size sweep
// and --mode step), the size series, the step presets, the periodic workload
// and its expected reductions (checked against a direct per-element
// computation), and the statistics and bandwidth figures.
#include <cmath>
#include <cstring>
#include <vector>

#include "bench/options.h"
#include "bench/plot.h"
#include "bench/presets.h"
#include "bench/report.h"
#include "bench/workload.h"
#include "gtest/gtest.h"

namespace kolo::bench {
namespace {

absl::StatusOr<BenchOptions> Parse(std::vector<std::string> args) {
  return ParseBenchOptions(args);
}

TEST(BenchOptions, Defaults) {
  absl::StatusOr<BenchOptions> o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->op, Collective::kAllreduce);
  EXPECT_EQ(o->mode, Mode::kRaw);
  EXPECT_EQ(o->dtype, DataType::kFloat32);
  EXPECT_EQ(o->reduce, ReduceOp::kSum);
  EXPECT_EQ(o->min_bytes, 4);
  EXPECT_EQ(o->max_bytes, int64_t{64} << 20);
  EXPECT_FALSE(o->inplace);
  EXPECT_EQ(o->iters, 0);
  EXPECT_EQ(o->seconds, 1);
}

TEST(BenchOptions, EveryFlag) {
  absl::StatusOr<BenchOptions> o = Parse({"--op",           "reducescatter",
                                          "--dtype",        "bf16",
                                          "--reduce",       "max",
                                          "--min-bytes",    "1K",
                                          "--max-bytes",    "2G",
                                          "--factor",       "2",
                                          "--iters",        "7",
                                          "--warmup",       "0",
                                          "--gap-us",       "250",
                                          "--json",         "/tmp/x.json",
                                          "--corrupt-rank", "1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->op, Collective::kReducescatter);
  EXPECT_EQ(o->dtype, DataType::kBFloat16);
  EXPECT_EQ(o->reduce, ReduceOp::kMax);
  EXPECT_EQ(o->min_bytes, 1024);
  EXPECT_EQ(o->max_bytes, int64_t{2} << 30);
  EXPECT_EQ(o->factor, 2);
  EXPECT_EQ(o->iters, 7);
  EXPECT_EQ(o->warmup, 0);
  EXPECT_EQ(o->gap_us, 250);
  EXPECT_EQ(o->json_path, "/tmp/x.json");
  EXPECT_EQ(o->corrupt_rank, 1);
  absl::StatusOr<BenchOptions> m = Parse({"--mode", "negotiated"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->mode, Mode::kNegotiated);
  EXPECT_EQ(ModeName(m->mode), "negotiated");
  m = Parse({"--mode", "RAW"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->mode, Mode::kRaw);
  absl::StatusOr<BenchOptions> b = Parse({"--op", "broadcast", "--root", "2"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->inplace);  // broadcast is always in place
  EXPECT_EQ(b->root, 2);
}

TEST(BenchOptions, BadInputNamesTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--op", "allsum"}, "--op: unknown collective 'allsum'"},
           {{"--mode", "fast"},
            "--mode: unknown mode 'fast'; use raw, negotiated or step"},
           {{"--mode"}, "missing value: '--mode'"},
           {{"--dtype", "complex"}, "--dtype: 'complex'"},
           {{"--min-bytes", "12Q"}, "--min-bytes: '12Q'"},
           {{"--min-bytes", "2M", "--max-bytes", "1M"}, "above --max-bytes"},
           {{"--factor", "1"}, "--factor: '1' is not a number > 1"},
           {{"--iters", "0"}, "--iters"},
           {{"--gap-us", "-5"},
            "--gap-us: '-5' is not a number of microseconds"},
           {{"--iters", "3", "--seconds", "1"}, "both given"},
           {{"--op", "allgather", "--reduce", "max"}, "not allgather"},
           {{"--op", "alltoall", "--inplace"}, "not alltoall"},
           {{"--root", "1"}, "broadcast only"},
           {{"--bogus", "1"}, "unknown flag '--bogus'"},
           {{"--json"}, "missing value: '--json'"},
       }) {
    absl::StatusOr<BenchOptions> o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.message;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.message), std::string::npos)
        << o.status();
  }
}

// CLI11's spellings: "--flag=value" (an empty one is empty); the last of a
// repeated flag wins, each value checked in order.
TEST(BenchOptions, SpellingsAndRepeats) {
  absl::StatusOr<BenchOptions> o = Parse(
      {"--op=broadcast", "--root", "1", "--root=2", "--json=", "--warmup=0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->op, Collective::kBroadcast);
  EXPECT_EQ(o->root, 2);
  EXPECT_EQ(o->json_path, "");
  EXPECT_EQ(o->warmup, 0);
  absl::StatusOr<BenchOptions> values = Parse({"--json", "--inplace"});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->json_path, "--inplace");
  EXPECT_FALSE(values->inplace);
  EXPECT_EQ(Parse({"--iters", "0", "--iters", "x"}).status().message(),
            "--iters: '0' is not a whole number >= 1");
  EXPECT_EQ(Parse({"--inplace=1"}).status().message(),
            "unknown flag '--inplace=1' (see --help)");
  EXPECT_EQ(Parse({"--warmup", "1", "extra"}).status().message(),
            "unknown flag 'extra' (see --help)");
}

TEST(BenchOptions, DeviceCuda) {
  absl::StatusOr<BenchOptions> o =
      Parse({"--mode", "negotiated", "--device", "cuda"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->cuda);
  EXPECT_FALSE(Parse({"--device", "cpu"})->cuda);
  EXPECT_EQ(Parse({"--device", "cuda"}).status().message(),
            "--device cuda needs --mode negotiated (kolo::raw::* take host "
            "buffers only)");
  EXPECT_FALSE(Parse({"--device", "gpu"}).ok());
  EXPECT_FALSE(
      Parse({"--mode", "step", "--preset", "resnet50", "--device", "cuda"})
          .ok());
}

TEST(BenchOptions, StepMode) {
  absl::StatusOr<BenchOptions> o =
      Parse({"--mode", "step", "--preset", "resnet50"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mode, Mode::kStep);
  EXPECT_EQ(ModeName(o->mode), "step");
  ASSERT_TRUE(o->preset.has_value());
  EXPECT_EQ(*o->preset, Preset::kResnet50);
  EXPECT_EQ(o->steps, 20);
  EXPECT_EQ(o->warmup, 3);
  EXPECT_EQ(o->reduce, ReduceOp::kAverage);
  EXPECT_TRUE(o->fusion_thresholds.empty());
  EXPECT_TRUE(o->cache_capacities.empty());
  EXPECT_FALSE(o->inplace);  // out of place unless --inplace
  // No list: one setting that leaves the job's values.
  std::vector<StepSetting> settings = StepSettings(*o);
  ASSERT_EQ(settings.size(), 1u);
  EXPECT_EQ(settings[0].fusion_threshold, StepSetting::kFromEnv);
  EXPECT_EQ(settings[0].cache_capacity, StepSetting::kFromEnv);

  o = Parse({"--mode",
             "STEP",
             "--preset",
             "Small161",
             "--steps",
             "7",
             "--warmup",
             "0",
             "--fusion-threshold",
             "0,64M, 128m",
             "--cache-capacity",
             "0,1024",
             "--json",
             "/tmp/s.json",
             "--corrupt-rank",
             "1",
             "--op",
             "allreduce",
             "--dtype",
             "float32",
             "--reduce",
             "average",
             "--inplace"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->inplace);
  EXPECT_EQ(*o->preset, Preset::kSmall161);
  EXPECT_EQ(o->steps, 7);
  EXPECT_EQ(o->warmup, 0);
  EXPECT_EQ(o->fusion_thresholds,
            (std::vector<int64_t>{0, int64_t{64} << 20, int64_t{128} << 20}));
  EXPECT_EQ(o->cache_capacities, (std::vector<int64_t>{0, 1024}));
  EXPECT_EQ(o->json_path, "/tmp/s.json");
  EXPECT_EQ(o->corrupt_rank, 1);
  // Thresholds outermost, in the order given.
  settings = StepSettings(*o);
  ASSERT_EQ(settings.size(), 6u);
  const int64_t want[6][2] = {{0, 0},
                              {0, 1024},
                              {int64_t{64} << 20, 0},
                              {int64_t{64} << 20, 1024},
                              {int64_t{128} << 20, 0},
                              {int64_t{128} << 20, 1024}};
  for (size_t i = 0; i < settings.size(); ++i) {
    EXPECT_EQ(settings[i].fusion_threshold, want[i][0]) << i;
    EXPECT_EQ(settings[i].cache_capacity, want[i][1]) << i;
  }
  // One list alone: the other stays the job's.
  o = Parse(
      {"--mode", "step", "--preset", "small161", "--cache-capacity", "0,5"});
  ASSERT_TRUE(o.ok()) << o.status();
  settings = StepSettings(*o);
  ASSERT_EQ(settings.size(), 2u);
  EXPECT_EQ(settings[1].fusion_threshold, StepSetting::kFromEnv);
  EXPECT_EQ(settings[1].cache_capacity, 5);
}

TEST(BenchOptions, StepModeRefusals) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<std::string> step = {"--mode", "step", "--preset",
                                         "small161"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = step;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  for (const Case& c : std::vector<Case>{
           {{"--mode", "step"}, "--mode step needs --preset"},
           {{"--preset", "resnet50"}, "--preset applies to --mode step only"},
           {{"--mode", "negotiated", "--steps", "3"},
            "--steps applies to --mode step only"},
           {{"--fusion-threshold", "0"}, "--fusion-threshold applies to"},
           {{"--cache-capacity", "0"}, "--cache-capacity applies to"},
           {{"--mode", "step", "--preset", "vgg16"},
            "--preset: unknown preset 'vgg16'; use resnet50 or small161"},
           {with({"--op", "broadcast"}),
            "--op broadcast does not apply to --mode step"},
           {with({"--dtype", "float16"}),
            "--dtype float16 does not apply to --mode step"},
           {with({"--reduce", "sum"}),
            "--reduce sum does not apply to --mode step"},
           {with({"--max-bytes", "1M"}),
            "--max-bytes does not apply to --mode step"},
           {with({"--iters", "5"}), "--iters does not apply to --mode step"},
           {with({"--root", "1"}), "--root does not apply to --mode step"},
           {with({"--steps", "0"}), "--steps: '0' is not a whole number >= 1"},
           {with({"--fusion-threshold", "0,,64M"}),
            "--fusion-threshold: '0,,64M' is not a comma-separated list"},
           {with({"--fusion-threshold", "-1"}), "--fusion-threshold: '-1'"},
           {with({"--fusion-threshold", ""}), "--fusion-threshold: ''"},
           {with({"--cache-capacity", "1K"}),
            "--cache-capacity: '1K' is not a comma-separated list of entry "
            "counts"},
           {with({"--cache-capacity", "-3"}), "--cache-capacity: '-3'"},
           {with({"--cache-capacity"}), "missing value: '--cache-capacity'"},
       }) {
    absl::StatusOr<BenchOptions> o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.message;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.message), std::string::npos)
        << o.status();
  }
}

// The embedded ResNet-50 table against the facts of torchvision's model
// (161 parameter tensors, 25,557,032 elements).
TEST(Presets, SizesAndNames) {
  const absl::Span<const int64_t> resnet = PresetCounts(Preset::kResnet50);
  ASSERT_EQ(resnet.size(), 161u);
  int64_t sum = 0;
  for (int64_t c : resnet) {
    EXPECT_GT(c, 0);
    sum += c;
  }
  EXPECT_EQ(sum, 25557032);
  EXPECT_EQ(PresetBytes(Preset::kResnet50), 102228128);
  EXPECT_EQ(resnet.front(), 9408);                // conv1: 64 x 3 x 7 x 7
  EXPECT_EQ(resnet[resnet.size() - 2], 2048000);  // fc.weight: 1000 x 2048
  EXPECT_EQ(resnet.back(), 1000);                 // fc.bias
  EXPECT_NEAR(static_cast<double>(PresetBytes(Preset::kResnet50)) / (1 << 20),
              97.49, 0.01);
  const absl::Span<const int64_t> small = PresetCounts(Preset::kSmall161);
  ASSERT_EQ(small.size(), 161u);
  for (int64_t c : small) EXPECT_EQ(c, 256);
  EXPECT_EQ(PresetBytes(Preset::kSmall161), 161 * 1024);
  EXPECT_EQ(PresetTensorName(Preset::kResnet50, 160), "resnet50/param.160");
  EXPECT_EQ(PresetTensorName(Preset::kSmall161, 0), "small161/param.0");
  EXPECT_EQ(*ParsePreset("ResNet50"), Preset::kResnet50);
  EXPECT_FALSE(ParsePreset("resnet").ok());
}

TEST(BenchOptions, ParseBytesAndSeries) {
  EXPECT_EQ(*ParseBytes("0"), 0);
  EXPECT_EQ(*ParseBytes("4"), 4);
  EXPECT_EQ(*ParseBytes("64k"), 65536);
  EXPECT_EQ(*ParseBytes("256M"), int64_t{256} << 20);
  EXPECT_FALSE(ParseBytes("-1").ok());
  EXPECT_FALSE(ParseBytes("M").ok());
  EXPECT_EQ(SizeSeries(4, 64, 2), (std::vector<int64_t>{4, 8, 16, 32, 64}));
  EXPECT_EQ(SizeSeries(4, 100, 4), (std::vector<int64_t>{4, 16, 64}));
  EXPECT_EQ(SizeSeries(0, 100, 8), (std::vector<int64_t>{0, 1, 8, 64}));
  EXPECT_EQ(SizeSeries(10, 20, 1.5), (std::vector<int64_t>{10, 15}));
  EXPECT_EQ(SizeSeries(5, 5, 2), (std::vector<int64_t>{5}));
}

// The expected reduction against a direct computation, element by element,
// over a range crossing many periods and starting mid-period.
TEST(Workload, ExpectedMatchesDirectReduction) {
  for (int n : {1, 2, 3, 5, 7}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      const int64_t first = 5, count = 100;
      std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count));
      for (int r = 0; r < n; ++r) {
        InputStream(DataType::kInt32, op, r).Fill(first, count, in[r].data());
      }
      std::vector<int32_t> want(count);
      for (int64_t i = 0; i < count; ++i) {
        int32_t acc = in[0][i];
        for (int r = 1; r < n; ++r) {
          const int32_t v = in[r][i];
          if (op == ReduceOp::kSum) acc += v;
          if (op == ReduceOp::kMin) acc = std::min(acc, v);
          if (op == ReduceOp::kMax) acc = std::max(acc, v);
          if (op == ReduceOp::kProduct) acc *= v;
        }
        want[i] = acc;
      }
      const Periodic expected = ExpectedReduction(DataType::kInt32, op, n);
      EXPECT_TRUE(expected.Check(first, count, want.data(), "x").ok())
          << n << " ranks, " << ReduceOpName(op);
    }
  }
}

TEST(Workload, AverageAndWrapAndBool) {
  // int8 average truncates toward zero: at k = 0 the two ranks hold -3 and
  // -2 (k % 7 - 3 for k = 0, 1): -5 / 2 = -2.
  std::vector<int8_t> got(kPeriod);
  ExpectedReduction(DataType::kInt8, ReduceOp::kAverage, 2)
      .Fill(0, kPeriod, got.data());
  EXPECT_EQ(got[0], -2);
  // uint8 product wraps: streams hold 2 where (k + r) % 3 == 0, else 1; with
  // 27 ranks, k = 0 sees nine 2s: 512 wraps to 0, k = 1 too, k = 2 likewise.
  std::vector<uint8_t> prod(kPeriod);
  ExpectedReduction(DataType::kUInt8, ReduceOp::kProduct, 27)
      .Fill(0, kPeriod, prod.data());
  EXPECT_EQ(prod[0], 0);
  ExpectedReduction(DataType::kUInt8, ReduceOp::kProduct, 7)
      .Fill(0, kPeriod, prod.data());
  EXPECT_EQ(prod[0], 8);  // ranks 0, 3, 6
  // bool product is AND, sum is OR.
  std::vector<uint8_t> band(kPeriod), bor(kPeriod);
  ExpectedReduction(DataType::kBool, ReduceOp::kProduct, 3)
      .Fill(0, kPeriod, band.data());
  ExpectedReduction(DataType::kBool, ReduceOp::kSum, 3)
      .Fill(0, kPeriod, bor.data());
  for (int k = 0; k < kPeriod; ++k) {
    bool all = true, any = false;
    for (int r = 0; r < 3; ++r) {
      const bool v = (k + r) % 3 != 0;
      all &= v;
      any |= v;
    }
    EXPECT_EQ(band[k], all ? 1 : 0) << k;
    EXPECT_EQ(bor[k], any ? 1 : 0) << k;
  }
}

TEST(Workload, CheckNamesTheFirstBadElement) {
  const Periodic p = InputStream(DataType::kFloat32, ReduceOp::kSum, 0);
  std::vector<float> data(50000);
  p.Fill(3, 50000, data.data());
  EXPECT_TRUE(p.Check(3, 50000, data.data(), "buf").ok());
  data[43210] += 1;
  absl::Status st = p.Check(3, 50000, data.data(), "buf");
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("buf: element 43210"), std::string::npos) << st;
  // Poison is never a valid value of any stream.
  Poison(data.data(), 4);
  EXPECT_FALSE(p.Check(3, 1, data.data(), "buf").ok());
}

TEST(Workload, FloatAverageToleratesRounding) {
  const Periodic p =
      ExpectedReduction(DataType::kFloat32, ReduceOp::kAverage, 3);
  std::vector<float> got(kPeriod);
  p.Fill(0, kPeriod, got.data());
  got[4] = std::nextafter(got[4], 100.0f);
  EXPECT_TRUE(p.Check(0, kPeriod, got.data(), "avg").ok());
  got[4] += 0.01f;
  EXPECT_FALSE(p.Check(0, kPeriod, got.data(), "avg").ok());
}

// --mode step's expected values: rank r's tensor t holds stream r from
// position t; the average is the exact float sum over the ranks divided by
// static_cast<float>(n), compared bitwise.
TEST(Workload, ExactFloat32AverageIsFloatSumOverN) {
  for (int n : {1, 2, 3, 5, 7}) {
    for (int64_t tensor : {0, 1, 20, 160}) {
      const int64_t count = 100;
      std::vector<std::vector<float>> in(n, std::vector<float>(count));
      for (int r = 0; r < n; ++r) {
        InputStream(DataType::kFloat32, ReduceOp::kSum, r)
            .Fill(tensor, count, in[r].data());
      }
      std::vector<float> want(count);
      for (int64_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += in[r][i];
        EXPECT_EQ(sum, std::round(sum)) << "small integers sum exactly";
        want[i] = sum / static_cast<float>(n);
      }
      const Periodic expected = ExactFloat32Average(n);
      EXPECT_TRUE(expected.Check(tensor, count, want.data(), "x").ok())
          << n << " ranks, tensor " << tensor;
      // No tolerance: one ulp off fails (n = 1: the inputs themselves).
      want[17] = std::nextafter(want[17], 100.0f);
      absl::Status st = expected.Check(tensor, count, want.data(), "t");
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << n;
      EXPECT_NE(st.message().find("t: element 17"), std::string::npos) << st;
    }
  }
  // Tensors differ: tensor 0 and tensor 1 of rank 0 are shifted streams.
  std::vector<float> a(4), b(4);
  InputStream(DataType::kFloat32, ReduceOp::kSum, 0).Fill(0, 4, a.data());
  InputStream(DataType::kFloat32, ReduceOp::kSum, 0).Fill(1, 4, b.data());
  EXPECT_NE(a, b);
}

// Nearest rank: the ceil(p/100 x n)-th smallest, never an interpolation.
TEST(Report, PercentileIsNearestRank) {
  EXPECT_EQ(Percentile({}, 90), 0);
  EXPECT_EQ(Percentile({7}, 90), 7);
  EXPECT_EQ(Percentile({2, 1}, 90), 2);        // ceil(1.8) = 2nd
  EXPECT_EQ(Percentile({3, 1, 2, 4}, 50), 2);  // 2nd of 4, not 2.5
  std::vector<double> ten = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_EQ(Percentile(ten, 90), 9);  // exactly the 9th, not the 10th
  EXPECT_EQ(Percentile(ten, 91), 10);
  EXPECT_EQ(Percentile(ten, 100), 10);
  EXPECT_EQ(Percentile(ten, 0.001), 1);
  std::vector<double> many(2000);
  for (size_t i = 0; i < many.size(); ++i) {
    many[i] = static_cast<double>((i * 7919) % many.size());  // 0..1999
  }
  EXPECT_EQ(Percentile(many, 90), 1799);  // the 1800th smallest
  EXPECT_EQ(Percentile(many, 50), 999);
}

TEST(Report, MedianAndBandwidth) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllreduce, 1), 0);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kBroadcast, 4), 1);
  Row row;
  row.ranks = 2;
  row.bytes = 1000000;
  row.time_us = 500;  // 1e6 B in 500 us = 2 GB/s
  ComputeBandwidth(Collective::kAllreduce, row);
  EXPECT_DOUBLE_EQ(row.algbw, 2.0);
  EXPECT_DOUBLE_EQ(row.busbw, 2.0);
  row.op = "allreduce";
  row.mode = "negotiated";
  row.p90_us = 612.5;
  row.check_ok = true;
  const std::string json = ToJson({row, row});
  EXPECT_NE(json.find("\"mode\": \"negotiated\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"time_us\": 500.000, \"p90_us\": 612.500"),
            std::string::npos)
      << json;
  EXPECT_NE(TableLine(row).find(" 500.0 "), std::string::npos);
  EXPECT_NE(TableLine(row).find(" 612.5 "), std::string::npos);
  EXPECT_NE(TableHeader().find(" p90 "), std::string::npos);
  EXPECT_NE(json.find("\"busbw_gbps\": 2.000000"), std::string::npos) << json;
  EXPECT_NE(json.find("},\n  {"), std::string::npos) << json;
  EXPECT_NE(TableLine(row).find(" ok"), std::string::npos);
}

TEST(Report, StepRowTableAndJson) {
  EXPECT_EQ(SettingText(-1, true), "env");
  EXPECT_EQ(SettingText(-1, false), "env");
  EXPECT_EQ(SettingText(0, true), "0");
  EXPECT_EQ(SettingText(int64_t{64} << 20, true), "64M");
  EXPECT_EQ(SettingText(int64_t{2} << 30, true), "2G");
  EXPECT_EQ(SettingText(3072, true), "3K");
  EXPECT_EQ(SettingText(1536, true), "1536");
  EXPECT_EQ(SettingText(1000, true), "1000");
  EXPECT_EQ(SettingText(1024, false), "1024");  // entries: no suffix
  StepRow row;
  row.preset = "resnet50";
  row.ranks = 2;
  row.tensors = 161;
  row.bytes = 102228128;
  row.fusion_threshold = int64_t{64} << 20;
  row.cache_capacity = StepSetting::kFromEnv;
  row.steps = 20;
  row.warmup = 3;
  row.step_ms = 102.228128;  // 1e9 B/s algbw; busbw x 2(n-1)/n = x 1
  row.step_p90_ms = 150.5;
  row.enqueue_ms = 0.25;
  row.check_ok = true;
  ComputeStepBandwidth(row);
  EXPECT_DOUBLE_EQ(row.algbw, 1.0);
  EXPECT_DOUBLE_EQ(row.busbw, 1.0);
  row.ranks = 4;
  ComputeStepBandwidth(row);
  EXPECT_DOUBLE_EQ(row.busbw, 1.5);
  const std::string line = StepTableLine(row);
  for (const char* field :
       {" resnet50 ", " 161 ", " 97.49 ", " 64M ", " env ", " 102.228 ",
        " 150.500 ", " 0.250 ", " 1.500 ", " ok"}) {
    EXPECT_NE(line.find(field), std::string::npos) << field << " in " << line;
  }
  EXPECT_NE(StepTableHeader().find(" enqueue "), std::string::npos);
  EXPECT_NE(StepTableHeader().find(" fusion "), std::string::npos);
  StepRow other = row;
  other.fusion_threshold = 0;
  other.cache_capacity = 1024;
  other.check_ok = false;
  const std::string json = StepToJson({row, other});
  EXPECT_NE(json.find("\"mode\": \"step\", \"preset\": \"resnet50\", "
                      "\"ranks\": 4, \"tensors\": 161, \"bytes\": 102228128"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"fusion_threshold\": 67108864, \"cache_capacity\": "
                      "\"env\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"fusion_threshold\": 0, \"cache_capacity\": 1024"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"step_ms\": 102.2281, \"step_p90_ms\": 150.5000, "
                      "\"enqueue_ms\": 0.2500"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"check\": \"ok\"},\n  {"), std::string::npos) << json;
  EXPECT_NE(json.find("\"check\": \"fail\"}\n]"), std::string::npos) << json;
}

// --- --plot --------------------------------------------------------------

TEST(Plot, FlagsAndRefusals) {
  absl::StatusOr<BenchOptions> o =
      Parse({"--plot", "out.PNG", "--plot-peers", "peers.txt"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->plot_path, "out.PNG");
  EXPECT_EQ(o->plot_peers_path, "peers.txt");
  EXPECT_EQ(*PlotFormatOf("a/b.svg"), PlotFormat::kSvg);
  EXPECT_EQ(*PlotFormatOf("x.png"), PlotFormat::kPng);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--plot", "out.jpg"},
            "--plot: 'out.jpg' does not end in .png or .svg"},
           {{"--plot", ".png"}, "does not end in .png or .svg"},
           {{"--plot", "png"}, "does not end in .png or .svg"},
           {{"--plot-peers", "p.txt"}, "give --plot FILE.png"},
           {{"--op", "allgather", "--plot", "a.png", "--plot-peers", "p"},
            "measures allreduce"},
           {{"--mode", "step", "--preset", "small161", "--plot", "a.png"},
            "--plot does not apply to --mode step"},
       }) {
    absl::StatusOr<BenchOptions> bad = Parse(c.args);
    ASSERT_FALSE(bad.ok()) << c.message;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(c.message), std::string::npos)
        << bad.status();
  }
}

// A report as scripts/peer-bench.sh prints it (two tables, all columns).
constexpr char kPeerReport[] =
    R"(# 2026-11-27 10:00 UTC; system congestion control: cubic; peers: gloo ompi vader

2 ranks: time (us), median of 3 rounds (min-max)

| size | kolo (shm) | kolo TCP | kolo / kolo TCP | Gloo ring | kolo / Gloo ring | Open MPI TCP | kolo / Open MPI TCP | Open MPI shm (vader) | kolo / Open MPI shm (vader) |
|---|---|---|---|---|---|---|---|---|---|
| 4 B | 0.4 (0.4-0.5) | 7.0 (6.9-7.3) | 0.06 | 40.1 (39.0-41.0) | 0.01 | 12.0 (11.0-13.0) | 0.03 | 0.2 (0.2-0.3) | 2.00 |
| 1 MiB | 120.0 (110.0-130.0) | 209.0 (200.0-210.0) | 0.57 | 1,500.0 (1,400.0-1,600.0) | 0.08 | 300.0 (290.0-310.0) | 0.40 | - | - |

4 ranks: time (us), median of 3 rounds (min-max)

| size | kolo (shm) | kolo TCP | kolo / kolo TCP | Gloo ring | kolo / Gloo ring |
|---|---|---|---|---|---|
| 4 B | 1.0 (1.0-1.0) | 20.0 (20.0-20.0) | 0.05 | 80.0 (80.0-80.0) | 0.01 |

raw figures: /tmp/kolo-peers.abc
)";

TEST(Plot, ReadsThePeerBenchReport) {
  absl::StatusOr<std::vector<PlotSeries>> two = ParsePeerBench(kPeerReport, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 4u);
  EXPECT_EQ((*two)[0].label, "kolo TCP (peer-bench)");
  EXPECT_EQ((*two)[1].label, "Gloo ring");
  EXPECT_EQ((*two)[2].label, "Open MPI TCP");
  EXPECT_EQ((*two)[3].label, "Open MPI shm (vader)");
  ASSERT_EQ((*two)[1].points.size(), 2u);
  EXPECT_EQ((*two)[1].points[1].bytes, 1 << 20);
  EXPECT_DOUBLE_EQ((*two)[1].points[1].time_us, 1500.0);
  // 1 MiB in 1.5 ms: algbw 0.699 GB/s, busbw x 2(2-1)/2 = the same.
  EXPECT_NEAR((*two)[1].points[1].algbw, 1048576 / 1.5e6, 1e-9);
  EXPECT_NEAR((*two)[1].points[1].busbw, 1048576 / 1.5e6, 1e-9);
  EXPECT_EQ((*two)[3].points.size(), 1u);  // "-" is no point
  absl::StatusOr<std::vector<PlotSeries>> four = ParsePeerBench(kPeerReport, 4);
  ASSERT_TRUE(four.ok()) << four.status();
  ASSERT_EQ(four->size(), 2u);
  EXPECT_NEAR((*four)[1].points[0].busbw, 4 / 80e3 * 1.5, 1e-12);

  absl::StatusOr<std::vector<PlotSeries>> three =
      ParsePeerBench(kPeerReport, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("no table for 3 ranks (it has 2, 4 "
                                          "ranks)"),
            std::string::npos)
      << three.status();
  absl::StatusOr<std::vector<PlotSeries>> none =
      ParsePeerBench("hello\nworld\n", 2);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("is it the output of"),
            std::string::npos);
  absl::StatusOr<std::vector<PlotSeries>> broken = ParsePeerBench(
      "2 ranks: time (us), x\n| size | Gloo ring |\n| 4 Q | 1.0 |\n", 2);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("line 3"), std::string::npos)
      << broken.status();
}

TEST(Plot, ScriptDrawsEverySeriesOnBothPanels) {
  Row a;
  a.bytes = 4;
  a.time_us = 2;
  a.ranks = 2;
  ComputeBandwidth(Collective::kAllreduce, a);
  Row zero;  // 0 bytes: not on a log axis
  zero.bytes = 0;
  zero.time_us = 1;
  Row b = a;
  b.bytes = 64 << 20;
  b.time_us = 10000;
  ComputeBandwidth(Collective::kAllreduce, b);
  std::vector<PlotSeries> series = {SeriesFromRows("kolo", {zero, a, b})};
  ASSERT_EQ(series[0].points.size(), 2u);
  series.push_back(PlotSeries{"Gloo's ring", {{4, 40, 0.1, 0.1}}});
  PlotSpec spec;
  spec.path = "/tmp/it's.svg";
  spec.format = PlotFormat::kSvg;
  spec.title = "allreduce \"float32\"";
  spec.ranks = 2;
  const std::string script =
      GnuplotScript(spec, series, {"/tmp/d/series0.dat", "/tmp/d/series1.dat"});
  EXPECT_NE(script.find("set terminal svg"), std::string::npos) << script;
  EXPECT_NE(script.find("set output '/tmp/it''s.svg'"), std::string::npos)
      << script;
  EXPECT_NE(script.find("title \"allreduce \\\"float32\\\"\""),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("'/tmp/d/series0.dat' using 1:2"), std::string::npos);
  EXPECT_NE(script.find("'/tmp/d/series1.dat' using 1:3"), std::string::npos);
  EXPECT_NE(script.find("title \"Gloo's ring\""), std::string::npos);
  EXPECT_NE(script.find("\"4 B\" 4"), std::string::npos) << script;
  EXPECT_NE(script.find("\"64 MiB\" 67108864"), std::string::npos) << script;
  EXPECT_NE(script.find("bus bandwidth"), std::string::npos);
  spec.ranks = 1;
  spec.format = PlotFormat::kPng;
  const std::string one =
      GnuplotScript(spec, series, {"/tmp/d/series0.dat", "/tmp/d/series1.dat"});
  EXPECT_NE(one.find("set terminal pngcairo"), std::string::npos);
  EXPECT_NE(one.find("'/tmp/d/series0.dat' using 1:4"), std::string::npos)
      << one;
  EXPECT_EQ(SizeLabel(1536), "1536 B");
  EXPECT_EQ(SizeLabel(16384), "16 KiB");
}

}  // namespace
}  // namespace kolo::bench
