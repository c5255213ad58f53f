// worker::Job (worker_lib/runtime/job.h) built in-process: a single worker
// that hosts its own coordinator, its first epoch and its Session, and a
// hosting rank whose coordinator port is taken.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/timeouts.h"
#include "worker_lib/config.h"
#include "worker_lib/runtime/job.h"

namespace kolo::worker {
namespace {

using ::kolo::testing::Scaled;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A single worker's environment: no launcher, so it hosts the coordinator.
EnvMap SingleWorker() {
  EnvMap env;
  env["KOLO_START_TIMEOUT"] =
      absl::StrCat(absl::ToDoubleSeconds(Scaled(absl::Seconds(10))));
  return env;
}

TEST(Job, SingleWorkerHostsItsCoordinatorAndFormsEpochOne) {
  auto config = ParseWorkerConfig(SingleWorker(), "jobhost");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->host_coordinator);
  auto job = Job::Start(*std::move(config));
  ASSERT_TRUE(job.ok()) << job.status();

  const proto::Membership m = (*job)->membership();
  EXPECT_EQ(m.rank(), 0);
  EXPECT_EQ(m.size(), 1);
  EXPECT_EQ((*job)->config().worker_id, "rank0@jobhost");
  EXPECT_THAT((*job)->data_address(), StartsWith("127.0.0.1:"));
  const Job::Attachment& a = (*job)->attachment();
  ASSERT_NE(a.client, nullptr);
  EXPECT_TRUE(a.client->health().ok());
  EXPECT_EQ(a.epochs->current()->number, 1u);

  // The Session reaches the hosted coordinator: an allgather of one.
  auto v = a.client->Exchange("k", "hello", Scaled(absl::Seconds(5)));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(*v, ElementsAre("hello"));
  // The epoch is alive: an elastic retry has nothing to do.
  auto next = (*job)->AwaitNextEpoch(a, absl::Now() + Scaled(absl::Seconds(1)));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, nullptr);

  // Leaving: the hosted coordinator sees every worker leave in order.
  EXPECT_TRUE((*job)->Stop().ok());
}

TEST(Job, HostingRankWhosePortIsTakenSaysWhere) {
  // A socket that holds a port without accepting.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  EnvMap env = SingleWorker();
  env["KOLO_COORDINATOR"] = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  env["KOLO_HOST_COORDINATOR"] = "1";
  env["KOLO_SECRET"] = "job-test-0123456789abcdef";
  auto config = ParseWorkerConfig(env, "jobhost");
  ASSERT_TRUE(config.ok()) << config.status();
  auto job = Job::Start(*std::move(config));
  ::close(fd);
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(),
              HasSubstr("could not host the coordinator at 127.0.0.1:"));
  EXPECT_THAT(job.status().message(), HasSubstr("KOLO_COORDINATOR"));
}

}  // namespace
}  // namespace kolo::worker
