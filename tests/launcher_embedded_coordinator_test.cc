// EmbeddedCoordinator (launcher/embedded_coordinator.h): kolorun's
// coordinator killed and started again at the same port, as
// `--fault kill-coordinator:for=DUR` does; what it answers while down; no
// restart of a running or shut-down one.
#include <string>

#include "absl/time/clock.h"
#include "coordinator/event_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/embedded_coordinator.h"

namespace kolo::launcher {
namespace {

using ::testing::HasSubstr;

coordinator::ServerOptions Options() {
  coordinator::ServerOptions o;
  o.listen.bind_host = "127.0.0.1";
  o.listen.port = 0;
  o.core.job_id = "embedded-test";
  o.core.secret = "0123456789abcdef0123456789abcdef";
  o.core.expected_size = 2;
  o.core.elastic = true;
  o.core.min_size = 1;
  return o;
}

TEST(EmbeddedCoordinator, KilledOneIsStartedAgainAtTheSamePort) {
  coordinator::ServerOptions options = Options();
  std::shared_ptr<coordinator::EventLog> events =
      coordinator::EventLog::InMemory();
  options.core.events = events;
  auto started = EmbeddedCoordinator::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  EmbeddedCoordinator& c = **started;
  const int port = c.port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(c.Status().job_id(), "embedded-test");
  EXPECT_FALSE(c.down());
  EXPECT_THAT(c.Restart().message(), HasSubstr("running"));

  c.Kill();
  EXPECT_TRUE(c.down());
  EXPECT_EQ(c.Status().job_id(), "embedded-test");  // the last answer
  EXPECT_EQ(c.Metrics(), "");
  EXPECT_TRUE(absl::IsDeadlineExceeded(c.WaitUntilEnded(absl::Now())));
  c.EndJob(true, "ignored while down", "");

  ASSERT_TRUE(c.Restart().ok());
  EXPECT_FALSE(c.down());
  EXPECT_EQ(c.port(), port);
  EXPECT_EQ(c.restarts(), 1);
  EXPECT_EQ(c.Status().job_id(), "embedded-test");
  EXPECT_EQ(c.Status().phase(), "forming");
  EXPECT_THAT(c.Metrics(), HasSubstr("kolo_"));
  // The job's event log says where the new incarnation begins.
  int restarted = 0;
  for (const auto& e : events->Kept()) {
    if (e["event"] == "coordinator_restarted") {
      ++restarted;
      EXPECT_EQ(e["port"], port);
      EXPECT_EQ(e["restart"], 1);
    }
  }
  EXPECT_EQ(restarted, 1);

  c.Kill();  // twice, as a chaos run does
  ASSERT_TRUE(c.Restart().ok());
  EXPECT_EQ(c.restarts(), 2);
  c.Shutdown(false, "done");
  c.Kill();
  EXPECT_THAT(c.Restart().message(), HasSubstr("ended"));
}

}  // namespace
}  // namespace kolo::launcher
