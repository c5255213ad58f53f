// The public API (include/kolo/kolo.h) in one process: a single worker that
// hosts its own coordinator, a torchrun-style start, joining a coordinator
// that already runs, and the errors of a bad start.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/kolo.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::Scaled;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sets variables for one test and restores them after.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::map<std::string, std::optional<std::string>> vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      Set(k, v);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) Set(k, v);
  }

 private:
  static void Set(const std::string& k, const std::optional<std::string>& v) {
    if (v) {
      ::setenv(k.c_str(), v->c_str(), 1);
    } else {
      ::unsetenv(k.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

// Every launcher variable unset: a single-worker start.
std::map<std::string, std::optional<std::string>> Clean() {
  std::map<std::string, std::optional<std::string>> m;
  for (const char* k :
       {"KOLO_LAUNCHER", "KOLO_COORDINATOR", "KOLO_SECRET", "KOLO_SECRET_FILE",
        "KOLO_HOST_COORDINATOR", "KOLO_WORKER_ID", "KOLO_HOSTNAME", "RANK",
        "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
        "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "KOLO_ADDR", "KOLO_IFACE"}) {
    m[k] = std::nullopt;
  }
  m["KOLO_START_TIMEOUT"] =
      absl::StrCat(absl::ToDoubleSeconds(Scaled(absl::Seconds(10))));
  return m;
}

void ExpectNotInitialised() {
  EXPECT_FALSE(is_initialized());
  EXPECT_EQ(rank(), -1);
  EXPECT_EQ(size(), -1);
  EXPECT_EQ(local_rank(), -1);
  EXPECT_EQ(local_size(), -1);
  EXPECT_EQ(cross_rank(), -1);
  EXPECT_EQ(cross_size(), -1);
  EXPECT_EQ(worker_id(), "");
  EXPECT_EQ(data_address(), "");
}

// First: once init() has scrubbed a KOLO_SECRET, this process keeps it for
// later inits (gtest runs tests in file order).
TEST(Api, MissingSecretIsRefusedWithHowTo) {
  auto vars = Clean();
  vars["RANK"] = "1";
  vars["WORLD_SIZE"] = "2";
  vars["MASTER_ADDR"] = "127.0.0.1";
  vars["MASTER_PORT"] = "29500";
  ScopedEnv env(vars);
  absl::Status s = init();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("KOLO_SECRET_FILE"));
  ExpectNotInitialised();
}

TEST(Api, SingleWorkerHostsItsOwnCoordinator) {
  ScopedEnv env(Clean());
  ExpectNotInitialised();
  EXPECT_EQ(control_allgather("k", "v", absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(init().ok());
  EXPECT_TRUE(init().ok()) << "a second init is a no-op";
  EXPECT_TRUE(is_initialized());
  EXPECT_EQ(rank(), 0);
  EXPECT_EQ(size(), 1);
  EXPECT_EQ(local_rank(), 0);
  EXPECT_EQ(local_size(), 1);
  EXPECT_EQ(cross_rank(), 0);
  EXPECT_EQ(cross_size(), 1);
  EXPECT_EQ(worker_id(), absl::StrCat("rank0@", net::KernelHostName()));
  EXPECT_THAT(data_address(), StartsWith("127.0.0.1:"));
  auto v = control_allgather("k", "hello", Scaled(absl::Seconds(5)));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(*v, ElementsAre("hello"));
  // A submission, then the same thread's after shutdown (refused: this
  // thread remembered the runtime it submitted to) and after the next init
  // (the fresh job's runtime).
  float x = 2.0f, y = 0.0f;
  const Tensor in{DataType::kFloat32, {1}, &x},
      out{DataType::kFloat32, {1}, &y};
  auto submit = [&] { return allreduce_async(in, out, {}, "api.x"); };
  absl::StatusOr<Handle> h = submit();
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(synchronize(*h, Scaled(absl::Seconds(5))).ok());
  EXPECT_EQ(y, 2.0f);

  EXPECT_TRUE(shutdown().ok());
  ExpectNotInitialised();
  EXPECT_EQ(submit().status().code(), absl::StatusCode::kFailedPrecondition)
      << submit().status();
  EXPECT_TRUE(shutdown().ok()) << "idempotent";
  // And again: init after shutdown starts a fresh job.
  ASSERT_TRUE(init().ok());
  EXPECT_EQ(size(), 1);
  y = 0.0f;
  h = submit();
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(synchronize(*h, Scaled(absl::Seconds(5))).ok());
  EXPECT_EQ(y, 2.0f);
  EXPECT_TRUE(shutdown().ok());
}

TEST(Api, TorchrunStyleStartScrubsTheSecret) {
  auto port = net::PickFreePort();
  ASSERT_TRUE(port.ok());
  auto vars = Clean();
  vars["RANK"] = "0";
  vars["WORLD_SIZE"] = "1";
  vars["LOCAL_RANK"] = "0";
  vars["MASTER_ADDR"] = "127.0.0.1";
  vars["MASTER_PORT"] = absl::StrCat(*port);
  vars["KOLO_SECRET"] = "torch-secret-0123456789";
  vars["KOLO_WORKER_ID"] = "trainer-0";
  ScopedEnv env(vars);
  ASSERT_TRUE(init().ok());
  EXPECT_EQ(std::getenv("KOLO_SECRET"), nullptr)
      << "children of the worker must not inherit the secret";
  EXPECT_EQ(worker_id(), "trainer-0");
  EXPECT_EQ(size(), 1);
  EXPECT_TRUE(shutdown().ok());
}

TEST(Api, JoinsACoordinatorThatAlreadyRuns) {
  coordinator::ServerOptions so;
  so.core.expected_size = 1;
  so.core.job_id = "standalone";
  so.core.secret = "abc-0123456789abcdef";
  auto server = coordinator::CoordinatorServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  auto vars = Clean();
  vars["RANK"] = "0";
  vars["WORLD_SIZE"] = "1";
  vars["KOLO_COORDINATOR"] = absl::StrCat("127.0.0.1:", (*server)->port());
  vars["KOLO_HOST_COORDINATOR"] = "0";
  vars["KOLO_JOB_ID"] = "standalone";
  vars["KOLO_SECRET"] = "abc-0123456789abcdef";
  ScopedEnv env(vars);
  ASSERT_TRUE(init().ok());
  EXPECT_EQ((*server)->Status().phase(), "running");
  EXPECT_TRUE(shutdown().ok());
  EXPECT_TRUE(
      (*server)->WaitUntilEnded(absl::Now() + Scaled(absl::Seconds(5))).ok());
  (*server)->Shutdown(false, "test over");
}

TEST(Api, TakenPortExplainsTorchrunsStore) {
  // Hold a port, as torchrun's rendezvous store holds MASTER_PORT.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  auto vars = Clean();
  vars["RANK"] = "0";
  vars["WORLD_SIZE"] = "2";
  vars["MASTER_ADDR"] = "127.0.0.1";
  vars["MASTER_PORT"] = absl::StrCat(ntohs(sa.sin_port));
  vars["KOLO_SECRET"] = "x-0123456789abcdef";
  ScopedEnv env(vars);
  absl::Status s = init();
  ::close(fd);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("could not host the coordinator"));
  EXPECT_THAT(s.message(), HasSubstr("KOLO_COORDINATOR="));
  EXPECT_THAT(s.message(), HasSubstr("torchrun"));
  ExpectNotInitialised();
}

TEST(Api, BadKoloAddrIsNamed) {
  auto vars = Clean();
  vars["KOLO_ADDR"] = "192.0.2.77";  // TEST-NET-1: not this host's
  ScopedEnv env(vars);
  absl::Status s = init();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("KOLO_ADDR"));
  ExpectNotInitialised();
}

}  // namespace
}  // namespace kolo
