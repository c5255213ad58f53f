// The collective grid of issue 3 through real processes: for world sizes 1-5,
// one kolorun job with allreduce forced to the ring (KOLO_ALLREDUCE_ALGORITHM
// =ring) that also runs every other collective, and one with allreduce forced
// to the latency-optimal algorithm (=small); 7 ranks get a lighter pass of
// both. Sanitizer builds run a subset (see grid_worker.cc). Each job loops over
// the whole grid inside kolo-grid-worker (tests/workers/grid_worker.cc), which
// checks every rank's output bit for bit and names the first mismatch.
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"
#include "tests/testing/topology.h"

namespace kolo::testing {
namespace {

std::string Bin(const std::string& name) { return BinDir() + "/" + name; }

// Runs `kolorun -np n kolo-grid-worker args...` with allreduce forced to
// `algorithm` and expects every rank to report GRID_OK.
// `env`: more of the job's environment; `output` (if set) gets the job's.
void RunGrid(int n, const std::string& algorithm,
             const std::vector<std::string>& args,
             std::map<std::string, std::optional<std::string>> env = {},
             std::string* output = nullptr) {
  std::vector<std::string> argv = {Bin("kolorun"), "-np", std::to_string(n),
                                   Bin("kolo-grid-worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  env["KOLO_ALLREDUCE_ALGORITHM"] = algorithm;
  Subprocess p(argv, std::move(env));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(p.Start().ok());
  const absl::Status st = p.Wait(Scaled(absl::Seconds(240)));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (output != nullptr) *output = p.output();
  ASSERT_TRUE(st.ok()) << st << "\n" << p.output();
  ASSERT_TRUE(p.exit_info().exited && p.exit_info().code == 0)
      << p.exit_info().ToString() << "\n"
      << p.output();
  const std::vector<Fields> ok = ParseTagged(p.output(), "GRID_OK");
  ASSERT_EQ(ok.size(), static_cast<size_t>(n)) << p.output();
  int64_t cases = -1;
  for (const Fields& f : ok) {
    EXPECT_EQ(IntField(f, "size"), n) << p.output();
    EXPECT_EQ(f.at("algorithm"), algorithm);
    // Every rank ran the same cases.
    const int64_t c = IntField(f, "cases");
    EXPECT_GT(c, 0) << p.output();
    if (cases >= 0) {
      EXPECT_EQ(c, cases) << p.output();
    }
    cases = c;
  }
  ::testing::Test::RecordProperty("cases", static_cast<int>(cases));
  std::printf("%d ranks, allreduce %s, %s: %lld cases on every rank, %.1f s\n",
              n, algorithm.c_str(), args[0].c_str(),
              static_cast<long long>(cases), seconds);
}

class Grid : public ::testing::TestWithParam<int> {};

TEST_P(Grid, RingAllreduceAndEveryOtherCollective) {
  RunGrid(GetParam(), "ring", {"all"});
}

// Forced to recursive doubling, a 64 MiB allreduce sends the whole buffer
// log2(n) times or more: the 64 MiB cases run for every dtype (sum) and every
// op (float32), 14 of the 49, which keeps the whole test near two minutes.
TEST_P(Grid, SmallAllreduce) { RunGrid(GetParam(), "small", {"allreduce"}); }

INSTANTIATE_TEST_SUITE_P(Sizes, Grid, ::testing::Values(1, 2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return absl::StrCat(param_info.param, "ranks");
                         });

// The fast path (KOLO_FAST_PATH=1): every allreduce case (counts up to
// 4099) twice by name, the second a cache hit run by a round of the fast
// path; every result exact, as with the fast path off.
class GridFastPath : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(GridFastPath, EveryAllreduceCaseTwiceIsExact) {
  const auto [n, fast] = GetParam();
  std::string output;
  RunGrid(n, "auto", {"allreduce", "--light", "--twice"},
          {{"KOLO_FAST_PATH", fast ? "1" : "0"}, {"KOLO_LOG_LEVEL", "debug"}},
          &output);
  size_t grants = 0;
  for (size_t at = output.find("fast path granted"); at != std::string::npos;
       at = output.find("fast path granted", at + 1)) {
    ++grants;
  }
  if (fast && n > 1) {
    EXPECT_GT(grants, 100u) << output.substr(0, 20000);
  } else {
    EXPECT_EQ(grants, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, GridFastPath,
    ::testing::Values(std::make_tuple(2, true), std::make_tuple(3, true),
                      std::make_tuple(4, true), std::make_tuple(3, false)),
    [](const ::testing::TestParamInfo<std::tuple<int, bool>>& p) {
      return absl::StrCat(std::get<0>(p.param), "ranks",
                          std::get<1>(p.param) ? "On" : "Off");
    });

TEST(GridLight, SevenRanksRing) { RunGrid(7, "ring", {"all", "--light"}); }

TEST(GridLight, SevenRanksSmall) {
  RunGrid(7, "small", {"allreduce", "--light"});
}

}  // namespace
}  // namespace kolo::testing
