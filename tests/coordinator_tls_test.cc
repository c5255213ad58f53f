// The control plane under TLS (issue 38): a CoordinatorServer with the job's
// certificates and SessionClients on loopback. A worker with the job's
// certificates joins; every refusal is said, bounded in time, on the side
// that must act (the worker's start error), and logged rate-limited on the
// coordinator: a certificate of another CA (another job's), an expired one,
// a plaintext worker against TLS, a TLS worker against plaintext, and the
// TLS probe's view of each; a Session refused after TLS (a wrong secret)
// logged naming the peer's address. The gate terminates TLS (issue 38): a
// TLS 1.2 client, another job's certificate and plaintext HTTP/2 are refused
// in the handshake and logged naming the peer's address; a connection past
// the handshake that never proves the secret is closed at the deadline.
#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/socket_util.h"
#include "common/tls.h"
#include "common/tls_generate.h"
#include "common/tls_probe.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/job_certificates.h"
#include "tests/testing/raw_socket.h"
#include "tests/testing/timeouts.h"
#include "tests/testing/tls_client.h"
#include "worker_lib/session/session_client.h"

namespace kolo {
namespace {

using ::kolo::testing::CapturedLog;
using ::kolo::testing::Scaled;
using ::kolo::testing::TlsTestClient;
using ::testing::HasSubstr;
using Kind = tls::ProbeResult::Kind;

constexpr char kSecret[] = "tls-test-secret-0123456789";
constexpr char kJob[] = "tls-job";

// The job's CA and certificate, and those of the refusals.
const ::kolo::testing::JobCertificates& Certs() {
  return ::kolo::testing::JobCerts();
}

std::unique_ptr<coordinator::CoordinatorServer> StartServer(
    bool with_tls, absl::Duration handshake_timeout =
                       coordinator::ListenOptions{}.handshake_timeout) {
  coordinator::ServerOptions o;
  o.listen.handshake_timeout = handshake_timeout;
  o.listen.bind_host = "127.0.0.1";
  o.core.expected_size = 1;
  o.core.job_id = kJob;
  o.core.secret = kSecret;
  o.core.heartbeat_interval = absl::Milliseconds(100);
  if (with_tls) o.listen.tls = Certs().Material(Certs().leaf);
  absl::StatusOr<std::unique_ptr<coordinator::CoordinatorServer>> s =
      coordinator::CoordinatorServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

worker::SessionOptions Options(int port,
                               const std::optional<tls::TlsMaterial>& m) {
  worker::SessionOptions o;
  o.coordinator = absl::StrCat("127.0.0.1:", port);
  o.job_id = kJob;
  o.worker_id = "w0";
  o.host_name = "h";
  o.data_address = "127.0.0.1:1";
  o.requested_rank = 0;
  o.expected_size = 1;
  o.secret = kSecret;
  o.heartbeat_interval = absl::Milliseconds(100);
  if (m.has_value()) o.tls = std::make_shared<const tls::TlsMaterial>(*m);
  return o;
}

// Connect's outcome, which must come well within the start timeout.
absl::Status Join(int port, const std::optional<tls::TlsMaterial>& m) {
  const absl::Duration start_timeout = Scaled(absl::Seconds(20));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<worker::SessionClient>> c =
      worker::SessionClient::Connect(Options(port, m), start + start_timeout);
  EXPECT_LT(absl::Now() - start, start_timeout / 2)
      << "the refusal took nearly the whole start timeout";
  if (!c.ok()) return c.status();
  EXPECT_TRUE((*c)->Shutdown(Scaled(absl::Seconds(5))).ok());
  return absl::OkStatus();
}

net::SockAddr Addr(int port) {
  return *net::ResolveAddress(absl::StrCat("127.0.0.1:", port));
}

TEST(CoordinatorTlsTest, AWorkerWithTheJobsCertificateJoins) {
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(Join(server->port(), Certs().Material(Certs().leaf)).ok());
  EXPECT_TRUE(
      server->WaitForEpoch(absl::Now() + Scaled(absl::Seconds(5))).ok());
}

// The gate's deadline holds under TLS: an idle connection is closed once it
// passed, while a member's stream lives on.
TEST(CoordinatorTlsTest, IdleConnectionsAreClosedAtTheHandshakeDeadline) {
  auto server = StartServer(true, absl::Milliseconds(500));
  ASSERT_NE(server, nullptr);
  const absl::Time start = absl::Now();
  std::vector<net::UniqueFd> idle;
  for (int i = 0; i < 5; ++i)
    idle.push_back(testing::RawConnect(server->port()));
  absl::StatusOr<std::unique_ptr<worker::SessionClient>> member =
      worker::SessionClient::Connect(
          Options(server->port(), Certs().Material(Certs().leaf)),
          absl::Now() + Scaled(absl::Seconds(20)));
  ASSERT_TRUE(member.ok()) << member.status();
  for (const net::UniqueFd& fd : idle) {
    EXPECT_TRUE(testing::ClosedWithin(fd.get(), Scaled(absl::Seconds(10))));
  }
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(450));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_TRUE((*member)->health().ok()) << (*member)->health();
  EXPECT_TRUE((*member)->Shutdown(Scaled(absl::Seconds(5))).ok());
}

TEST(CoordinatorTlsTest, TheProbeSeesEachCase) {
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  const ::kolo::testing::JobCertificates& c = Certs();
  const absl::Duration t = Scaled(absl::Seconds(5));
  const net::SockAddr a = Addr(server->port());
  tls::TlsMaterial good = c.Material(c.leaf);
  EXPECT_EQ(tls::ProbeTls(a, &good, t).kind, Kind::kAccepted);
  // Another job's certificate, even trusting this job's CA: refused.
  tls::TlsMaterial other = c.Material(c.other_leaf);
  tls::ProbeResult refused = tls::ProbeTls(a, &other, t);
  EXPECT_EQ(refused.kind, Kind::kRefused);
  // kolo's own server handshake says why, in an alert.
  EXPECT_THAT(refused.detail, HasSubstr("alert"));
  // Another job's CA only: this side refuses the coordinator's certificate.
  tls::TlsMaterial other_job = c.Material(c.other_leaf, &c.other_ca);
  tls::ProbeResult r = tls::ProbeTls(a, &other_job, t);
  EXPECT_EQ(r.kind, Kind::kPeerUnverified);
  EXPECT_THAT(r.detail, HasSubstr("certificate"));
  tls::TlsMaterial expired = c.Material(c.expired);
  EXPECT_EQ(tls::ProbeTls(a, &expired, t).kind, Kind::kRefused);
  // No certificate: the port speaks TLS all the same, and refuses it.
  tls::ProbeResult none = tls::ProbeTls(a, nullptr, t);
  EXPECT_EQ(none.kind, Kind::kRefused) << none.detail;
  EXPECT_THAT(none.detail, HasSubstr("alert"));

  auto plain = StartServer(false);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(tls::ProbeTls(Addr(plain->port()), &good, t).kind, Kind::kNotTls);
}

TEST(CoordinatorTlsTest, AnotherJobsCertificateIsRefusedOnTheCoordinator) {
  // Refusals are logged at warn once a minute, the rest at debug: an
  // earlier test's may hold this one back.
  CapturedLog log("coordinator");
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  absl::Status st = Join(server->port(), Certs().Material(Certs().other_leaf));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(st.message(), HasSubstr("refused this worker's TLS certificate"));
  EXPECT_THAT(st.message(), HasSubstr("KOLO_TLS_CERT"));
  // Logged naming the worker's address (issue 38: gRPC could not).
  EXPECT_THAT(log.WaitFor("its TLS handshake was refused", absl::Seconds(10)),
              HasSubstr("gRPC port from ipv4:127.0.0.1:"));
  EXPECT_THAT(log.text(), HasSubstr("its TLS handshake was refused"));
}

TEST(CoordinatorTlsTest, ATls12ClientIsRefusedAndTheLogNamesItsAddress) {
  CapturedLog log("coordinator");
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  const tls::TlsMaterial m = Certs().Material(Certs().leaf);
  TlsTestClient c(server->port(), &m, TLS1_2_VERSION);
  EXPECT_FALSE(c.Handshake());
  EXPECT_THAT(c.error(), HasSubstr("protocol version"));
  const std::string from =
      absl::StrCat("gRPC port from ipv4:127.0.0.1:", c.local_port(), ": ");
  EXPECT_THAT(log.WaitFor(from, absl::Seconds(10)),
              HasSubstr(absl::StrCat(from, "its TLS handshake was refused")));
  EXPECT_THAT(log.text(), HasSubstr("the port takes TLS 1.3 only"));
}

TEST(CoordinatorTlsTest, PlaintextHttp2IsRefusedAndLogged) {
  CapturedLog log("coordinator");
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  net::UniqueFd c = testing::RawConnect(server->port());
  constexpr absl::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  ASSERT_EQ(::send(c.get(), kPreface.data(), kPreface.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(kPreface.size()));
  EXPECT_TRUE(testing::ClosedWithin(c.get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(log.WaitFor("plaintext gRPC", absl::Seconds(10)),
              HasSubstr("gRPC port from ipv4:127.0.0.1:"));
}

// Past the handshake, a connection must still prove the secret in time.
TEST(CoordinatorTlsTest, AConnectionPastTheHandshakeIsClosedAtTheDeadline) {
  CapturedLog log("coordinator");
  auto server = StartServer(true, absl::Milliseconds(500));
  ASSERT_NE(server, nullptr);
  const absl::Time start = absl::Now();
  const tls::TlsMaterial m = Certs().Material(Certs().leaf);
  TlsTestClient c(server->port(), &m);
  ASSERT_TRUE(c.Handshake()) << c.error();
  ASSERT_TRUE(c.Send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
  EXPECT_TRUE(c.ClosedWithin(Scaled(absl::Seconds(10))));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(450));
  EXPECT_THAT(log.WaitFor("no call on it proved", absl::Seconds(10)),
              HasSubstr(absl::StrCat("from ipv4:127.0.0.1:", c.local_port(),
                                     ": no call on it proved the job secret")));
}

// Issue 38: a peer that gets past TLS (the job's certificate) and is refused
// by kolo (a wrong secret) is logged naming its address, as a refused TLS
// handshake is (the tests above).
TEST(CoordinatorTlsTest, ASessionRefusedAfterTlsIsLoggedNamingThePeer) {
  CapturedLog log("coordinator");
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  worker::SessionOptions o =
      Options(server->port(), Certs().Material(Certs().leaf));
  o.secret = "a-wrong-secret-0123456789";
  absl::StatusOr<std::unique_ptr<worker::SessionClient>> c =
      worker::SessionClient::Connect(o,
                                     absl::Now() + Scaled(absl::Seconds(20)));
  EXPECT_FALSE(c.ok());
  const std::string needle = "Session from ipv4:127.0.0.1:";
  EXPECT_THAT(log.WaitFor(needle, absl::Seconds(10)), HasSubstr(needle));
}

TEST(CoordinatorTlsTest, AnExpiredCertificateIsRefused) {
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  absl::Status st = Join(server->port(), Certs().Material(Certs().expired));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(st.message(), HasSubstr("not expired"));
}

TEST(CoordinatorTlsTest, AWorkerOfAnotherJobDoesNotTrustTheCoordinator) {
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  absl::Status st = Join(
      server->port(), Certs().Material(Certs().other_leaf, &Certs().other_ca));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(st.message(), HasSubstr("does not trust"));
  EXPECT_THAT(st.message(), HasSubstr("another job's"));
}

TEST(CoordinatorTlsTest, APlaintextWorkerIsToldTheCoordinatorRequiresTls) {
  auto server = StartServer(true);
  ASSERT_NE(server, nullptr);
  absl::Status st = Join(server->port(), std::nullopt);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(st.message(), HasSubstr("requires TLS"));
  EXPECT_THAT(st.message(),
              HasSubstr("KOLO_TLS_CERT, KOLO_TLS_KEY and KOLO_TLS_CA"));
}

TEST(CoordinatorTlsTest, ATlsWorkerIsToldTheCoordinatorIsPlaintext) {
  auto server = StartServer(false);
  ASSERT_NE(server, nullptr);
  absl::Status st = Join(server->port(), Certs().Material(Certs().leaf));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(st.message(), HasSubstr("does not speak TLS"));
}

}  // namespace
}  // namespace kolo
