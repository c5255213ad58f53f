// Fault injection through kolorun on loopback (issue 19): each fault kind
// fired as asked, with its effect on the job and its entry in the recovery
// report (text on stderr, JSON with --fault-report, checked against the
// schema below); bad specs refused at start. The workers are
// tests/workers/elastic_worker.cc (exact sums every step). Every job is
// bounded by RunJob's deadline.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/fault_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/job_run.h"

namespace kolo::testing {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class FaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/kolo-faults-test-", ::getpid(), "-",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::string cmd = absl::StrCat("mkdir -p '", dir_, "'");
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    report_path_ = dir_ + "/report.json";
  }
  void TearDown() override {
    std::string cmd = absl::StrCat("rm -rf '", dir_, "'");
    (void)std::system(cmd.c_str());
  }

  // kolorun -np N [flags] --fault-report R kolo-elastic-worker [worker flags]
  JobRun Launch(int n, std::vector<std::string> flags,
                std::vector<std::string> worker_flags,
                std::map<std::string, std::optional<std::string>> env = {}) {
    std::vector<std::string> argv = {Bin("kolorun"), "-np", std::to_string(n)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--fault-report");
    argv.push_back(report_path_);
    argv.push_back(Bin("kolo-elastic-worker"));
    argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
    return RunJob(argv, std::move(env), absl::Seconds(90));
  }

  // The JSON report, checked against the schema.
  json Report() {
    std::ifstream in(report_path_);
    std::stringstream text;
    text << in.rdbuf();
    json r = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(r.is_object()) << "no JSON report at " << report_path_;
    if (r.is_object()) CheckSchema(r);
    return r;
  }

  static void CheckSchema(const json& r) {
    EXPECT_EQ(r.value("schema", ""), "kolo-fault-report/1");
    const json& job = r.at("job");
    for (const char* k : {"id", "outcome", "reason", "coordinator_reason"}) {
      EXPECT_TRUE(job.at(k).is_string()) << k;
    }
    for (const char* k : {"seed", "started_unix_ms", "exit_code", "final_epoch",
                          "final_members", "resets"}) {
      EXPECT_TRUE(job.at(k).is_number_integer()) << k;
    }
    EXPECT_TRUE(job.at("duration_s").is_number());
    EXPECT_TRUE(job.at("coordinator_killed").is_boolean());
    ASSERT_TRUE(r.at("faults").is_array());
    for (const json& f : r.at("faults")) {
      EXPECT_TRUE(f.at("id").is_number_integer());
      for (const char* k : {"spec", "kind", "fired_by", "state", "detail"}) {
        EXPECT_TRUE(f.at(k).is_string()) << k;
      }
      EXPECT_THAT(
          (std::set<std::string>{"fired", "skipped", "not-fired", "plan"}),
          ::testing::Contains(f.at("state").get<std::string>()));
      for (const char* k : {"fired_s", "ended_s"}) {
        EXPECT_TRUE(f.at(k).is_null() || f.at(k).is_number()) << k;
      }
      EXPECT_TRUE(f.at("from_random").is_null() ||
                  f.at("from_random").is_number_integer());
      EXPECT_TRUE(f.at("target").is_null() || f.at("target").is_object());
      if (f.at("target").is_object() && f.at("target").contains("worker")) {
        for (const char* k : {"incarnation", "rank", "epoch", "pid"}) {
          EXPECT_TRUE(f.at("target").at(k).is_number_integer()) << k;
        }
      }
      const json& d = f.at("detection");
      EXPECT_TRUE(d.is_null() || d.is_object());
      if (d.is_object()) {
        EXPECT_TRUE(d.at("how").is_string());
        EXPECT_TRUE(d.at("cause").is_string());
        EXPECT_TRUE(d.at("epoch_ended").is_number_integer());
        EXPECT_TRUE(d.at("next_epoch").is_number_integer());
        EXPECT_TRUE(d.at("next_epoch_formed_after_s").is_number());
        EXPECT_TRUE(d.at("after_s").is_null() || d.at("after_s").is_number());
      }
      const json& rec = f.at("recovery");
      EXPECT_TRUE(rec.is_null() || rec.is_object());
      if (rec.is_object()) {
        EXPECT_TRUE(rec.at("survivors").is_array());
        for (const json& s : rec.at("survivors")) {
          EXPECT_TRUE(s.at("worker").is_string());
          EXPECT_TRUE(s.at("after_s").is_number());
        }
      }
      EXPECT_TRUE(f.at("rollbacks").is_array());
      for (const json& rb : f.at("rollbacks")) {
        EXPECT_TRUE(rb.at("worker").is_string());
        EXPECT_TRUE(rb.at("commit").is_number_integer());
        EXPECT_TRUE(rb.at("ops_discarded").is_number_integer());
      }
      EXPECT_TRUE(f.at("replacement").is_null() ||
                  f.at("replacement").is_object());
    }
    ASSERT_TRUE(r.at("epochs").is_array());
    for (const json& e : r.at("epochs")) {
      EXPECT_TRUE(e.at("epoch").is_number_integer());
      EXPECT_TRUE(e.at("formed_s").is_number());
      EXPECT_TRUE(e.at("cause").is_string());
      for (const char* k : {"members", "joined", "left", "lost"}) {
        EXPECT_TRUE(e.at(k).is_array()) << k;
      }
      for (const json& l : e.at("lost")) {
        for (const char* k : {"worker", "host", "cause", "detection"}) {
          EXPECT_TRUE(l.at(k).is_string()) << k;
        }
        EXPECT_TRUE(l.at("detected_s").is_number());
      }
    }
    ASSERT_TRUE(r.at("worker_ends").is_array());
    for (const json& w : r.at("worker_ends")) {
      EXPECT_TRUE(w.at("worker").is_string());
      EXPECT_TRUE(w.at("what").is_string());
    }
  }

  static void ExpectExactSurvivors(const JobRun& run, int size) {
    std::vector<std::string> done = Lines(run.output, "EL_DONE ");
    EXPECT_EQ(done.size(), static_cast<size_t>(size)) << run.output;
    for (const std::string& line : done) {
      EXPECT_EQ(Int(Field(line, "size")), size) << line;
      EXPECT_EQ(Field(line, "w"), Field(done[0], "w")) << run.output;
    }
    EXPECT_THAT(run.output, Not(HasSubstr("EL_STEP_BAD")));
  }

  std::string dir_;
  std::string report_path_;
};

// A SIGKILL by time: the stream breaks, epoch 1 ends, the three survivors
// complete their next collective in epoch 2; the timeline marks it.
TEST_F(FaultsTest, KillByTimeIsDetectedByTheStreamAndReported) {
  const std::string timeline = dir_ + "/timeline.json";
  JobRun run =
      Launch(4, {"--min-np", "2", "--fault", "kill:rank=2:after=1500ms"},
             {"--steps", "1000000", "--seconds", "4", "--step-ms", "10",
              "--replacement-exits", "1"},
             {{"KOLO_TIMELINE", timeline}});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectExactSurvivors(run, 3);
  EXPECT_THAT(run.output, HasSubstr("kolorun: fault report (seed 1): 1 fault"));
  EXPECT_THAT(run.output, HasSubstr("survivors' next collective"));
  json r = Report();
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["job"]["outcome"], "ok");
  const json& f = r["faults"][0];
  ASSERT_EQ(f["state"], "fired") << r.dump(2);
  EXPECT_EQ(f["fired_by"], "kolorun");
  EXPECT_EQ(f["target"]["worker"], "w2");
  EXPECT_EQ(f["target"]["rank"], 2);
  EXPECT_EQ(f["target"]["epoch"], 1);
  EXPECT_NEAR(f["fired_s"].get<double>(), 1.5, 0.5);
  ASSERT_TRUE(f["detection"].is_object()) << r.dump(2);
  EXPECT_EQ(f["detection"]["how"], "stream");
  EXPECT_EQ(f["detection"]["epoch_ended"], 1);
  EXPECT_EQ(f["detection"]["next_epoch"], 2);
  ASSERT_TRUE(f["recovery"].is_object());
  EXPECT_EQ(f["recovery"]["survivors"].size(), 3u) << r.dump(2);
  // Every survivor rolled back to its last commit.
  EXPECT_EQ(f["rollbacks"].size(), 3u) << r.dump(2);
  ASSERT_GE(r["epochs"].size(), 2u);
  EXPECT_EQ(r["epochs"][1]["lost"][0]["worker"], "w2");
  // The timeline (rank 0's, across epochs) marks the change and recovery.
  std::ifstream in(timeline);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("epoch 2 formed"));
  EXPECT_THAT(text.str(), HasSubstr("recovered: first collective of epoch 2"));
  EXPECT_THAT(text.str(), HasSubstr("rollback to commit"));
}

// A SIGSTOP the worker fires itself at its 40th collective; kolorun sends
// SIGCONT after `for`. The coordinator evicts it by heartbeat; once
// continued it rejoins as a newcomer.
TEST_F(FaultsTest, StopAtOpIsDetectedByHeartbeatAndContinued) {
  JobRun run =
      Launch(3, {"--min-np", "2", "--fault", "stop:rank=1:at-op=40:for=4s"},
             {"--steps", "1000000", "--seconds", "9", "--step-ms", "10",
              "--replacement-exits", "1"});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("EL_STEP_BAD")));
  json r = Report();
  ASSERT_TRUE(r.is_object());
  const json& f = r["faults"][0];
  EXPECT_EQ(f["state"], "fired") << r.dump(2);
  EXPECT_EQ(f["fired_by"], "worker");
  EXPECT_EQ(f["target"]["rank"], 1);
  EXPECT_GE(f["target"]["at_op"].get<int64_t>(), 40);
  ASSERT_TRUE(f["ended_s"].is_number()) << r.dump(2);
  EXPECT_NEAR(f["ended_s"].get<double>() - f["fired_s"].get<double>(), 4.0,
              0.6);
  ASSERT_TRUE(f["detection"].is_object()) << r.dump(2);
  EXPECT_EQ(f["detection"]["how"], "heartbeat");
  EXPECT_EQ(f["detection"]["cause"].get<std::string>().rfind("silent for", 0),
            0u);
  // It came back as a newcomer of a later epoch.
  ASSERT_TRUE(f["replacement"].is_object()) << r.dump(2);
  EXPECT_EQ(f["replacement"]["worker"], f["target"]["worker"]);
  EXPECT_GT(f["replacement"]["joined_epoch"].get<int>(), 2);
}

// SIGTERM to a worker by id: it leaves at its next commit, the others go
// on without rollback.
TEST_F(FaultsTest, TermByWorkerIdIsALeave) {
  JobRun run =
      Launch(3, {"--min-np", "2", "--fault", "term:worker=w2:after=2500ms"},
             {"--steps", "1000000", "--seconds", "4", "--step-ms", "10"});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectExactSurvivors(run, 2);
  json r = Report();
  ASSERT_TRUE(r.is_object());
  const json& f = r["faults"][0];
  EXPECT_EQ(f["state"], "fired");
  EXPECT_EQ(f["target"]["worker"], "w2");
  ASSERT_TRUE(f["detection"].is_object()) << r.dump(2);
  EXPECT_EQ(f["detection"]["how"], "left");
  EXPECT_TRUE(f["rollbacks"].empty()) << r.dump(2);
  EXPECT_EQ(f["replacement"], nullptr);
}

// delay holds every collective of its target back: a job of 10 steps (two
// plans each: the allreduce and the commit's check) takes at least 2 s with
// 100 ms per plan. slow fires and ends on time; neither changes membership.
TEST_F(FaultsTest, DelayAndSlowHoldTheTargetBackWithoutMembershipChange) {
  JobRun run = Launch(2,
                      {"--min-np", "2", "--fault", "delay:rank=0:ms=100",
                       "--fault", "slow:worker=w1:factor=3:for=1s"},
                      {"--steps", "10", "--step-ms", "1"});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectExactSurvivors(run, 2);
  EXPECT_GE(run.seconds, 2.0) << "the delay did not hold collectives back";
  json r = Report();
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["job"]["final_epoch"], 1);
  EXPECT_EQ(r["faults"][0]["state"], "fired");
  EXPECT_EQ(r["faults"][0]["fired_by"], "worker");
  EXPECT_EQ(r["faults"][0]["target"]["rank"], 0);
  EXPECT_EQ(r["faults"][0]["detection"], nullptr);
  EXPECT_EQ(r["faults"][1]["state"], "fired");
  EXPECT_EQ(r["faults"][1]["target"]["worker"], "w1");
}

// drop cuts one data connection; both ends report it, every worker stays
// in touch with the coordinator, which ends the job naming the connection.
TEST_F(FaultsTest, DropCutsADataConnection) {
  JobRun run =
      Launch(3, {"--fault", "drop:rank=1:peer=0:at-op=20"},
             {"--steps", "1000000", "--seconds", "20", "--step-ms", "5"},
             {{"KOLO_HEARTBEAT_TIMEOUT_SECONDS", "2"}});
  EXPECT_TRUE(run.exit.exited && run.exit.code != 0)
      << run.exit.ToString() << "\n"
      << run.output;
  json r = Report();
  ASSERT_TRUE(r.is_object());
  const json& f = r["faults"][0];
  EXPECT_EQ(f["state"], "fired") << r.dump(2);
  EXPECT_EQ(f["target"]["rank"], 1);
  EXPECT_EQ(f["detail"], "connection shut down");
  EXPECT_EQ(r["job"]["outcome"], "failed");
  EXPECT_THAT(r["job"]["coordinator_reason"].get<std::string>(),
              HasSubstr("w1 (rank 1) - w0 (rank 0)"))
      << r.dump(2);
  EXPECT_THAT(r["job"]["coordinator_reason"].get<std::string>(),
              HasSubstr("the data connections"));
}

// In an elastic job the same cut ends the epoch, not the job: the members
// (all alive) reform it from their last commit and go on.
TEST_F(FaultsTest, DropInAnElasticJobReformsTheEpoch) {
  JobRun run =
      Launch(3, {"--min-np", "2", "--fault", "drop:rank=1:at-op=20"},
             {"--steps", "1000000", "--seconds", "5", "--step-ms", "5"},
             {{"KOLO_HEARTBEAT_TIMEOUT_SECONDS", "2"}});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectExactSurvivors(run, 3);
  json r = Report();
  ASSERT_TRUE(r.is_object());
  const json& f = r["faults"][0];
  EXPECT_EQ(f["state"], "fired") << r.dump(2);
  ASSERT_TRUE(f["detection"].is_object()) << r.dump(2);
  EXPECT_EQ(f["detection"]["how"], "data-plane");
  EXPECT_EQ(f["detection"]["next_epoch"], 2);
  ASSERT_TRUE(f["recovery"].is_object());
  EXPECT_EQ(f["recovery"]["survivors"].size(), 3u) << r.dump(2);
  EXPECT_EQ(r["epochs"][1]["cause"], "reformed");
}

// The coordinator dies: every worker loses its stream and exits; kolorun
// ends the job in failure; nothing hangs.
TEST_F(FaultsTest, KillCoordinatorEndsTheJob) {
  JobRun run =
      Launch(2, {"--min-np", "2", "--fault", "kill-coordinator:after=1s"},
             {"--steps", "1000000", "--seconds", "30", "--step-ms", "10"});
  EXPECT_TRUE(run.exit.exited && run.exit.code != 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_LT(run.seconds, 30) << run.output;
  json r = Report();
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["job"]["coordinator_killed"], true);
  EXPECT_EQ(r["job"]["outcome"], "failed");
  EXPECT_EQ(r["faults"][0]["state"], "fired");
  EXPECT_EQ(r["worker_ends"].size(), 2u) << r.dump(2);
}

// kill-coordinator with for=: kolorun kills its coordinator as a crash
// would and starts a new one at the same port 1 s later. The workers, told
// it comes back (KOLO_COORDINATOR_RETURNS), keep their lease, rejoin the new
// incarnation from their last commit, and every step's sums stay exact.
TEST_F(FaultsTest, KillCoordinatorForStartsItAgainAndTheJobGoesOn) {
  JobRun run = Launch(
      4, {"--min-np", "2", "--fault", "kill-coordinator:after=2s:for=1s"},
      {"--steps", "1000000", "--seconds", "6", "--step-ms", "10"});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ExpectExactSurvivors(run, 4);
  EXPECT_THAT(run.output, HasSubstr("the coordinator is back at port"));
  json r = Report();
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["job"]["coordinator_killed"], false);
  EXPECT_EQ(r["job"]["coordinator_restarts"], 1);
  EXPECT_EQ(r["faults"][0]["state"], "fired");
  EXPECT_THAT(r["faults"][0]["detail"].get<std::string>(),
              HasSubstr("a new coordinator at its address"));
  EXPECT_TRUE(r["faults"][0]["ended_s"].is_number()) << r.dump(2);
  // Its recovery: the new incarnation's first epoch, every worker's first
  // collective in it, after the 1 s the coordinator was down.
  const json& f = r["faults"][0];
  ASSERT_TRUE(f["detection"].is_object()) << r.dump(2);
  EXPECT_EQ(f["detection"]["how"], "coordinator-restart");
  EXPECT_EQ(f["detection"]["next_epoch"], 1);
  ASSERT_TRUE(f["recovery"].is_object());
  ASSERT_EQ(f["recovery"]["survivors"].size(), 4u) << r.dump(2);
  for (const json& w : f["recovery"]["survivors"]) {
    EXPECT_GT(w["after_s"].get<double>(), 1.0) << r.dump(2);
    EXPECT_LT(w["after_s"].get<double>(), 10.0) << r.dump(2);
  }
  // Both incarnations' epochs, in order.
  ASSERT_GE(r["epochs"].size(), 2u);
  EXPECT_EQ(r["epochs"][0]["incarnation"], 0);
  EXPECT_EQ(r["epochs"].back()["incarnation"], 1);
}

// The coordinator killed 50 ms after a worker, while the job forms the
// epoch without it: the new coordinator forms the job from the workers that
// dial back, and every step's sums stay exact.
TEST_F(FaultsTest, KillCoordinatorDuringAnEpochChange) {
  JobRun run =
      Launch(4,
             {"--min-np", "2", "--blacklist-cooldown-range", "1", "1",
              "--fault", "kill:rank=1:after=2s", "--fault",
              "kill-coordinator:after=2050ms:for=1s"},
             {"--steps", "1000000", "--seconds", "7", "--step-ms", "10"});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  std::vector<std::string> done = Lines(run.output, "EL_DONE ");
  ASSERT_GE(done.size(), 3u) << run.output;
  for (const std::string& line : done) {
    EXPECT_EQ(static_cast<size_t>(Int(Field(line, "size"))), done.size())
        << line;
    EXPECT_EQ(Field(line, "w"), Field(done[0], "w")) << run.output;
  }
  EXPECT_THAT(run.output, Not(HasSubstr("EL_STEP_BAD")));
  json r = Report();
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["job"]["coordinator_restarts"], 1) << r.dump(2);
}

// A coordinator down longer than the workers' lease (1 s, then the lost
// Session's 5 s grace): each worker exits with status 75, as a worker that
// lost its coordinator does, kolorun replaces it in its slot, and the
// replacements form the job with the coordinator when it is back.
TEST_F(FaultsTest, WorkerWhoseLeaseRanOutExits75AndIsReplaced) {
  JobRun run =
      Launch(3,
             {"--min-np", "2", "--blacklist-cooldown-range", "1", "1",
              "--fault", "kill-coordinator:after=1s:for=8s"},
             {"--steps", "1000000", "--seconds", "3", "--step-ms", "10"},
             {{"KOLO_LEASE_SECONDS", "1"}});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_THAT(run.output, HasSubstr("exits with status 75"));
  ExpectExactSurvivors(run, 3);
  json r = Report();
  ASSERT_TRUE(r.is_object());
  int lost = 0;
  for (const json& w : r["worker_ends"]) {
    lost += w["what"] == "exited with code 75" ? 1 : 0;
  }
  EXPECT_EQ(lost, 3) << r.dump(2);
  EXPECT_EQ(r["job"]["coordinator_restarts"], 1);
}

// The job shrank by two leaves (a leave frees no slot), then its
// coordinator stays down past the lease: both workers exit with status 75,
// kolorun starts fresh replacements, and the coordinator, back at its port,
// forms the job with those two once no other came for a second, rather than
// wait for the four it started with (found by the 1,000-fault chaos run:
// the replacements timed out waiting, again and again).
TEST_F(FaultsTest, RestartedCoordinatorFormsWithFreshReplacementsOfAShrunkJob) {
  JobRun run = Launch(
      4,
      {"--min-np", "2", "--blacklist-cooldown-range", "1", "1", "--fault",
       "term:worker=w3:after=1s", "--fault", "term:worker=w2:after=1500ms",
       "--fault", "kill-coordinator:after=2500ms:for=8s"},
      {"--steps", "1000000", "--seconds", "4", "--step-ms", "10"},
      {{"KOLO_LEASE_SECONDS", "1"}});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_THAT(run.output, HasSubstr("exits with status 75"));
  EXPECT_THAT(run.output, HasSubstr("2 of 4 workers reconnected"));
  ExpectExactSurvivors(run, 2);
  json r = Report();
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["job"]["coordinator_restarts"], 1);
}

// kill-coordinator:for= needs an elastic job: a fixed one ends with its
// coordinator.
TEST_F(FaultsTest, RestartOfAFixedJobsCoordinatorIsRefused) {
  JobRun run = Launch(2, {"--fault", "kill-coordinator:after=1s:for=1s"},
                      {"--steps", "10"});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("picks up an elastic job only"));
}

// random draws its faults from the seed alone: the report lists exactly
// the plan PlanFaults gives.
TEST_F(FaultsTest, RandomFaultsFollowTheSeed) {
  const std::string spec = "random:rate=40/min:kinds=delay,slow:until=3s";
  JobRun run =
      Launch(3, {"--min-np", "2", "--fault", spec, "--fault-seed", "42"},
             {"--steps", "1000000", "--seconds", "4", "--step-ms", "10"});
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  json r = Report();
  ASSERT_TRUE(r.is_object());
  absl::StatusOr<FaultSpec> parsed = ParseFaultSpec(spec);
  ASSERT_TRUE(parsed.ok());
  std::vector<PlannedFault> plan = PlanFaults({*parsed}, 42);
  ASSERT_EQ(r["faults"].size(), plan.size()) << r.dump(2);
  EXPECT_EQ(r["faults"][0]["state"], "plan");
  for (size_t i = 1; i < plan.size(); ++i) {
    EXPECT_EQ(r["faults"][i]["spec"], FaultSpecText(plan[i].spec));
    EXPECT_EQ(r["faults"][i]["from_random"], 0);
    EXPECT_EQ(r["faults"][i]["state"], "fired") << r.dump(2);
  }
  EXPECT_EQ(r["job"]["seed"], 42);
}

TEST_F(FaultsTest, BadSpecsAreRefusedAtStart) {
  JobRun bad = RunJob({Bin("kolorun"), "-np", "2", "--fault",
                       "kill:rank=x:after=1s", Bin("kolo-elastic-worker")});
  EXPECT_TRUE(bad.exit.exited && bad.exit.code == 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--fault: bad fault spec 'kill:rank=x"));
  EXPECT_THAT(bad.output, HasSubstr("a rank is an integer >= 0"));
  JobRun env =
      RunJob({Bin("kolorun"), "-np", "2", Bin("kolo-elastic-worker")},
             {{"KOLO_FAULTS", "kill:rank=1:after=1s;teleport:rank=0"}});
  EXPECT_TRUE(env.exit.exited && env.exit.code == 2) << env.output;
  EXPECT_THAT(env.output, HasSubstr("KOLO_FAULTS: bad fault spec 'teleport"));
  EXPECT_THAT(env.output, HasSubstr("the kinds are kill, stop, term"));
  JobRun part = RunJob({Bin("kolorun"), "-np", "2", "--fault",
                        "partition:host=b:for=1s", Bin("kolo-elastic-worker")});
  EXPECT_TRUE(part.exit.exited && part.exit.code == 2) << part.output;
  EXPECT_THAT(part.output, HasSubstr("--launcher-cmd 'ip netns exec {host}'"));
}

}  // namespace
}  // namespace kolo::testing
