// Tests of the negotiation link (proto/kolo.proto, "Negotiation link"): the
// coordinator's LinkServer (coordinator/link_server.h) against the worker's
// NegotiationLink (worker_lib/session/negotiation_link.h) and against raw
// sockets that speak the frame protocol by hand, on 127.0.0.1.
//
// Covered: the HMAC handshake and binding (right secret, wrong secret on
// either side, wrong job, wrong incarnation, a refused bind), messages both
// ways with the fence stamped, Send to unknown sessions, Unbind, a second
// link replacing the first, Wake and Close of a blocked Receive, bursts from
// concurrent senders, callbacks that Send, the handshake timeout, garbage
// on the wire, and Stop with links open. Every wait is bounded by a
// generous deadline (scaled by KOLO_TIMEOUT_SCALE); none is a speed
// threshold.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/framing.h"
#include "common/mutex.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/tls_generate.h"
#include "common/unique_fd.h"
#include "common/version.h"
#include "coordinator/link_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kolo.pb.h"
#include "tests/testing/timeouts.h"
#include "worker_lib/session/negotiation_link.h"

namespace kolo::coordinator {
namespace {

using ::kolo::testing::Scaled;
using ::kolo::worker::LinkOptions;
using ::kolo::worker::NegotiationLink;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;

constexpr char kJob[] = "job-link-test";
constexpr char kSecret[] = "the-right-secret";
constexpr uint64_t kIncarnation = 0x1234abcd5678ef01ull;
constexpr uint64_t kEpoch = 3;
constexpr SessionId kSession = 42;

using ReceiveResult = absl::StatusOr<std::optional<proto::CoordinatorMessage>>;

proto::WorkerMessage AnnounceOf(const std::string& name,
                                const std::string& invalid = "") {
  proto::WorkerMessage m;
  proto::Request* r = m.mutable_announce()->add_requests();
  r->set_name(name);
  r->set_op(proto::ALLREDUCE);
  r->add_shape(4);
  r->set_invalid(invalid);
  return m;
}

proto::CoordinatorMessage PlanOf(uint64_t seq, const std::string& name = "") {
  proto::CoordinatorMessage m;
  m.mutable_fence()->set_incarnation(kIncarnation);
  m.mutable_fence()->set_epoch(kEpoch);
  m.mutable_plan()->set_seq(seq);
  if (!name.empty()) m.mutable_plan()->add_responses()->add_names(name);
  return m;
}

// A payload whose content depends on `key`, so that a frame cut short or
// spliced with another shows.
std::string PayloadFor(int key, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    s[i] = static_cast<char>('a' + (key * 31 + static_cast<int>(i)) % 26);
  }
  return s;
}

// A TCP client on a blocking socket that speaks the frame protocol by hand.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = net::UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ =
        fd_.valid() && ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr),
                                 sizeof(addr)) == 0;
  }
  bool connected() const { return connected_; }

  bool SendBytes(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_.get(), bytes.data() + off, bytes.size() - off,
                         MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool Send(const proto::WorkerMessage& msg) {
    std::string bytes;
    AppendFrame(msg.SerializeAsString(), &bytes);
    return SendBytes(bytes);
  }

  // The next message; an error on EOF, a broken stream or the timeout.
  absl::StatusOr<proto::CoordinatorMessage> Read(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      absl::StatusOr<std::optional<std::string>> frame = decoder_.Next();
      if (!frame.ok()) return frame.status();
      if (frame->has_value()) {
        proto::CoordinatorMessage msg;
        if (!msg.ParseFromString(**frame)) {
          return absl::DataLossError("unreadable message");
        }
        return msg;
      }
      absl::StatusOr<ssize_t> n = RecvSome(deadline);
      if (!n.ok()) return n.status();
      if (*n == 0) return absl::UnavailableError("closed by the server");
    }
  }

  // OK once recv returns 0 (the server closed the connection); any bytes
  // before that are dropped. An error for anything else, or the deadline.
  absl::Status AwaitEof(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      absl::StatusOr<ssize_t> n = RecvSome(deadline);
      if (!n.ok()) return n.status();
      if (*n == 0) return absl::OkStatus();
    }
  }

 private:
  // One recv once the socket is readable; the byte count (0 at EOF).
  absl::StatusOr<ssize_t> RecvSome(absl::Time deadline) {
    while (true) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError("nothing from the server in time");
      }
      pollfd p{fd_.get(), POLLIN, 0};
      int ready =
          ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      if (ready < 0 && errno != EINTR) {
        return absl::InternalError(std::strerror(errno));
      }
      if (ready <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return absl::UnavailableError(
            absl::StrCat("recv: ", std::strerror(errno)));
      }
      decoder_.Append(buf, static_cast<size_t>(n));
      return n;
    }
  }

  net::UniqueFd fd_;
  bool connected_ = false;
  FrameDecoder decoder_;
};

struct Received {
  SessionId session;
  proto::WorkerMessage message;
};

// A link Hello as a raw client sends it.
proto::WorkerMessage LinkHello(uint64_t incarnation, const std::string& job,
                               const std::string& worker,
                               const std::string& client_nonce) {
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(incarnation);
  hello.mutable_fence()->set_epoch(kEpoch);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_job_id(job);
  hello.mutable_hello()->set_worker_id(worker);
  hello.mutable_hello()->set_client_nonce(client_nonce);
  return hello;
}

// What an unproven peer gets: AUTH_FAILED with the generic text, then EOF.
void ExpectGenericRefusal(RawClient& raw) {
  absl::StatusOr<proto::CoordinatorMessage> refusal =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  ASSERT_TRUE(refusal->has_refusal());
  EXPECT_EQ(refusal->refusal().reason(), proto::Refusal::AUTH_FAILED);
  EXPECT_EQ(refusal->refusal().message(), auth::kUnauthenticatedRefusal);
  EXPECT_THAT(refusal->refusal().message(), Not(HasSubstr(kJob)));
  EXPECT_TRUE(raw.AwaitEof(Scaled(absl::Seconds(20))).ok());
}

class LinkTest : public ::testing::Test {
 protected:
  using BindBehavior = std::function<absl::StatusOr<SessionId>(
      const std::string& worker_id, uint64_t epoch)>;

  static LinkServerOptions ServerOptions() {
    LinkServerOptions o;
    o.bind_host = "127.0.0.1";
    o.port = 0;
    o.job_id = kJob;
    o.secret = kSecret;
    o.incarnation = kIncarnation;
    o.handshake_timeout = Scaled(absl::Seconds(20));
    return o;
  }

  // Listens and starts the link thread with the recording callbacks.
  // bind_behavior_ and on_message_hook_ must be set before.
  void StartServer(LinkServerOptions options = ServerOptions()) {
    absl::StatusOr<std::unique_ptr<LinkServer>> server =
        LinkServer::Listen(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
    absl::Status started = server_->Start(
        [this](const std::string& worker_id, uint64_t epoch) {
          return Bind(worker_id, epoch);
        },
        [this](SessionId session, const proto::WorkerMessage& msg) {
          OnMessage(session, msg);
        },
        timer_hook_);
    ASSERT_TRUE(started.ok()) << started;
  }

  LinkOptions WorkerOptions(const std::string& worker_id = "w0") const {
    LinkOptions o;
    o.host = "127.0.0.1";
    o.port = server_->port();
    o.secret = kSecret;
    o.job_id = kJob;
    o.worker_id = worker_id;
    o.incarnation = kIncarnation;
    o.epoch = kEpoch;
    o.timeout = Scaled(absl::Seconds(20));
    return o;
  }

  std::unique_ptr<NegotiationLink> ConnectOrDie(const LinkOptions& options) {
    absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
        NegotiationLink::Connect(options);
    EXPECT_TRUE(link.ok()) << link.status();
    return link.ok() ? *std::move(link) : nullptr;
  }

  // Waits until at least `n` messages arrived; false at the deadline.
  bool WaitForMessages(size_t n, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + Scaled(timeout);
    MutexLock lock(&mu_);
    while (received_.size() < n) {
      if (cv_.WaitWithDeadline(&mu_, deadline) && received_.size() < n) {
        return false;
      }
    }
    return true;
  }

  std::vector<Received> Messages() {
    MutexLock lock(&mu_);
    return received_;
  }
  std::vector<std::pair<std::string, uint64_t>> Binds() {
    MutexLock lock(&mu_);
    return binds_;
  }

  // Set before StartServer; read on the link thread only after.
  BindBehavior bind_behavior_ = [](const std::string&, uint64_t) {
    return absl::StatusOr<SessionId>(kSession);
  };
  std::function<void(SessionId, const proto::WorkerMessage&)> on_message_hook_;
  LinkServer::TimerFn timer_hook_;  // null: no timer

 private:
  absl::StatusOr<SessionId> Bind(const std::string& worker_id, uint64_t epoch) {
    {
      MutexLock lock(&mu_);
      binds_.emplace_back(worker_id, epoch);
    }
    return bind_behavior_(worker_id, epoch);
  }
  void OnMessage(SessionId session, const proto::WorkerMessage& msg) {
    {
      MutexLock lock(&mu_);
      received_.push_back(Received{session, msg});
      cv_.SignalAll();
    }
    if (on_message_hook_) on_message_hook_(session, msg);
  }

  Mutex mu_;
  CondVar cv_;
  std::vector<std::pair<std::string, uint64_t>> binds_ ABSL_GUARDED_BY(mu_);
  std::vector<Received> received_ ABSL_GUARDED_BY(mu_);

 protected:
  // Last: destroyed (stopped, its thread joined) before what the callbacks
  // use.
  std::unique_ptr<LinkServer> server_;
};

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

TEST_F(LinkTest, WakeEndsABlockedReceiveWithNothing) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);

  ReceiveResult woken = absl::UnknownError("not run");
  absl::Duration took;
  std::thread reader([&] {
    const absl::Time start = absl::Now();
    woken = link->Receive(absl::Seconds(30));
    took = absl::Now() - start;
  });
  // Whether the reader is already blocked or not yet: Wake ends the current
  // or the next Receive.
  link->Wake();
  reader.join();
  ASSERT_TRUE(woken.ok()) << woken.status();
  EXPECT_FALSE(woken->has_value());
  EXPECT_LT(took, Scaled(absl::Seconds(10)));

  // The wake-up was consumed: the next Receive waits for its timeout, and a
  // message still comes through afterwards.
  const absl::Time start = absl::Now();
  ReceiveResult r = link->Receive(absl::Milliseconds(200));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_TRUE(server_->Send(kSession, PlanOf(5)));
  r = link->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->plan().seq(), 5u);
}

TEST_F(LinkTest, CloseEndsABlockedReceiveAndLaterCallsFail) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);

  // The reader's loop, as the runtime's: a Receive that returns nothing is
  // retried; it must end in an error within two calls.
  absl::Status ended;
  int calls = 0;
  absl::Duration took;
  std::thread reader([&] {
    const absl::Time start = absl::Now();
    for (calls = 1; calls <= 3; ++calls) {
      ReceiveResult r = link->Receive(absl::Seconds(30));
      if (!r.ok()) {
        ended = r.status();
        break;
      }
      if (r->has_value()) {
        ended = absl::InternalError("unexpected message");
        break;
      }
    }
    took = absl::Now() - start;
  });
  link->Close();
  reader.join();
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable) << ended;
  EXPECT_LE(calls, 2);
  EXPECT_LT(took, Scaled(absl::Seconds(10)));

  ReceiveResult r = link->Receive(absl::Milliseconds(10));
  EXPECT_FALSE(r.ok());
  absl::Status sent = link->Send(AnnounceOf("late"));
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable) << sent;
  EXPECT_THAT(sent.message(), HasSubstr("closed"));
  link->Close();  // idempotent

  // The coordinator sees the hang-up and unbinds the Session.
  const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(20));
  while (server_->Send(kSession, PlanOf(1)) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));  // polling a condition
  }
  EXPECT_FALSE(server_->Send(kSession, PlanOf(2)));
  EXPECT_THAT(Messages(), IsEmpty());
}

TEST_F(LinkTest, BurstsBothWaysFromConcurrentSenders) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  constexpr int kThreads = 2;
  constexpr int kPerThread = 500;
  constexpr int kTotal = kThreads * kPerThread;
  // Sizes from 0 to ~60 KB, so that frames span many socket writes.
  auto size_of = [](int i) { return static_cast<size_t>((i % 13) * 4700); };

  std::atomic<int> send_failures{0};
  std::vector<std::thread> threads;
  // However the reader's checks end (an ASSERT returns early), the senders
  // are joined; closing the link ends a worker send waiting for room.
  struct JoinAll {
    std::vector<std::thread>& threads;
    NegotiationLink& link;
    ~JoinAll() {
      bool running = false;
      for (std::thread& th : threads) running |= th.joinable();
      if (running) link.Close();
      for (std::thread& th : threads) {
        if (th.joinable()) th.join();
      }
    }
  } join_all{threads, *link};
  for (int t = 0; t < kThreads; ++t) {
    // Up: announces from the worker.
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int key = t * kPerThread + i;
        if (!link->Send(AnnounceOf(absl::StrCat("t", t, "/", i),
                                   PayloadFor(key, size_of(i))))
                 .ok()) {
          ++send_failures;
        }
      }
    });
    // Down: plans from the coordinator.
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int key = t * kPerThread + i;
        if (!server_->Send(kSession, PlanOf(static_cast<uint64_t>(key),
                                            PayloadFor(key, size_of(i))))) {
          ++send_failures;
        }
      }
    });
  }

  // The worker's reader: every plan whole, each sender's in its order.
  std::vector<int> next_down(kThreads, 0);
  int down = 0;
  const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(60));
  while (down < kTotal && absl::Now() < deadline) {
    ReceiveResult r = link->Receive(Scaled(absl::Seconds(60)));
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->has_value()) continue;
    ASSERT_TRUE((*r)->has_plan());
    const int key = static_cast<int>((*r)->plan().seq());
    const int t = key / kPerThread, i = key % kPerThread;
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(i, next_down[t]) << "plans of one sender out of order";
    next_down[t] = i + 1;
    if (size_of(i) > 0) {
      ASSERT_EQ((*r)->plan().responses_size(), 1);
      EXPECT_EQ((*r)->plan().responses(0).names(0),
                PayloadFor(key, size_of(i)));
    } else {
      EXPECT_EQ((*r)->plan().responses_size(), 0);
    }
    ++down;
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(send_failures.load(), 0);
  EXPECT_EQ(down, kTotal);

  ASSERT_TRUE(WaitForMessages(kTotal, absl::Seconds(60)));
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), static_cast<size_t>(kTotal));
  std::vector<int> next_up(kThreads, 0);
  for (const Received& m : got) {
    EXPECT_EQ(m.session, kSession);
    ASSERT_TRUE(m.message.has_announce());
    ASSERT_EQ(m.message.announce().requests_size(), 1);
    const proto::Request& req = m.message.announce().requests(0);
    int t = -1, i = -1;
    ASSERT_EQ(std::sscanf(req.name().c_str(), "t%d/%d", &t, &i), 2)
        << req.name();
    ASSERT_TRUE(t >= 0 && t < kThreads) << req.name();
    EXPECT_EQ(i, next_up[t]) << "announces of one sender out of order";
    next_up[t] = i + 1;
    EXPECT_EQ(req.invalid(), PayloadFor(t * kPerThread + i, size_of(i)))
        << req.name();
    EXPECT_EQ(m.message.fence().epoch(), kEpoch);
  }
  EXPECT_THAT(next_up, ElementsAre(kPerThread, kPerThread));
}

TEST_F(LinkTest, CallbacksMaySendOnTheLinkThread) {
  // on_message answers each announce with a plan at once, from the link
  // thread (the service does the same through the core's actions).
  std::atomic<uint64_t> answered{0};
  on_message_hook_ = [this, &answered](SessionId session,
                                       const proto::WorkerMessage& msg) {
    if (msg.has_announce()) {
      EXPECT_TRUE(server_->Send(session, PlanOf(++answered)));
    }
  };
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    ASSERT_TRUE(link->Send(AnnounceOf(absl::StrCat("n", seq))).ok());
    ReceiveResult r = link->Receive(Scaled(absl::Seconds(20)));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->has_value()) << "no answer to announce " << seq;
    EXPECT_EQ((*r)->plan().seq(), seq);
  }
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), 100u);
  EXPECT_EQ(got.back().message.announce().requests(0).name(), "n100");
}

TEST_F(LinkTest, TimerRunsOnTheLinkThreadWhenItsDeadlinePasses) {
  // The timer asks to be called again 300 ms after its first call; it must
  // then run on the link thread, not before that deadline, and without any
  // message to wake the thread.
  Mutex mu;
  CondVar cv;
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time fired = absl::InfiniteFuture();
  bool off_thread = false;
  timer_hook_ = [&](absl::Time now) {
    MutexLock lock(&mu);
    if (!server_->OnLinkThread()) off_thread = true;
    if (deadline == absl::InfiniteFuture()) {
      deadline = now + absl::Milliseconds(300);
    } else if (now >= deadline && fired == absl::InfiniteFuture()) {
      fired = absl::Now();
      cv.SignalAll();
    }
    return fired == absl::InfiniteFuture() ? deadline : absl::InfiniteFuture();
  };
  StartServer();
  EXPECT_FALSE(server_->OnLinkThread());
  // The first call comes after the first wait (at most 500 ms).
  const absl::Time give_up = absl::Now() + Scaled(absl::Seconds(20));
  {
    MutexLock lock(&mu);
    while (fired == absl::InfiniteFuture()) {
      if (cv.WaitWithDeadline(&mu, give_up)) break;
    }
  }
  server_->Stop();  // the timer uses this test's locals
  MutexLock lock(&mu);
  ASSERT_NE(fired, absl::InfiniteFuture()) << "the timer never fired";
  EXPECT_GE(fired, deadline);
  EXPECT_FALSE(off_thread);
}

TEST_F(LinkTest, TimerRunsAfterEveryMessage) {
  // A message that sets a deadline (here: counts) is followed by a timer
  // call on the same thread before the link thread waits again.
  std::atomic<int> messages{0};
  std::atomic<int> timer_calls_after_message{0};
  on_message_hook_ = [&](SessionId, const proto::WorkerMessage&) {
    messages.fetch_add(1);
  };
  timer_hook_ = [&](absl::Time) {
    if (messages.load() > 0) timer_calls_after_message.fetch_add(1);
    return absl::InfiniteFuture();
  };
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  proto::WorkerMessage done;
  done.mutable_done()->set_seq(1);
  ASSERT_TRUE(link->Send(done).ok());
  ASSERT_TRUE(WaitForMessages(1, absl::Seconds(20)));
  const absl::Time give_up = absl::Now() + Scaled(absl::Seconds(20));
  while (timer_calls_after_message.load() == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_GT(timer_calls_after_message.load(), 0);
  server_->Stop();  // the callbacks use this test's locals
}

TEST_F(LinkTest, CallbackMayUnbindItsOwnSession) {
  on_message_hook_ = [this](SessionId session, const proto::WorkerMessage&) {
    server_->Unbind(session);
  };
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  // The second message is dropped with the link, whether it came in the same
  // read as the first or not (its send may fail: the link may be gone).
  ASSERT_TRUE(link->Send(AnnounceOf("first")).ok());
  (void)link->Send(AnnounceOf("second"));
  ReceiveResult r = link->Receive(Scaled(absl::Seconds(30)));
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(server_->Send(kSession, PlanOf(1)));
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message.announce().requests(0).name(), "first");
}

TEST_F(LinkTest, SilentClientIsClosedAfterTheHandshakeTimeout) {
  LinkServerOptions options = ServerOptions();
  options.handshake_timeout = absl::Milliseconds(300);
  StartServer(options);
  // A bound link is not subject to the handshake timeout.
  std::unique_ptr<NegotiationLink> bound = ConnectOrDie(WorkerOptions());
  ASSERT_NE(bound, nullptr);

  const absl::Time start = absl::Now();
  RawClient silent(server_->port());
  ASSERT_TRUE(silent.connected());
  // One that stops after its Hello.
  RawClient halfway(server_->port());
  ASSERT_TRUE(halfway.connected());
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(kIncarnation);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_job_id(kJob);
  hello.mutable_hello()->set_worker_id("w7");
  hello.mutable_hello()->set_client_nonce(auth::RandomBytes(auth::kNonceBytes));
  ASSERT_TRUE(halfway.Send(hello));
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      halfway.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_TRUE(challenge->has_challenge());

  absl::Status eof = silent.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok()) << eof;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  eof = halfway.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok()) << eof;
  EXPECT_THAT(Binds(), ElementsAre(Pair("w0", kEpoch)));

  // The bound link, older than the timeout by now, still works.
  EXPECT_TRUE(server_->Send(kSession, PlanOf(3)));
  ReceiveResult r = bound->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->plan().seq(), 3u);
}

TEST_F(LinkTest, OversizedFrameClosesTheConnection) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.SendBytes(std::string(4, '\xff')));
  absl::Status eof = raw.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok()) << eof;
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, AHandshakeLargerThan64KiBClosesTheConnection) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  // A frame announcing 1 MiB, and 128 KiB of it: an unauthenticated peer
  // may not make the coordinator buffer that much.
  std::string bytes = {'\x00', '\x10', '\x00', '\x00'};
  bytes += std::string(128 << 10, 'x');
  (void)raw.SendBytes(bytes);  // may fail once the server closed
  // Closed with our bytes unread: an end of stream or a reset.
  absl::Status eof = raw.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok() || absl::StrContains(eof.message(), "reset")) << eof;
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, ConnectAfterStopIsRefusedAtOnce) {
  StartServer();
  server_->Stop();
  LinkOptions o = WorkerOptions();
  o.timeout = Scaled(absl::Seconds(10));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnavailable)
      << link.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << link.status();
}

TEST_F(LinkTest, FirstMessageMustBeAHello) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  proto::WorkerMessage announce = AnnounceOf("too-early");
  announce.mutable_fence()->set_incarnation(kIncarnation);
  ASSERT_TRUE(raw.Send(announce));
  absl::StatusOr<proto::CoordinatorMessage> refusal =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  ASSERT_TRUE(refusal->has_refusal());
  // Not proven: the generic refusal (the coordinator logs "expected a Hello").
  EXPECT_EQ(refusal->refusal().message(), auth::kUnauthenticatedRefusal);
  EXPECT_TRUE(raw.AwaitEof(Scaled(absl::Seconds(20))).ok());
  EXPECT_THAT(Messages(), IsEmpty());
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, OtherProtocolVersionIsRefused) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(kIncarnation);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion + 100);
  hello.mutable_hello()->set_job_id(kJob);
  hello.mutable_hello()->set_worker_id("w0");
  hello.mutable_hello()->set_client_nonce(auth::RandomBytes(auth::kNonceBytes));
  ASSERT_TRUE(raw.Send(hello));
  absl::StatusOr<proto::CoordinatorMessage> refusal =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  ASSERT_TRUE(refusal->has_refusal());
  EXPECT_THAT(
      refusal->refusal().message(),
      HasSubstr(absl::StrCat("protocol version ", kProtocolVersion + 100)));
  EXPECT_TRUE(raw.AwaitEof(Scaled(absl::Seconds(20))).ok());
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, StopWithLinksOpenIsPromptAndBreaksThem) {
  bind_behavior_ = [](const std::string& worker_id, uint64_t) {
    return absl::StatusOr<SessionId>(worker_id == "w0" ? 1 : 2);
  };
  StartServer();
  std::unique_ptr<NegotiationLink> a = ConnectOrDie(WorkerOptions("w0"));
  std::unique_ptr<NegotiationLink> b = ConnectOrDie(WorkerOptions("w1"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // An unbound connection too, accepted (it has its Challenge) but not bound.
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(kIncarnation);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_job_id(kJob);
  hello.mutable_hello()->set_worker_id("w2");
  hello.mutable_hello()->set_client_nonce(auth::RandomBytes(auth::kNonceBytes));
  ASSERT_TRUE(raw.Send(hello));
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_TRUE(challenge->has_challenge());
  EXPECT_TRUE(server_->Send(1, PlanOf(1)));
  EXPECT_TRUE(server_->Send(2, PlanOf(1)));

  const absl::Time start = absl::Now();
  server_->Stop();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(5)));

  for (NegotiationLink* link : {a.get(), b.get()}) {
    const absl::Time t0 = absl::Now();
    ReceiveResult r = link->Receive(Scaled(absl::Seconds(30)));
    // The plan sent before Stop may come first; then the link breaks.
    if (r.ok() && r->has_value()) {
      EXPECT_EQ((*r)->plan().seq(), 1u);
      r = link->Receive(Scaled(absl::Seconds(30)));
    }
    ASSERT_FALSE(r.ok()) << "expected an error, got "
                         << (r->has_value() ? "a message" : "a timeout");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_LT(absl::Now() - t0, Scaled(absl::Seconds(10)));
  }
  EXPECT_TRUE(raw.AwaitEof(Scaled(absl::Seconds(10))).ok());
  EXPECT_FALSE(server_->Send(1, PlanOf(2)));
  server_->Unbind(1);  // harmless after Stop
  server_->Stop();     // idempotent
}

TEST_F(LinkTest, ConnectToAClosedPortIsUnavailable) {
  StartServer();
  LinkOptions o = WorkerOptions();
  server_->Stop();
  server_.reset();  // the listener closes
  o.timeout = Scaled(absl::Seconds(10));
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnavailable)
      << link.status();
}

}  // namespace
}  // namespace kolo::coordinator
