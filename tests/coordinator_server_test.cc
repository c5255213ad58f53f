// Tests of CoordinatorServer (coordinator/server.h) over real gRPC on
// loopback: raw generated stubs do the Session handshake by hand.
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/socket.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/socket_util.h"
#include "common/version.h"
#include "coordinator/server.h"
#include "coordinator/status_auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kolo.grpc.pb.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/raw_socket.h"
#include "tests/testing/timeouts.h"

namespace kolo::coordinator {
namespace {

using ::kolo::testing::CapturedLog;
using ::kolo::testing::ClosedWithin;
using ::kolo::testing::RawConnect;
using ::kolo::testing::Scaled;
using ::testing::HasSubstr;

constexpr char kSecret[] = "server-test-secret";
constexpr char kJob[] = "server-job";

// A worker speaking the Session protocol by hand, with a blocking stub. Every
// call is bounded by the context's deadline.
class RawWorker {
 public:
  RawWorker(int port, std::string worker_id, std::string host,
            std::string secret = kSecret)
      : worker_id_(std::move(worker_id)),
        host_(std::move(host)),
        secret_(std::move(secret)),
        hs_(secret_, kJob, worker_id_) {
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials());
    stub_ = proto::Coordinator::NewStub(channel);
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      absl::ToChronoSeconds(Scaled(absl::Seconds(30))));
    stream_ = stub_->Session(&ctx_);
  }
  ~RawWorker() {
    if (finished_) return;
    ctx_.TryCancel();
    stream_->Finish();
  }

  // Hello + Challenge + Proof. Returns the Refusal if refused at any step
  // (the Refusal to a Proof arrives later: see Next()).
  std::optional<proto::Refusal> Handshake(uint32_t version = kProtocolVersion) {
    proto::WorkerMessage hello;
    proto::Hello* h = hello.mutable_hello();
    h->set_protocol_version(version);
    h->set_feature_bits(kFeatureBits);
    h->set_job_id(kJob);
    h->set_worker_id(worker_id_);
    h->set_host_name(host_);
    h->set_data_address("127.0.0.1:1");
    h->set_requested_rank(-1);
    h->set_client_nonce(hs_.client_nonce());
    h->set_pid(1);
    EXPECT_TRUE(stream_->Write(hello));
    proto::CoordinatorMessage m = Next();
    if (m.has_refusal()) return m.refusal();
    EXPECT_TRUE(m.has_challenge()) << m.DebugString();
    incarnation_ = m.fence().incarnation();
    const proto::Challenge& c = m.challenge();
    std::string mac = auth::WorkerProof(secret_, kJob, worker_id_,
                                        hs_.client_nonce(), c.server_nonce());
    if (secret_ == kSecret) {
      absl::StatusOr<std::string> answer =
          hs_.Answer(c.server_nonce(), c.server_proof());
      EXPECT_TRUE(answer.ok()) << answer.status();
    }
    proto::WorkerMessage proof;
    proof.mutable_fence()->set_incarnation(incarnation_);
    proof.mutable_proof()->set_mac(mac);
    EXPECT_TRUE(stream_->Write(proof));
    return std::nullopt;
  }

  // The next message that is not a Heartbeat; an empty message if the
  // stream ended.
  proto::CoordinatorMessage Next() {
    proto::CoordinatorMessage m;
    while (stream_->Read(&m)) {
      if (!m.has_heartbeat()) return m;
    }
    return proto::CoordinatorMessage();
  }

  void Send(proto::WorkerMessage m, uint64_t epoch) {
    m.mutable_fence()->set_incarnation(incarnation_);
    m.mutable_fence()->set_epoch(epoch);
    EXPECT_TRUE(stream_->Write(m));
  }

  // Half-closes and returns the stream's final status.
  grpc::Status Close() {
    stream_->WritesDone();
    proto::CoordinatorMessage m;
    while (stream_->Read(&m)) {
    }
    finished_ = true;
    return stream_->Finish();
  }

  void Cancel() { ctx_.TryCancel(); }

 private:
  std::string worker_id_, host_, secret_;
  auth::ClientHandshake hs_;
  uint64_t incarnation_ = 0;
  bool finished_ = false;
  std::unique_ptr<proto::Coordinator::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<
      grpc::ClientReaderWriter<proto::WorkerMessage, proto::CoordinatorMessage>>
      stream_;
};

std::unique_ptr<CoordinatorServer> StartServer(
    int n, absl::Duration heartbeat_timeout = Scaled(absl::Seconds(5)),
    const std::function<void(ServerOptions&)>& tweak = {}) {
  ServerOptions o;
  o.listen.bind_host = "127.0.0.1";
  o.listen.port = 0;
  o.core.expected_size = n;
  o.core.job_id = kJob;
  o.core.secret = kSecret;
  o.core.heartbeat_interval = absl::Milliseconds(100);
  o.core.heartbeat_timeout = heartbeat_timeout;
  if (tweak) tweak(o);
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> s =
      CoordinatorServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  EXPECT_GT((*s)->port(), 0);
  EXPECT_NE((*s)->incarnation(), 0u);
  return std::move(*s);
}

proto::StatusReply StatusRpc(int port) {
  auto stub = proto::Coordinator::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoSeconds(Scaled(absl::Seconds(10))));
  proto::StatusReply reply;
  // The Status RPC requires the job secret (coordinator/status_auth.h).
  grpc::Status st =
      stub->Status(&ctx, SignStatusRequest(kSecret, kJob), &reply);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return reply;
}

absl::Time Deadline(absl::Duration d) { return absl::Now() + Scaled(d); }

// Waits until `n` workers are authenticated (or the epoch formed), so that
// arrival order (which decides ranks) is the order of the test's handshakes.
void WaitForAuthenticated(const CoordinatorServer& server, int n) {
  absl::Time until = Deadline(absl::Seconds(10));
  while (true) {
    proto::StatusReply st = server.Status();
    int in = 0;
    for (const auto& w : st.workers()) {
      if (w.state() == proto::MEMBER_STATE_WAITING ||
          w.state() == proto::MEMBER_STATE_MEMBER)
        ++in;
    }
    if (in >= n) return;
    ASSERT_LT(absl::Now(), until)
        << "only " << in << " of " << n << " workers authenticated in time";
    absl::SleepFor(absl::Milliseconds(2));
  }
}

TEST(CoordinatorServerTest, EpochOfThreeFormsAndEndsWhenAllLeave) {
  auto server = StartServer(3);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawWorker>> w;
  const char* hosts[] = {"a", "b", "a"};
  for (int i = 0; i < 3; ++i) {
    w.push_back(std::make_unique<RawWorker>(server->port(),
                                            absl::StrCat("w", i), hosts[i]));
    EXPECT_EQ(w.back()->Handshake(), std::nullopt);
    WaitForAuthenticated(*server, i + 1);
  }
  ASSERT_TRUE(server->WaitForEpoch(Deadline(absl::Seconds(10))).ok());
  // w0, w2 on host a get ranks 0, 1; w1 on host b rank 2.
  const int want_rank[] = {0, 2, 1};
  const int want_local[] = {0, 0, 1};
  for (int i = 0; i < 3; ++i) {
    proto::CoordinatorMessage m = w[i]->Next();
    ASSERT_TRUE(m.has_membership()) << m.DebugString();
    EXPECT_EQ(m.fence().incarnation(), server->incarnation());
    EXPECT_EQ(m.fence().epoch(), 1u);
    EXPECT_EQ(m.membership().rank(), want_rank[i]);
    EXPECT_EQ(m.membership().size(), 3);
    EXPECT_EQ(m.membership().local_rank(), want_local[i]);
    EXPECT_EQ(m.membership().peers_size(), 3);
  }
  proto::StatusReply st = StatusRpc(server->port());
  EXPECT_EQ(st.phase(), "running");
  EXPECT_EQ(st.job_id(), kJob);
  EXPECT_EQ(st.incarnation(), server->incarnation());
  ASSERT_EQ(st.workers_size(), 3);
  EXPECT_EQ(st.workers(0).worker_id(), "w0");
  EXPECT_EQ(st.workers(1).worker_id(), "w2");
  EXPECT_EQ(st.workers(2).worker_id(), "w1");
  for (const auto& ws : st.workers())
    EXPECT_EQ(ws.state(), proto::MEMBER_STATE_MEMBER);

  // Exchange, then Leave.
  for (int i = 0; i < 3; ++i) {
    proto::WorkerMessage ex;
    ex.mutable_exchange()->set_key("k");
    ex.mutable_exchange()->set_value(absl::StrCat("v", i));
    w[i]->Send(ex, 1);
  }
  for (int i = 0; i < 3; ++i) {
    proto::CoordinatorMessage m = w[i]->Next();
    ASSERT_TRUE(m.has_exchange_result()) << m.DebugString();
    EXPECT_THAT(m.exchange_result().values(),
                ::testing::ElementsAre("v0", "v2", "v1"));
  }
  for (int i = 0; i < 3; ++i) {
    proto::WorkerMessage leave;
    leave.mutable_leave()->set_reason("done");
    w[i]->Send(leave, 1);
    EXPECT_TRUE(w[i]->Next().has_leave_ack());
    EXPECT_TRUE(w[i]->Close().ok());
  }
  EXPECT_TRUE(server->WaitUntilEnded(Deadline(absl::Seconds(10))).ok());
  server->Shutdown(false, "test over");
}

TEST(CoordinatorServerTest, WrongSecretRefusedOthersStillForm) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  RawWorker bad(server->port(), "w1", "b", "wrong-secret");
  EXPECT_EQ(bad.Handshake(), std::nullopt);  // refused at the Proof
  proto::CoordinatorMessage m = bad.Next();
  ASSERT_TRUE(m.has_refusal()) << m.DebugString();
  EXPECT_EQ(m.refusal().reason(), proto::Refusal::AUTH_FAILED);
  // The peer did not prove the secret: the generic refusal, no details.
  EXPECT_EQ(m.refusal().message(), auth::kUnauthenticatedRefusal);
  grpc::Status closed = bad.Close();
  EXPECT_EQ(closed.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(closed.error_message(), auth::kUnauthenticatedRefusal);

  RawWorker w0(server->port(), "w0", "a"), w1(server->port(), "w1", "b");
  EXPECT_EQ(w0.Handshake(), std::nullopt);
  EXPECT_EQ(w1.Handshake(), std::nullopt);
  EXPECT_TRUE(w0.Next().has_membership());
  EXPECT_TRUE(w1.Next().has_membership());
  EXPECT_TRUE(server->WaitForEpoch(Deadline(absl::Seconds(10))).ok());
}

TEST(CoordinatorServerTest, VersionMismatchRefused) {
  auto server = StartServer(1);
  ASSERT_NE(server, nullptr);
  RawWorker w(server->port(), "w0", "a");
  std::optional<proto::Refusal> r = w.Handshake(kProtocolVersion + 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason(), proto::Refusal::VERSION_MISMATCH);
  EXPECT_THAT(r->message(), HasSubstr(absl::StrCat(
                                "worker w0 speaks v", kProtocolVersion + 1,
                                ", coordinator speaks v", kProtocolVersion)));
  EXPECT_EQ(w.Close().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(CoordinatorServerTest, ShutdownSendsJobEnd) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  RawWorker w0(server->port(), "w0", "a"), w1(server->port(), "w1", "a");
  EXPECT_EQ(w0.Handshake(), std::nullopt);
  EXPECT_EQ(w1.Handshake(), std::nullopt);
  EXPECT_TRUE(w0.Next().has_membership());
  EXPECT_TRUE(w1.Next().has_membership());
  server->Shutdown(true, "operator pressed ctrl-c");
  for (RawWorker* w : {&w0, &w1}) {
    proto::CoordinatorMessage m = w->Next();
    ASSERT_TRUE(m.has_job_end()) << m.DebugString();
    EXPECT_TRUE(m.job_end().failure());
    EXPECT_EQ(m.job_end().reason(), "operator pressed ctrl-c");
  }
  EXPECT_TRUE(absl::IsAborted(server->WaitUntilEnded(absl::Now())));
  server->Shutdown(true, "again");  // idempotent
}

TEST(CoordinatorServerTest, MemberDisconnectEndsJob) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  RawWorker w0(server->port(), "w0", "a"), w1(server->port(), "w1", "b");
  EXPECT_EQ(w0.Handshake(), std::nullopt);
  WaitForAuthenticated(*server, 1);
  EXPECT_EQ(w1.Handshake(), std::nullopt);
  EXPECT_TRUE(w0.Next().has_membership());
  EXPECT_TRUE(w1.Next().has_membership());
  w1.Cancel();
  proto::CoordinatorMessage m = w0.Next();
  ASSERT_TRUE(m.has_job_end()) << m.DebugString();
  EXPECT_TRUE(m.job_end().failure());
  EXPECT_THAT(m.job_end().reason(), HasSubstr("worker w1 (rank 1, host b)"));
  absl::Status ended = server->WaitUntilEnded(Deadline(absl::Seconds(10)));
  EXPECT_TRUE(absl::IsAborted(ended)) << ended;
  EXPECT_THAT(ended.message(), HasSubstr("w1"));
}

TEST(CoordinatorServerTest, SilentMemberEndsJob) {
  auto server = StartServer(1, absl::Milliseconds(300));
  ASSERT_NE(server, nullptr);
  RawWorker w0(server->port(), "w0", "a");
  EXPECT_EQ(w0.Handshake(), std::nullopt);
  EXPECT_TRUE(w0.Next().has_membership());
  // w0 never sends a heartbeat: the tick thread declares it failed.
  absl::Status ended = server->WaitUntilEnded(Deadline(absl::Seconds(10)));
  EXPECT_TRUE(absl::IsAborted(ended)) << ended;
  EXPECT_THAT(ended.message(), HasSubstr("worker w0 (rank 0, host a) silent"));
  proto::CoordinatorMessage m = w0.Next();
  ASSERT_TRUE(m.has_job_end()) << m.DebugString();
  EXPECT_THAT(m.job_end().reason(), HasSubstr("silent for"));
}

TEST(CoordinatorServerTest, WaitForEpochDeadlineNamesWhoIsIn) {
  auto server = StartServer(3);
  ASSERT_NE(server, nullptr);
  RawWorker w0(server->port(), "w0", "hostA");
  EXPECT_EQ(w0.Handshake(), std::nullopt);
  // Wait until w0 is in, then time out waiting for the others.
  WaitForAuthenticated(*server, 1);
  proto::StatusReply status = StatusRpc(server->port());
  EXPECT_EQ(status.phase(), "forming");
  ASSERT_EQ(status.workers_size(), 1);
  EXPECT_EQ(status.workers(0).state(), proto::MEMBER_STATE_WAITING);
  absl::Status st = server->WaitForEpoch(absl::Now() + absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("waiting for 2 of 3 workers"));
  EXPECT_THAT(st.message(), HasSubstr("w0 (host hostA)"));
  absl::Status ended = server->WaitUntilEnded(absl::Now());
  EXPECT_TRUE(absl::IsDeadlineExceeded(ended)) << ended;
}

TEST(CoordinatorServerTest, PortInUseIsAClearError) {
  auto first = StartServer(1);
  ASSERT_NE(first, nullptr);
  ServerOptions o;
  o.listen.bind_host = "127.0.0.1";
  o.listen.port = first->port();
  o.core.expected_size = 1;
  o.core.job_id = kJob;
  o.core.secret = kSecret;
  auto second = CoordinatorServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(
      second.status().message(),
      HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", first->port())));
}

// Connections from outside to the gRPC port (issue 39): raw TCP that never
// speaks HTTP/2, HTTP/2 that never proves the job secret, garbage, floods.

TEST(CoordinatorServerTest, IdleRawConnectionsAreClosedAtTheHandshakeDeadline) {
  CapturedLog log("coordinator");
  auto server = StartServer(1, Scaled(absl::Seconds(5)), [](ServerOptions& o) {
    o.listen.handshake_timeout = absl::Milliseconds(500);
  });
  ASSERT_NE(server, nullptr);
  const absl::Time start = absl::Now();
  std::vector<net::UniqueFd> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(RawConnect(server->port()));
  // A worker that proves the secret meanwhile is not disturbed.
  RawWorker w0(server->port(), "w0", "a");
  EXPECT_EQ(w0.Handshake(), std::nullopt);
  EXPECT_TRUE(w0.Next().has_membership());
  for (const net::UniqueFd& fd : idle) {
    EXPECT_TRUE(ClosedWithin(fd.get(), Scaled(absl::Seconds(10))));
  }
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_THAT(log.text(), HasSubstr("closed an unauthenticated connection to "
                                    "the gRPC port from ipv4:127.0.0.1:"));
  // The member's stream, older than the deadline by now, still works.
  absl::SleepFor(absl::Milliseconds(200));
  server->Shutdown(false, "done");
  proto::CoordinatorMessage m = w0.Next();
  EXPECT_TRUE(m.has_job_end()) << m.DebugString();
}

TEST(CoordinatorServerTest, HttpTwoConnectionThatNeverProvesIsClosed) {
  auto server = StartServer(1, Scaled(absl::Seconds(5)), [](ServerOptions& o) {
    o.listen.handshake_timeout = absl::Milliseconds(500);
  });
  ASSERT_NE(server, nullptr);
  grpc::ChannelArguments args;
  // No reconnection within the test: the state shows the server's close.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 60000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 60000);
  auto channel =
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server->port()),
                                grpc::InsecureChannelCredentials(), args);
  ASSERT_TRUE(channel->WaitForConnected(
      std::chrono::system_clock::now() +
      absl::ToChronoSeconds(Scaled(absl::Seconds(10)))));
  // Connected, no call: after the deadline the server closes it.
  const auto until = std::chrono::system_clock::now() +
                     absl::ToChronoSeconds(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY, until));
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);
}

TEST(CoordinatorServerTest, AFloodFromOneAddressIsCappedAndWorkersStillJoin) {
  CapturedLog log("coordinator");
  auto server = StartServer(2, Scaled(absl::Seconds(5)), [](ServerOptions& o) {
    o.listen.handshake_timeout =
        Scaled(absl::Seconds(60));  // the cap acts, not it
    o.listen.max_unauthenticated_per_host = 8;
  });
  ASSERT_NE(server, nullptr);
  std::vector<net::UniqueFd> flood;
  for (int i = 0; i < 40; ++i) flood.push_back(RawConnect(server->port()));
  // The workers come after the flood, from the same address, and go ahead
  // of it: each new connection closes the oldest unproven one.
  RawWorker w0(server->port(), "w0", "a"), w1(server->port(), "w1", "a");
  EXPECT_EQ(w0.Handshake(), std::nullopt);
  EXPECT_EQ(w1.Handshake(), std::nullopt);
  EXPECT_TRUE(w0.Next().has_membership());
  EXPECT_TRUE(w1.Next().has_membership());
  int closed = 0;
  for (const net::UniqueFd& fd : flood) {
    closed += ClosedWithin(fd.get(), absl::Milliseconds(20)) ? 1 : 0;
  }
  EXPECT_GE(closed, 40 - 8);
  EXPECT_THAT(log.text(), HasSubstr("dropped to make room: 8 unauthenticated "
                                    "connections from its address"));
}

TEST(CoordinatorServerTest, GarbageOnThePortIsLogged) {
  CapturedLog log("coordinator");
  auto server = StartServer(1);
  ASSERT_NE(server, nullptr);
  net::UniqueFd c = RawConnect(server->port());
  ASSERT_EQ(::send(c.get(), "\x16\x03\x01garbage", 10, MSG_NOSIGNAL), 10);
  EXPECT_TRUE(ClosedWithin(c.get(), Scaled(absl::Seconds(10))));
  EXPECT_THAT(log.text(), HasSubstr("it does not speak gRPC (HTTP/2)"));
}

TEST(CoordinatorServerTest, AVerifiedStatusCallProvesItsConnection) {
  auto server = StartServer(1, Scaled(absl::Seconds(5)), [](ServerOptions& o) {
    o.listen.handshake_timeout = absl::Milliseconds(500);
  });
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = proto::Coordinator::NewStub(channel);
  for (int i = 0; i < 2; ++i) {  // the second after the deadline
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     absl::ToChronoSeconds(Scaled(absl::Seconds(10))));
    proto::StatusReply reply;
    grpc::Status st =
        stub->Status(&ctx, SignStatusRequest(kSecret, kJob), &reply);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (i == 0) absl::SleepFor(absl::Milliseconds(800));
  }
  // Still the first connection: it was never closed.
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
}

}  // namespace
}  // namespace kolo::coordinator
