// Tests of the negotiation link (proto/kolo.proto, "Negotiation link"): the
// coordinator's LinkServer (coordinator/link_server.h) against the worker's
// NegotiationLink (worker_lib/session/negotiation_link.h) and against raw
// sockets that speak the frame protocol by hand, on 127.0.0.1.
//
// Covered here: the HMAC handshake and binding (right secret, wrong secret
// on either side, wrong job, wrong incarnation, a refused bind), TLS (and
// its refusals logged naming the peer), the local socket and TCP, messages both
// ways with the fence stamped, Send to unknown sessions, Unbind, a second link
// replacing the first. coordinator_link_io_test.cc has the rest; the fixture is
// in coordinator_link_test_fixture.h. Every wait is bounded by a generous
// deadline (scaled by KOLO_TIMEOUT_SCALE); none is a speed threshold.
#include <unistd.h>

#include "tests/coordinator_link_test_fixture.h"
#include "tests/testing/captured_log.h"

namespace kolo::coordinator::link_test {
namespace {

using ::kolo::testing::CapturedLog;

TEST_F(LinkTest, HandshakeBindsAndMessagesFlowBothWays) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions("w0"));
  ASSERT_NE(link, nullptr);
  EXPECT_THAT(Binds(), ElementsAre(Pair("w0", kEpoch)));
  // On this host the link takes the coordinator's local socket.
  EXPECT_EQ(link->peer(),
            absl::StrCat("127.0.0.1:", server_->port(), " (local socket @",
                         net::LocalLinkName(server_->port()), ")"));

  // Up: the message arrives under the bound Session with the fence stamped.
  ASSERT_TRUE(link->Send(AnnounceOf("grad/layer0")).ok());
  ASSERT_TRUE(WaitForMessages(1, absl::Seconds(20)));
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].session, kSession);
  EXPECT_EQ(got[0].message.fence().incarnation(), kIncarnation);
  EXPECT_EQ(got[0].message.fence().epoch(), kEpoch);
  ASSERT_TRUE(got[0].message.has_announce());
  ASSERT_EQ(got[0].message.announce().requests_size(), 1);
  EXPECT_EQ(got[0].message.announce().requests(0).name(), "grad/layer0");

  // Down: a plan written for the Session reaches the worker.
  EXPECT_TRUE(server_->Send(kSession, PlanOf(7, "grad/layer0")));
  ReceiveResult r = link->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value()) << "no plan before the deadline";
  ASSERT_TRUE((*r)->has_plan());
  EXPECT_EQ((*r)->plan().seq(), 7u);
  ASSERT_EQ((*r)->plan().responses_size(), 1);
  EXPECT_THAT((*r)->plan().responses(0).names(), ElementsAre("grad/layer0"));
  EXPECT_EQ((*r)->fence().incarnation(), kIncarnation);

  // No link is bound to another Session: the caller uses the stream.
  EXPECT_FALSE(server_->Send(kSession + 1, PlanOf(8)));
  EXPECT_FALSE(server_->Send(0, PlanOf(8)));
  EXPECT_THAT(Binds(), ElementsAre(Pair("w0", kEpoch)));
}

// Under TLS (issue 38) the link runs TLS 1.3 with mutual authentication
// before the secret's handshake: the job's certificate passes; another
// job's, an expired one and plaintext do not, and nothing is bound.
struct LinkCertificates {
  tls::KeyAndCert ca, leaf, expired, other_leaf;
  LinkCertificates() {
    const absl::Time now = absl::Now();
    tls::CertSpec s;
    s.not_before = now - absl::Hours(1);
    s.not_after = now + absl::Hours(1);
    ca = *tls::MakeCa(s);
    tls::KeyAndCert other_ca = *tls::MakeCa(s);
    s.common_name = tls::kJobName;  // a leaf's subject is not its issuer
    other_leaf = *tls::MakeLeaf(other_ca, s);
    leaf = *tls::MakeLeaf(ca, s);
    s.not_before = now - absl::Hours(3);
    s.not_after = now - absl::Hours(2);
    expired = *tls::MakeLeaf(ca, s);
  }
  std::shared_ptr<const tls::TlsMaterial> Of(const tls::KeyAndCert& kc) const {
    return std::make_shared<const tls::TlsMaterial>(
        tls::TlsMaterial{kc.cert_pem, kc.key_pem, ca.cert_pem});
  }
};

TEST_F(LinkTest, UnderTlsTheJobsCertificateBindsAndMessagesFlow) {
  const LinkCertificates certs;
  LinkServerOptions so = ServerOptions();
  so.tls = *certs.Of(certs.leaf);
  StartServer(so);
  LinkOptions o = WorkerOptions("w0");
  o.tls = certs.Of(certs.leaf);
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(o);
  ASSERT_NE(link, nullptr);
  EXPECT_THAT(Binds(), ElementsAre(Pair("w0", kEpoch)));
  ASSERT_TRUE(link->Send(AnnounceOf("grad/layer0")).ok());
  ASSERT_TRUE(WaitForMessages(1, absl::Seconds(20)));
  EXPECT_EQ(Messages()[0].message.announce().requests(0).name(), "grad/layer0");
  EXPECT_TRUE(server_->Send(kSession, PlanOf(7, "grad/layer0")));
  ReceiveResult r = link->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->plan().seq(), 7u);
}

TEST_F(LinkTest, UnderTlsOtherCertificatesAndPlaintextAreRefused) {
  const LinkCertificates certs;
  LinkServerOptions so = ServerOptions();
  so.tls = *certs.Of(certs.leaf);
  StartServer(so);
  for (auto material : {certs.Of(certs.other_leaf), certs.Of(certs.expired),
                        std::shared_ptr<const tls::TlsMaterial>()}) {
    LinkOptions o = WorkerOptions("w0");
    o.tls = material;
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
        NegotiationLink::Connect(o);
    EXPECT_FALSE(link.ok());
    EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10)));
  }
  EXPECT_TRUE(Binds().empty());
}

// Issue 38: a refused TLS handshake is logged on the coordinator naming the
// peer: its address over TCP, its process on the local socket.
TEST_F(LinkTest, UnderTlsARefusedHandshakeIsLoggedNamingThePeer) {
  const LinkCertificates certs;
  LinkServerOptions so = ServerOptions();
  so.tls = *certs.Of(certs.leaf);
  StartServer(so);
  CapturedLog log("link");
  // Plaintext over TCP: the address.
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send(LinkHello(kIncarnation, kJob, "w0", "nonce")));
  std::string text =
      log.WaitFor("negotiation link from 127.0.0.1:", absl::Seconds(10));
  EXPECT_THAT(text, HasSubstr("negotiation link from 127.0.0.1:")) << text;
  EXPECT_THAT(text, HasSubstr("closed before it was bound: TLS")) << text;
  // Another job's certificate, on the local socket first: this process.
  LinkOptions o = WorkerOptions("w0");
  o.tls = certs.Of(certs.other_leaf);
  EXPECT_FALSE(NegotiationLink::Connect(o).ok());
  const std::string local =
      absl::StrCat("negotiation link from a local socket (pid ", ::getpid(),
                   ", uid ", ::getuid(), ")");
  text = log.WaitFor(local, absl::Seconds(10));
  EXPECT_THAT(text, HasSubstr(local)) << text;
  EXPECT_TRUE(Binds().empty());
}

TEST_F(LinkTest, ATlsWorkerRefusesAPlaintextLinkServer) {
  const LinkCertificates certs;
  StartServer();
  LinkOptions o = WorkerOptions("w0");
  o.tls = certs.Of(certs.leaf);
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  EXPECT_FALSE(link.ok());
  EXPECT_THAT(link.status().message(), HasSubstr("TLS"));
  EXPECT_TRUE(Binds().empty());
}

TEST_F(LinkTest, WithoutItsLocalSocketTheCoordinatorIsReachedOverTcp) {
  // The local name of the port is taken (bound, not listening): the
  // coordinator listens on TCP only, and the worker's local connect is
  // refused, so it connects to the port.
  absl::StatusOr<int> port = net::PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  net::UniqueFd squatter(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = net::LocalLinkName(*port);
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(::bind(squatter.get(), reinterpret_cast<sockaddr*>(&addr),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                          name.size())),
            0)
      << std::strerror(errno);
  LinkServerOptions options = ServerOptions();
  options.port = *port;
  StartServer(options);
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions("w0"));
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->peer(), absl::StrCat("127.0.0.1:", *port));
  ASSERT_TRUE(link->Send(AnnounceOf("over tcp")).ok());
  ASSERT_TRUE(WaitForMessages(1, absl::Seconds(20)));
  EXPECT_TRUE(server_->Send(kSession, PlanOf(3, "over tcp")));
  ReceiveResult r = link->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value()) << "no plan before the deadline";
  EXPECT_EQ((*r)->plan().seq(), 3u);
}

TEST_F(LinkTest,
       AnotherJobsCoordinatorOnTheLocalSocketSendsTheWorkerToItsPort) {
  // Two coordinators on one port number of two loopback addresses: the first
  // (this fixture's, job kJob) holds the local name, so the second's worker
  // meets a coordinator of the wrong job there and connects to its port.
  StartServer();
  LinkServerOptions other = ServerOptions();
  other.bind_host = "127.0.0.2";
  other.port = server_->port();
  other.job_id = "another-job";
  absl::StatusOr<std::unique_ptr<LinkServer>> second =
      LinkServer::Listen(std::move(other));
  ASSERT_TRUE(second.ok()) << second.status();
  std::atomic<int> bound{0};
  ASSERT_TRUE((*second)
                  ->Start(
                      [&](const std::string&, uint64_t) {
                        ++bound;
                        return absl::StatusOr<SessionId>(kSession);
                      },
                      [](SessionId, const proto::WorkerMessage&) {})
                  .ok());
  LinkOptions o = WorkerOptions("w1");
  o.host = "127.0.0.2";
  o.job_id = "another-job";
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(o);
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->peer(), absl::StrCat("127.0.0.2:", server_->port()));
  EXPECT_EQ(bound.load(), 1);
  EXPECT_THAT(Binds(), IsEmpty());  // the first coordinator bound nobody
  (*second)->Stop();
}

TEST_F(LinkTest, DoneMessagesArriveInOrder) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    proto::WorkerMessage m;
    m.mutable_done()->set_seq(seq);
    ASSERT_TRUE(link->Send(std::move(m)).ok());
  }
  ASSERT_TRUE(WaitForMessages(5, absl::Seconds(20)));
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(got[i].message.has_done());
    EXPECT_EQ(got[i].message.done().seq(), i + 1);
  }
}

TEST_F(LinkTest, WrongSecretOnTheWorkerFailsBeforeAnyBind) {
  StartServer();
  LinkOptions o = WorkerOptions();
  o.secret = "a-wrong-secret";
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  // The worker checks the coordinator's proof first: it never answers, and
  // reports the mismatch as an authentication failure.
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnauthenticated)
      << link.status();
  EXPECT_THAT(link.status().message(),
              HasSubstr("could not prove it knows this job's secret"));
  EXPECT_THAT(link.status().message(),
              HasSubstr(absl::StrCat("127.0.0.1:", server_->port())));
  EXPECT_THAT(Binds(), IsEmpty());

  // The server goes on serving: the right secret binds, and only once.
  std::unique_ptr<NegotiationLink> good = ConnectOrDie(WorkerOptions("w1"));
  ASSERT_NE(good, nullptr);
  EXPECT_THAT(Binds(), ElementsAre(Pair("w1", kEpoch)));
}

TEST_F(LinkTest, ForgedProofIsRefusedWithAuthFailed) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  const std::string client_nonce = auth::RandomBytes(auth::kNonceBytes);
  ASSERT_TRUE(raw.Send(LinkHello(kIncarnation, kJob, "w0", client_nonce)));

  // The Challenge is fenced with the Hello's epoch and proves the secret.
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  ASSERT_TRUE(challenge->has_challenge());
  EXPECT_EQ(challenge->fence().incarnation(), kIncarnation);
  EXPECT_EQ(challenge->fence().epoch(), kEpoch);
  const std::string& server_nonce = challenge->challenge().server_nonce();
  EXPECT_EQ(server_nonce.size(), auth::kNonceBytes);
  EXPECT_EQ(
      challenge->challenge().server_proof(),
      auth::CoordinatorProof(kSecret, kJob, "w0", client_nonce, server_nonce));

  // A proof made with another secret.
  proto::WorkerMessage proof;
  proof.mutable_fence()->set_incarnation(kIncarnation);
  proof.mutable_fence()->set_epoch(kEpoch);
  proof.mutable_proof()->set_mac(auth::WorkerProof("a-wrong-secret", kJob, "w0",
                                                   client_nonce, server_nonce));
  ASSERT_TRUE(raw.Send(proof));
  ExpectGenericRefusal(raw);
  EXPECT_THAT(Binds(), IsEmpty());
}

// Issue 16 §3: a peer that claims another job (or coordinator start) and
// cannot prove the secret learns nothing about this job, only the generic
// refusal; the details are for the coordinator's log.
TEST_F(LinkTest, UnprovenPeerLearnsNothingAboutTheJob) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  const std::string client_nonce = auth::RandomBytes(auth::kNonceBytes);
  ASSERT_TRUE(raw.Send(
      LinkHello(kIncarnation + 1, "some-other-job", "w0", client_nonce)));
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  ASSERT_TRUE(challenge->has_challenge()) << "refused before any proof";
  proto::WorkerMessage proof;
  proof.mutable_proof()->set_mac("forged");
  ASSERT_TRUE(raw.Send(proof));
  ExpectGenericRefusal(raw);
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, RawClientWithTheRightProofIsBound) {
  // The wire protocol as proto/kolo.proto documents it, without
  // NegotiationLink.
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  const std::string client_nonce = auth::RandomBytes(auth::kNonceBytes);
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(kIncarnation);
  hello.mutable_fence()->set_epoch(kEpoch);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_job_id(kJob);
  hello.mutable_hello()->set_worker_id("w5");
  hello.mutable_hello()->set_client_nonce(client_nonce);
  ASSERT_TRUE(raw.Send(hello));
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  ASSERT_TRUE(challenge->has_challenge());
  proto::WorkerMessage proof;
  proof.mutable_fence()->set_incarnation(kIncarnation);
  proof.mutable_fence()->set_epoch(kEpoch);
  proof.mutable_proof()->set_mac(
      auth::WorkerProof(kSecret, kJob, "w5", client_nonce,
                        challenge->challenge().server_nonce()));
  // The proof and a first announce in one write: both are handled, in order.
  std::string bytes;
  AppendFrame(proof.SerializeAsString(), &bytes);
  AppendFrame(AnnounceOf("x").SerializeAsString(), &bytes);
  ASSERT_TRUE(raw.SendBytes(bytes));
  absl::StatusOr<proto::CoordinatorMessage> ready =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(ready->has_link_ready());
  EXPECT_EQ(ready->fence().incarnation(), kIncarnation);
  EXPECT_EQ(ready->fence().epoch(), kEpoch);
  EXPECT_THAT(Binds(), ElementsAre(Pair("w5", kEpoch)));
  ASSERT_TRUE(WaitForMessages(1, absl::Seconds(20)));
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].session, kSession);
  ASSERT_TRUE(got[0].message.has_announce());
  EXPECT_EQ(got[0].message.announce().requests(0).name(), "x");
}

TEST_F(LinkTest, WrongJobIsRefusedNamingBothJobs) {
  StartServer();
  LinkOptions o = WorkerOptions();
  o.job_id = "some-other-job";
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), absl::StatusCode::kPermissionDenied)
      << link.status();
  EXPECT_THAT(link.status().message(), HasSubstr("some-other-job"));
  EXPECT_THAT(link.status().message(), HasSubstr(kJob));
  EXPECT_THAT(link.status().message(), HasSubstr("refused"));
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, WrongIncarnationIsRefusedAsFenced) {
  StartServer();
  LinkOptions o = WorkerOptions();
  o.incarnation = kIncarnation + 1;
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), absl::StatusCode::kPermissionDenied)
      << link.status();
  EXPECT_THAT(link.status().message(), HasSubstr("fenced"));
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, RefusedBindIsPermissionDeniedWithItsMessage) {
  bind_behavior_ = [](const std::string& worker_id, uint64_t epoch) {
    return absl::StatusOr<SessionId>(absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker_id, " is not a member of epoch ", epoch)));
  };
  StartServer();
  LinkOptions o = WorkerOptions("w9");
  o.epoch = 1;
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), absl::StatusCode::kPermissionDenied)
      << link.status();
  EXPECT_THAT(link.status().message(),
              HasSubstr("worker w9 is not a member of epoch 1"));
  EXPECT_THAT(Binds(), ElementsAre(Pair("w9", 1u)));
  EXPECT_FALSE(server_->Send(kSession, PlanOf(1)));
}

TEST_F(LinkTest, UnbindBreaksTheWorkersReceive) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  EXPECT_TRUE(server_->Send(kSession, PlanOf(1)));
  ReceiveResult r = link->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok() && r->has_value()) << "the plan before the Unbind";

  server_->Unbind(kSession);
  EXPECT_FALSE(server_->Send(kSession, PlanOf(2)));
  const absl::Time start = absl::Now();
  r = link->Receive(Scaled(absl::Seconds(30)));
  ASSERT_FALSE(r.ok()) << "expected an error, got "
                       << (r->has_value() ? "a message" : "a timeout");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("closed"));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10)));
  // It stays broken, and later sends to the Session find no link.
  r = link->Receive(absl::Milliseconds(10));
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(server_->Send(kSession, PlanOf(3)));
  server_->Unbind(kSession);  // nothing bound: a no-op
}

TEST_F(LinkTest, SecondLinkOfASessionReplacesTheFirst) {
  StartServer();
  std::unique_ptr<NegotiationLink> first = ConnectOrDie(WorkerOptions());
  ASSERT_NE(first, nullptr);
  std::unique_ptr<NegotiationLink> second = ConnectOrDie(WorkerOptions());
  ASSERT_NE(second, nullptr);
  EXPECT_THAT(Binds(), ElementsAre(Pair("w0", kEpoch), Pair("w0", kEpoch)));

  ReceiveResult r = first->Receive(Scaled(absl::Seconds(30)));
  EXPECT_FALSE(r.ok()) << "the replaced link must break";
  EXPECT_TRUE(server_->Send(kSession, PlanOf(11)));
  r = second->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->plan().seq(), 11u);
}

}  // namespace
}  // namespace kolo::coordinator::link_test
