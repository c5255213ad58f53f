// WorkerConfig parsing: every launch mode, defaults, aliases, and the errors
// users see for missing or bad values; the warnings about unknown KOLO_*
// variables.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker_lib/config.h"

namespace kolo::worker {
namespace {

using ::testing::HasSubstr;

constexpr char kHost[] = "kernelhost";

absl::StatusOr<WorkerConfig> Parse(const EnvMap& env) {
  return ParseWorkerConfig(env, kHost);
}

TEST(WorkerConfig, Kolorun) {
  auto c = Parse({{"KOLO_LAUNCHER", "kolorun"},
                  {"KOLO_COORDINATOR", "10.0.0.1:4000"},
                  {"KOLO_JOB_ID", "job7"},
                  {"KOLO_WORKER_ID", "w3"},
                  {"KOLO_HOSTNAME", "hostA"},
                  {"KOLO_RANK", "3"},
                  {"KOLO_SIZE", "4"},
                  {"KOLO_LOCAL_RANK", "1"},
                  {"KOLO_SECRET", "s3cret-0123456789abcdef"},
                  // Ignored under kolorun:
                  {"RANK", "9"},
                  {"WORLD_SIZE", "10"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launch_mode, LaunchMode::kKolorun);
  EXPECT_EQ(c->coordinator.host, "10.0.0.1");
  EXPECT_EQ(c->coordinator.port, 4000);
  EXPECT_EQ(c->job_id, "job7");
  EXPECT_EQ(c->worker_id, "w3");
  EXPECT_EQ(c->host_name, "hostA");
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->size, 4);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->secret, "s3cret-0123456789abcdef");
  EXPECT_FALSE(c->host_coordinator);
  EXPECT_EQ(c->worker_incarnation, 0u);
  // Defaults.
  EXPECT_EQ(c->knobs.start_timeout, absl::Seconds(30));
  EXPECT_EQ(c->knobs.heartbeat_interval, absl::Milliseconds(500));
  EXPECT_EQ(c->lease, absl::Seconds(10));
  EXPECT_EQ(c->knobs.heartbeat_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(c->knobs.log_level, "warn");
  EXPECT_EQ(c->data_addr, "");
  EXPECT_EQ(c->data_iface, "");
}

TEST(WorkerConfig, KolorunRank0DoesNotHost) {
  EnvMap env = {{"KOLO_LAUNCHER", "kolorun"},
                {"KOLO_COORDINATOR", "h:1"},
                {"KOLO_RANK", "0"},
                {"KOLO_SIZE", "2"},
                {"KOLO_SECRET", "s-0123456789abcdef"}};
  auto c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->host_coordinator);
  env.erase("KOLO_COORDINATOR");
  c = Parse(env);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_COORDINATOR"));
  env["KOLO_COORDINATOR"] = "h:1";
  env.erase("KOLO_SIZE");
  c = Parse(env);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_SIZE"));
}

TEST(WorkerConfig, Torchrun) {
  EnvMap env = {{"RANK", "0"},
                {"WORLD_SIZE", "2"},
                {"LOCAL_RANK", "0"},
                {"MASTER_ADDR", "node1"},
                {"MASTER_PORT", "29500"},
                {"TORCHELASTIC_RUN_ID", "tr-42"},
                {"KOLO_SECRET", "x-0123456789abcdef"}};
  auto c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launch_mode, LaunchMode::kTorchrun);
  EXPECT_EQ(c->coordinator.ToString(), "node1:29500");
  EXPECT_EQ(c->coordinator_source, "MASTER_ADDR:MASTER_PORT");
  EXPECT_TRUE(c->host_coordinator);
  EXPECT_EQ(c->job_id, "tr-42");
  EXPECT_EQ(c->host_name, kHost);
  EXPECT_EQ(c->worker_id, "rank0@kernelhost");
  EXPECT_EQ(c->local_rank, 0);

  env["RANK"] = "1";
  env["LOCAL_RANK"] = "1";
  c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->host_coordinator) << "only rank 0 hosts";
  EXPECT_EQ(c->worker_id, "rank1@kernelhost");

  // KOLO_COORDINATOR wins over MASTER_ADDR/PORT (torchrun's store owns
  // MASTER_PORT).
  env["KOLO_COORDINATOR"] = "node1:29600";
  c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->coordinator.port, 29600);
  EXPECT_EQ(c->coordinator_source, "KOLO_COORDINATOR");
}

// torchrun's static rendezvous (TORCHELASTIC_USE_AGENT_STORE=True): its
// agent's store owns MASTER_PORT, so a worker without KOLO_COORDINATOR gets
// one sentence naming what to set instead of a bind error at rank 0.
TEST(WorkerConfig, TorchrunAgentStoreNeedsKoloCoordinator) {
  EnvMap env = {{"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"MASTER_ADDR", "node1"},
                {"MASTER_PORT", "29500"},
                {"TORCHELASTIC_RUN_ID", "none"},
                {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  for (const char* rank : {"0", "1"}) {
    env["RANK"] = rank;
    auto c = Parse(env);
    ASSERT_FALSE(c.ok()) << "rank " << rank;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(c.status().message(),
                HasSubstr("MASTER_PORT=29500 is torchrun's own rendezvous "
                          "store"));
    EXPECT_THAT(c.status().message(),
                HasSubstr("set KOLO_COORDINATOR=node1:<a free port other than "
                          "MASTER_PORT> and KOLO_SECRET_FILE="));
    EXPECT_EQ(c.status().message().find(". "), absl::string_view::npos)
        << "one sentence: " << c.status().message();
  }
  // What the message asks for works.
  env["KOLO_COORDINATOR"] = "node1:29600";
  env["KOLO_SECRET"] = "x-0123456789abcdef";
  auto c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->coordinator.ToString(), "node1:29600");
  // Other rendezvous backends (c10d, --standalone) leave MASTER_PORT free
  // for the workers: torch sets the variable to "False".
  env.erase("KOLO_COORDINATOR");
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->coordinator.ToString(), "node1:29500");
}

TEST(WorkerConfig, HostingDecision) {
  EnvMap env = {{"RANK", "0"},
                {"WORLD_SIZE", "2"},
                {"KOLO_COORDINATOR", "127.0.0.1:5000"},
                {"KOLO_SECRET", "x-0123456789abcdef"}};
  auto c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->host_coordinator);
  env["KOLO_HOST_COORDINATOR"] = "0";  // a standalone kolo-coordinator runs
  c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->host_coordinator);
  env["KOLO_HOST_COORDINATOR"] = "maybe";
  c = Parse(env);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_HOST_COORDINATOR='maybe'"));
  // Port 0 only when the hosting worker is alone.
  env["KOLO_HOST_COORDINATOR"] = "1";
  env["KOLO_COORDINATOR"] = "127.0.0.1:0";
  c = Parse(env);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_COORDINATOR"));
}

TEST(WorkerConfig, HostCoordinatorIsRefusedUnderKolorun) {
  EnvMap env = {{"KOLO_LAUNCHER", "kolorun"},
                {"KOLO_COORDINATOR", "127.0.0.1:4000"},
                {"KOLO_RANK", "0"},
                {"KOLO_SIZE", "2"},
                {"KOLO_SECRET", "x-0123456789abcdef"},
                {"KOLO_HOST_COORDINATOR", "1"}};
  auto c = Parse(env);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("unset KOLO_HOST_COORDINATOR"));
  env["KOLO_HOST_COORDINATOR"] = "0";  // what kolorun does anyway
  c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->host_coordinator);
}

TEST(WorkerConfig, NoCoordinatorAddress) {
  EnvMap env = {{"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"KOLO_SECRET", "x-0123456789abcdef"}};
  auto c = Parse(env);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_COORDINATOR=host:port"));
  EXPECT_THAT(c.status().message(), HasSubstr("MASTER_ADDR/MASTER_PORT"));
  env["MASTER_ADDR"] = "n";
  c = Parse(env);
  EXPECT_THAT(c.status().message(), HasSubstr("MASTER_PORT is not set"));
}

TEST(WorkerConfig, Slurm) {
  auto c = Parse({{"SLURM_PROCID", "5"},
                  {"SLURM_NTASKS", "8"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURMD_NODENAME", "gpu-07"},
                  {"SLURM_JOB_ID", "12345"},
                  {"MASTER_ADDR", "gpu-01"},
                  {"MASTER_PORT", "7000"},
                  {"KOLO_SECRET", "x-0123456789abcdef"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launch_mode, LaunchMode::kSlurm);
  EXPECT_EQ(c->rank, 5);
  EXPECT_EQ(c->size, 8);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->host_name, "gpu-07");
  EXPECT_EQ(c->job_id, "12345");
  EXPECT_EQ(c->worker_id, "rank5@gpu-07");
  EXPECT_FALSE(c->host_coordinator);
}

TEST(WorkerConfig, OpenMpiWinsOverSlurm) {
  // mpirun inside a Slurm allocation: every process inherits SLURM_PROCID=0.
  auto c = Parse({{"OMPI_COMM_WORLD_RANK", "2"},
                  {"OMPI_COMM_WORLD_SIZE", "3"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                  {"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "1"},
                  {"KOLO_COORDINATOR", "head:6000"},
                  {"KOLO_SECRET", "x-0123456789abcdef"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launch_mode, LaunchMode::kOpenMpi);
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->size, 3);
  EXPECT_EQ(c->local_rank, 0);
  EXPECT_EQ(c->job_id, "default");
}

TEST(WorkerConfig, SingleWorker) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launch_mode, LaunchMode::kSingle);
  EXPECT_EQ(c->rank, 0);
  EXPECT_EQ(c->size, 1);
  EXPECT_TRUE(c->host_coordinator);
  EXPECT_EQ(c->coordinator.ToString(), "127.0.0.1:0");
  EXPECT_EQ(c->secret.size(), 64u) << "a random secret";
}

// A launcher's single task needs no coordinator address and no secret, as a
// process started alone: a batch script of `sbatch -n 1` running the worker
// itself, `srun -n 1`, `mpirun -np 1`.
TEST(WorkerConfig, OneTaskOfALauncherRunsAlone) {
  for (const EnvMap& env : {EnvMap{{"SLURM_PROCID", "0"},
                                   {"SLURM_NTASKS", "1"},
                                   {"SLURM_LOCALID", "0"},
                                   {"SLURM_JOB_ID", "77"}},
                            EnvMap{{"OMPI_COMM_WORLD_RANK", "0"},
                                   {"OMPI_COMM_WORLD_SIZE", "1"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}},
                            EnvMap{{"RANK", "0"}, {"WORLD_SIZE", "1"}}}) {
    auto c = Parse(env);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_NE(c->launch_mode, LaunchMode::kSingle);
    EXPECT_EQ(c->size, 1);
    EXPECT_TRUE(c->host_coordinator);
    EXPECT_EQ(c->coordinator.ToString(), "127.0.0.1:0");
    EXPECT_EQ(c->secret.size(), 64u) << "a random secret";
  }
  // An address given is used, and then others may connect: a secret is
  // needed.
  EnvMap given = {{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "1"},
                  {"KOLO_COORDINATOR", "node1:29600"}};
  auto c = Parse(given);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  given["KOLO_SECRET"] = "x-0123456789abcdef";
  c = Parse(given);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->coordinator.ToString(), "node1:29600");
  EXPECT_EQ(c->secret, "x-0123456789abcdef");
  // More than one task still needs both.
  c = Parse({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_THAT(c.status().message(), HasSubstr("no coordinator address"));
}

TEST(WorkerConfig, MissingSecretSaysHowToGiveOne) {
  auto c = Parse({{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", "29500"}});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("openssl rand -hex 32"));
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_SECRET_FILE=/path/secret"));
  EXPECT_THAT(c.status().message(), HasSubstr("rank0@kernelhost"));
}

TEST(WorkerConfig, SecretFile) {
  char path[] = "/tmp/kolo_secret_XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string content = "abcdef0123456789\n";
  ASSERT_EQ(::write(fd, content.data(), content.size()),
            static_cast<ssize_t>(content.size()));
  ::close(fd);
  EnvMap env = {{"RANK", "0"},
                {"WORLD_SIZE", "1"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "29500"},
                {"KOLO_SECRET_FILE", path}};
  auto c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->secret, "abcdef0123456789");
  env["KOLO_SECRET"] = "direct-0123456789abcdef";  // KOLO_SECRET wins
  c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->secret, "direct-0123456789abcdef");
  ::unlink(path);
  env.erase("KOLO_SECRET");
  c = Parse(env);
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(path));
}

EnvMap Base() {
  return {{"RANK", "0"},
          {"WORLD_SIZE", "2"},
          {"KOLO_COORDINATOR", "127.0.0.1:5000"},
          {"KOLO_SECRET", "x-0123456789abcdef"}};
}

TEST(WorkerConfig, BadNumbersNameTheVariable) {
  struct Case {
    const char* var;
    const char* value;
  };
  for (const Case& k :
       {Case{"KOLO_START_TIMEOUT", "soon"}, Case{"KOLO_START_TIMEOUT", "-3"},
        Case{"KOLO_HEARTBEAT_INTERVAL_MS", "0"},
        Case{"KOLO_HEARTBEAT_INTERVAL_MS", "1.5"},
        Case{"KOLO_LEASE_SECONDS", "zero"},
        Case{"KOLO_WORKER_INCARNATION", "-1"}, Case{"KOLO_LOG_LEVEL", "loud"},
        Case{"KOLO_ADDR", "not-an-ip"}, Case{"RANK", "x"}, Case{"RANK", "2"},
        Case{"WORLD_SIZE", "0"}, Case{"LOCAL_RANK", "-1"},
        Case{"KOLO_COORDINATOR", "nocolon"},
        Case{"KOLO_COORDINATOR", "h:70000"}, Case{"KOLO_LAUNCHER", "mpirun"}}) {
    EnvMap env = Base();
    env[k.var] = k.value;
    auto c = Parse(env);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument)
        << k.var << "=" << k.value << ": " << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr(k.var)) << c.status();
  }
}

TEST(WorkerConfig, LeaseMustExceedHeartbeat) {
  EnvMap env = Base();
  env["KOLO_HEARTBEAT_INTERVAL_MS"] = "2000";
  env["KOLO_LEASE_SECONDS"] = "1";
  auto c = Parse(env);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_LEASE_SECONDS"));
}

TEST(WorkerConfig, TimingAndAliases) {
  EnvMap env = Base();
  env["HOROVOD_START_TIMEOUT"] = "7";
  env["HOROVOD_LOG_LEVEL"] = "DEBUG";
  env["KOLO_HEARTBEAT_INTERVAL_MS"] = "100";
  env["KOLO_LEASE_SECONDS"] = "2.5";
  env["KOLO_HEARTBEAT_TIMEOUT_SECONDS"] = "1.5";
  env["KOLO_WORKER_INCARNATION"] = "3";
  env["KOLO_IFACE"] = "eth1";
  env["KOLO_ADDR"] = "10.1.2.3";
  auto c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.start_timeout, absl::Seconds(7));
  EXPECT_EQ(c->knobs.log_level, "debug");
  EXPECT_EQ(c->knobs.heartbeat_interval, absl::Milliseconds(100));
  EXPECT_EQ(c->lease, absl::Milliseconds(2500));
  EXPECT_EQ(c->knobs.heartbeat_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(c->worker_incarnation, 3u);
  EXPECT_EQ(c->data_iface, "eth1");
  EXPECT_EQ(c->data_addr, "10.1.2.3");
  // KOLO_* wins over HOROVOD_*.
  env["KOLO_START_TIMEOUT"] = "9";
  env["KOLO_LOG_LEVEL"] = "error";
  c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.start_timeout, absl::Seconds(9));
  EXPECT_EQ(c->knobs.log_level, "error");
}

TEST(WorkerConfig, EmptyValuesCountAsUnset) {
  EnvMap env = Base();
  env["KOLO_WORKER_ID"] = "";
  env["KOLO_HOSTNAME"] = "";
  env["KOLO_LOG_LEVEL"] = "";
  auto c = Parse(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->worker_id, "rank0@kernelhost");
  EXPECT_EQ(c->knobs.log_level, "warn");
}

// Issue 16 §3: KOLO_SECRET too short to resist guessing is refused, saying
// how long it must be and how to make one.
TEST(WorkerConfig, ShortSecretRefused) {
  EnvMap env = {{"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "29500"},
                {"KOLO_SECRET", "x"}};
  auto c = Parse(env);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_SECRET"));
  EXPECT_THAT(c.status().message(), HasSubstr("at least 16 bytes"));
  EXPECT_THAT(c.status().message(), HasSubstr("/dev/urandom"));
}

TEST(WorkerConfig, ProcessEnvironmentScrubsSecret) {
  ASSERT_EQ(::setenv("KOLO_SECRET", "from-env", 1), 0);
  ASSERT_EQ(::setenv("KOLO_TEST_MARKER", "a=b", 1), 0);
  EnvMap env = ReadProcessEnvironment();
  EXPECT_EQ(env["KOLO_SECRET"], "from-env");
  EXPECT_EQ(env["KOLO_TEST_MARKER"], "a=b");
  ScrubSecretFromProcessEnvironment();
  EXPECT_EQ(std::getenv("KOLO_SECRET"), nullptr) << "children must not see it";
  // A later init() in this process still has it.
  EXPECT_EQ(ReadProcessEnvironment()["KOLO_SECRET"], "from-env");
  ::unsetenv("KOLO_TEST_MARKER");
}

}  // namespace
}  // namespace kolo::worker

namespace kolo::worker {
namespace {

TEST(WorkerConfig, DataPlaneKnobs) {
  EnvMap env = {{"KOLO_LAUNCHER", "kolorun"},
                {"KOLO_COORDINATOR", "127.0.0.1:5"},
                {"KOLO_SECRET", "s-0123456789abcdef"},
                {"KOLO_RANK", "0"},
                {"KOLO_SIZE", "1"}};
  auto c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.data_timeout, absl::Seconds(30));
  EXPECT_EQ(c->spin, absl::Microseconds(50));
  EXPECT_EQ(c->small_allreduce_bytes, -1);  // by world size
  env["HOROVOD_GLOO_TIMEOUT_SECONDS"] = "12";
  env["KOLO_SPIN_US"] = "0";
  env["KOLO_SMALL_ALLREDUCE_BYTES"] = "4096";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.data_timeout, absl::Seconds(12));
  EXPECT_EQ(c->spin, absl::ZeroDuration());
  EXPECT_EQ(c->small_allreduce_bytes, 4096);
  env["KOLO_TIMEOUT_SECONDS"] = "3";  // wins over the Horovod alias
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.data_timeout, absl::Seconds(3));
  env["KOLO_SPIN_US"] = "-1";
  c = ParseWorkerConfig(env, "host");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("KOLO_SPIN_US"), std::string::npos);
}

TEST(WorkerConfig, AllreduceAlgorithm) {
  EnvMap env = {{"KOLO_LAUNCHER", "kolorun"},
                {"KOLO_COORDINATOR", "127.0.0.1:5"},
                {"KOLO_SECRET", "s-0123456789abcdef"},
                {"KOLO_RANK", "0"},
                {"KOLO_SIZE", "1"}};
  auto c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->allreduce_algorithm, Algorithm::kAuto);
  const std::pair<const char*, Algorithm> cases[] = {
      {"ring", Algorithm::kRing},
      {"small", Algorithm::kSmall},
      {"Ring", Algorithm::kRing},
      {"auto", Algorithm::kAuto},
      {"", Algorithm::kAuto}};  // empty counts as unset
  for (const auto& [value, want] : cases) {
    env["KOLO_ALLREDUCE_ALGORITHM"] = value;
    c = ParseWorkerConfig(env, "host");
    ASSERT_TRUE(c.ok()) << value << ": " << c.status();
    EXPECT_EQ(c->allreduce_algorithm, want) << value;
  }
  env["KOLO_ALLREDUCE_ALGORITHM"] = "tree";
  c = ParseWorkerConfig(env, "host");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("KOLO_ALLREDUCE_ALGORITHM='tree'"),
            std::string::npos)
      << c.status();
}

TEST(WorkerConfig, Hierarchical) {
  EnvMap env = {{"KOLO_LAUNCHER", "kolorun"},
                {"KOLO_COORDINATOR", "127.0.0.1:5"},
                {"KOLO_SECRET", "s-0123456789abcdef"},
                {"KOLO_RANK", "0"},
                {"KOLO_SIZE", "1"}};
  auto c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hierarchical, HierarchicalMode::kAuto);
  const std::pair<const char*, HierarchicalMode> cases[] = {
      {"1", HierarchicalMode::kOn},      {"on", HierarchicalMode::kOn},
      {"0", HierarchicalMode::kOff},     {"false", HierarchicalMode::kOff},
      {"AUTO", HierarchicalMode::kAuto}, {"", HierarchicalMode::kAuto}};
  for (const auto& [value, want] : cases) {
    env["KOLO_HIERARCHICAL"] = value;
    c = ParseWorkerConfig(env, "host");
    ASSERT_TRUE(c.ok()) << value << ": " << c.status();
    EXPECT_EQ(c->hierarchical, want) << value;
  }
  // Horovod's alias, and KOLO_* winning over it.
  env.erase("KOLO_HIERARCHICAL");
  env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "0";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hierarchical, HierarchicalMode::kOff);
  env["KOLO_HIERARCHICAL"] = "1";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hierarchical, HierarchicalMode::kOn);
  env["KOLO_HIERARCHICAL"] = "2";
  c = ParseWorkerConfig(env, "host");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(
                "bad value KOLO_HIERARCHICAL='2': expected auto, 0 or 1"),
            std::string::npos)
      << c.status();
  env.erase("KOLO_HIERARCHICAL");
  env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "maybe";
  c = ParseWorkerConfig(env, "host");
  EXPECT_NE(c.status().message().find("HOROVOD_HIERARCHICAL_ALLREDUCE='maybe'"),
            std::string::npos)
      << c.status();
}

TEST(WorkerConfig, SegmentBytesAndTcpCongestion) {
  EnvMap env = {{"KOLO_LAUNCHER", "kolorun"},
                {"KOLO_COORDINATOR", "127.0.0.1:5"},
                {"KOLO_SECRET", "s-0123456789abcdef"},
                {"KOLO_RANK", "0"},
                {"KOLO_SIZE", "1"}};
  auto c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->segment_bytes, 0);  // automatic
  EXPECT_EQ(c->socket_sndbuf, 256 * 1024);
  EXPECT_EQ(c->socket_rcvbuf, 512 * 1024);
  EXPECT_EQ(c->tcp_congestion, (std::vector<std::string>{"cubic", "reno"}));
  env["KOLO_SEGMENT_BYTES"] = "131072";
  env["KOLO_SOCKET_SNDBUF"] = "0";
  env["KOLO_SOCKET_RCVBUF"] = "1048576";
  env["KOLO_TCP_CONGESTION"] = " Reno , bbr";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->segment_bytes, 131072);
  EXPECT_EQ(c->socket_sndbuf, 0);
  EXPECT_EQ(c->socket_rcvbuf, 1048576);
  EXPECT_EQ(c->tcp_congestion, (std::vector<std::string>{"reno", "bbr"}));
  env["KOLO_TCP_CONGESTION"] = "system";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tcp_congestion.empty());
  for (const char* bad : {"cu bic", "cubic,;", "x/y"}) {
    env["KOLO_TCP_CONGESTION"] = bad;
    c = ParseWorkerConfig(env, "host");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(c.status().message().find("KOLO_TCP_CONGESTION"),
              std::string::npos)
        << c.status();
  }
  env["KOLO_TCP_CONGESTION"] = "cubic";
  env["KOLO_SEGMENT_BYTES"] = "-1";
  c = ParseWorkerConfig(env, "host");
  EXPECT_NE(c.status().message().find("KOLO_SEGMENT_BYTES='-1'"),
            std::string::npos)
      << c.status();
}

}  // namespace
}  // namespace kolo::worker

namespace kolo::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

EnvMap NegotiationBase() {
  return {{"KOLO_LAUNCHER", "kolorun"},
          {"KOLO_COORDINATOR", "127.0.0.1:5"},
          {"KOLO_SECRET", "s-0123456789abcdef"},
          {"KOLO_RANK", "0"},
          {"KOLO_SIZE", "1"}};
}

TEST(WorkerConfig, NegotiationKnobsDefaultsAndAliases) {
  EnvMap env = NegotiationBase();
  auto c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.cycle_time, absl::Milliseconds(1));
  EXPECT_EQ(c->knobs.stall_check, absl::Seconds(60));
  EXPECT_EQ(c->knobs.stall_shutdown, absl::ZeroDuration());

  env["HOROVOD_CYCLE_TIME"] = "5";
  env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = "30";
  env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = "120";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.cycle_time, absl::Milliseconds(5));
  EXPECT_EQ(c->knobs.stall_check, absl::Seconds(30));
  EXPECT_EQ(c->knobs.stall_shutdown, absl::Seconds(120));

  // KOLO_* wins over HOROVOD_*; fractions; 0 turns the stall checks off.
  env["KOLO_CYCLE_TIME_MS"] = "0.25";
  env["KOLO_STALL_CHECK_TIME_SECONDS"] = "0";
  env["KOLO_STALL_SHUTDOWN_TIME_SECONDS"] = "1.5";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.cycle_time, absl::Microseconds(250));
  EXPECT_EQ(c->knobs.stall_check, absl::ZeroDuration());
  EXPECT_EQ(c->knobs.stall_shutdown, absl::Milliseconds(1500));
  env["KOLO_STALL_SHUTDOWN_TIME_SECONDS"] = "0";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.stall_shutdown, absl::ZeroDuration());
}

// kolorun passes --elastic-timeout down as KOLO_ELASTIC_TIMEOUT; an elastic
// newcomer waits that long to be admitted, not the default 600 s.
TEST(WorkerConfig, ElasticTimeoutIsRead) {
  EnvMap env = NegotiationBase();
  auto c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.elastic_timeout, absl::Seconds(600));
  env["HOROVOD_ELASTIC_TIMEOUT"] = "45";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.elastic_timeout, absl::Seconds(45));
  env["KOLO_ELASTIC_TIMEOUT"] = "30";
  c = ParseWorkerConfig(env, "host");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->knobs.elastic_timeout, absl::Seconds(30));
  env["KOLO_ELASTIC_TIMEOUT"] = "soon";
  c = ParseWorkerConfig(env, "host");
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("KOLO_ELASTIC_TIMEOUT"));
}

TEST(WorkerConfig, BadNegotiationKnobsNameTheVariable) {
  struct Case {
    const char* var;
    const char* value;
  };
  for (const Case& k :
       {Case{"KOLO_CYCLE_TIME_MS", "0"}, Case{"KOLO_CYCLE_TIME_MS", "-1"},
        Case{"KOLO_CYCLE_TIME_MS", "fast"}, Case{"HOROVOD_CYCLE_TIME", "0"},
        Case{"KOLO_STALL_CHECK_TIME_SECONDS", "-1"},
        Case{"HOROVOD_STALL_CHECK_TIME_SECONDS", "x"},
        Case{"KOLO_STALL_SHUTDOWN_TIME_SECONDS", "never"},
        Case{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "-5"}}) {
    EnvMap env = NegotiationBase();
    env[k.var] = k.value;
    auto c = ParseWorkerConfig(env, "host");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument)
        << k.var << "=" << k.value << ": " << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr(k.var)) << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr(k.value)) << c.status();
  }
}

TEST(UnknownVariableWarnings, TypoGetsTheClosestKnownName) {
  EXPECT_THAT(UnknownVariableWarnings({{"KOLO_CYCLE_TIME", "5"}}),
              ElementsAre("KOLO_CYCLE_TIME=5 is not a kolo variable; did you "
                          "mean KOLO_CYCLE_TIME_MS? (docs/configuration.md "
                          "lists every variable)"));
  struct Case {
    const char* typo;
    const char* meant;
  };
  for (const Case& k : {
           Case{"KOLO_LOGLEVEL", "KOLO_LOG_LEVEL"},
           Case{"KOLO_log_level", "KOLO_LOG_LEVEL"},  // case
           Case{"KOLO_SPNI_US", "KOLO_SPIN_US"},      // transposed
           Case{"KOLO_ADR", "KOLO_ADDR"},             // short name
           Case{"KOLO_STALL_CHECK_TIME", "KOLO_STALL_CHECK_TIME_SECONDS"},
           Case{"KOLO_TIMEOUT", "KOLO_TIMEOUT_SECONDS"},  // unit left out
           Case{"KOLO_START_TIMEOUT_SECONDS", "KOLO_START_TIMEOUT"},  // added
           Case{"KOLO_HEARTBEAT_INTERVAL", "KOLO_HEARTBEAT_INTERVAL_MS"},
           Case{"KOLO_SECRET_FILES", "KOLO_SECRET_FILE"},
           Case{"KOLO_SPIN", "KOLO_SPIN_US"},
       }) {
    std::vector<std::string> w = UnknownVariableWarnings({{k.typo, "1"}});
    ASSERT_EQ(w.size(), 1u) << k.typo;
    EXPECT_THAT(w[0], HasSubstr(absl::StrCat("did you mean ", k.meant, "?")))
        << k.typo << ": " << w[0];
  }
}

TEST(UnknownVariableWarnings, FarOffNameGetsNoSuggestion) {
  for (const char* name :
       {"KOLO_BANANA", "KOLO_X", "KOLO_", "KOLO_ENABLE_GPU_DIRECT_MAGIC"}) {
    std::vector<std::string> w = UnknownVariableWarnings({{name, "1"}});
    ASSERT_EQ(w.size(), 1u) << name;
    EXPECT_THAT(w[0], HasSubstr(absl::StrCat(name,
                                             "=1 is not a kolo variable;"
                                             " it is ignored")));
    EXPECT_THAT(w[0], Not(HasSubstr("did you mean"))) << w[0];
  }
}

TEST(UnknownVariableWarnings, KnownAndForeignNamesAreQuiet) {
  EnvMap env;
  for (const std::string& name : KnownVariables()) env[name] = "1";
  env["HOROVOD_CYCLE_TIME"] = "5";
  env["HOROVOD_FUSION_THRESHOLD"] = "0";  // Horovod's own: not ours to judge
  env["PATH"] = "/bin";
  env["kolo_cycle_time_ms"] = "1";  // not KOLO_*
  env["KOLOX"] = "1";
  EXPECT_THAT(UnknownVariableWarnings(env), IsEmpty());
  EXPECT_THAT(UnknownVariableWarnings({}), IsEmpty());
}

TEST(UnknownVariableWarnings, SortedAndSecretsNotShown) {
  std::vector<std::string> w = UnknownVariableWarnings(
      {{"KOLO_ZZZ_TOP", "a"}, {"KOLO_SECRT", "hunter2"}, {"KOLO_AAA", "b"}});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_THAT(w[0], HasSubstr("KOLO_AAA=b "));
  EXPECT_THAT(w[1], HasSubstr("KOLO_SECRT=<hidden> "));
  EXPECT_THAT(w[1], HasSubstr("did you mean KOLO_SECRET?"));
  EXPECT_THAT(w[2], HasSubstr("KOLO_ZZZ_TOP=a "));
  for (const std::string& s : w) EXPECT_THAT(s, Not(HasSubstr("hunter2")));
  // A long value is cut.
  w = UnknownVariableWarnings({{"KOLO_NOTES", std::string(500, 'x')}});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_LT(w[0].size(), 200u) << w[0];
}

TEST(UnknownVariableWarnings, KnownListIsSortedAndHasEveryKnob) {
  std::vector<std::string> known = KnownVariables();
  EXPECT_TRUE(std::is_sorted(known.begin(), known.end()));
  EXPECT_EQ(std::adjacent_find(known.begin(), known.end()), known.end());
  for (const char* name :
       {"KOLO_CYCLE_TIME_MS", "KOLO_STALL_CHECK_TIME_SECONDS",
        "KOLO_STALL_SHUTDOWN_TIME_SECONDS", "KOLO_START_TIMEOUT",
        "KOLO_TIMEOUT_SECONDS", "KOLO_LOG_LEVEL", "KOLO_LOCAL_SIZE",
        "KOLO_SECRET", "KOLO_SECRET_FILE", "KOLO_TIMEOUT_SCALE"}) {
    EXPECT_NE(std::find(known.begin(), known.end(), name), known.end()) << name;
  }
  // And every variable of the shared knobs' table (common/knobs.h).
  for (const Knob& knob : kKnobTable) {
    EXPECT_NE(std::find(known.begin(), known.end(), knob.variable), known.end())
        << knob.variable;
  }
}

}  // namespace
}  // namespace kolo::worker
