// Multi-process tests without kolorun: workers started the way torchrun,
// Slurm and Open MPI start them (rank 0 hosts the coordinator: a wrong secret
// is named on that worker; rank 0 killed or frozen makes the others exit
// within their lease; a taken port is named on rank 0 and stops the others
// within seconds), and against a standalone kolo-coordinator (a wrong
// secret disturbs nobody else; a killed or frozen coordinator makes the
// workers exit within their lease).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/net.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"
#include "tests/testing/topology.h"

namespace kolo::testing {
namespace {

using Env = std::map<std::string, std::optional<std::string>>;

std::string Bin(const std::string& name) { return BinDir() + "/" + name; }

std::string WriteSecret(const std::string& name, const std::string& secret) {
  std::string path =
      absl::StrCat(::testing::TempDir(), "/", name, ".", getpid());
  // Padded to the minimum secret length; private, as a secret file should be.
  std::ofstream(path) << secret << "-0123456789abcdef\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

// Variables a surrounding launcher might have set; removed so each test
// controls exactly how its workers start.
Env CleanEnv() {
  Env env;
  for (const char* k : {"KOLO_LAUNCHER",
                        "KOLO_COORDINATOR",
                        "KOLO_SECRET",
                        "KOLO_SECRET_FILE",
                        "KOLO_RANK",
                        "KOLO_SIZE",
                        "KOLO_LOCAL_RANK",
                        "KOLO_WORKER_ID",
                        "KOLO_HOSTNAME",
                        "KOLO_JOB_ID",
                        "KOLO_HOST_COORDINATOR",
                        "RANK",
                        "WORLD_SIZE",
                        "LOCAL_RANK",
                        "MASTER_ADDR",
                        "MASTER_PORT",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "SLURM_LOCALID",
                        "SLURM_JOB_ID",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK",
                        "TORCHELASTIC_RUN_ID"}) {
    env[k] = std::nullopt;
  }
  return env;
}

int FreePort() {
  absl::StatusOr<int> port = net::PickFreePort();
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? *port : 1;
}

// Starts `n` workers; env_for(rank) gives each its variables.
std::vector<std::unique_ptr<Subprocess>> StartWorkers(
    int n, const std::function<Env(int)>& env_for,
    std::vector<std::string> args) {
  std::vector<std::unique_ptr<Subprocess>> workers;
  args.insert(args.begin(), Bin("kolo-mp-worker"));
  for (int r = 0; r < n; ++r) {
    Env env = CleanEnv();
    for (auto& [k, v] : env_for(r)) env[k] = v;
    workers.push_back(std::make_unique<Subprocess>(args, env));
    absl::Status st = workers.back()->Start();
    EXPECT_TRUE(st.ok()) << st;
  }
  return workers;
}

void ExpectTopology(std::vector<std::unique_ptr<Subprocess>>& workers) {
  const int n = static_cast<int>(workers.size());
  std::set<int> ranks;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(workers[i]->Wait(Scaled(absl::Seconds(60))).ok())
        << workers[i]->output();
    ASSERT_TRUE(workers[i]->exit_info().exited &&
                workers[i]->exit_info().code == 0)
        << "worker " << i << ": " << workers[i]->exit_info().ToString() << "\n"
        << workers[i]->output();
    std::vector<Fields> topo = ParseTagged(workers[i]->output(), "TOPO");
    ASSERT_EQ(topo.size(), 1u) << workers[i]->output();
    // The launcher's rank is kept.
    EXPECT_EQ(IntField(topo[0], "rank"), i);
    EXPECT_EQ(IntField(topo[0], "size"), n);
    EXPECT_EQ(IntField(topo[0], "local_rank"), i);
    EXPECT_EQ(IntField(topo[0], "local_size"), n);
    EXPECT_EQ(IntField(topo[0], "cross_rank"), 0);
    EXPECT_EQ(IntField(topo[0], "cross_size"), 1);
    ranks.insert(IntField(topo[0], "rank"));
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(n));
}

Env TorchrunEnv(int rank, int n, const std::string& port,
                const std::string& secret_file) {
  return Env{{"RANK", std::to_string(rank)},
             {"WORLD_SIZE", std::to_string(n)},
             {"LOCAL_RANK", std::to_string(rank)},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", port},
             {"KOLO_SECRET_FILE", secret_file}};
}

class Torchrun : public ::testing::TestWithParam<int> {};

TEST_P(Torchrun, TopologyAndAgreement) {
  const int n = GetParam();
  std::string secret = WriteSecret("torchrun_secret", "torchrun-secret-1");
  std::string port = std::to_string(FreePort());
  auto workers = StartWorkers(
      n, [&](int r) { return TorchrunEnv(r, n, port, secret); }, {"topology"});
  ExpectTopology(workers);
}

INSTANTIATE_TEST_SUITE_P(Sizes, Torchrun, ::testing::Values(1, 3));

TEST(EnvStart, WrongSecretIsNamedOnTheWorker) {
  // Rank 0 hosts the coordinator; rank 1 has another secret.
  std::string good = WriteSecret("rank0_secret", "the-job-secret");
  std::string bad = WriteSecret("rank1_secret", "not-the-job-secret");
  std::string port = std::to_string(FreePort());
  auto workers = StartWorkers(
      2,
      [&](int r) {
        Env env = TorchrunEnv(r, 2, port, r == 0 ? good : bad);
        env["KOLO_START_TIMEOUT"] =
            absl::StrCat(absl::ToDoubleSeconds(Scaled(absl::Seconds(3))));
        return env;
      },
      {"init-only"});
  Subprocess& intruder = *workers[1];
  ASSERT_TRUE(intruder.Wait(Scaled(absl::Seconds(20))).ok())
      << intruder.output();
  EXPECT_EQ(intruder.exit_info().code, 3) << intruder.output();
  EXPECT_NE(intruder.output().find("UNAUTHENTICATED"), std::string::npos)
      << intruder.output();
  EXPECT_NE(intruder.output().find("refused worker rank1@"), std::string::npos)
      << intruder.output();
  EXPECT_NE(intruder.output().find("authentication failed"), std::string::npos)
      << intruder.output();
  // Rank 0 waits for a second worker that never joins, then says so.
  Subprocess& host = *workers[0];
  ASSERT_TRUE(host.Wait(Scaled(absl::Seconds(20))).ok()) << host.output();
  EXPECT_EQ(host.exit_info().code, 3) << host.output();
  EXPECT_NE(host.output().find("no membership from the coordinator"),
            std::string::npos)
      << host.output();
}

// Starts 3 holding workers, waits until all are in, and hurts rank 0 (which
// hosts the coordinator) with `sig`: the others exit within their lease.
void ExpectOthersExitWhenRank0Gets(int sig, absl::Duration within) {
  std::string secret = WriteSecret("hold_secret", "hold-secret");
  std::string port = std::to_string(FreePort());
  auto workers = StartWorkers(3,
                              [&](int r) {
                                Env env = TorchrunEnv(r, 3, port, secret);
                                env["KOLO_LEASE_SECONDS"] = "2";
                                env["KOLO_HEARTBEAT_INTERVAL_MS"] = "200";
                                return env;
                              },
                              {"hold", "120"});
  for (auto& w : workers) {
    ASSERT_TRUE(w->WaitForOutput("INITIALISED", Scaled(absl::Seconds(30))))
        << w->output();
  }
  const absl::Time start = absl::Now();
  workers[0]->Signal(sig);
  for (int r = 1; r < 3; ++r) {
    Subprocess& w = *workers[r];
    ASSERT_TRUE(w.Wait(within).ok()) << "rank " << r << " lingers\n"
                                     << w.output();
    EXPECT_TRUE(w.exit_info().exited && w.exit_info().code == 75)
        << w.exit_info().ToString() << "\n"
        << w.output();
    EXPECT_NE(w.output().find("lost the coordinator at 127.0.0.1:"),
              std::string::npos)
        << w.output();
  }
  EXPECT_LT(absl::Now() - start, within);
  workers[0]->Signal(SIGKILL);
  workers[0]->Signal(SIGCONT);
}

TEST(EnvStart, KilledRank0MakesOthersExit) {
  // A broken stream is seen at once; the lease (2 s) is the upper bound.
  ExpectOthersExitWhenRank0Gets(SIGKILL, Scaled(absl::Seconds(5)));
}

TEST(EnvStart, SilentRank0MakesOthersExitWithinTheLease) {
  ExpectOthersExitWhenRank0Gets(SIGSTOP, Scaled(absl::Seconds(8)));
}

TEST(EnvStart, WorkerKilledMidAllreduce) {
  // Rank 1 of 3 dies in the middle of a stream of 1 MiB allreduces: the
  // others' calls fail within seconds, naming rank 1. (No launcher here, so
  // nobody stops the survivors for them: they must notice by themselves.)
  std::string secret = WriteSecret("kill_secret", "kill-secret");
  std::string port = std::to_string(FreePort());
  auto workers =
      StartWorkers(3, [&](int r) { return TorchrunEnv(r, 3, port, secret); },
                   {"kill-mid-allreduce", "1", "20"});
  ASSERT_TRUE(workers[1]->Wait(Scaled(absl::Seconds(60))).ok())
      << workers[1]->output();
  EXPECT_EQ(workers[1]->exit_info().signal, SIGKILL)
      << workers[1]->exit_info().ToString() << workers[1]->output();
  const absl::Time died = absl::Now();
  for (int r : {0, 2}) {
    Subprocess& w = *workers[r];
    ASSERT_TRUE(w.Wait(Scaled(absl::Seconds(15))).ok())
        << "rank " << r << " still running:\n"
        << w.output();
    EXPECT_EQ(w.exit_info().code, 5) << w.exit_info().ToString() << w.output();
    EXPECT_NE(w.output().find("ALLREDUCE_FAILED"), std::string::npos)
        << w.output();
    EXPECT_NE(w.output().find("rank 1"), std::string::npos) << w.output();
  }
  // Well within KOLO_TIMEOUT_SECONDS (30 s): a closed connection is seen at
  // once, not by the inactivity deadline.
  EXPECT_LT(absl::Now() - died, Scaled(absl::Seconds(10)));
}

TEST(EnvStart, WorkerStoppedMidAllreduceEndsTheJobThroughTheCoordinator) {
  // Rank 1 of 3 stops (SIGSTOP) in the middle of a stream of 1 MiB
  // allreduces: its sockets stay open, so no connection error tells the
  // others. The coordinator misses its heartbeats (timeout 2 s here) and
  // ends the job; that must abort the survivors' blocked allreduces at once,
  // naming rank 1 — long before the 30 s inactivity deadline.
  std::string secret = WriteSecret("stop_secret", "stop-secret");
  std::string port = std::to_string(FreePort());
  auto workers = StartWorkers(3,
                              [&](int r) {
                                Env env = TorchrunEnv(r, 3, port, secret);
                                env["KOLO_HEARTBEAT_TIMEOUT_SECONDS"] = "2";
                                env["KOLO_TIMEOUT_SECONDS"] = "30";
                                return env;
                              },
                              {"stop-mid-allreduce", "1", "20"});
  Subprocess& victim = *workers[1];
  // Rank 1 stopping itself is not observable from here except by the
  // others' failure; bound everything by the 30 s deadline it must beat.
  const absl::Time start = absl::Now();
  for (int r : {0, 2}) {
    Subprocess& w = *workers[r];
    ASSERT_TRUE(w.Wait(Scaled(absl::Seconds(25))).ok())
        << "rank " << r << " still running:\n"
        << w.output();
    EXPECT_EQ(w.exit_info().code, 5) << w.exit_info().ToString() << w.output();
    EXPECT_NE(w.output().find("ALLREDUCE_FAILED"), std::string::npos)
        << w.output();
    EXPECT_NE(w.output().find("rank 1"), std::string::npos) << w.output();
    EXPECT_EQ(w.output().find("KOLO_TIMEOUT_SECONDS"), std::string::npos)
        << "ended by the inactivity deadline, not by the coordinator:\n"
        << w.output();
  }
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(20)));
  victim.Signal(SIGKILL);
  victim.Signal(SIGCONT);
  ASSERT_TRUE(victim.Wait(Scaled(absl::Seconds(10))).ok());
}

// Rank 0 hosts the coordinator on a port another program holds (the test,
// as torchrun's store holds MASTER_PORT): rank 0 says which variable chose
// the port (not kolo-coordinator's --port) without gRPC's raw error line,
// and the others stop within seconds, naming the cause, instead of waiting
// for their start timeout (30 s by default; 60 s here).
void ExpectTakenPortNamedAtOnce(const Env& address, const std::string& var) {
  net::UniqueFd holder(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(holder.valid());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)),
            0);
  ASSERT_EQ(::listen(holder.get(), 16), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&sa), &len),
            0);
  const std::string port = std::to_string(ntohs(sa.sin_port));
  std::string secret = WriteSecret("taken_secret", "taken-port-secret");
  const absl::Time start = absl::Now();
  auto workers = StartWorkers(2,
                              [&](int r) {
                                Env env = TorchrunEnv(r, 2, port, secret);
                                for (const auto& [k, v] : address) {
                                  env[k] = v ? absl::StrCat(*v, port) : v;
                                }
                                env["KOLO_START_TIMEOUT"] = "60";
                                return env;
                              },
                              {"init-only"});
  Subprocess& host = *workers[0];
  ASSERT_TRUE(host.Wait(Scaled(absl::Seconds(20))).ok()) << host.output();
  EXPECT_EQ(host.exit_info().code, 3) << host.output();
  EXPECT_NE(host.output().find("could not host the coordinator"),
            std::string::npos)
      << host.output();
  EXPECT_NE(host.output().find("the port is taken"), std::string::npos)
      << host.output();
  EXPECT_NE(host.output().find("choose a free port in " + var),
            std::string::npos)
      << host.output();
  EXPECT_EQ(host.output().find("--port"), std::string::npos) << host.output();
  EXPECT_EQ(host.output().find("chttp2"), std::string::npos) << host.output();
  Subprocess& other = *workers[1];
  ASSERT_TRUE(other.Wait(Scaled(absl::Seconds(20))).ok())
      << "rank 1 waits for a coordinator that cannot come:\n"
      << other.output();
  EXPECT_EQ(other.exit_info().code, 3) << other.output();
  EXPECT_NE(other.output().find("is not a kolo coordinator"), std::string::npos)
      << other.output();
  EXPECT_NE(other.output().find("choose a free port in " + var),
            std::string::npos)
      << other.output();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(15)));
}

TEST(EnvStart, TakenMasterPortIsNamedAndTheOthersStopAtOnce) {
  ExpectTakenPortNamedAtOnce({}, "MASTER_PORT");
}

TEST(EnvStart, TakenKoloCoordinatorPortIsNamedAndTheOthersStopAtOnce) {
  ExpectTakenPortNamedAtOnce({{"KOLO_COORDINATOR", "127.0.0.1:"}},
                             "KOLO_COORDINATOR");
}

TEST(EnvStart, Slurm) {
  const int n = 2;
  std::string secret = WriteSecret("slurm_secret", "slurm-secret-1");
  std::string coord = absl::StrCat("127.0.0.1:", FreePort());
  auto workers = StartWorkers(n,
                              [&](int r) {
                                return Env{{"SLURM_PROCID", std::to_string(r)},
                                           {"SLURM_NTASKS", std::to_string(n)},
                                           {"SLURM_LOCALID", std::to_string(r)},
                                           {"KOLO_COORDINATOR", coord},
                                           {"KOLO_SECRET_FILE", secret}};
                              },
                              {"topology"});
  ExpectTopology(workers);
}

TEST(EnvStart, OpenMpi) {
  const int n = 4;
  std::string secret = WriteSecret("ompi_secret", "ompi-secret-1");
  std::string port = std::to_string(FreePort());
  auto workers = StartWorkers(
      n,
      [&](int r) {
        return Env{{"OMPI_COMM_WORLD_RANK", std::to_string(r)},
                   {"OMPI_COMM_WORLD_SIZE", std::to_string(n)},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", port},
                   {"KOLO_SECRET_FILE", secret}};
      },
      {"topology"});
  ExpectTopology(workers);
}

TEST(EnvStart, NoSecretIsRefusedWithHowTo) {
  auto workers =
      StartWorkers(1,
                   [&](int) {
                     return Env{{"RANK", "0"},
                                {"WORLD_SIZE", "1"},
                                {"LOCAL_RANK", "0"},
                                {"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", std::to_string(FreePort())}};
                   },
                   {"init-only"});
  ASSERT_TRUE(workers[0]->Wait(Scaled(absl::Seconds(30))).ok());
  EXPECT_EQ(workers[0]->exit_info().code, 3) << workers[0]->output();
  EXPECT_NE(workers[0]->output().find("KOLO_SECRET_FILE"), std::string::npos)
      << workers[0]->output();
}

// A standalone kolo-coordinator for `n` workers; returns its port.
int StartCoordinator(Subprocess& coord) {
  absl::Status st = coord.Start();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_TRUE(coord.WaitForOutput("listening on", Scaled(absl::Seconds(30))))
      << coord.output();
  EXPECT_TRUE(coord.WaitForOutput("(job", Scaled(absl::Seconds(5))))
      << coord.output();
  size_t pos = coord.output().find("listening on ");
  std::string rest = coord.output().substr(pos + 13);
  std::string hostport = rest.substr(0, rest.find(' '));
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(hostport.substr(hostport.rfind(':') + 1), &port))
      << hostport;
  return port;
}

Env StandaloneWorkerEnv(int rank, int n, int port,
                        const std::string& secret_file) {
  return Env{{"RANK", std::to_string(rank)},
             {"WORLD_SIZE", std::to_string(n)},
             {"LOCAL_RANK", std::to_string(rank)},
             {"KOLO_COORDINATOR", absl::StrCat("127.0.0.1:", port)},
             {"KOLO_HOST_COORDINATOR", "0"},
             {"KOLO_WORKER_ID", absl::StrCat("sw", rank)},
             {"KOLO_SECRET_FILE", secret_file},
             {"KOLO_LEASE_SECONDS", "3"}};
}

TEST(Standalone, WrongSecretDisturbsNobody) {
  std::string good = WriteSecret("good_secret", "the-right-secret");
  std::string bad = WriteSecret("bad_secret", "a-wrong-secret");
  Subprocess coord({Bin("kolo-coordinator"), "--port", "0", "--np", "2",
                    "--bind", "127.0.0.1", "--secret-file", good, "--log-level",
                    "info"});
  int port = StartCoordinator(coord);
  ASSERT_GT(port, 0);
  auto first = StartWorkers(
      1, [&](int) { return StandaloneWorkerEnv(0, 2, port, good); },
      {"topology"});
  // An intruder with the wrong secret, claiming rank 1.
  Env intruder_env = StandaloneWorkerEnv(1, 2, port, bad);
  intruder_env["KOLO_WORKER_ID"] = "intruder";
  auto intruder =
      StartWorkers(1, [&](int) { return intruder_env; }, {"init-only"});
  ASSERT_TRUE(intruder[0]->Wait(Scaled(absl::Seconds(30))).ok());
  EXPECT_EQ(intruder[0]->exit_info().code, 3) << intruder[0]->output();
  EXPECT_NE(intruder[0]->output().find("secret"), std::string::npos)
      << intruder[0]->output();
  // The coordinator logged the refusal, naming the worker.
  EXPECT_TRUE(coord.WaitForOutput("intruder", Scaled(absl::Seconds(10))))
      << coord.output();
  // The real rank 1 joins; the job forms and ends well.
  auto second = StartWorkers(
      1, [&](int) { return StandaloneWorkerEnv(1, 2, port, good); },
      {"topology"});
  for (auto* w : {first[0].get(), second[0].get()}) {
    ASSERT_TRUE(w->Wait(Scaled(absl::Seconds(60))).ok()) << w->output();
    EXPECT_EQ(w->exit_info().code, 0) << w->output() << "\ncoordinator:\n"
                                      << coord.output();
    EXPECT_EQ(ParseTagged(w->output(), "TOPO").size(), 1u) << w->output();
  }
  ASSERT_TRUE(coord.Wait(Scaled(absl::Seconds(30))).ok()) << coord.output();
  EXPECT_EQ(coord.exit_info().code, 0) << coord.output();
}

// Workers hold a 3 s lease on the coordinator; `stop_signal` ends or freezes
// it.
void LeaseTest(int stop_signal) {
  std::string secret = WriteSecret("lease_secret", "lease-secret");
  Subprocess coord({Bin("kolo-coordinator"), "--port", "0", "--np", "2",
                    "--bind", "127.0.0.1", "--secret-file", secret});
  int port = StartCoordinator(coord);
  ASSERT_GT(port, 0);
  auto workers = StartWorkers(
      2, [&](int r) { return StandaloneWorkerEnv(r, 2, port, secret); },
      {"hold", "120"});
  for (auto& w : workers) {
    ASSERT_TRUE(w->WaitForOutput("INITIALISED", Scaled(absl::Seconds(30))))
        << w->output();
  }
  absl::Time stopped = absl::Now();
  coord.Signal(stop_signal);
  for (auto& w : workers) {
    // Lease 3 s, plus generous slack for a loaded machine.
    ASSERT_TRUE(w->Wait(Scaled(absl::Seconds(20))).ok()) << w->output();
    EXPECT_TRUE(w->exit_info().exited) << w->exit_info().ToString();
    EXPECT_EQ(w->exit_info().code, 75) << w->output();
    EXPECT_NE(w->output().find("lost the coordinator"), std::string::npos)
        << w->output();
    EXPECT_EQ(w->output().find("SURVIVED"), std::string::npos);
  }
  if (stop_signal == SIGSTOP) {
    // Silence is only noticed when the lease runs out, not before.
    EXPECT_GE(absl::Now() - stopped, absl::Seconds(2.5));
    coord.Signal(SIGKILL);
    coord.Signal(SIGCONT);
  }
  EXPECT_TRUE(coord.Wait(Scaled(absl::Seconds(10))).ok());
}

TEST(Standalone, KilledCoordinatorEndsWorkersWithinLease) {
  LeaseTest(SIGKILL);
}
TEST(Standalone, SilentCoordinatorEndsWorkersWithinLease) {
  LeaseTest(SIGSTOP);
}

}  // namespace
}  // namespace kolo::testing
