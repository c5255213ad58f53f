// Elastic growth and planned leaves on loopback (issue 18): real workers
// (tests/workers/elastic_worker.cc) train under kolo::elastic::run while a
// worker joins by hand (a standalone kolo-coordinator and workers started
// with the job's address and secret) or leaves on SIGTERM; every member
// learns of the change at the same commit, goes on without rollback, and
// every rank ends with rank 0's state. Every job is bounded; nothing here
// can hang.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/job_run.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Env = std::map<std::string, std::optional<std::string>>;

// The EL_DONE lines of `output`: `size` of them, each at size `size`, with
// the same step and w (rank 0's state), ranks 0..size-1, no wrong sum.
void ExpectDone(const std::string& output, int size) {
  std::vector<std::string> done = Lines(output, "EL_DONE ");
  ASSERT_EQ(done.size(), static_cast<size_t>(size)) << output;
  std::vector<int64_t> ranks;
  for (const std::string& line : done) {
    EXPECT_EQ(Int(Field(line, "size")), size) << line;
    EXPECT_EQ(Field(line, "step"), Field(done[0], "step")) << output;
    EXPECT_EQ(Field(line, "w"), Field(done[0], "w"))
        << "every rank holds rank 0's state\n"
        << output;
    ranks.push_back(Int(Field(line, "rank")));
  }
  std::sort(ranks.begin(), ranks.end());
  for (int r = 0; r < size; ++r) EXPECT_EQ(ranks[r], r) << output;
  EXPECT_THAT(output, Not(HasSubstr("EL_STEP_BAD")));
  EXPECT_THAT(output, Not(HasSubstr("EL_ERROR")));
}

TEST(Growth, SigtermLeavesAtTheCommitAndTheOthersGoOn) {
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "4", "--min-np", "2",
              Bin("kolo-elastic-worker"), "--steps", "40", "--term", "2:10"},
             {}, absl::Seconds(120));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectDone(run.output, 3);
  for (const std::string& line : Lines(run.output, "EL_DONE ")) {
    EXPECT_EQ(Int(Field(line, "step")), 40) << line;
  }
  ASSERT_EQ(Lines(run.output, "EL_TERM ").size(), 1u) << run.output;
  // A planned change: the leaver exits 0, nobody rolls back, nobody is
  // lost.
  EXPECT_THAT(run.output, HasSubstr("leaves the job at commit"));
  EXPECT_THAT(run.output, HasSubstr("no rollback"));
  EXPECT_THAT(run.output, Not(HasSubstr("restoring commit")));
  EXPECT_THAT(run.output, Not(HasSubstr("exited with code")))
      << "only exits with code 0, which kolorun logs at info";
  std::vector<std::string> term = Lines(run.output, "EL_TERM ");
  std::vector<std::string> back = Lines(run.output, "EL_RECOVERED ");
  ASSERT_EQ(back.size(), 3u) << run.output;
  const int64_t t0 =
      Int(Field(" " + term[0].substr(term[0].find("EL_TERM")), "t"));
  int64_t last = 0;
  for (const std::string& line : back) {
    last = std::max(last, Int(Field(line, "t")));
  }
  std::printf("graceful leave: %.3f s from SIGTERM to the others' next step\n",
              static_cast<double>(last - t0) / 1e6);
}

// The latest "t=" of the EL_RECOVERED lines at `size`, or -1.
int64_t RecoveredAt(const std::string& output, int size) {
  int64_t last = -1;
  for (const std::string& line : Lines(output, "EL_RECOVERED ")) {
    if (Int(Field(line, "size")) == size) {
      last = std::max(last, Int(Field(line, "t")));
    }
  }
  return last;
}

TEST(Growth, KilledWorkerIsReplacedInItsSlotAndTheJobIsBackAtFour) {
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "4", "--min-np", "2",
              Bin("kolo-elastic-worker"), "--steps", "150", "--kill", "2:10"},
             {}, absl::Seconds(120));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectDone(run.output, 4);
  for (const std::string& line : Lines(run.output, "EL_DONE ")) {
    EXPECT_EQ(Int(Field(line, "step")), 150) << line;
  }
  // The replacement is the slot's worker id, incarnation 1, appended.
  std::vector<std::string> starts =
      Lines(run.output, "EL_START worker=w2 incarnation=1 ");
  ASSERT_EQ(starts.size(), 1u) << run.output;
  EXPECT_EQ(Int(Field(starts[0], "rank")), 3) << starts[0];
  EXPECT_GT(Int(Field(starts[0], "step")), 10) << starts[0];
  EXPECT_EQ(Lines(run.output, "EL_RESET n=1 size=3").size(), 3u) << run.output;
  EXPECT_EQ(Lines(run.output, "EL_RESET n=2 size=4").size(), 3u) << run.output;
  std::vector<std::string> kill = Lines(run.output, "EL_KILL ");
  ASSERT_EQ(kill.size(), 1u) << run.output;
  const int64_t t0 =
      Int(Field(" " + kill[0].substr(kill[0].find("EL_KILL")), "t"));
  const int64_t back = RecoveredAt(run.output, 4);
  ASSERT_GT(back, t0) << run.output;
  std::printf("SIGKILL to full size with a replacement: %.3f s\n",
              static_cast<double>(back - t0) / 1e6);
}

// A discovery script for this test (`cat` of a hosts file the test may
// rewrite), both files removed at the end.
class Discovery {
 public:
  explicit Discovery(const std::string& hosts)
      : hosts_(absl::StrCat(::testing::TempDir(), "/growth_hosts.", getpid())),
        script_(
            absl::StrCat(::testing::TempDir(), "/growth_discover.", getpid())) {
    Set(hosts);
    std::ofstream(script_) << "#!/bin/sh\ncat " << hosts_ << "\n";
    ::chmod(script_.c_str(), 0700);
  }
  ~Discovery() {
    ::unlink(hosts_.c_str());
    ::unlink(script_.c_str());
  }
  // Replaces the hosts file at once (a rename: the script never reads
  // half of it).
  void Set(const std::string& hosts) {
    std::ofstream(hosts_ + ".new") << hosts;
    ::rename((hosts_ + ".new").c_str(), hosts_.c_str());
  }
  const std::string& script() const { return script_; }

 private:
  std::string hosts_, script_;
};

// A slot whose replacements keep failing (incarnations 1 and 2 exit 3 at
// once) cools down (--blacklist-cooldown-range 1 2), is retried after its
// cooldown, and incarnation 3 brings the job back to 4.
TEST(Growth, SlotThatKeepsFailingCoolsDownThenIsRetried) {
  JobRun run = RunJob({Bin("kolorun"), "-np", "4", "--min-np", "2",
                       "--blacklist-cooldown-range", "1", "2",
                       Bin("kolo-elastic-worker"), "--seconds", "8", "--steps",
                       "100000", "--kill", "2:10", "--replacements-fail", "2"},
                      {}, absl::Seconds(120));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectDone(run.output, 4);
  std::vector<std::string> fails = Lines(run.output, "EL_REPLACEMENT_FAILS ");
  ASSERT_EQ(fails.size(), 2u) << run.output;
  ASSERT_EQ(Lines(run.output, "EL_START worker=w2 incarnation=3 ").size(), 1u)
      << run.output;
  EXPECT_THAT(run.output, HasSubstr("cooling down"));
  // The kill is retried at once; the next failures cool the slot for 1 s,
  // then 2 s (LO doubling up to HI).
  const int64_t fail1 = Int(Field(fails[0], "t"));
  const int64_t fail2 = Int(Field(fails[1], "t"));
  const int64_t start3 = Int(
      Field(Lines(run.output, "EL_START worker=w2 incarnation=3 ")[0], "t"));
  EXPECT_GE(fail2 - fail1, 900000) << run.output;
  EXPECT_GE(start3 - fail2, 1900000) << run.output;
  std::printf("slot cooldowns: %.2f s, then %.2f s to the next start\n",
              static_cast<double>(fail2 - fail1) / 1e6,
              static_cast<double>(start3 - fail2) / 1e6);
}

TEST(Growth, DiscoveryScriptGrowsTheJobFromTwoToFourSlots) {
  Discovery d("localhost:2\n");
  Subprocess job({Bin("kolorun"), "--min-np", "2", "--max-np", "4",
                  "--host-discovery-script", d.script(),
                  "--discovery-interval-seconds", "1",
                  Bin("kolo-elastic-worker"), "--seconds", "8", "--steps",
                  "100000", "--step-ms", "10"});
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.WaitForOutput("EL_RECOVERED", Scaled(absl::Seconds(1))) ||
              job.WaitForOutput("EL_START", Scaled(absl::Seconds(30))))
      << job.output();
  absl::SleepFor(absl::Milliseconds(500));
  const int64_t grown = absl::ToUnixMicros(absl::Now());
  d.Set("localhost:4\n");
  EXPECT_TRUE(job.Wait(Scaled(absl::Seconds(90))).ok()) << job.output();
  const std::string& output = job.output();
  EXPECT_TRUE(job.exit_info().exited && job.exit_info().code == 0)
      << job.exit_info().ToString() << "\n"
      << output;
  ExpectDone(output, 4);
  EXPECT_EQ(Lines(output, "EL_START ").size(), 4u) << output;
  // The newcomers join at one commit, or at two when the second connects
  // after the first was admitted; every change reaches both first-epoch
  // members at the same commit (the same reset count and size).
  auto first_members = [&](const std::string& tag) {
    return Lines(output, tag + " rank=0").size() +
           Lines(output, tag + " rank=1").size();
  };
  const size_t at_once = first_members("EL_RESET n=1 size=4");
  const size_t in_two = first_members("EL_RESET n=2 size=4");
  EXPECT_TRUE((at_once == 2 && in_two == 0) ||
              (at_once == 0 && in_two == 2 &&
               first_members("EL_RESET n=1 size=3") == 2))
      << output;
  const int64_t back = RecoveredAt(output, 4);
  ASSERT_GT(back, grown) << output;
  std::printf(
      "discovery 2 -> 4 slots: %.3f s from the script's change to the first "
      "collective at size 4 (interval 1 s)\n",
      static_cast<double>(back - grown) / 1e6);
}

// The script's first answer offers 1 slot under --min-np 3: kolorun starts
// that worker and waits; once the script offers 3 slots the first epoch
// forms at size 3 and the job trains to the end.
TEST(Growth, ShortStartWaitsUntilTheScriptOffersMinNp) {
  Discovery d("localhost:1\n");
  Subprocess job({Bin("kolorun"), "--min-np", "3", "--max-np", "3",
                  "--host-discovery-script", d.script(),
                  "--discovery-interval-seconds", "1",
                  Bin("kolo-elastic-worker"), "--steps", "60"});
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(
      job.WaitForOutput("fewer than --min-np 3", Scaled(absl::Seconds(30))))
      << job.output();
  // Still one worker, and no epoch: nobody trains.
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_EQ(Lines(job.output(), "EL_START ").size(), 0u) << job.output();
  d.Set("localhost:3\n");
  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(90))).ok()) << job.output();
  const std::string& out = job.output();
  EXPECT_TRUE(job.exit_info().exited && job.exit_info().code == 0)
      << job.exit_info().ToString() << "\n"
      << out;
  ExpectDone(out, 3);
  EXPECT_EQ(Lines(out, "EL_START ").size(), 3u) << out;
}

// A script that never offers --min-np slots (here none at all): the job
// ends after --elastic-timeout (longer than --start-timeout here), naming
// what it waited for.
TEST(Growth, ShortStartEndsNamingWhatItWaitedFor) {
  Discovery d("");
  const absl::Time t0 = absl::Now();
  JobRun run = RunJob({Bin("kolorun"), "--min-np", "2", "--start-timeout", "1",
                       "--elastic-timeout", "3", "--host-discovery-script",
                       d.script(), Bin("kolo-elastic-worker"), "--steps", "60"},
                      {}, absl::Seconds(60));
  const absl::Duration took = absl::Now() - t0;
  EXPECT_TRUE(run.exit.exited && run.exit.code == 1)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("did not reach --min-np 2 workers within 3s"));
  EXPECT_THAT(run.output, HasSubstr("offered 0 slot(s)"));
  EXPECT_GE(took, absl::Seconds(3)) << run.output;
}

TEST(Growth, MaxNpCapsTheWorkersTheScriptOffers) {
  Discovery d("localhost:4\n");
  JobRun run = RunJob({Bin("kolorun"), "--min-np", "2", "--max-np", "3",
                       "--host-discovery-script", d.script(),
                       Bin("kolo-elastic-worker"), "--steps", "60"},
                      {}, absl::Seconds(120));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectDone(run.output, 3);
  EXPECT_EQ(Lines(run.output, "EL_START ").size(), 3u) << run.output;
}

// Hosts "localhost" and "127.0.0.1" (two names of this machine, both
// started locally); 127.0.0.1 disappears from the script: its workers are
// asked to leave (SIGTERM), leave at their next commit with status 0, and
// the others go on without rollback.
TEST(Growth, HostThatDisappearsFromTheScriptLeavesInOrder) {
  Discovery d("localhost:2\n127.0.0.1:2\n");
  Subprocess job({Bin("kolorun"), "--min-np", "2", "--host-discovery-script",
                  d.script(), Bin("kolo-elastic-worker"), "--seconds", "6",
                  "--steps", "100000", "--step-ms", "10"});
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.WaitForOutput("EL_RECOVERED", Scaled(absl::Seconds(1))) ||
              job.WaitForOutput("EL_START", Scaled(absl::Seconds(30))))
      << job.output();
  absl::SleepFor(absl::Milliseconds(1500));
  d.Set("localhost:2\n");
  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(90))).ok()) << job.output();
  const std::string& out = job.output();
  EXPECT_TRUE(job.exit_info().exited && job.exit_info().code == 0)
      << job.exit_info().ToString() << "\n"
      << out;
  ExpectDone(out, 2);
  EXPECT_THAT(out, HasSubstr("leaves the job at commit"));
  EXPECT_THAT(out, HasSubstr("no rollback"));
  EXPECT_THAT(out, Not(HasSubstr("restoring commit")));
  EXPECT_THAT(out, Not(HasSubstr("silent for")));
}

// kolo-ctl, pointed at a running kolorun job with the command kolorun
// printed, shows the membership as it is: after a kill and the
// replacement's join, the replacement (incarnation 1) is a member and the
// history says why each epoch formed.
TEST(Growth, KoloCtlShowsTheTrueMembership) {
  Subprocess job({Bin("kolorun"), "-np", "3", "--min-np", "2", "--log-level",
                  "info", Bin("kolo-elastic-worker"), "--seconds", "10",
                  "--steps", "100000", "--step-ms", "20", "--kill", "1:20"});
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.WaitForOutput("EL_START worker=w1 incarnation=1",
                                Scaled(absl::Seconds(60))))
      << job.output();
  ASSERT_TRUE(
      job.WaitForOutput("EL_RESET n=2 size=3", Scaled(absl::Seconds(30))))
      << job.output();
  std::optional<Command> status = CtlStatusJson(job.output());
  ASSERT_TRUE(status.has_value()) << job.output();
  Subprocess ctl(status->argv, status->env);
  ASSERT_TRUE(ctl.Start().ok());
  ASSERT_TRUE(ctl.Wait(Scaled(absl::Seconds(30))).ok()) << ctl.output();
  ASSERT_EQ(ctl.exit_info().code, 0) << ctl.output();
  const nlohmann::json j = nlohmann::json::parse(ctl.output());
  EXPECT_EQ(j["job"]["phase"], "running") << ctl.output();
  EXPECT_EQ(j["job"]["members"], 3) << ctl.output();
  std::map<std::string, int> incarnation;
  for (const auto& w : j["workers"]) {
    if (w["state"] == "member") {
      incarnation[w["worker_id"].get<std::string>()] =
          w["incarnation"].get<int>();
    }
  }
  EXPECT_EQ(incarnation,
            (std::map<std::string, int>{{"w0", 0}, {"w1", 1}, {"w2", 0}}))
      << ctl.output();
  const auto& history = j["history"];
  ASSERT_GE(history.size(), 3u) << ctl.output();
  EXPECT_EQ(history[0]["cause"], "start");
  EXPECT_EQ(history[1]["cause"], "lost");
  EXPECT_EQ(history[1]["lost"][0]["worker_id"], "w1");
  EXPECT_EQ(history[2]["cause"], "joined");
  EXPECT_EQ(history[2]["joined"][0], "w1");
  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(60))).ok()) << job.output();
  EXPECT_EQ(job.exit_info().code, 0) << job.output();
  // The secret file is gone with the job.
  const std::string& file = *status->env["KOLO_SECRET_FILE"];
  EXPECT_NE(::access(file.c_str(), F_OK), 0) << file;
}

// kolorun --graceful-term: SIGTERM to kolorun is a notice to every worker;
// they all leave at the same commit with status 0 and the job ends in
// order (kolorun exits 0).
TEST(Growth, GracefulTermMakesEveryWorkerLeaveAtOneCommit) {
  Subprocess job({Bin("kolorun"), "-np", "3", "--min-np", "2",
                  "--graceful-term", Bin("kolo-elastic-worker"), "--seconds",
                  "60", "--steps", "100000", "--step-ms", "10"});
  ASSERT_TRUE(job.Start().ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(job.WaitForOutput(absl::StrCat("EL_START worker=w", i),
                                  Scaled(absl::Seconds(30))))
        << job.output();
  }
  absl::SleepFor(absl::Milliseconds(300));
  job.Signal(SIGTERM);
  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(30))).ok()) << job.output();
  const std::string& out = job.output();
  EXPECT_TRUE(job.exit_info().exited && job.exit_info().code == 0)
      << job.exit_info().ToString() << "\n"
      << out;
  std::vector<std::string> left = Lines(out, "leaves the job at commit ");
  ASSERT_EQ(left.size(), 3u) << out;
  auto commit = [](const std::string& line) {
    return line.substr(line.find("at commit ") + 10);
  };
  for (const std::string& line : left) {
    EXPECT_EQ(commit(line), commit(left[0])) << out;
  }
  EXPECT_THAT(out, Not(HasSubstr("EL_DONE")));
  EXPECT_THAT(out, Not(HasSubstr("EL_ERROR")));
}

// A private secret file for this test, removed at the end.
class SecretFile {
 public:
  SecretFile()
      : path_(absl::StrCat(::testing::TempDir(), "/growth_secret.", getpid())) {
    std::ofstream(path_) << "growth-test-secret-0123456789abcdef\n";
    ::chmod(path_.c_str(), 0600);
  }
  ~SecretFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Env WorkerEnv(int index, int size, int port, const std::string& secret) {
  return Env{{"RANK", std::to_string(index)},
             {"WORLD_SIZE", std::to_string(size)},
             {"LOCAL_RANK", std::to_string(index)},
             {"KOLO_COORDINATOR", absl::StrCat("127.0.0.1:", port)},
             {"KOLO_HOST_COORDINATOR", "0"},
             {"KOLO_ELASTIC", "1"},
             {"KOLO_WORKER_ID", absl::StrCat("hw", index)},
             {"KOLO_SECRET_FILE", secret},
             {"KOLO_LEASE_SECONDS", "5"},
             // Variables a surrounding launcher might have set.
             {"KOLO_RANK", std::nullopt},
             {"KOLO_SIZE", std::nullopt},
             {"KOLO_JOB_ID", std::nullopt}};
}

TEST(Growth, WorkerStartedByHandJoinsAtTheNextCommit) {
  SecretFile secret;
  Subprocess coord({Bin("kolo-coordinator"), "--port", "0", "--np", "2",
                    "--min-np", "1", "--bind", "127.0.0.1", "--secret-file",
                    secret.path(), "--log-level", "info"});
  ASSERT_TRUE(coord.Start().ok());
  ASSERT_TRUE(coord.WaitForOutput("(job", Scaled(absl::Seconds(30))))
      << coord.output();
  size_t pos = coord.output().find("listening on ");
  ASSERT_NE(pos, std::string::npos) << coord.output();
  std::string rest = coord.output().substr(pos + 13);
  std::string hostport = rest.substr(0, rest.find(' '));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(hostport.substr(hostport.rfind(':') + 1), &port))
      << hostport;

  const std::vector<std::string> argv = {Bin("kolo-elastic-worker"),
                                         "--seconds",
                                         "5",
                                         "--steps",
                                         "100000",
                                         "--step-ms",
                                         "10"};
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::make_unique<Subprocess>(
        argv, WorkerEnv(i, 2, port, secret.path())));
    ASSERT_TRUE(workers.back()->Start().ok());
  }
  for (auto& w : workers) {
    ASSERT_TRUE(w->WaitForOutput("EL_START", Scaled(absl::Seconds(30))))
        << w->output();
  }
  // A third worker, started by hand with the job's address and secret.
  workers.push_back(
      std::make_unique<Subprocess>(argv, WorkerEnv(2, 3, port, secret.path())));
  ASSERT_TRUE(workers.back()->Start().ok());
  ASSERT_TRUE(
      workers.back()->WaitForOutput("EL_START", Scaled(absl::Seconds(30))))
      << workers.back()->output() << coord.output();
  std::string output;
  for (auto& w : workers) {
    EXPECT_TRUE(w->Wait(Scaled(absl::Seconds(60))).ok()) << w->output();
    EXPECT_TRUE(w->exit_info().exited && w->exit_info().code == 0)
        << w->exit_info().ToString() << "\n"
        << w->output();
    output += w->output();
  }
  ExpectDone(output, 3);
  // The newcomer started from the job's state (a step past 0) at size 3;
  // the others learnt of it at the same commit, without rollback.
  std::string start = Lines(workers[2]->output(), "EL_START ")[0];
  EXPECT_EQ(Int(Field(start, "size")), 3) << start;
  EXPECT_EQ(Int(Field(start, "rank")), 2) << start;
  EXPECT_GT(Int(Field(start, "step")), 0) << start;
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(workers[i]->output(), HasSubstr("EL_RESET n=1 size=3"));
    EXPECT_THAT(workers[i]->output(), HasSubstr("no rollback"));
  }
  EXPECT_TRUE(coord.Wait(Scaled(absl::Seconds(30))).ok()) << coord.output();
  EXPECT_THAT(coord.output(), HasSubstr("hw2 joins"));
}

// A standalone coordinator started on `port` (0: any) for job `job_id`
// with `sizes` (--np, --min-np, ...), listening when this returns; its port
// in *port.
std::unique_ptr<Subprocess> StartCoordinator(
    const SecretFile& secret, const std::string& job_id, int* port,
    const std::vector<std::string>& sizes = {"--np", "4", "--min-np", "2",
                                             "--max-np", "4"}) {
  std::vector<std::string> argv = {Bin("kolo-coordinator"),
                                   "--port",
                                   std::to_string(*port),
                                   "--bind",
                                   "127.0.0.1",
                                   "--secret-file",
                                   secret.path(),
                                   "--job-id",
                                   job_id,
                                   "--log-level",
                                   "info"};
  argv.insert(argv.end(), sizes.begin(), sizes.end());
  auto coord = std::make_unique<Subprocess>(argv);
  if (!coord->Start().ok() ||
      !coord->WaitForOutput("listening on ", Scaled(absl::Seconds(30)))) {
    ADD_FAILURE() << coord->output();
    return coord;
  }
  std::string rest =
      coord->output().substr(coord->output().find("listening on ") + 13);
  std::string hostport = rest.substr(0, rest.find(' '));
  EXPECT_TRUE(absl::SimpleAtoi(hostport.substr(hostport.rfind(':') + 1), port))
      << hostport;
  return coord;
}

// kolo-elastic-train workers `first`..`first + n - 1` of a standalone
// coordinator's job (each told the job has `first + n` workers), with
// `extra` flags.
std::vector<std::unique_ptr<Subprocess>> StartTrainers(
    const SecretFile& secret, const std::string& job_id, int port,
    const std::string& lease, int n = 4, int first = 0,
    const std::vector<std::string>& extra = {}) {
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int i = first; i < first + n; ++i) {
    Env env = WorkerEnv(i, first + n, port, secret.path());
    env["KOLO_JOB_ID"] = job_id;
    env["KOLO_LEASE_SECONDS"] = lease;
    std::vector<std::string> argv = {Bin("kolo-elastic-train"),
                                     "--steps",
                                     "800",
                                     "--step-ms",
                                     "10",
                                     "--seed",
                                     "7",
                                     "--log-every",
                                     "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    workers.push_back(std::make_unique<Subprocess>(argv, env));
    EXPECT_TRUE(workers.back()->Start().ok());
  }
  return workers;
}

// The fingerprint of StartTrainers' training, unfaulted, in one process
// (the same at every size).
std::string UnfaultedFingerprint() {
  Subprocess solo({Bin("kolo-elastic-train"), "--steps", "800", "--seed", "7",
                   "--log-every", "0"},
                  {{"KOLO_COORDINATOR", std::nullopt},
                   {"KOLO_ELASTIC", std::nullopt},
                   {"RANK", std::nullopt},
                   {"WORLD_SIZE", std::nullopt}});
  EXPECT_TRUE(solo.Start().ok());
  EXPECT_TRUE(solo.Wait(Scaled(absl::Seconds(60))).ok()) << solo.output();
  std::vector<std::string> want = Lines(solo.output(), "EL_FINAL ");
  EXPECT_EQ(want.size(), 1u) << solo.output();
  return want.empty() ? "" : Field(want[0], "fingerprint");
}

// The first `n` of `workers` end with status 0, each saying `said`, and
// with the unfaulted fingerprint at size `n`.
void ExpectUnfaultedEnd(std::vector<std::unique_ptr<Subprocess>>& workers,
                        int n, const std::string& said) {
  std::string output;
  for (int i = 0; i < n; ++i) {
    Subprocess& w = *workers[static_cast<size_t>(i)];
    ASSERT_TRUE(w.Wait(Scaled(absl::Seconds(60))).ok()) << w.output();
    EXPECT_TRUE(w.exit_info().exited && w.exit_info().code == 0)
        << w.exit_info().ToString() << "\n"
        << w.output();
    EXPECT_THAT(w.output(), HasSubstr(said));
    output += w.output();
  }
  std::vector<std::string> fin = Lines(output, "EL_FINAL ");
  ASSERT_EQ(fin.size(), static_cast<size_t>(n)) << output;
  const std::string want = UnfaultedFingerprint();
  for (const std::string& line : fin) {
    EXPECT_EQ(Field(line, "fingerprint"), want) << output;
    EXPECT_EQ(Int(Field(line, "size")), n) << line;
  }
}

// Issue 37 point 1: the standalone coordinator of a 4-worker elastic job is
// SIGKILLed mid-training and started again at its address 1 s later: every
// worker reconnects within its lease, goes back to its last commit, and the
// job ends with the fingerprint of an unfaulted run.
TEST(Restart, KilledCoordinatorRestartedAtItsAddressPicksTheJobUp) {
  SecretFile secret;
  int port = 0;
  std::unique_ptr<Subprocess> coord =
      StartCoordinator(secret, "restart", &port);
  ASSERT_GT(port, 0);
  auto workers = StartTrainers(secret, "restart", port, "10");
  ASSERT_TRUE(coord->WaitForOutput("epoch 1 formed", Scaled(absl::Seconds(30))))
      << coord->output();
  absl::SleepFor(absl::Seconds(2));  // ~150 of the 800 steps
  coord->Signal(SIGKILL);
  ASSERT_TRUE(coord->Wait(Scaled(absl::Seconds(10))).ok());
  absl::SleepFor(absl::Seconds(1));
  std::unique_ptr<Subprocess> again =
      StartCoordinator(secret, "restart", &port);
  const absl::Time restarted = absl::Now();
  for (auto& w : workers) {
    ASSERT_TRUE(w->WaitForOutput("the coordinator restarted",
                                 Scaled(absl::Seconds(30))))
        << w->output() << again->output();
  }
  const absl::Duration back = absl::Now() - restarted;
  std::printf("RESTART every worker back %.3f s after the restart\n",
              absl::ToDoubleSeconds(back));
  ExpectUnfaultedEnd(workers, 4, "lost the coordinator");
  again->Signal(SIGTERM);
  EXPECT_TRUE(again->Wait(Scaled(absl::Seconds(30))).ok()) << again->output();
  EXPECT_THAT(again->output(), HasSubstr("epoch 1 formed with 4 workers"));
}

// The coordinator is killed while a newcomer waits to be admitted (the
// members commit every 3 s): the newcomer dials the restarted coordinator
// too, and the job ends at size 4 with the unfaulted bits.
TEST(Restart, NewcomerWaitingToJoinJoinsTheRestartedCoordinator) {
  SecretFile secret;
  int port = 0;
  const std::vector<std::string> sizes = {"--np", "3",        "--min-np",
                                          "2",    "--max-np", "4"};
  std::unique_ptr<Subprocess> coord =
      StartCoordinator(secret, "restart-new", &port, sizes);
  ASSERT_GT(port, 0);
  const std::vector<std::string> slow_commits = {"--commit-every", "300"};
  auto workers =
      StartTrainers(secret, "restart-new", port, "10", 3, 0, slow_commits);
  ASSERT_TRUE(coord->WaitForOutput("epoch 1 formed", Scaled(absl::Seconds(30))))
      << coord->output();
  absl::SleepFor(absl::Milliseconds(500));
  auto newcomer =
      StartTrainers(secret, "restart-new", port, "10", 1, 3, slow_commits);
  ASSERT_TRUE(coord->WaitForOutput("waits to join", Scaled(absl::Seconds(30))))
      << coord->output() << newcomer[0]->output();
  coord->Signal(SIGKILL);
  ASSERT_TRUE(coord->Wait(Scaled(absl::Seconds(10))).ok());
  ASSERT_THAT(coord->output(), Not(HasSubstr("epoch 2 formed")))
      << "the newcomer was admitted before the kill";
  absl::SleepFor(absl::Seconds(1));
  std::unique_ptr<Subprocess> again =
      StartCoordinator(secret, "restart-new", &port, sizes);
  workers.push_back(std::move(newcomer[0]));
  ExpectUnfaultedEnd(workers, 4, "EL_FINAL");
  again->Signal(SIGTERM);
  EXPECT_TRUE(again->Wait(Scaled(absl::Seconds(30))).ok()) << again->output();
}

// A second coordinator for a live job, at its address, is refused (the
// port is taken) and the job goes on untouched.
TEST(Restart, SecondCoordinatorForALiveJobIsRefused) {
  SecretFile secret;
  int port = 0;
  std::unique_ptr<Subprocess> coord =
      StartCoordinator(secret, "restart-two", &port);
  ASSERT_GT(port, 0);
  auto workers = StartTrainers(secret, "restart-two", port, "10");
  ASSERT_TRUE(coord->WaitForOutput("epoch 1 formed", Scaled(absl::Seconds(30))))
      << coord->output();
  Subprocess second({Bin("kolo-coordinator"), "--port", std::to_string(port),
                     "--bind", "127.0.0.1", "--secret-file", secret.path(),
                     "--job-id", "restart-two", "--np", "4", "--min-np", "2"});
  ASSERT_TRUE(second.Start().ok());
  ASSERT_TRUE(second.Wait(Scaled(absl::Seconds(30))).ok()) << second.output();
  EXPECT_EQ(second.exit_info().code, 2) << second.output();
  EXPECT_THAT(second.output(), HasSubstr("the port is taken"));
  ExpectUnfaultedEnd(workers, 4, "EL_FINAL");
  EXPECT_THAT(coord->output(), Not(HasSubstr("epoch 2 formed")));
  coord->Signal(SIGTERM);
  EXPECT_TRUE(coord->Wait(Scaled(absl::Seconds(30))).ok()) << coord->output();
}

// A worker lost while the coordinator was down never reconnects: the
// restarted coordinator forms the job with the three that did, once no
// other reconnected for a second, and they end with the unfaulted bits.
TEST(Restart, WorkerLostWhileTheCoordinatorWasDownIsLeftBehind) {
  SecretFile secret;
  int port = 0;
  std::unique_ptr<Subprocess> coord =
      StartCoordinator(secret, "restart-3", &port);
  ASSERT_GT(port, 0);
  auto workers = StartTrainers(secret, "restart-3", port, "10");
  ASSERT_TRUE(coord->WaitForOutput("epoch 1 formed", Scaled(absl::Seconds(30))))
      << coord->output();
  absl::SleepFor(absl::Seconds(2));
  coord->Signal(SIGKILL);
  ASSERT_TRUE(coord->Wait(Scaled(absl::Seconds(10))).ok());
  workers[3]->Signal(SIGKILL);
  ASSERT_TRUE(workers[3]->Wait(Scaled(absl::Seconds(10))).ok());
  absl::SleepFor(absl::Seconds(1));
  std::unique_ptr<Subprocess> again =
      StartCoordinator(secret, "restart-3", &port);
  ExpectUnfaultedEnd(workers, 3, "is back: the coordinator restarted");
  again->Signal(SIGTERM);
  EXPECT_TRUE(again->Wait(Scaled(absl::Seconds(30))).ok()) << again->output();
  EXPECT_THAT(again->output(), HasSubstr("3 of 4 workers reconnected"));
}

// A coordinator that does not come back: every worker gives up after its
// lease (2 s here) and exits non-zero, saying so; none lingers.
TEST(Restart, CoordinatorThatStaysDownEndsEveryWorkerAfterTheLease) {
  SecretFile secret;
  int port = 0;
  std::unique_ptr<Subprocess> coord =
      StartCoordinator(secret, "no-restart", &port);
  ASSERT_GT(port, 0);
  auto workers = StartTrainers(secret, "no-restart", port, "2");
  ASSERT_TRUE(coord->WaitForOutput("epoch 1 formed", Scaled(absl::Seconds(30))))
      << coord->output();
  absl::SleepFor(absl::Seconds(1));
  coord->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  for (auto& w : workers) {
    ASSERT_TRUE(w->Wait(Scaled(absl::Seconds(20))).ok()) << w->output();
    EXPECT_TRUE(w->exit_info().exited && w->exit_info().code == 75)
        << w->exit_info().ToString() << "\n"
        << w->output();
    EXPECT_THAT(w->output(), HasSubstr("did not come back within 7.0 s"));
  }
  // The lease, then the lost Session's grace (5 s).
  EXPECT_LT(absl::Now() - killed, Scaled(absl::Seconds(12)));
}

// SIGTERM to a worker still waiting to be admitted (the job needs two, and
// only it started): it stops waiting at once, says why, and ends as SIGTERM
// ends a process.
TEST(Growth, SigtermBeforeAdmissionEndsTheWaitAtOnce) {
  SecretFile secret;
  int port = 0;
  std::unique_ptr<Subprocess> coord = StartCoordinator(
      secret, "sigterm", &port, {"--np", "2", "--min-np", "2"});
  ASSERT_GT(port, 0);
  Env env = WorkerEnv(0, 2, port, secret.path());
  env["KOLO_JOB_ID"] = "sigterm";
  env["KOLO_LOG_LEVEL"] = "info";
  Subprocess worker({Bin("kolo-elastic-worker"), "--steps", "10"}, env);
  ASSERT_TRUE(worker.Start().ok());
  // Its Hello reached the coordinator: it waits for the second worker.
  ASSERT_TRUE(coord->WaitForOutput("hw0", Scaled(absl::Seconds(30))))
      << coord->output() << worker.output();
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time sent = absl::Now();
  worker.Signal(SIGTERM);
  ASSERT_TRUE(worker.Wait(Scaled(absl::Seconds(10))).ok()) << worker.output();
  EXPECT_LT(absl::Now() - sent, Scaled(absl::Seconds(3)));
  EXPECT_FALSE(worker.exit_info().exited) << worker.exit_info().ToString();
  EXPECT_EQ(worker.exit_info().signal, SIGTERM) << worker.output();
  EXPECT_THAT(worker.output(),
              HasSubstr("was asked to leave (SIGTERM) before"));
  coord->Signal(SIGTERM);
  EXPECT_TRUE(coord->Wait(Scaled(absl::Seconds(30))).ok()) << coord->output();
}

}  // namespace
}  // namespace kolo::testing
