// Multi-process tests through kolorun on loopback: topology on every rank for
// world sizes 1-5, fake hosts with -H, the demo, a killed or failing worker
// ending the job with its rank named, KOLO_HOST_COORDINATOR=1 refused at
// once, and no orphans after SIGKILL of kolorun.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"
#include "tests/testing/topology.h"

namespace kolo::testing {
namespace {

std::string Bin(const std::string& name) { return BinDir() + "/" + name; }

// Runs kolorun with `args` to completion (bounded) and returns it.
std::unique_ptr<Subprocess> RunKolorun(std::vector<std::string> args,
                                       absl::Duration timeout) {
  args.insert(args.begin(), Bin("kolorun"));
  auto p = std::make_unique<Subprocess>(args);
  absl::Status st = p->Start();
  EXPECT_TRUE(st.ok()) << st;
  st = p->Wait(Scaled(timeout));
  EXPECT_TRUE(st.ok()) << st;
  return p;
}

class WorldSize : public ::testing::TestWithParam<int> {};

TEST_P(WorldSize, TopologyOnEveryRank) {
  const int n = GetParam();
  auto p =
      RunKolorun({"-np", std::to_string(n), Bin("kolo-mp-worker"), "topology"},
                 absl::Seconds(60));
  ASSERT_TRUE(p->exit_info().exited && p->exit_info().code == 0)
      << p->exit_info().ToString() << "\n"
      << p->output();
  std::vector<Fields> topo = ParseTagged(p->output(), "TOPO");
  ASSERT_EQ(topo.size(), static_cast<size_t>(n)) << p->output();
  std::set<int> ranks;
  std::vector<std::string> ids(n);
  for (const Fields& f : topo) {
    int r = IntField(f, "rank");
    ASSERT_GE(r, 0);
    ASSERT_LT(r, n);
    ranks.insert(r);
    ids[r] = f.at("worker");
    EXPECT_EQ(IntField(f, "size"), n);
    // One launcher host (localhost): local = global, one cross group each.
    EXPECT_EQ(IntField(f, "local_rank"), r);
    EXPECT_EQ(IntField(f, "local_size"), n);
    EXPECT_EQ(IntField(f, "cross_rank"), 0);
    EXPECT_EQ(IntField(f, "cross_size"), 1);
    // kolorun gives worker i the id w<i> and rank hint i.
    EXPECT_EQ(f.at("worker"), absl::StrCat("w", r));
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(n));
  // Every rank agreed on the same list, in rank order.
  for (const Fields& f : topo)
    EXPECT_EQ(f.at("agreed"), absl::StrJoin(ids, ","));
  // Output lines are prefixed with the rank.
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(
        p->output().find(absl::StrCat("[", r, "]<stdout>:TOPO rank=", r, " ")),
        std::string::npos)
        << p->output();
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, WorldSize, ::testing::Values(1, 2, 3, 4, 5));

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, ExactOnEveryRank) {
  const int n = GetParam();
  auto p = RunKolorun(
      {"-np", std::to_string(n), Bin("kolo-mp-worker"), "collectives"},
      absl::Seconds(120));
  ASSERT_TRUE(p->exit_info().exited && p->exit_info().code == 0)
      << p->exit_info().ToString() << "\n"
      << p->output();
  EXPECT_EQ(ParseTagged(p->output(), "COLL_OK").size(), static_cast<size_t>(n))
      << p->output();
}

INSTANTIATE_TEST_SUITE_P(Sizes, Collectives, ::testing::Values(1, 2, 3, 4, 5));

// KOLO_DATA_ENCRYPTION=aes-256-gcm over TCP only (KOLO_SHM=0): the same
// exact collectives; a value the worker does not know is refused, naming it.
TEST(Kolorun, EncryptedDataPlaneIsExact) {
  for (int n : {2, 3}) {
    auto p = RunKolorun({"-np", std::to_string(n), "/usr/bin/env",
                         "KOLO_DATA_ENCRYPTION=aes-256-gcm", "KOLO_SHM=0",
                         Bin("kolo-mp-worker"), "collectives"},
                        absl::Seconds(120));
    ASSERT_TRUE(p->exit_info().exited && p->exit_info().code == 0)
        << p->exit_info().ToString() << "\n"
        << p->output();
    EXPECT_EQ(ParseTagged(p->output(), "COLL_OK").size(),
              static_cast<size_t>(n))
        << p->output();
  }
  auto bad =
      RunKolorun({"-np", "2", "/usr/bin/env", "KOLO_DATA_ENCRYPTION=rot13",
                  Bin("kolo-mp-worker"), "collectives"},
                 absl::Seconds(60));
  EXPECT_FALSE(bad->exit_info().exited && bad->exit_info().code == 0);
  EXPECT_NE(bad->output().find("KOLO_DATA_ENCRYPTION"), std::string::npos)
      << bad->output();
  // Only rank 0 encrypts: the data-plane handshake refuses, naming both.
  auto mixed = RunKolorun(
      {"-np", "2", "/bin/sh", "-c",
       absl::StrCat("if [ \"$KOLO_RANK\" = 0 ]; then export "
                    "KOLO_DATA_ENCRYPTION=aes-256-gcm; fi; KOLO_SHM=0 exec ",
                    Bin("kolo-mp-worker"), " collectives")},
      absl::Seconds(60));
  EXPECT_FALSE(mixed->exit_info().exited && mixed->exit_info().code == 0);
  EXPECT_NE(mixed->output().find("rank 1 uses KOLO_DATA_ENCRYPTION=none, "
                                 "rank 0 uses aes-256-gcm"),
            std::string::npos)
      << mixed->output();
}

TEST(Kolorun, FakeHostsGiveLocalAndCrossRanks) {
  // Two launcher hosts, a:2 and b:3, started through a command template that
  // runs them locally: ranks 0,1 on a; 2,3,4 on b.
  auto p = RunKolorun(
      {"-np", "5", "-H", "a:2,b:3", "--launcher-cmd",
       "env KOLO_TEST_FAKE_HOST={host}", Bin("kolo-mp-worker"), "topology"},
      absl::Seconds(60));
  ASSERT_TRUE(p->exit_info().exited && p->exit_info().code == 0)
      << p->exit_info().ToString() << "\n"
      << p->output();
  std::vector<Fields> topo = ParseTagged(p->output(), "TOPO");
  ASSERT_EQ(topo.size(), 5u) << p->output();
  struct Want {
    const char* host;
    int local_rank, local_size, cross_rank, cross_size;
  };
  const Want want[5] = {{"a", 0, 2, 0, 2},
                        {"a", 1, 2, 0, 2},
                        {"b", 0, 3, 1, 2},
                        {"b", 1, 3, 1, 2},
                        {"b", 2, 3, 0, 1}};
  for (const Fields& f : topo) {
    int r = IntField(f, "rank");
    ASSERT_GE(r, 0);
    ASSERT_LT(r, 5);
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(f.at("host"), want[r].host);
    EXPECT_EQ(f.at("fake_host"), want[r].host);  // the template ran with {host}
    EXPECT_EQ(IntField(f, "local_rank"), want[r].local_rank);
    EXPECT_EQ(IntField(f, "local_size"), want[r].local_size);
    EXPECT_EQ(IntField(f, "cross_rank"), want[r].cross_rank);
    EXPECT_EQ(IntField(f, "cross_size"), want[r].cross_size);
    EXPECT_EQ(IntField(f, "size"), 5);
  }
}

TEST(Kolorun, DemoAgreesOnOneValue) {
  auto p = RunKolorun({"-np", "4", Bin("kolo-hello")}, absl::Seconds(60));
  ASSERT_TRUE(p->exit_info().exited && p->exit_info().code == 0)
      << p->exit_info().ToString() << "\n"
      << p->output();
  std::set<std::string> agreed;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(p->output(), '\n')) {
    size_t pos = line.find("agreed value ");
    if (pos == absl::string_view::npos) continue;
    ++lines;
    std::string rest(line.substr(pos + 13));
    agreed.insert(rest.substr(0, rest.find(' ')));
  }
  EXPECT_EQ(lines, 4) << p->output();
  EXPECT_EQ(agreed.size(), 1u) << p->output();
}

TEST(Kolorun, KilledWorkerEndsTheJobNamingIt) {
  absl::Time start = absl::Now();
  auto p = RunKolorun({"-np", "3", Bin("kolo-mp-worker"), "die", "1"},
                      absl::Seconds(60));
  EXPECT_TRUE(p->exit_info().exited);
  EXPECT_NE(p->exit_info().code, 0) << p->output();
  // Well before the other workers' 120 s wait ends.
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(45)));
  EXPECT_NE(p->output().find("w1"), std::string::npos) << p->output();
  EXPECT_NE(p->output().find("rank 1"), std::string::npos) << p->output();
  EXPECT_NE(p->output().find("localhost"), std::string::npos) << p->output();
  EXPECT_NE(p->output().find("signal 9"), std::string::npos) << p->output();
}

TEST(Kolorun, WorkerKilledMidAllreduceEndsTheJob) {
  absl::Time start = absl::Now();
  auto p = RunKolorun(
      {"-np", "3", Bin("kolo-mp-worker"), "kill-mid-allreduce", "1", "20"},
      absl::Seconds(60));
  EXPECT_TRUE(p->exit_info().exited);
  EXPECT_NE(p->exit_info().code, 0) << p->output();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(30)));
  // kolorun names the first failure it sees: usually w1 killed by signal 9,
  // but a survivor's own failure (its allreduce ended with an error naming
  // rank 1) can be reaped first. Either way rank 1 is named. The survivors'
  // errors themselves are checked in multiprocess_env_test.
  EXPECT_NE(p->output().find("kolorun: worker w"), std::string::npos)
      << p->output();
  EXPECT_NE(p->output().find("rank 1"), std::string::npos) << p->output();
}

TEST(Kolorun, FailingWorkerExitCodeNamed) {
  auto p = RunKolorun({"-np", "3", Bin("kolo-mp-worker"), "exit", "2", "7"},
                      absl::Seconds(60));
  EXPECT_TRUE(p->exit_info().exited);
  EXPECT_NE(p->exit_info().code, 0) << p->output();
  EXPECT_NE(p->output().find("w2"), std::string::npos) << p->output();
  EXPECT_NE(p->output().find("rank 2"), std::string::npos) << p->output();
  EXPECT_NE(p->output().find("code 7"), std::string::npos) << p->output();
}

// KOLO_HOST_COORDINATOR=1 left in the environment (from a torchrun-style
// script): kolorun runs the coordinator on the port KOLO_COORDINATOR names,
// so rank 0 could only fail to host one there. The workers name the
// variable (not kolo-coordinator's --port, nor in gRPC's raw bind error)
// and kolorun ends the job at once.
TEST(Kolorun, HostCoordinatorVariableIsRefusedAtOnce) {
  const absl::Time start = absl::Now();
  Subprocess p({Bin("kolorun"), "-np", "2", Bin("kolo-mp-worker"), "init-only"},
               {{"KOLO_HOST_COORDINATOR", "1"}});
  ASSERT_TRUE(p.Start().ok());
  ASSERT_TRUE(p.Wait(Scaled(absl::Seconds(30))).ok()) << p.output();
  EXPECT_TRUE(p.exit_info().exited && p.exit_info().code != 0)
      << p.exit_info().ToString() << "\n"
      << p.output();
  EXPECT_NE(p.output().find("KOLO_HOST_COORDINATOR=1 under kolorun"),
            std::string::npos)
      << p.output();
  EXPECT_NE(p.output().find("unset KOLO_HOST_COORDINATOR"), std::string::npos)
      << p.output();
  EXPECT_EQ(p.output().find("--port"), std::string::npos) << p.output();
  EXPECT_EQ(p.output().find("chttp2"), std::string::npos) << p.output();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10))) << p.output();
}

TEST(Kolorun, SigkillOfKolorunLeavesNoProcess) {
  std::string dir =
      ::testing::TempDir() + "/kolo_orphans_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  Subprocess p({Bin("kolorun"), "-np", "3", Bin("kolo-mp-worker"),
                "spawn-and-sleep", dir});
  ASSERT_TRUE(p.Start().ok());
  absl::Time deadline = absl::Now() + Scaled(absl::Seconds(60));
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r) {
    for (const char* kind : {"pid.", "child."}) {
      std::string path = absl::StrCat(dir, "/", kind, r);
      pid_t pid = 0;
      while (pid == 0 && absl::Now() < deadline) {
        std::ifstream in(path);
        if (!(in >> pid)) {
          pid = 0;
          p.WaitForOutput("\n\n",
                          absl::Milliseconds(50));  // read output meanwhile
        }
      }
      ASSERT_GT(pid, 0) << "no " << path << "; output:\n" << p.output();
      pids.push_back(pid);
    }
  }
  for (pid_t pid : pids) ASSERT_TRUE(ProcessAlive(pid)) << pid;
  p.Signal(SIGKILL);
  ASSERT_TRUE(p.Wait(Scaled(absl::Seconds(10))).ok());
  absl::Time gone_deadline = absl::Now() + Scaled(absl::Seconds(15));
  for (pid_t pid : pids) {
    while (ProcessAlive(pid) && absl::Now() < gone_deadline)
      absl::SleepFor(absl::Milliseconds(50));
    EXPECT_FALSE(ProcessAlive(pid)) << "process " << pid << " outlived kolorun";
  }
  for (pid_t pid : pids)
    ::kill(pid, SIGKILL);  // never leave them, even on failure
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kolo::testing
