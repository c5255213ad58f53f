// SessionClient against a real, in-process CoordinatorServer on 127.0.0.1:
// memberships, refusals (wrong secret, wrong version), start timeouts,
// control_allgather, shutdown, and a coordinator that ends the job.
#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/timeouts.h"
#include "worker_lib/session/session_client.h"

namespace kolo::worker {
namespace {

using ::kolo::testing::Scaled;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ClientOr = absl::StatusOr<std::unique_ptr<SessionClient>>;

constexpr char kSecret[] = "the-job-secret";

std::unique_ptr<coordinator::CoordinatorServer> StartServer(int expected,
                                                            int port = 0) {
  coordinator::ServerOptions o;
  o.listen.bind_host = "127.0.0.1";
  o.listen.port = port;
  o.core.expected_size = expected;
  o.core.job_id = "job";
  o.core.secret = kSecret;
  o.core.heartbeat_interval = absl::Milliseconds(100);
  o.core.heartbeat_timeout = Scaled(absl::Seconds(5));
  auto s = coordinator::CoordinatorServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

SessionOptions Options(int port, int rank, int size, std::string host = "h") {
  SessionOptions o;
  o.coordinator = absl::StrCat("127.0.0.1:", port);
  o.job_id = "job";
  o.worker_id = absl::StrCat("w", rank);
  o.host_name = std::move(host);
  o.data_address = absl::StrCat("127.0.0.1:", 10000 + rank);
  o.requested_rank = rank;
  o.expected_size = size;
  o.secret = kSecret;
  o.heartbeat_interval = absl::Milliseconds(100);
  o.lease = Scaled(absl::Seconds(10));
  return o;
}

// Connects every option set in its own thread (they wait for each other).
std::vector<ClientOr> ConnectAll(const std::vector<SessionOptions>& opts,
                                 absl::Duration timeout) {
  std::vector<ClientOr> out;
  for (size_t i = 0; i < opts.size(); ++i) {
    out.emplace_back(absl::UnknownError("not run"));
  }
  std::vector<std::thread> threads;
  const absl::Time deadline = absl::Now() + timeout;
  for (size_t i = 0; i < opts.size(); ++i) {
    threads.emplace_back(
        [&, i] { out[i] = SessionClient::Connect(opts[i], deadline); });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(Session, MembershipExchangeAndShutdown) {
  auto server = StartServer(3);
  ASSERT_NE(server, nullptr);
  auto clients = ConnectAll(
      {Options(server->port(), 0, 3, "a"), Options(server->port(), 1, 3, "b"),
       Options(server->port(), 2, 3, "a")},
      Scaled(absl::Seconds(20)));
  for (auto& c : clients) ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(
      server->WaitForEpoch(absl::Now() + Scaled(absl::Seconds(5))).ok());

  for (int i = 0; i < 3; ++i) {
    const proto::Membership& m = (*clients[i])->membership();
    EXPECT_EQ(m.rank(), i) << "the requested rank is honoured";
    EXPECT_EQ(m.size(), 3);
    EXPECT_EQ((*clients[i])->epoch(), 1u);
    EXPECT_EQ((*clients[i])->incarnation(), server->incarnation());
    ASSERT_EQ(m.peers_size(), 3);
    EXPECT_EQ(m.peers(i).data_address(), absl::StrCat("127.0.0.1:", 10000 + i));
    EXPECT_EQ(m.peers(i).worker_id(), absl::StrCat("w", i));
  }
  // Host a has ranks 0 and 2; host b has rank 1.
  const proto::Membership& m0 = (*clients[0])->membership();
  const proto::Membership& m1 = (*clients[1])->membership();
  const proto::Membership& m2 = (*clients[2])->membership();
  EXPECT_EQ(m0.local_rank(), 0);
  EXPECT_EQ(m0.local_size(), 2);
  EXPECT_EQ(m2.local_rank(), 1);
  EXPECT_EQ(m2.local_size(), 2);
  EXPECT_EQ(m1.local_rank(), 0);
  EXPECT_EQ(m1.local_size(), 1);
  EXPECT_EQ(m0.cross_size(), 2);
  EXPECT_EQ(m1.cross_rank(), 1);

  // control_allgather: values in rank order, whatever the call order.
  for (int round = 0; round < 3; ++round) {
    std::vector<absl::StatusOr<std::vector<std::string>>> results(
        3, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int i = 2; i >= 0; --i) {
      threads.emplace_back([&, i] {
        results[i] = (*clients[i])
                         ->Exchange(absl::StrCat("key", round),
                                    absl::StrCat("v", i, "/", round),
                                    Scaled(absl::Seconds(10)));
      });
    }
    for (auto& t : threads) t.join();
    for (auto& r : results) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_THAT(*r, ElementsAre(absl::StrCat("v0/", round),
                                  absl::StrCat("v1/", round),
                                  absl::StrCat("v2/", round)));
    }
  }

  for (auto& c : clients) {
    EXPECT_TRUE((*c)->Shutdown(Scaled(absl::Seconds(5))).ok());
    EXPECT_TRUE((*c)->Shutdown().ok()) << "idempotent";
  }
  EXPECT_TRUE(
      server->WaitUntilEnded(absl::Now() + Scaled(absl::Seconds(5))).ok());
  auto after = (*clients[0])->Exchange("late", "x", absl::Seconds(1));
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
  server->Shutdown(false, "test over");
}

TEST(Session, WrongSecretIsRefusedClearlyAndDisturbsNobody) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  SessionOptions bad = Options(server->port(), 1, 2);
  bad.secret = "not-the-secret";
  auto refused =
      SessionClient::Connect(bad, absl::Now() + Scaled(absl::Seconds(10)));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated)
      << refused.status();
  // The coordinator proves first; the worker, distrusting it, sends no real
  // proof, and reports the coordinator's (logged) refusal.
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat("the coordinator at 127.0.0.1:",
                                     server->port(), " refused worker w1")));
  EXPECT_THAT(refused.status().message(), HasSubstr("authentication failed"));
  EXPECT_THAT(refused.status().message(), HasSubstr("secret"));
  // The refusal itself is generic; the worker's own finding says why.
  EXPECT_THAT(refused.status().message(),
              HasSubstr("could not prove that it knows the secret"));

  // The job still forms with the right workers.
  auto clients =
      ConnectAll({Options(server->port(), 0, 2), Options(server->port(), 1, 2)},
                 Scaled(absl::Seconds(20)));
  for (auto& c : clients) ASSERT_TRUE(c.ok()) << c.status();
  for (auto& c : clients) EXPECT_TRUE((*c)->Shutdown().ok());
  server->Shutdown(false, "test over");
}

TEST(Session, VersionMismatchNamesBothVersions) {
  auto server = StartServer(1);
  ASSERT_NE(server, nullptr);
  SessionOptions o = Options(server->port(), 0, 1);
  o.protocol_version = kProtocolVersion + 41;
  auto c = SessionClient::Connect(o, absl::Now() + Scaled(absl::Seconds(10)));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition)
      << c.status();
  EXPECT_THAT(c.status().message(),
              HasSubstr(absl::StrCat("refused worker w0")));
  EXPECT_THAT(c.status().message(),
              HasSubstr(absl::StrCat(kProtocolVersion + 41)));
  EXPECT_THAT(c.status().message(), HasSubstr(absl::StrCat(kProtocolVersion)));
  server->Shutdown(false, "test over");
}

TEST(Session, WorkerMayStartBeforeTheCoordinator) {
  auto port = net::PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  ClientOr c = absl::UnknownError("not run");
  std::thread t([&] {
    c = SessionClient::Connect(Options(*port, 0, 1),
                               absl::Now() + Scaled(absl::Seconds(20)));
  });
  absl::SleepFor(absl::Milliseconds(700));
  auto server = StartServer(1, *port);
  t.join();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->membership().size(), 1);
  EXPECT_TRUE((*c)->Shutdown().ok());
  server->Shutdown(false, "test over");
}

TEST(Session, StartTimeouts) {
  // Nobody listens.
  auto port = net::PickFreePort();
  ASSERT_TRUE(port.ok());
  auto c = SessionClient::Connect(Options(*port, 0, 1),
                                  absl::Now() + absl::Milliseconds(500));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded)
      << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("could not reach"));
  EXPECT_THAT(c.status().message(), HasSubstr("KOLO_START_TIMEOUT"));

  // The coordinator waits for a second worker that never comes.
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  c = SessionClient::Connect(Options(server->port(), 0, 2),
                             absl::Now() + absl::Seconds(1));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded)
      << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("no membership from"));
  EXPECT_THAT(c.status().message(),
              HasSubstr("raise KOLO_START_TIMEOUT or check that every worker "
                        "started"));
  server->Shutdown(false, "test over");
}

TEST(Session, ExchangeTimesOutWhenARankDoesNotCall) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  auto clients =
      ConnectAll({Options(server->port(), 0, 2), Options(server->port(), 1, 2)},
                 Scaled(absl::Seconds(20)));
  for (auto& c : clients) ASSERT_TRUE(c.ok()) << c.status();
  auto r = (*clients[0])->Exchange("lonely", "x", absl::Milliseconds(300));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("lonely"));
  EXPECT_TRUE((*clients[0])->health().ok()) << "a timeout is not fatal";
  for (auto& c : clients) (void)(*c)->Shutdown();
  server->Shutdown(false, "test over");
}

TEST(Session, JobEndFailsPendingAndLaterCalls) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  auto clients =
      ConnectAll({Options(server->port(), 0, 2), Options(server->port(), 1, 2)},
                 Scaled(absl::Seconds(20)));
  for (auto& c : clients) ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::vector<std::string>> pending =
      absl::UnknownError("not run");
  std::thread t([&] {
    pending = (*clients[0])->Exchange("k", "v", Scaled(absl::Seconds(30)));
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  server->Shutdown(true, "the operator stopped job 'job'");
  t.join();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(5)));
  ASSERT_FALSE(pending.ok());
  EXPECT_EQ(pending.status().code(), absl::StatusCode::kAborted)
      << pending.status();
  EXPECT_THAT(pending.status().message(),
              HasSubstr("the operator stopped job 'job'"));
  auto later = (*clients[1])->Exchange("k2", "v", Scaled(absl::Seconds(5)));
  EXPECT_EQ(later.status().code(), absl::StatusCode::kAborted);
  for (auto& c : clients) EXPECT_TRUE((*c)->Shutdown().ok());
}

}  // namespace
}  // namespace kolo::worker
