// The data-plane handshake: message parsing, and refusals (wrong secret,
// epoch, version, job, worker, rank; garbage; oversized fields; replayed
// proofs), each logged, with the real peer still connecting afterwards.
#include <sys/socket.h>
#include <sys/time.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/tcp/handshake.h"
#include "allreduce/tcp/tcp_transport.h"
#include "allreduce/tcp/wire.h"
#include "common/auth.h"
#include "common/socket_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allreduce_tcp_test_mesh.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::LogCapture;
using ::kolo::testing::Scaled;
using ::kolo::testing::TestWorld;
using tcp::Hello;
using tcp::MsgType;
using ::testing::HasSubstr;
using ::testing::Not;

// ---- Pure message tests ----------------------------------------------------

Hello GoodHello() {
  return Hello{1, 4, 1, 0, "job-1", "w1", std::string(32, 'n')};
}

tcp::AcceptorView View() { return {1, 4, "job-1", 0, 3, {"w0", "w1", "w2"}}; }

TEST(Handshake, HelloRoundTripAndChecks) {
  absl::StatusOr<Hello> h = tcp::ParseHello(tcp::EncodeHello(GoodHello()));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->worker_id, "w1");
  EXPECT_TRUE(tcp::CheckHello(*h, View()).ok());
  Hello bad = GoodHello();
  bad.epoch = 3;
  EXPECT_THAT(tcp::CheckHello(bad, View()).message(),
              HasSubstr("peer is in epoch 3, this transport is epoch 4"));
  bad = GoodHello();
  bad.version = 2;
  EXPECT_THAT(tcp::CheckHello(bad, View()).message(),
              HasSubstr("protocol version 2, this transport speaks 1"));
  bad = GoodHello();
  bad.from_rank = 7;
  EXPECT_THAT(tcp::CheckHello(bad, View()).message(),
              HasSubstr("unexpected rank 7"));
  bad = GoodHello();
  bad.worker_id = "w2";
  EXPECT_THAT(tcp::CheckHello(bad, View()).message(),
              HasSubstr("rank 1 is worker 'w1'"));
}

TEST(Handshake, GarbageAndOversizedFieldsAreRefused) {
  EXPECT_THAT(tcp::ParseMsgHeader("GET / HTTP").status().message(),
              HasSubstr("not a kolo data-plane handshake"));
  tcp::WireWriter w;
  w.U32(tcp::kHandshakeMagic);
  w.U8(1);
  w.U32(1 << 30);
  EXPECT_THAT(tcp::ParseMsgHeader(w.out()).status().message(),
              HasSubstr("oversized handshake message"));
  Hello h = GoodHello();
  h.job_id = std::string(300, 'j');
  EXPECT_THAT(tcp::ParseHello(tcp::EncodeHello(h)).status().message(),
              HasSubstr("oversized field: 300 bytes"));
  std::string truncated = tcp::EncodeHello(GoodHello());
  truncated.resize(truncated.size() - 5);
  EXPECT_THAT(tcp::ParseHello(truncated).status().message(),
              HasSubstr("truncated"));
}

TEST(Handshake, ProofsDependOnRoleAndNonces) {
  Hello h = GoodHello();
  std::string a = tcp::AcceptorProof("s", h, "w0", std::string(32, 'a'));
  EXPECT_NE(a, tcp::ConnectorProof("s", h, "w0", std::string(32, 'a')));
  EXPECT_NE(a, tcp::AcceptorProof("s", h, "w0", std::string(32, 'b')));
  EXPECT_NE(a, tcp::AcceptorProof("t", h, "w0", std::string(32, 'a')));
}

// ---- Against a live acceptor -----------------------------------------------

// A blocking raw client of rank 0's listener.
class RawClient {
 public:
  explicit RawClient(const std::string& address) {
    auto addr = net::ResolveAddress(address);
    EXPECT_TRUE(addr.ok());
    fd_ = net::UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    timeval tv{};
    tv.tv_sec =
        static_cast<time_t>(absl::ToInt64Seconds(Scaled(absl::Seconds(10))));
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    EXPECT_EQ(
        ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr->storage),
                  addr->len),
        0);
  }
  void Send(const std::string& bytes) {
    EXPECT_EQ(::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads one handshake message; an error at EOF or on garbage.
  absl::StatusOr<std::pair<MsgType, std::string>> Read() {
    std::string header(tcp::kMsgHeaderBytes, '\0');
    if (!ReadExactly(&header)) return absl::UnavailableError("EOF");
    auto h = tcp::ParseMsgHeader(header);
    if (!h.ok()) return h.status();
    std::string body(h->body_bytes, '\0');
    if (!ReadExactly(&body)) return absl::UnavailableError("EOF");
    return std::make_pair(h->type, body);
  }
  // The reason of a Refuse message, or "" for anything else.
  std::string ReadRefusal() {
    auto m = Read();
    if (!m.ok() || m->first != MsgType::kRefuse) return "";
    auto reason = tcp::ParseString(m->second, tcp::kMaxReasonBytes);
    return reason.ok() ? *reason : "";
  }
  bool AtEof() {
    char c;
    return ::recv(fd_.get(), &c, 1, 0) == 0;
  }

 private:
  bool ReadExactly(std::string* s) {
    size_t got = 0;
    while (got < s->size()) {
      ssize_t n = ::recv(fd_.get(), s->data() + got, s->size() - got, 0);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }
  net::UniqueFd fd_;
};

// Rank 0 of a 2-rank world accepts in a thread while the test plays
// impostors; then the real rank 1 connects and one message goes through.
class HandshakeRefusal : public ::testing::Test {
 protected:
  // Refusals of unproven peers are logged at warn once per address per
  // minute, the rest at debug: the test reads them all.
  HandshakeRefusal() : level_(GetLogger("transport")->level()) {
    GetLogger("transport")->set_level(spdlog::level::debug);
  }
  ~HandshakeRefusal() override { GetLogger("transport")->set_level(level_); }

  void StartRank0() {
    rank0_ = std::thread([this] {
      auto t = TcpTransport::Create(world_.Options(0));
      if (t.ok()) {
        t0_ = std::move(*t);
      } else {
        status0_ = t.status();
      }
    });
  }

  TestWorld world_{2};
  LogCapture log_;
  std::thread rank0_;
  std::unique_ptr<TcpTransport> t0_;
  absl::Status status0_;
  spdlog::level::level_enum level_;
};

TEST_F(HandshakeRefusal, ImpostorTransportsAreRefusedAndTheRealPeerConnects) {
  struct Case {
    const char* name;
    void (*tweak)(TcpOptions&);
    const char* impostor_error;
  };
  const Case cases[] = {
      {"secret", [](TcpOptions& o) { o.secret = "wrong"; },
       "did not prove knowledge of the job secret"},
      {"epoch", [](TcpOptions& o) { o.epoch = 3; },
       "peer is in epoch 3, this transport is epoch 4"},
      {"version", [](TcpOptions& o) { o.protocol_version = 99; },
       "peer speaks protocol version 99, this transport speaks 1"},
      {"job", [](TcpOptions& o) { o.job_id = "job-2"; },
       "peer belongs to job 'job-2', this transport to job 'job-1'"},
      {"worker", [](TcpOptions& o) { o.worker_ids[1] = "w9"; },
       "claims rank 1 as worker 'w9'"},
  };
  StartRank0();
  for (const Case& c : cases) {
    TcpOptions o = world_.Options(1);
    c.tweak(o);
    auto t = TcpTransport::Create(o);
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kPermissionDenied)
        << c.name << ": " << t.status();
    EXPECT_THAT(t.status().message(), HasSubstr(c.impostor_error)) << c.name;
    EXPECT_THAT(t.status().message(), HasSubstr("rank 0 (worker w0 at "));
  }
  // Rank 1 + rank 0 exchange one int each way.
  auto t1 = TcpTransport::Create(world_.Options(1));
  rank0_.join();
  ASSERT_TRUE(t1.ok()) << t1.status();
  ASSERT_TRUE(status0_.ok()) << status0_;
  std::vector<std::unique_ptr<TcpTransport>> ts;
  ts.push_back(std::move(t0_));
  ts.push_back(std::move(*t1));
  kolo::testing::RunRanks(ts, [](int rank, TcpTransport& t) {
    int v = rank + 10, got = 0;
    ASSERT_TRUE(
        t.SendRecv(1 - rank, &v, sizeof(v), 1 - rank, &got, sizeof(got)).ok());
    EXPECT_EQ(got, 11 - rank);
  });
  std::string log = log_.text();
  // The acceptor logged each refusal it decided, with the reason.
  EXPECT_THAT(log, HasSubstr("peer is in epoch 3, this transport is epoch 4"));
  EXPECT_THAT(log, HasSubstr("protocol version 99"));
  EXPECT_THAT(log, HasSubstr("job 'job-2'"));
  EXPECT_THAT(log, HasSubstr("worker 'w9'"));
  // The wrong-secret impostor gave up first (the acceptor proves first).
  EXPECT_THAT(log, HasSubstr("closed the connection during the handshake"));
  EXPECT_THAT(log, HasSubstr("did not prove knowledge of the job secret"));
}

TEST_F(HandshakeRefusal, RawClientsAreRefusedAndTheRealPeerConnects) {
  const std::string addr0 = world_.listener(0).address;
  StartRank0();
  RawClient silent(addr0);  // connects and never speaks
  {
    RawClient garbage(addr0);
    garbage.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    // No peer has proven the secret here: each gets the one generic
    // refusal; the reasons are in rank 0's log.
    EXPECT_EQ(garbage.ReadRefusal(), auth::kUnauthenticatedRefusal);
  }
  {
    RawClient huge(addr0);
    tcp::WireWriter w;
    w.U32(tcp::kHandshakeMagic);
    w.U8(1);
    w.U32(1 << 30);
    huge.Send(w.out());
    EXPECT_EQ(huge.ReadRefusal(), auth::kUnauthenticatedRefusal);
  }
  {
    RawClient field(addr0);
    Hello h = GoodHello();
    h.job_id = std::string(300, 'j');
    field.Send(tcp::EncodeMsg(MsgType::kHello, tcp::EncodeHello(h)));
    EXPECT_EQ(field.ReadRefusal(), auth::kUnauthenticatedRefusal);
  }
  {
    // Issue 16 §3: a peer that has not proven the secret learns nothing of
    // the world (its size, who is which rank): it is challenged, and refused
    // generically when it cannot answer.
    RawClient rank7(addr0);
    Hello h = GoodHello();
    h.from_rank = 7;
    rank7.Send(tcp::EncodeMsg(MsgType::kHello, tcp::EncodeHello(h)));
    auto c = rank7.Read();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->first, MsgType::kChallenge);
    rank7.Send(
        tcp::EncodeMsg(MsgType::kProof,
                       tcp::EncodeString(auth::RandomBytes(auth::kMacBytes))));
    std::string refusal = rank7.ReadRefusal();
    EXPECT_EQ(refusal, auth::kUnauthenticatedRefusal);
    EXPECT_THAT(refusal, Not(HasSubstr("rank")));
  }
  {
    // A proof made for one connection's nonces is refused on another (no
    // replay), and a made-up proof is refused.
    Hello h = GoodHello();
    h.nonce = auth::RandomBytes(auth::kNonceBytes);
    RawClient first(addr0), second(addr0);
    first.Send(tcp::EncodeMsg(MsgType::kHello, tcp::EncodeHello(h)));
    second.Send(tcp::EncodeMsg(MsgType::kHello, tcp::EncodeHello(h)));
    auto c1 = first.Read(), c2 = second.Read();
    ASSERT_TRUE(c1.ok() && c2.ok());
    auto ch1 = tcp::ParseChallenge(c1->second);
    auto ch2 = tcp::ParseChallenge(c2->second);
    ASSERT_TRUE(ch1.ok() && ch2.ok());
    EXPECT_NE(ch1->nonce, ch2->nonce);
    // The acceptor proved it knows the secret.
    EXPECT_EQ(ch1->proof, tcp::AcceptorProof("s3cret", h, "w0", ch1->nonce));
    second.Send(tcp::EncodeMsg(
        MsgType::kProof,
        tcp::EncodeString(tcp::ConnectorProof("s3cret", h, "w0", ch1->nonce))));
    EXPECT_EQ(second.ReadRefusal(), auth::kUnauthenticatedRefusal);
    first.Send(
        tcp::EncodeMsg(MsgType::kProof,
                       tcp::EncodeString(auth::RandomBytes(auth::kMacBytes))));
    EXPECT_EQ(first.ReadRefusal(), auth::kUnauthenticatedRefusal);
  }
  auto t1 = TcpTransport::Create(world_.Options(1));
  rank0_.join();
  ASSERT_TRUE(t1.ok()) << t1.status();
  ASSERT_TRUE(status0_.ok()) << status0_;
  // The silent client is dropped once rank 0's mesh is complete.
  EXPECT_TRUE(silent.AtEof());
  std::string log = log_.text();
  EXPECT_THAT(log,
              HasSubstr("refused a data-plane connection from 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("not a kolo data-plane handshake"));
  EXPECT_THAT(log, HasSubstr("oversized field"));
  EXPECT_THAT(log, HasSubstr("wrong job secret"));
  // The silent client's drop is logged too.
  EXPECT_THAT(log, HasSubstr("did not complete its handshake"));
}

}  // namespace
}  // namespace kolo
