// SessionClient's lease and fencing, against a scripted fake coordinator that
// does the handshake right and then misbehaves on purpose: goes silent, dies
// mid-call, or sends messages from another epoch or incarnation.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kolo.grpc.pb.h"
#include "tests/testing/timeouts.h"
#include "worker_lib/session/session_client.h"

namespace kolo::worker {
namespace {

using ::kolo::testing::Scaled;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSecret[] = "s";
constexpr uint64_t kIncarnation = 0x1234;

enum class Script {
  kSilent,          // no heartbeats after the Membership
  kAnswerExchange,  // heartbeats; answers an Exchange after fenced decoys
  kSignalExchange,  // heartbeats; tells the test when an Exchange arrives
};

class FakeCoordinator final : public proto::Coordinator::Service {
 public:
  explicit FakeCoordinator(Script script) : script_(script) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeCoordinator() override { Kill(); }

  int port() const { return port_; }
  // Ends every stream at once, as a killed process would.
  void Kill() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }
  bool WaitForExchange(absl::Duration timeout) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + timeout;
    while (!exchange_seen_) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return exchange_seen_;
  }
  // The messages the worker sent after its Proof.
  std::vector<proto::WorkerMessage> received() {
    MutexLock lock(&mu_);
    return received_;
  }

  grpc::Status Session(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<proto::CoordinatorMessage, proto::WorkerMessage>*
          stream) override {
    proto::WorkerMessage in;
    if (!stream->Read(&in) || !in.has_hello()) return grpc::Status::CANCELLED;
    const proto::Hello hello = in.hello();
    auth::ServerHandshake hs(kSecret, hello.job_id(), hello.worker_id(),
                             hello.client_nonce());
    proto::CoordinatorMessage out = Fenced(0);
    out.mutable_challenge()->set_server_nonce(hs.server_nonce());
    out.mutable_challenge()->set_server_proof(hs.server_proof());
    stream->Write(out);
    if (!stream->Read(&in) || !hs.Verify(in.proof().mac()).ok()) {
      return grpc::Status::CANCELLED;
    }
    out = Fenced(1);
    proto::Membership* m = out.mutable_membership();
    m->set_rank(0), m->set_size(1), m->set_local_rank(0), m->set_local_size(1);
    m->set_cross_rank(0), m->set_cross_size(1);
    stream->Write(out);

    std::thread beat;
    if (script_ != Script::kSilent) {
      beat = std::thread([&] {
        while (!ctx->IsCancelled() && !stopping_) {
          proto::CoordinatorMessage hb = Fenced(1);
          hb.mutable_heartbeat()->set_seq(1);
          MutexLock lock(&write_mu_);
          if (!stream->Write(hb)) break;
          absl::SleepFor(absl::Milliseconds(50));
        }
      });
    }
    while (stream->Read(&in)) {
      {
        MutexLock lock(&mu_);
        received_.push_back(in);
        if (in.has_exchange()) exchange_seen_ = true;
        cv_.SignalAll();
      }
      if (in.has_exchange() && script_ == Script::kAnswerExchange) {
        MutexLock lock(&write_mu_);
        // Decoys: another epoch, another incarnation. The worker drops them.
        proto::CoordinatorMessage decoy = Fenced(7);
        decoy.mutable_exchange_result()->set_key(in.exchange().key());
        decoy.mutable_exchange_result()->add_values("from epoch 7");
        stream->Write(decoy);
        decoy.mutable_fence()->set_epoch(1);
        decoy.mutable_fence()->set_incarnation(kIncarnation + 1);
        stream->Write(decoy);
        proto::CoordinatorMessage r = Fenced(1);
        r.mutable_exchange_result()->set_key(in.exchange().key());
        r.mutable_exchange_result()->add_values(in.exchange().value());
        stream->Write(r);
      }
      if (in.has_leave()) {
        MutexLock lock(&write_mu_);
        proto::CoordinatorMessage ack = Fenced(1);
        ack.mutable_leave_ack();
        stream->Write(ack);
      }
    }
    stopping_ = true;
    if (beat.joinable()) beat.join();
    return grpc::Status::OK;
  }

 private:
  static proto::CoordinatorMessage Fenced(uint64_t epoch) {
    proto::CoordinatorMessage m;
    m.mutable_fence()->set_incarnation(kIncarnation);
    m.mutable_fence()->set_epoch(epoch);
    return m;
  }

  const Script script_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<bool> stopping_{false};
  Mutex write_mu_;  // one writer at a time on the sync stream
  Mutex mu_;
  CondVar cv_;
  bool exchange_seen_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<proto::WorkerMessage> received_ ABSL_GUARDED_BY(mu_);
};

SessionOptions Options(int port, absl::Duration lease) {
  SessionOptions o;
  o.coordinator = absl::StrCat("127.0.0.1:", port);
  o.job_id = "job";
  o.worker_id = "w0";
  o.host_name = "h";
  o.data_address = "127.0.0.1:1";
  o.requested_rank = 0;
  o.expected_size = 1;
  o.secret = kSecret;
  o.heartbeat_interval = absl::Milliseconds(50);
  o.lease = lease;
  return o;
}

TEST(Lease, SilentCoordinatorFailsPendingCallWithUnavailable) {
  FakeCoordinator fake(Script::kSilent);
  auto c = SessionClient::Connect(Options(fake.port(), absl::Seconds(1)),
                                  absl::Now() + Scaled(absl::Seconds(10)));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Time start = absl::Now();
  auto r = (*c)->Exchange("k", "v", Scaled(absl::Seconds(30)));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10)));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("lost the coordinator at"));
  EXPECT_THAT(r.status().message(), HasSubstr("no message for"));
  // Later calls fail the same way.
  EXPECT_EQ((*c)->Exchange("k2", "v", absl::Seconds(1)).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE((*c)->Shutdown(Scaled(absl::Seconds(2))).ok());
}

TEST(Lease, KilledCoordinatorFailsPendingCallWithUnavailable) {
  FakeCoordinator fake(Script::kSignalExchange);
  auto c =
      SessionClient::Connect(Options(fake.port(), Scaled(absl::Seconds(10))),
                             absl::Now() + Scaled(absl::Seconds(10)));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::vector<std::string>> r = absl::UnknownError("not run");
  std::thread t(
      [&] { r = (*c)->Exchange("k", "v", Scaled(absl::Seconds(30))); });
  ASSERT_TRUE(fake.WaitForExchange(Scaled(absl::Seconds(10))));
  const absl::Time start = absl::Now();
  fake.Kill();
  t.join();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(5)))
      << "a broken stream is seen at once, not after the lease";
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("stream closed"));
  EXPECT_TRUE((*c)->Shutdown(Scaled(absl::Seconds(2))).ok());
}

TEST(Lease, FencedMessagesAreDroppedAndOwnMessagesCarryTheFence) {
  FakeCoordinator fake(Script::kAnswerExchange);
  auto c =
      SessionClient::Connect(Options(fake.port(), Scaled(absl::Seconds(10))),
                             absl::Now() + Scaled(absl::Seconds(10)));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->incarnation(), kIncarnation);
  EXPECT_EQ((*c)->epoch(), 1u);
  auto r = (*c)->Exchange("k", "mine", Scaled(absl::Seconds(10)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("mine"));
  absl::SleepFor(absl::Milliseconds(200));  // a few heartbeats
  EXPECT_TRUE((*c)->Shutdown(Scaled(absl::Seconds(5))).ok());
  std::vector<proto::WorkerMessage> sent = fake.received();
  ASSERT_GE(sent.size(), 3u);  // heartbeats, exchange, leave
  bool in_epoch = false;
  for (const proto::WorkerMessage& m : sent) {
    EXPECT_EQ(m.fence().incarnation(), kIncarnation);
    // A heartbeat may leave before the Membership arrives (epoch 0); never
    // after one of epoch 1.
    if (m.fence().epoch() == 1) in_epoch = true;
    EXPECT_EQ(m.fence().epoch(), in_epoch ? 1u : 0u);
    if (!m.has_heartbeat()) {
      EXPECT_EQ(m.fence().epoch(), 1u);
    }
  }
  EXPECT_TRUE(sent.back().has_leave());
}

TEST(LeaseDeathTest, WorkerExitsWhenItLosesTheCoordinator) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        FakeCoordinator fake(Script::kSilent);
        SessionOptions o = Options(fake.port(), absl::Milliseconds(500));
        o.exit_on_lost_coordinator = true;
        auto c = SessionClient::Connect(o, absl::Now() + absl::Seconds(10));
        if (!c.ok()) std::_Exit(3);
        absl::SleepFor(absl::Seconds(30));  // the lease ends this
        std::_Exit(4);
      },
      ::testing::ExitedWithCode(kLostCoordinatorExitCode),
      "lost the coordinator at 127.0.0.1");
}

TEST(Lease, NoExitAfterShutdown) {
  FakeCoordinator fake(Script::kAnswerExchange);
  SessionOptions o = Options(fake.port(), absl::Milliseconds(500));
  o.exit_on_lost_coordinator = true;
  auto c = SessionClient::Connect(o, absl::Now() + Scaled(absl::Seconds(10)));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Shutdown(Scaled(absl::Seconds(5))).ok());
  fake.Kill();
  absl::SleepFor(absl::Seconds(1));  // past the lease: this process lives on
}

}  // namespace
}  // namespace kolo::worker
