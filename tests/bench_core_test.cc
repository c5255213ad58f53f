// kolo-bench's pieces without processes: flag parsing, the size series, the
// periodic workload and its expected reductions (checked against a direct
// per-element computation), and the statistics and bandwidth figures.
#include <cstring>
#include <vector>

#include "bench/options.h"
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
            "--mode: unknown mode 'fast'; use raw or negotiated"},
           {{"--mode"}, "missing value: '--mode'"},
           {{"--dtype", "complex"}, "--dtype: 'complex'"},
           {{"--min-bytes", "12Q"}, "--min-bytes: '12Q'"},
           {{"--min-bytes", "2M", "--max-bytes", "1M"}, "above --max-bytes"},
           {{"--factor", "1"}, "--factor: '1' is not a number > 1"},
           {{"--iters", "0"}, "--iters"},
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

}  // namespace
}  // namespace kolo::bench
