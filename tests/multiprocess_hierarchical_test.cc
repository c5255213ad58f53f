// Hierarchical collectives through kolorun, on "hosts" made by kolorun's
// command template on this machine (`-H a:2,b:2 --launcher-cmd 'env
// KOLO_TEST_FAKE_HOST={host}'`: the workers run here, but get the launcher
// host names a and b, so the ranks of a host share memory and the hosts talk
// TCP over loopback). Needs no root; multiprocess_netns_test runs the same
// worker across real network namespaces.
//
// For 2 hosts x 2 ranks and 3 + 1: every rank of a KOLO_HIERARCHICAL=1 job
// checks its results exactly (tests/workers/hier_worker.cc), all ranks agree
// on the digest of the results and on the bits of a random-float allreduce,
// and a KOLO_HIERARCHICAL=0 job gives the same digest; the log says the
// hierarchy is on (auto too) or not. HOROVOD_HIERARCHICAL_ALLREDUCE is
// honoured as an alias. The collective grid and process sets run on it. An
// elastic job whose host b loses a rank rebuilds the hierarchy from the next
// epoch's membership.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"

namespace kolo::testing {
namespace {

using ::testing::HasSubstr;

struct HierResult {
  std::string digest;  // of the exact results: equal on every rank
  std::string random;  // of the random-float result: equal on every rank
  std::map<int, std::string> scatter;  // by rank: its reducescatter blocks
  int hierarchical_lines = 0;
  std::string output;
};

// Runs kolo-hier-worker on `hosts` (kolorun's -H) with `env`; every rank
// must succeed and agree.
HierResult RunHier(const std::string& hosts, int n,
                   std::map<std::string, std::optional<std::string>> env) {
  HierResult res;
  JobRun run = RunJob({Bin("kolorun"), "-np", std::to_string(n), "-H", hosts,
                       "--launcher-cmd", "env KOLO_TEST_FAKE_HOST={host}",
                       "--log-level", "info", Bin("kolo-hier-worker")},
                      std::move(env), absl::Seconds(180));
  res.output = run.output;
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  const std::vector<std::string> ok = Lines(run.output, "HIER_OK");
  EXPECT_EQ(ok.size(), static_cast<size_t>(n)) << run.output;
  for (const std::string& line : ok) {
    EXPECT_EQ(Int(Field(line, "size")), n) << line;
    res.scatter[static_cast<int>(Int(Field(line, "rank")))] =
        Field(line, "scatter");
    if (res.digest.empty()) {
      res.digest = Field(line, "digest");
      res.random = Field(line, "random");
    }
    EXPECT_EQ(Field(line, "digest"), res.digest) << "ranks disagree\n"
                                                 << run.output;
    EXPECT_EQ(Field(line, "random"), res.random)
        << "random floats differ between ranks\n"
        << run.output;
  }
  res.hierarchical_lines =
      static_cast<int>(Lines(run.output, "hierarchical collectives").size());
  return res;
}

void CompareModes(const std::string& hosts, int n) {
  const HierResult on = RunHier(hosts, n, {{"KOLO_HIERARCHICAL", "1"}});
  EXPECT_EQ(on.hierarchical_lines, n) << on.output;
  EXPECT_THAT(on.output, HasSubstr("hierarchical collectives "
                                   "(KOLO_HIERARCHICAL=1): 2 hosts"));
  const HierResult off = RunHier(hosts, n, {{"KOLO_HIERARCHICAL", "0"}});
  EXPECT_EQ(off.hierarchical_lines, 0) << off.output;
  EXPECT_FALSE(on.digest.empty());
  EXPECT_EQ(on.digest, off.digest)
      << "KOLO_HIERARCHICAL=1 and =0 gave different results";
  EXPECT_EQ(on.scatter, off.scatter)
      << "KOLO_HIERARCHICAL=1 and =0 gave different reducescatter blocks";
  // auto (the default): on, since both layouts have a host with 2+ ranks.
  const HierResult dflt =
      RunHier(hosts, n, {{"KOLO_HIERARCHICAL", std::nullopt}});
  EXPECT_EQ(dflt.hierarchical_lines, n) << dflt.output;
  EXPECT_THAT(dflt.output, HasSubstr("(KOLO_HIERARCHICAL=auto)"));
  EXPECT_EQ(dflt.digest, on.digest);
}

TEST(Hierarchical, TwoHostsOfTwoRanks) { CompareModes("a:2,b:2", 4); }

TEST(Hierarchical, ThreePlusOne) { CompareModes("a:3,b:1", 4); }

// The collective grid (tests/workers/grid_worker.cc, its lighter pass: every
// dtype x op, counts up to 4099) on hierarchical jobs, allreduce forced to
// each shape: ring (sliced on 2 + 2, leader with rings on 3 + 1) and small
// (leader with trees).
TEST(Hierarchical, CollectiveGridIsExact) {
  for (const char* hosts : {"a:2,b:2", "a:3,b:1"}) {
    for (const char* algorithm : {"ring", "small"}) {
      SCOPED_TRACE(absl::StrCat(hosts, ", allreduce ", algorithm));
      JobRun run = RunJob(
          {Bin("kolorun"), "-np", "4", "-H", hosts, "--launcher-cmd",
           "env KOLO_TEST_FAKE_HOST={host}", Bin("kolo-grid-worker"), "all",
           "--light"},
          {{"KOLO_HIERARCHICAL", "1"}, {"KOLO_ALLREDUCE_ALGORITHM", algorithm}},
          absl::Seconds(240));
      EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
          << run.exit.ToString() << "\n"
          << run.output;
      EXPECT_EQ(Lines(run.output, "GRID_OK").size(), 4u) << run.output;
    }
  }
}

// Process sets (tests/workers/groups_worker.cc: every collective on sets of
// every shape, dynamic and static) on 3 + 2 ranks, hierarchy forced: each
// set's data plane groups its own members by host.
TEST(Hierarchical, ProcessSetsGetTheirOwnHierarchy) {
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "5", "-H", "a:3,b:2", "--launcher-cmd",
              "env KOLO_TEST_FAKE_HOST={host}", Bin("kolo-groups-worker")},
             {{"KOLO_HIERARCHICAL", "1"}}, absl::Seconds(240));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  const std::vector<std::string> done = Lines(run.output, "GRP_DONE");
  EXPECT_EQ(done.size(), 5u) << run.output;
  for (const std::string& line : done) {
    EXPECT_EQ(Field(line, "fails"), "0") << run.output;
  }
}

TEST(Hierarchical, HorovodAliasTurnsItOff) {
  const HierResult r = RunHier("a:2,b:2", 4,
                               {{"KOLO_HIERARCHICAL", std::nullopt},
                                {"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}});
  EXPECT_EQ(r.hierarchical_lines, 0) << r.output;
}

TEST(Hierarchical, BadValueIsRefusedNamingTheVariable) {
  JobRun run = RunJob({Bin("kolorun"), "-np", "2", Bin("kolo-hier-worker")},
                      {{"KOLO_HIERARCHICAL", "sometimes"}}, absl::Seconds(60));
  EXPECT_FALSE(run.exit.exited && run.exit.code == 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("KOLO_HIERARCHICAL='sometimes'"));
  EXPECT_THAT(run.output, HasSubstr("auto, 0 or 1"));
}

// Elastic: 2 + 2 ranks, one of host b killed; the survivors' next epoch
// (a:2, b:1) has its own hierarchy, and the job finishes with every rank
// holding rank 0's state.
TEST(Hierarchical, ElasticEpochRebuildsTheHierarchy) {
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "4", "--min-np", "2", "-H", "a:2,b:2",
              "--launcher-cmd", "env KOLO_TEST_FAKE_HOST={host}", "--log-level",
              "info", Bin("kolo-elastic-worker"), "--steps", "30", "--kill",
              "3:10", "--replacement-exits", "1"},
             {}, absl::Seconds(120));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_GE(Lines(run.output, "2 ranks on host b").size(), 2u) << run.output;
  EXPECT_GE(Lines(run.output, "1 ranks on host b").size(), 1u) << run.output;
  EXPECT_TRUE(Lines(run.output, "EL_STEP_BAD").empty()) << run.output;
  const std::vector<std::string> done = Lines(run.output, "EL_DONE");
  ASSERT_GE(done.size(), 3u) << run.output;
  for (const std::string& line : done) {
    EXPECT_EQ(Field(line, "w"), Field(done[0], "w")) << run.output;
  }
}

}  // namespace
}  // namespace kolo::testing
