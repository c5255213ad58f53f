// kolo-bench under kolorun: every collective on 1-3 ranks over a few sizes
// (including 0 and sizes that do not split evenly) passes its result check
// and writes one JSON record per size, in raw and in negotiated mode; a
// corrupted result on one rank makes the run fail, naming that rank and
// element. --mode step runs a preset's training step once per setting
// (fusion threshold x cache capacity) and checks it the same way.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

std::string Bin(const std::string& name) { return BinDir() + "/" + name; }

struct BenchRun {
  int exit_code = -1;
  std::string output;
  std::string json;
};

BenchRun Bench(int n, std::vector<std::string> flags) {
  const std::string json = (std::filesystem::temp_directory_path() /
                            absl::StrCat("kolo_bench_test_", getpid(), ".json"))
                               .string();
  std::filesystem::remove(json);
  std::vector<std::string> argv = {Bin("kolorun"),    "-np",
                                   std::to_string(n), Bin("kolo-bench"),
                                   "--json",          json};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Subprocess p(argv);
  BenchRun run;
  absl::Status st = p.Start();
  EXPECT_TRUE(st.ok()) << st;
  st = p.Wait(Scaled(absl::Seconds(120)));
  EXPECT_TRUE(st.ok()) << st;
  run.exit_code = p.exit_info().exited ? p.exit_info().code : -1;
  run.output = p.output();
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  run.json = text.str();
  std::filesystem::remove(json);
  return run;
}

int Count(const std::string& text, const std::string& needle) {
  int found = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++found;
  }
  return found;
}

class BenchWorld : public ::testing::TestWithParam<int> {};

TEST_P(BenchWorld, EveryCollectivePassesItsCheck) {
  const int n = GetParam();
  for (const char* op :
       {"allreduce", "allgather", "broadcast", "alltoall", "reducescatter"}) {
    // 0, 3, 72, 1728 and 41472 B, float32 (3 B rounds down to 0 elements
    // and runs once): tiny, not multiples of n elements, past the
    // small-allreduce threshold only at the top.
    BenchRun run =
        Bench(n, {"--op", op, "--min-bytes", "0", "--max-bytes", "100K",
                  "--factor", "24", "--iters", "3", "--warmup", "1"});
    const std::string what = absl::StrCat(op, " on ", n, " ranks");
    ASSERT_EQ(run.exit_code, 0) << what << "\n" << run.output;
    EXPECT_EQ(Count(run.output, " ok\n"), Count(run.json, "\"check\": \"ok\""))
        << what << "\n"
        << run.output;
    EXPECT_GE(Count(run.json, "\"check\": \"ok\""), 4) << what << run.json;
    EXPECT_EQ(Count(run.json, "\"check\": \"fail\""), 0) << run.json;
    EXPECT_EQ(Count(run.json, absl::StrCat("\"ranks\": ", n)),
              Count(run.json, "\"op\": "))
        << run.json;
    EXPECT_NE(run.json.find("\"size_bytes\": 0,"), std::string::npos)
        << run.json;
    EXPECT_EQ(Count(run.json, "\"mode\": \"raw\""), Count(run.json, "\"op\": "))
        << run.json;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, BenchWorld, ::testing::Values(1, 2, 3));

// --mode negotiated: every collective through the asynchronous API, checked
// exactly, with the same JSON fields plus mode and p90_us.
TEST(Bench, NegotiatedModeEveryCollective) {
  for (const char* op :
       {"allreduce", "allgather", "broadcast", "alltoall", "reducescatter"}) {
    BenchRun run = Bench(2, {"--mode", "negotiated", "--op", op, "--min-bytes",
                             "0", "--max-bytes", "100K", "--factor", "24",
                             "--iters", "3", "--warmup", "1"});
    const std::string what = absl::StrCat(op, " negotiated on 2 ranks");
    ASSERT_EQ(run.exit_code, 0) << what << "\n" << run.output;
    EXPECT_NE(run.output.find("negotiated mode"), std::string::npos)
        << run.output;
    const int records = Count(run.json, "\"op\": ");
    EXPECT_GE(records, 4) << what << run.json;
    EXPECT_EQ(Count(run.json, "\"check\": \"ok\""), records) << run.json;
    EXPECT_EQ(Count(run.json, "\"mode\": \"negotiated\""), records) << run.json;
    EXPECT_EQ(Count(run.json, "\"p90_us\": "), records) << run.json;
    EXPECT_NE(run.json.find("\"size_bytes\": 0,"), std::string::npos)
        << run.json;
  }
}

TEST(Bench, NegotiatedModeInPlaceAndOtherTypes) {
  for (std::vector<std::string> flags : std::vector<std::vector<std::string>>{
           {"--dtype", "int8", "--reduce", "product", "--inplace", "--gap-us",
            "100"},
           {"--dtype", "float16", "--reduce", "average"},
           {"--op", "broadcast", "--root", "1", "--dtype", "uint8"}}) {
    flags.insert(flags.end(), {"--mode", "negotiated", "--max-bytes", "300K",
                               "--factor", "64", "--iters", "2"});
    BenchRun run = Bench(2, flags);
    ASSERT_EQ(run.exit_code, 0) << absl::StrJoin(flags, " ") << "\n"
                                << run.output;
    EXPECT_EQ(Count(run.json, "\"check\": \"fail\""), 0) << run.json;
    EXPECT_EQ(Count(run.json, "\"mode\": \"negotiated\""),
              Count(run.json, "\"op\": "))
        << run.json;
    const bool gap =
        std::find(flags.begin(), flags.end(), "--gap-us") != flags.end();
    EXPECT_EQ(run.output.find("busy 100 us before each iteration") !=
                  std::string::npos,
              gap)
        << run.output;
  }
}

TEST(Bench, NegotiatedCorruptedResultFailsTheRun) {
  BenchRun run =
      Bench(2, {"--mode", "negotiated", "--corrupt-rank", "1", "--min-bytes",
                "1K", "--max-bytes", "1K", "--iters", "2"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("CHECK FAILED: allreduce of 1024 B on rank 1 of 2:"
                            " element 0"),
            std::string::npos)
      << run.output;
}

TEST(Bench, OtherTypesOpsAndInPlace) {
  for (std::vector<std::string> flags : std::vector<std::vector<std::string>>{
           {"--dtype", "float16", "--reduce", "average"},
           {"--dtype", "int8", "--reduce", "product", "--inplace"},
           {"--dtype", "bool", "--reduce", "min"},
           {"--op", "reducescatter", "--dtype", "bfloat16", "--reduce", "max"},
           {"--op", "broadcast", "--root", "2", "--dtype", "uint8"}}) {
    flags.insert(flags.end(),
                 {"--max-bytes", "300K", "--factor", "16", "--iters", "2"});
    BenchRun run = Bench(3, flags);
    ASSERT_EQ(run.exit_code, 0) << absl::StrJoin(flags, " ") << "\n"
                                << run.output;
    EXPECT_EQ(Count(run.json, "\"check\": \"fail\""), 0) << run.json;
  }
}

TEST(Bench, CorruptedResultFailsTheRun) {
  BenchRun run = Bench(3, {"--corrupt-rank", "1", "--min-bytes", "1K",
                           "--max-bytes", "1K", "--iters", "2"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("CHECK FAILED: allreduce of 1024 B on rank 1 of 3:"
                            " element 0"),
            std::string::npos)
      << run.output;
}

// Every "<key>": <number> value in `json`, in order.
std::vector<double> Numbers(const std::string& json, const std::string& key) {
  std::vector<double> values;
  const std::string needle = absl::StrCat("\"", key, "\": ");
  for (size_t at = json.find(needle); at != std::string::npos;
       at = json.find(needle, at + 1)) {
    values.push_back(std::strtod(json.c_str() + at + needle.size(), nullptr));
  }
  return values;
}

// --mode step: one record per threshold x capacity, in that order, each
// checked exactly, with positive times; the settings change in one job.
TEST(Bench, StepModeComparesSettings) {
  BenchRun run = Bench(
      2, {"--mode", "step", "--preset", "small161", "--steps", "3", "--warmup",
          "1", "--fusion-threshold", "0,64M", "--cache-capacity", "0,1024"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("# kolo-bench: step, small161 (161 float32 "
                            "tensors, 0.16 MiB), 2 ranks"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(Count(run.output, " ok\n"), 4) << run.output;
  EXPECT_EQ(Count(run.json, "\"mode\": \"step\""), 4) << run.json;
  EXPECT_EQ(Count(run.json, "\"check\": \"ok\""), 4) << run.json;
  EXPECT_EQ(Count(run.json,
                  "\"preset\": \"small161\", \"ranks\": 2, "
                  "\"tensors\": 161, \"bytes\": 164864"),
            4)
      << run.json;
  EXPECT_EQ(Numbers(run.json, "fusion_threshold"),
            (std::vector<double>{0, 0, 67108864, 67108864}))
      << run.json;
  EXPECT_EQ(Numbers(run.json, "cache_capacity"),
            (std::vector<double>{0, 1024, 0, 1024}))
      << run.json;
  for (const char* key : {"step_ms", "step_p90_ms", "enqueue_ms"}) {
    const std::vector<double> times = Numbers(run.json, key);
    ASSERT_EQ(times.size(), 4u) << key << run.json;
    for (double t : times) EXPECT_GT(t, 0) << key << run.json;
  }
  for (double t : Numbers(run.json, "busbw_gbps")) EXPECT_GT(t, 0) << run.json;
}

TEST(Bench, StepModeCorruptedResultFailsTheRun) {
  BenchRun run = Bench(2, {"--mode", "step", "--preset", "small161", "--steps",
                           "2", "--warmup", "0", "--corrupt-rank", "1"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("CHECK FAILED: small161/param.0 on rank 1 of 2: "
                            "element 0 is "),
            std::string::npos)
      << run.output;
  EXPECT_EQ(Count(run.json, "\"check\": \"fail\""), 1) << run.json;
}

// --mode step --inplace: each tensor is its own output; the steps before
// the last reduce the inputs again, and the last one (from the original
// inputs) is checked exactly; a corrupted result still fails.
TEST(Bench, StepModeInPlaceChecksTheLastStep) {
  BenchRun run =
      Bench(3, {"--mode", "step", "--preset", "small161", "--steps", "4",
                "--warmup", "2", "--inplace", "--gap-us", "50"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("busy 50 us before each step"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("3 ranks, average allreduce, in place"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(Count(run.json, "\"check\": \"ok\""), 1) << run.json;
  BenchRun bad = Bench(2, {"--mode", "step", "--preset", "small161", "--steps",
                           "2", "--inplace", "--corrupt-rank", "0"});
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("CHECK FAILED: small161/param.0 on rank 0 of 2"),
            std::string::npos)
      << bad.output;
}

TEST(Bench, BadFlagIsRefusedBeforeAnyWork) {
  Subprocess p({Bin("kolo-bench"), "--op", "allsum"});
  ASSERT_TRUE(p.Start().ok());
  ASSERT_TRUE(p.Wait(Scaled(absl::Seconds(30))).ok());
  EXPECT_EQ(p.exit_info().code, 2);
  EXPECT_NE(p.output().find("unknown collective 'allsum'"), std::string::npos)
      << p.output();
  Subprocess m({Bin("kolo-bench"), "--mode", "fast"});
  ASSERT_TRUE(m.Start().ok());
  ASSERT_TRUE(m.Wait(Scaled(absl::Seconds(30))).ok());
  EXPECT_EQ(m.exit_info().code, 2);
  EXPECT_NE(m.output().find("--mode: unknown mode 'fast'; use raw, "
                            "negotiated or step"),
            std::string::npos)
      << m.output();
  Subprocess s({Bin("kolo-bench"), "--mode", "step"});
  ASSERT_TRUE(s.Start().ok());
  ASSERT_TRUE(s.Wait(Scaled(absl::Seconds(30))).ok());
  EXPECT_EQ(s.exit_info().code, 2);
  EXPECT_NE(s.output().find("--mode step needs --preset resnet50 or --preset "
                            "small161"),
            std::string::npos)
      << s.output();
}

// --plot: with gnuplot present, a 2-rank sweep with a peer-bench report
// draws a PNG, a 1-rank one an SVG; a bad extension is refused before any
// work, and a missing gnuplot is named (before the sweep).
bool HaveGnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Bench, PlotDrawsPngWithPeersAndSvg) {
  if (!HaveGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string png =
      absl::StrCat(dir, "/kolo_plot_test_", getpid(), ".png");
  const std::string svg =
      absl::StrCat(dir, "/kolo_plot_test_", getpid(), ".svg");
  const std::string peers =
      absl::StrCat(dir, "/kolo_plot_test_", getpid(), ".peers");
  {
    std::ofstream out(peers);
    out << "2 ranks: time (us), median of 1 rounds (min-max)\n\n"
           "| size | kolo (shm) | Gloo ring | kolo / Gloo ring |\n"
           "|---|---|---|---|\n"
           "| 4 B | 1.0 (1.0-1.0) | 40.0 (40.0-40.0) | 0.03 |\n"
           "| 1 KiB | 2.0 (2.0-2.0) | 50.0 (50.0-50.0) | 0.04 |\n";
  }
  BenchRun run = Bench(2, {"--max-bytes", "4K", "--seconds", "0.05", "--plot",
                           png, "--plot-peers", peers});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("# plot: " + png), std::string::npos) << run.output;
  const std::string picture = Slurp(png);
  EXPECT_GT(picture.size(), 1000u);
  EXPECT_EQ(picture.substr(0, 4), "\x89PNG");

  Subprocess one({Bin("kolo-bench"), "--max-bytes", "4K", "--seconds", "0.05",
                  "--plot", svg});
  ASSERT_TRUE(one.Start().ok());
  ASSERT_TRUE(one.Wait(Scaled(absl::Seconds(60))).ok());
  EXPECT_EQ(one.exit_info().code, 0) << one.output();
  const std::string drawing = Slurp(svg);
  EXPECT_NE(drawing.find("<svg"), std::string::npos) << drawing.substr(0, 200);
  EXPECT_NE(drawing.find("algorithm bandwidth"), std::string::npos);
  std::filesystem::remove(png);
  std::filesystem::remove(svg);
  std::filesystem::remove(peers);
}

TEST(Bench, PlotBadExtensionOrNoGnuplotIsRefused) {
  Subprocess p({Bin("kolo-bench"), "--plot", "out.jpg"});
  ASSERT_TRUE(p.Start().ok());
  ASSERT_TRUE(p.Wait(Scaled(absl::Seconds(30))).ok());
  EXPECT_EQ(p.exit_info().code, 2);
  EXPECT_NE(p.output().find("--plot: 'out.jpg' does not end in .png or .svg"),
            std::string::npos)
      << p.output();
  // No gnuplot on PATH: refused before the sweep, saying what to install.
  const std::string empty = (std::filesystem::temp_directory_path() /
                             absl::StrCat("kolo_no_gnuplot_", getpid()))
                                .string();
  std::filesystem::create_directories(empty);
  Subprocess q({Bin("kolo-bench"), "--plot", "out.png"}, {{"PATH", empty}});
  ASSERT_TRUE(q.Start().ok());
  ASSERT_TRUE(q.Wait(Scaled(absl::Seconds(60))).ok());
  EXPECT_EQ(q.exit_info().code, 2) << q.output();
  EXPECT_NE(q.output().find("--plot needs gnuplot, which is not on PATH; "
                            "install it (Debian: apt-get install gnuplot-nox)"),
            std::string::npos)
      << q.output();
  EXPECT_EQ(q.output().find("# kolo-bench:"), std::string::npos)
      << "the sweep ran\n"
      << q.output();
  std::filesystem::remove(empty);
}

}  // namespace
}  // namespace kolo::testing
