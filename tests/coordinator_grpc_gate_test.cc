// Tests of GrpcGate (coordinator/grpc_gate.h) without gRPC: the hand-over is
// a fake that keeps the descriptor, as gRPC would. Idle, garbage and unproven
// connections are closed and logged; the caps drop the oldest; a proven
// connection stays; PeerOf names the address a handed-over one came from.
// Under TLS (issue 38; the test plays gRPC on the socketpair's end): bytes
// flow both ways through the relay, closures propagate both ways, a TLS 1.2
// client, a wrong CA, an expired certificate and plaintext HTTP/2 are
// refused in the handshake and logged with the peer's address, a connection
// past the handshake that never proves is closed at the deadline, and Stop
// closes what the relay holds.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "common/socket_util.h"
#include "common/tls_generate.h"
#include "coordinator/grpc_gate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/job_certificates.h"
#include "tests/testing/raw_socket.h"
#include "tests/testing/timeouts.h"
#include "tests/testing/tls_client.h"

namespace kolo::coordinator {
namespace {

using ::kolo::testing::CapturedLog;
using ::kolo::testing::ClosedWithin;
using ::kolo::testing::Eventually;
using ::kolo::testing::RawConnect;
using ::kolo::testing::Scaled;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class GrpcGateTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (gate_ != nullptr) gate_->Stop();
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
  // "gRPC" closes a descriptor it was handed.
  void CloseHanded(int fd) {
    MutexLock lock(&mu_);
    for (net::UniqueFd& h : handed_) {
      if (h.get() == fd) h.Reset();
    }
  }
  std::string Log() const { return log_.text(); }

  // LogRefusal holds back all but one line per address per minute, at
  // debug: the capture shows those too.
  CapturedLog log_{"coordinator"};
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

// ---- Under TLS -------------------------------------------------------------

// The job's CA and certificate, and those of the refusals.
const ::kolo::testing::JobCertificates& Certs() {
  return ::kolo::testing::JobCerts();
}

using ::kolo::testing::TlsTestClient;

class GrpcGateTlsTest : public GrpcGateTest {
 protected:
  void StartTls(absl::Duration handshake_timeout) {
    GrpcGateOptions o;
    o.handshake_timeout = handshake_timeout;
    o.tls = Certs().Material(Certs().leaf);
    Start(o);
  }
  // A client with the job's certificate, past the handshake and the preface,
  // and the descriptor "gRPC" was handed for it.
  std::unique_ptr<TlsTestClient> Connected(int* grpc_fd) {
    const tls::TlsMaterial m = Certs().Material(Certs().leaf);
    const size_t before = Handed().size();
    auto c = std::make_unique<TlsTestClient>(gate_->port(), &m);
    EXPECT_TRUE(c->Handshake()) << c->error();
    EXPECT_TRUE(c->Send(kPreface));
    EXPECT_TRUE(Eventually([&] { return Handed().size() == before + 1; },
                           Scaled(absl::Seconds(10))));
    *grpc_fd = Handed().empty() ? -1 : Handed().back();
    return c;
  }
  // Reads `n` bytes from "gRPC"'s end (non-blocking), bounded.
  static std::string ReadPlain(int fd, size_t n) {
    std::string out;
    const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(10));
    while (out.size() < n && absl::Now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t r =
          ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), MSG_DONTWAIT);
      if (r == 0) break;
      if (r > 0) out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  std::string AddressOf(const TlsTestClient& c) const {
    return absl::StrCat("from ipv4:127.0.0.1:", c.local_port(), ": ");
  }
};

TEST_F(GrpcGateTlsTest, BytesFlowBothWaysAndPeerOfNamesTheTcpAddress) {
  StartTls(Scaled(absl::Seconds(60)));
  int grpc_fd = -1;
  std::unique_ptr<TlsTestClient> c = Connected(&grpc_fd);
  ASSERT_GE(grpc_fd, 0);
  // The preface and what follows reach "gRPC" in plaintext.
  ASSERT_TRUE(c->Send("hello"));
  EXPECT_EQ(ReadPlain(grpc_fd, kPreface.size() + 5),
            absl::StrCat(kPreface, "hello"));
  // And back, more than a TLS record's worth.
  const std::string big(100 * 1000, 'x');
  size_t sent = 0;
  std::string got;
  while (got.size() < big.size()) {
    if (sent < big.size()) {
      const ssize_t n = ::send(grpc_fd, big.data() + sent, big.size() - sent,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
    }
    std::string part = c->Read(big.size() - got.size(), absl::Seconds(1));
    if (part.empty() && sent == big.size()) break;
    got += part;
  }
  EXPECT_EQ(got, big);
  EXPECT_EQ(gate_->PeerOf(absl::StrCat("fd:", grpc_fd)),
            absl::StrCat("ipv4:127.0.0.1:", c->local_port()));
  EXPECT_EQ(gate_->relayed(), 1u);
  EXPECT_EQ(gate_->unproven(), 1u);
  gate_->Proven(absl::StrCat("fd:", grpc_fd));
  EXPECT_EQ(gate_->unproven(), 0u);
}

TEST_F(GrpcGateTlsTest, ATls12ClientIsRefusedAndLoggedWithItsAddress) {
  StartTls(Scaled(absl::Seconds(60)));
  const tls::TlsMaterial m = Certs().Material(Certs().leaf);
  TlsTestClient c(gate_->port(), &m, TLS1_2_VERSION);
  EXPECT_FALSE(c.Handshake());
  EXPECT_THAT(c.error(), HasSubstr("protocol version"));
  const std::string log = log_.WaitFor(AddressOf(c), absl::Seconds(10));
  EXPECT_THAT(log, HasSubstr(absl::StrCat(
                       "closed an unauthenticated connection to the gRPC port ",
                       AddressOf(c), "its TLS handshake was refused")));
  EXPECT_THAT(log, HasSubstr("the port takes TLS 1.3 only"));
  EXPECT_TRUE(Handed().empty());
}

TEST_F(GrpcGateTlsTest, RefusedCertificatesAreLoggedWithTheAddress) {
  StartTls(Scaled(absl::Seconds(60)));
  for (const tls::KeyAndCert* own : {&Certs().other_leaf, &Certs().expired}) {
    const tls::TlsMaterial m = Certs().Material(*own);
    TlsTestClient c(gate_->port(), &m);
    // TLS 1.3: this side ends its handshake first; the refusal is an alert.
    (void)c.Handshake();
    EXPECT_TRUE(c.ClosedWithin(Scaled(absl::Seconds(10))));
    EXPECT_THAT(c.error(), HasSubstr("alert"));
    const std::string log = log_.WaitFor(AddressOf(c), absl::Seconds(10));
    EXPECT_THAT(log, HasSubstr(absl::StrCat(AddressOf(c),
                                            "its TLS handshake was refused")));
  }
  EXPECT_THAT(Log(), HasSubstr("certificate has expired"));
  EXPECT_TRUE(Handed().empty());
}

TEST_F(GrpcGateTlsTest, PlaintextHttp2IsRefusedAndLogged) {
  StartTls(Scaled(absl::Seconds(60)));
  net::UniqueFd c = RawConnect(gate_->port());
  ASSERT_EQ(::send(c.get(), kPreface.data(), kPreface.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(kPreface.size()));
  EXPECT_TRUE(ClosedWithin(c.get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(log_.WaitFor("plaintext", absl::Seconds(10)),
              HasSubstr("from ipv4:127.0.0.1:"));
  EXPECT_THAT(Log(), HasSubstr("it spoke plaintext gRPC (HTTP/2) to a port "
                               "that takes TLS only"));
  EXPECT_TRUE(Handed().empty());
}

TEST_F(GrpcGateTlsTest, NotHttp2InsideTlsIsRefusedAndLogged) {
  StartTls(Scaled(absl::Seconds(60)));
  const tls::TlsMaterial m = Certs().Material(Certs().leaf);
  TlsTestClient c(gate_->port(), &m);
  ASSERT_TRUE(c.Handshake()) << c.error();
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(c.ClosedWithin(Scaled(absl::Seconds(10))));
  EXPECT_THAT(log_.WaitFor("inside TLS", absl::Seconds(10)),
              HasSubstr(absl::StrCat(AddressOf(c),
                                     "it does not speak gRPC (HTTP/2) inside "
                                     "TLS; its first bytes: \"GET / HTTP")));
}

TEST_F(GrpcGateTlsTest, AnUnprovenConnectionPastTheHandshakeIsClosedInTime) {
  StartTls(absl::Milliseconds(500));
  const absl::Time start = absl::Now();
  int unproven_fd = -1, proven_fd = -1;
  std::unique_ptr<TlsTestClient> unproven = Connected(&unproven_fd);
  std::unique_ptr<TlsTestClient> proven = Connected(&proven_fd);
  ASSERT_GE(proven_fd, 0);
  gate_->Proven(absl::StrCat("fd:", proven_fd));
  EXPECT_TRUE(unproven->ClosedWithin(Scaled(absl::Seconds(10))));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(450));
  EXPECT_THAT(Log(), HasSubstr(absl::StrCat(
                         AddressOf(*unproven),
                         "no call on it proved the job secret within 500ms")));
  // The proven one outlives the deadline, and still carries bytes.
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(::send(proven_fd, "ok", 2, MSG_NOSIGNAL), 2);
  EXPECT_EQ(proven->Read(2, Scaled(absl::Seconds(10))), "ok");
  EXPECT_EQ(gate_->unproven(), 0u);
}

TEST_F(GrpcGateTlsTest, AHandshakeThatNeverEndsIsClosedAtTheDeadline) {
  StartTls(absl::Milliseconds(300));
  net::UniqueFd idle = RawConnect(gate_->port());
  EXPECT_TRUE(ClosedWithin(idle.get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(Log(), HasSubstr("(it never completed the TLS handshake)"));
}

TEST_F(GrpcGateTlsTest, ClosuresPropagateBothWays) {
  StartTls(Scaled(absl::Seconds(60)));
  // The TLS peer closes: "gRPC" reads the end of its socket.
  int grpc_fd = -1;
  std::unique_ptr<TlsTestClient> c = Connected(&grpc_fd);
  ASSERT_EQ(ReadPlain(grpc_fd, kPreface.size()), kPreface);
  c.reset();
  EXPECT_TRUE(ClosedWithin(grpc_fd, Scaled(absl::Seconds(10))));
  // "gRPC" closes: the TLS peer sees the end.
  int grpc_fd2 = -1;
  std::unique_ptr<TlsTestClient> c2 = Connected(&grpc_fd2);
  gate_->Proven(absl::StrCat("fd:", grpc_fd2));
  CloseHanded(grpc_fd2);
  EXPECT_TRUE(c2->ClosedWithin(Scaled(absl::Seconds(10))));
  c2.reset();  // both sides ended: the relay lets go at once
  EXPECT_TRUE(Eventually([&] { return gate_->relayed() == 0; },
                         Scaled(absl::Seconds(10))));
}

TEST_F(GrpcGateTlsTest, StopClosesTheRelayedConnections) {
  StartTls(Scaled(absl::Seconds(60)));
  int grpc_fd = -1;
  std::unique_ptr<TlsTestClient> c = Connected(&grpc_fd);
  gate_->Proven(absl::StrCat("fd:", grpc_fd));
  ASSERT_TRUE(Eventually([&] { return gate_->relayed() == 1; },
                         Scaled(absl::Seconds(10))));
  gate_->Stop();
  EXPECT_TRUE(c->ClosedWithin(Scaled(absl::Seconds(10))));
  EXPECT_TRUE(ClosedWithin(grpc_fd, Scaled(absl::Seconds(10))));
  EXPECT_EQ(gate_->relayed(), 0u);
}

}  // namespace
}  // namespace kolo::coordinator
