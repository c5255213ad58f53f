// Tests of GrpcGate (coordinator/grpc_gate.h) without gRPC: the hand-over is
// a fake that keeps the descriptor, as gRPC would. Idle, garbage and unproven
// connections are closed and logged; the caps drop the oldest; a proven
// connection stays; PeerOf names the address a handed-over one came from.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/socket_util.h"
#include "coordinator/grpc_gate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "tests/testing/raw_socket.h"
#include "tests/testing/timeouts.h"

namespace kolo::coordinator {
namespace {

using ::kolo::testing::ClosedWithin;
using ::kolo::testing::Eventually;
using ::kolo::testing::RawConnect;
using ::kolo::testing::Scaled;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class GrpcGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = GetLogger("coordinator");
    level_ = log_->level();
    // LogRefusal holds back all but one line per address per minute, at
    // debug: show those too.
    log_->set_level(spdlog::level::debug);
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
    log_->sinks().push_back(sink_);
  }
  void TearDown() override {
    if (gate_ != nullptr) gate_->Stop();
    log_->sinks().pop_back();
    log_->set_level(level_);
  }

  void Start(GrpcGateOptions o) {
    absl::StatusOr<std::unique_ptr<GrpcGate>> gate = GrpcGate::Listen(o);
    ASSERT_TRUE(gate.ok()) << gate.status();
    gate_ = *std::move(gate);
    gate_->Start([this](int fd) {
      MutexLock lock(&mu_);
      handed_.emplace_back(fd);  // "gRPC" owns it now
    });
  }
  std::vector<int> Handed() {
    MutexLock lock(&mu_);
    std::vector<int> out;
    for (const net::UniqueFd& fd : handed_) out.push_back(fd.get());
    return out;
  }
  std::string Log() const { return absl::StrJoin(sink_->last_formatted(), ""); }

  std::shared_ptr<spdlog::logger> log_;
  spdlog::level::level_enum level_ = spdlog::level::warn;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::unique_ptr<GrpcGate> gate_;
  Mutex mu_;
  std::vector<net::UniqueFd> handed_ ABSL_GUARDED_BY(mu_);
};

TEST_F(GrpcGateTest, IdleConnectionIsClosedAtTheDeadline) {
  GrpcGateOptions o;
  o.handshake_timeout = absl::Milliseconds(300);
  Start(o);
  const absl::Time start = absl::Now();
  net::UniqueFd idle = RawConnect(gate_->port());
  EXPECT_TRUE(ClosedWithin(idle.get(), Scaled(absl::Seconds(10))));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_EQ(gate_->unproven(), 0u);
  EXPECT_TRUE(Handed().empty());
  EXPECT_THAT(Log(), HasSubstr("closed an unauthenticated connection to the "
                               "gRPC port from ipv4:127.0.0.1:"));
  EXPECT_THAT(Log(), HasSubstr("(it never began HTTP/2)"));
}

TEST_F(GrpcGateTest, GarbageIsRefusedAtOnceAndLogged) {
  GrpcGateOptions o;
  o.handshake_timeout = Scaled(absl::Seconds(60));  // not what closes it
  Start(o);
  net::UniqueFd c = RawConnect(gate_->port());
  ASSERT_EQ(::send(c.get(), "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  EXPECT_TRUE(ClosedWithin(c.get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(Log(), HasSubstr("it does not speak gRPC (HTTP/2); its first "
                               "bytes: \"GET / HTTP/1.1"));
  EXPECT_TRUE(Handed().empty());
}

TEST_F(GrpcGateTest, UnprovenHandedOverConnectionIsShutDownProvenOneStays) {
  GrpcGateOptions o;
  o.handshake_timeout = absl::Milliseconds(500);
  Start(o);
  net::UniqueFd unproven = RawConnect(gate_->port());
  net::UniqueFd proven = RawConnect(gate_->port());
  for (int fd : {unproven.get(), proven.get()}) {
    ASSERT_EQ(::send(fd, kPreface.data(), kPreface.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(kPreface.size()));
  }
  ASSERT_TRUE(Eventually([&] { return Handed().size() == 2; },
                         Scaled(absl::Seconds(10))));
  // "gRPC" names calls by descriptor; the gate knows where they came from.
  std::vector<int> handed = Handed();
  const std::string peer0 = gate_->PeerOf(absl::StrCat("fd:", handed[0]));
  const std::string peer1 = gate_->PeerOf(absl::StrCat("fd:", handed[1]));
  EXPECT_THAT(peer0, StartsWith("ipv4:127.0.0.1:"));
  EXPECT_NE(peer0, peer1);
  EXPECT_EQ(gate_->PeerOf("fd:100000"), "fd:100000");
  // Which handed-over descriptor is `proven`'s: the one whose peer is its
  // local address.
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ASSERT_EQ(::getsockname(proven.get(), reinterpret_cast<sockaddr*>(&ss), &len),
            0);
  const int proven_port =
      ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  const int proven_fd = absl::EndsWith(peer0, absl::StrCat(":", proven_port))
                            ? handed[0]
                            : handed[1];
  gate_->Proven(absl::StrCat("fd:", proven_fd));
  EXPECT_EQ(gate_->unproven(), 1u);

  EXPECT_TRUE(ClosedWithin(unproven.get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(Log(), HasSubstr("no call on it proved the job secret within "
                               "500ms"));
  // The proven one outlives the deadline.
  absl::SleepFor(absl::Milliseconds(300));
  pollfd p{proven.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the proven connection was closed";
  EXPECT_EQ(gate_->unproven(), 0u);
}

TEST_F(GrpcGateTest, PerAddressCapDropsTheOldest) {
  GrpcGateOptions o;
  o.handshake_timeout = Scaled(absl::Seconds(60));
  o.max_unproven_per_host = 4;
  Start(o);
  std::vector<net::UniqueFd> conns;
  for (int i = 0; i < 7; ++i) {
    conns.push_back(RawConnect(gate_->port()));
    // One at a time, so that the accept order is the connect order.
    ASSERT_TRUE(Eventually(
        [&] {
          return gate_->unproven() == static_cast<size_t>(std::min(i + 1, 4));
        },
        Scaled(absl::Seconds(10))));
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(ClosedWithin(conns[i].get(), Scaled(absl::Seconds(10)))) << i;
  }
  for (int i = 3; i < 7; ++i) {
    pollfd p{conns[i].get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0) << "connection " << i << " was closed";
  }
  EXPECT_THAT(Log(), HasSubstr("the oldest, dropped to make room: 4 "
                               "unauthenticated connections from its address"));
}

TEST_F(GrpcGateTest, TotalCapDropsTheOldest) {
  GrpcGateOptions o;
  o.handshake_timeout = Scaled(absl::Seconds(60));
  o.max_unproven = 3;
  Start(o);
  std::vector<net::UniqueFd> conns;
  for (int i = 0; i < 5; ++i) {
    conns.push_back(RawConnect(gate_->port()));
    ASSERT_TRUE(Eventually(
        [&] {
          return gate_->unproven() == static_cast<size_t>(std::min(i + 1, 3));
        },
        Scaled(absl::Seconds(10))));
  }
  EXPECT_TRUE(ClosedWithin(conns[0].get(), Scaled(absl::Seconds(10))));
  EXPECT_TRUE(ClosedWithin(conns[1].get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(Log(), HasSubstr("3 unauthenticated connections in all"));
}

TEST_F(GrpcGateTest, StopRefusesNewConnections) {
  Start(GrpcGateOptions{});
  const int port = gate_->port();
  net::UniqueFd pending = RawConnect(port);
  gate_->Stop();
  EXPECT_TRUE(ClosedWithin(pending.get(), Scaled(absl::Seconds(10))));
  absl::StatusOr<net::SockAddr> a =
      net::ResolveAddress(absl::StrCat("127.0.0.1:", port));
  ASSERT_TRUE(a.ok());
  absl::StatusOr<net::UniqueFd> fd = net::StartConnect(*a);
  if (fd.ok()) {
    pollfd p{fd->get(), POLLOUT, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1);
    EXPECT_FALSE(net::FinishConnect(fd->get()).ok());
  }
}

}  // namespace
}  // namespace kolo::coordinator
