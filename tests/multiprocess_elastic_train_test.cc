// kolo-elastic-train (examples/elastic_train) through kolorun on loopback:
// the same parameters, loss and accuracy — to the bit — at 1 and 3 ranks,
// and at 4 ranks with a worker killed mid-run (the survivors replay their
// last commit, kolorun's replacement joins and receives the state), or
// stopped for good (evicted, then killed once the survivors finished).
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A seed of this test process, so that the kill below finds only its own
// workers (their command lines carry it).
std::string Seed() { return std::to_string(1000 + getpid() % 100000); }

// The pids of processes whose command line holds every one of `words`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& words) {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string cmd = ss.str();
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    bool all = !cmd.empty();
    for (const std::string& w : words) all = all && cmd.find(w) != cmd.npos;
    // Not kolorun itself, nor its guards: the worker program.
    if (all && cmd.rfind(Bin("kolo-elastic-train"), 0) == 0)
      pids.push_back(pid);
  }
  ::closedir(proc);
  return pids;
}

// The EL_FINAL lines: `size` of them, all at `size`, with one fingerprint,
// loss and accuracy; returns the fingerprint.
std::string ExpectFinal(const std::string& out, int size) {
  std::vector<std::string> fin = Lines(out, "EL_FINAL ");
  EXPECT_EQ(fin.size(), static_cast<size_t>(size)) << out;
  if (fin.empty()) return "";
  for (const std::string& l : fin) {
    EXPECT_EQ(Int(Field(l, "size")), size) << l;
    EXPECT_EQ(Field(l, "fingerprint"), Field(fin[0], "fingerprint")) << out;
    EXPECT_EQ(Field(l, "loss"), Field(fin[0], "loss")) << out;
    EXPECT_EQ(Field(l, "accuracy"), Field(fin[0], "accuracy")) << out;
  }
  EXPECT_THAT(out, Not(HasSubstr("EL_INCONSISTENT")));
  return Field(fin[0], "fingerprint");
}

TEST(ElasticTrain, SameBitsAtOneAndThreeRanks) {
  JobRun one = RunJob({Bin("kolorun"), "-np", "1", Bin("kolo-elastic-train"),
                       "--steps", "150", "--seed", Seed()});
  ASSERT_TRUE(one.exit.exited && one.exit.code == 0) << one.output;
  JobRun three = RunJob({Bin("kolorun"), "-np", "3", Bin("kolo-elastic-train"),
                         "--steps", "150", "--seed", Seed()});
  ASSERT_TRUE(three.exit.exited && three.exit.code == 0) << three.output;
  EXPECT_EQ(ExpectFinal(one.output, 1), ExpectFinal(three.output, 3));
  // It learns: well above chance on the held-out set.
  const std::string acc = Field(Lines(one.output, "EL_FINAL ")[0], "accuracy");
  EXPECT_GT(std::stod(acc), 0.8) << one.output;
}

// With the fast path on (KOLO_FAST_PATH=1), the kill lands while the
// survivors agree on their steps over the data plane: the epoch's end aborts
// that wait like any other, and the job recovers alike.
class KilledWorker : public ::testing::TestWithParam<bool> {};

TEST_P(KilledWorker, EndsWithTheUnfaultedRunsBits) {
  const std::map<std::string, std::optional<std::string>> env = {
      {"KOLO_FAST_PATH", GetParam() ? "1" : "0"}};
  const std::vector<std::string> train = {"--steps", "400",    "--step-ms",
                                          "5",       "--seed", Seed()};
  std::vector<std::string> ref_argv = {Bin("kolorun"), "-np", "2",
                                       Bin("kolo-elastic-train")};
  ref_argv.insert(ref_argv.end(), train.begin(), train.end());
  JobRun ref = RunJob(ref_argv, env);
  ASSERT_TRUE(ref.exit.exited && ref.exit.code == 0) << ref.output;
  const std::string expected = ExpectFinal(ref.output, 2);

  std::vector<std::string> argv = {
      Bin("kolorun"), "-np", "4", "--min-np", "2", Bin("kolo-elastic-train")};
  argv.insert(argv.end(), train.begin(), train.end());
  Subprocess job(argv, env);
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.WaitForOutput("EL_STEP step=100 ", Scaled(absl::Seconds(60))))
      << job.output();
  std::vector<pid_t> workers = FindProcesses({"--seed " + Seed()});
  ASSERT_EQ(workers.size(), 4u) << job.output();
  ASSERT_EQ(::kill(workers[1], SIGKILL), 0);
  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(120))).ok()) << job.output();
  const std::string& out = job.output();
  EXPECT_TRUE(job.exit_info().exited && job.exit_info().code == 0)
      << job.exit_info().ToString() << "\n"
      << out;
  EXPECT_THAT(out, HasSubstr("restoring commit"));
  EXPECT_THAT(out, HasSubstr("incarnation 1"));
  EXPECT_THAT(out, HasSubstr("EL_RESHARD rank=0 size=3"));
  EXPECT_THAT(out, HasSubstr("EL_RESHARD rank=0 size=4"));
  EXPECT_EQ(ExpectFinal(out, 4), expected) << out;
}

INSTANTIATE_TEST_SUITE_P(FastPath, KilledWorker, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "On" : "Off";
                         });

// Issue 39: a worker stopped for good (SIGSTOP, never continued) is evicted;
// the survivors finish, and kolorun then kills the stopped process instead
// of waiting for it forever: the job's outcome is the members' (exit 0).
TEST(ElasticTrain, WorkerStoppedForGoodDoesNotKeepTheJobAlive) {
  JobRun run = RunJob({Bin("kolorun"), "-np", "4", "--min-np", "2", "--fault",
                       "stop:rank=1:after=3s", Bin("kolo-elastic-train"),
                       "--steps", "600", "--step-ms", "10", "--seed", Seed()},
                      {}, absl::Seconds(90));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("was evicted by the coordinator and is still alive "
                        "after the job ended"));
  ExpectFinal(run.output, 3);
  EXPECT_TRUE(FindProcesses({"--seed " + Seed()}).empty())
      << "nothing is left behind";
}

}  // namespace
}  // namespace kolo::testing
