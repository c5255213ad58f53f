// Tests of tcp::Acceptor (allreduce/tcp/acceptor.h), the data port's
// accept-all-the-time front: idle and garbage connections are closed (at the
// handshake deadline, or at once for garbage) and logged, a flood is capped
// with the oldest dropped first, and a mesh formed through the acceptor
// completes while strangers' connections are held.
#include <poll.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "allreduce/tcp/acceptor.h"
#include "allreduce/tcp/tcp_transport.h"
#include "common/socket_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allreduce_tcp_test_mesh.h"
#include "tests/testing/raw_socket.h"
#include "tests/testing/timeouts.h"

namespace kolo::tcp {
namespace {

using ::kolo::testing::ClosedWithin;
using ::kolo::testing::Eventually;
using ::kolo::testing::LogCapture;
using ::kolo::testing::Scaled;
using ::kolo::testing::TestWorld;
using ::testing::HasSubstr;

// Non-blocking connects to `address`, `n` of them (not waited for).
std::vector<net::UniqueFd> Flood(const std::string& address, int n) {
  std::vector<net::UniqueFd> out;
  absl::StatusOr<net::SockAddr> a = net::ResolveAddress(address);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<net::UniqueFd> fd = net::StartConnect(*a);
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (fd.ok()) out.push_back(*std::move(fd));
  }
  return out;
}

class AcceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // LogRefusal holds back all but one line per address per minute, at
    // debug: show those too.
    level_ = GetLogger("transport")->level();
    GetLogger("transport")->set_level(spdlog::level::debug);
  }
  void TearDown() override { GetLogger("transport")->set_level(level_); }
  spdlog::level::level_enum level_ = spdlog::level::warn;
};

TEST_F(AcceptorTest, IdleConnectionsAreClosedAtTheHandshakeDeadline) {
  LogCapture log;
  TestWorld world(1);
  AcceptorOptions o;
  o.handshake_timeout = absl::Milliseconds(300);
  o.owner = "worker w0";
  absl::StatusOr<std::unique_ptr<Acceptor>> acceptor =
      Acceptor::Start(world.listener(0).fd.get(), o);
  ASSERT_TRUE(acceptor.ok()) << acceptor.status();
  const absl::Time start = absl::Now();
  std::vector<net::UniqueFd> idle = Flood(world.listener(0).address, 5);
  // Accepted between epochs (no mesh forms), then held...
  EXPECT_TRUE(Eventually([&] { return (*acceptor)->held() == 5; },
                         Scaled(absl::Seconds(10))));
  // ...and closed at the deadline.
  for (const net::UniqueFd& fd : idle) {
    EXPECT_TRUE(ClosedWithin(fd.get(), Scaled(absl::Seconds(10))));
  }
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_EQ((*acceptor)->held(), 0u);
  EXPECT_THAT(log.text(), HasSubstr("worker w0: closed a data-plane "
                                    "connection from 127.0.0.1:"));
  EXPECT_THAT(log.text(), HasSubstr("it sent nothing within the handshake "
                                    "deadline of 300ms"));
}

TEST_F(AcceptorTest, GarbageIsRefusedAtOnceAndLogged) {
  LogCapture log;
  TestWorld world(1);
  AcceptorOptions o;
  o.handshake_timeout = Scaled(absl::Seconds(60));  // not what closes it
  absl::StatusOr<std::unique_ptr<Acceptor>> acceptor =
      Acceptor::Start(world.listener(0).fd.get(), o);
  ASSERT_TRUE(acceptor.ok()) << acceptor.status();
  std::vector<net::UniqueFd> c = Flood(world.listener(0).address, 1);
  ASSERT_EQ(c.size(), 1u);
  pollfd p{c[0].get(), POLLOUT, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  ASSERT_EQ(::send(c[0].get(), "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  EXPECT_TRUE(ClosedWithin(c[0].get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(log.text(), HasSubstr("does not speak the data-plane "
                                    "handshake; its first bytes: \"GET \""));
  EXPECT_TRUE((*acceptor)->Take().empty());
}

TEST_F(AcceptorTest, AFloodIsCappedAndTheMeshStillForms) {
  LogCapture log;
  TestWorld world(2);
  AcceptorOptions o;
  o.handshake_timeout = Scaled(absl::Seconds(60));
  o.max_held = 16;
  absl::StatusOr<std::unique_ptr<Acceptor>> acceptor =
      Acceptor::Start(world.listener(0).fd.get(), o);
  ASSERT_TRUE(acceptor.ok()) << acceptor.status();
  // Strangers first: far more than the listener's backlog (64) and the cap.
  std::vector<net::UniqueFd> strangers = Flood(world.listener(0).address, 200);
  ASSERT_EQ(strangers.size(), 200u);
  // Every one is accepted (the backlog drains; a SYN the full backlog
  // dropped meanwhile comes again within seconds)...
  EXPECT_TRUE(Eventually(
      [&] {
        int answered = 0;
        for (const net::UniqueFd& fd : strangers) {
          pollfd p{fd.get(), POLLOUT, 0};
          answered += ::poll(&p, 1, 0) == 1 ? 1 : 0;
        }
        return answered == 200;
      },
      Scaled(absl::Seconds(20))));
  // ...and the oldest beyond the cap were dropped to make room.
  EXPECT_TRUE(ClosedWithin(strangers.front().get(), Scaled(absl::Seconds(10))));
  EXPECT_TRUE(Eventually([&] { return (*acceptor)->held() == 16; },
                         Scaled(absl::Seconds(10))));
  EXPECT_THAT(log.text(), HasSubstr("to make room: 16 connections waiting"));

  // The epoch's mesh forms through the acceptor although strangers are
  // held: its connection is the newest and sends its Hello at once.
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<TcpTransport>> ts =
      world.CreateAll([&](TcpOptions& t) {
        if (t.rank == 0) {
          t.listen_fd = -1;
          t.acceptor = acceptor->get();
        }
      });
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_NE(ts[0], nullptr);
  EXPECT_NE(ts[1], nullptr);
  std::printf("mesh formed in %s with %zu strangers held\n",
              absl::FormatDuration(absl::Now() - start).c_str(),
              (*acceptor)->held());
  // The newest strangers are still held (idle), never handed to the mesh;
  // the oldest made room for rank 1's connection, which the mesh took.
  EXPECT_EQ((*acceptor)->held(), 15u);
}

TEST_F(AcceptorTest, TheMeshClosesTakenConnectionsAtTheirDeadline) {
  LogCapture log;
  TestWorld world(2);
  AcceptorOptions o;
  o.handshake_timeout = absl::Milliseconds(400);
  absl::StatusOr<std::unique_ptr<Acceptor>> acceptor =
      Acceptor::Start(world.listener(0).fd.get(), o);
  ASSERT_TRUE(acceptor.ok()) << acceptor.status();
  // A stranger that sends the start of a Hello header, then nothing: the
  // acceptor hands it to the forming mesh, which must drop it at its
  // deadline rather than hold it while it waits for rank 1.
  std::vector<net::UniqueFd> c = Flood(world.listener(0).address, 1);
  pollfd p{c[0].get(), POLLOUT, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  ASSERT_EQ(::send(c[0].get(), "KOL", 3, MSG_NOSIGNAL), 3);
  absl::Status mesh;
  std::thread rank0([&] {
    TcpOptions t = world.Options(0);
    t.listen_fd = -1;
    t.acceptor = acceptor->get();
    t.handshake_timeout = o.handshake_timeout;
    t.connect_timeout = Scaled(absl::Seconds(3));
    mesh = TcpTransport::Create(t).status();
  });
  EXPECT_TRUE(ClosedWithin(c[0].get(), Scaled(absl::Seconds(10))));
  rank0.join();  // rank 1 never comes: the mesh gives up at its deadline
  EXPECT_TRUE(absl::IsDeadlineExceeded(mesh)) << mesh;
  EXPECT_THAT(log.text(), HasSubstr("no handshake within the deadline of "
                                    "400ms"));
}

}  // namespace
}  // namespace kolo::tcp
