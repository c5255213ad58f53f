// The fixture of the negotiation link's tests (coordinator_link_test.cc:
// handshake, binding, refusals, TLS; coordinator_link_io_test.cc: receive,
// wake, close, bursts, callbacks, timers, limits, stop): a LinkServer on
// 127.0.0.1 with recording callbacks (LinkTest), a raw client that speaks
// the frame protocol by hand (RawClient), and message builders.
//
// Thread-safety: LinkTest's records are guarded by its mutex (the link
// thread writes them); RawClient is used from one thread.
#ifndef KOLO_TESTS_COORDINATOR_LINK_TEST_FIXTURE_H_
#define KOLO_TESTS_COORDINATOR_LINK_TEST_FIXTURE_H_

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

namespace kolo::coordinator::link_test {

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

inline proto::WorkerMessage AnnounceOf(const std::string& name,
                                       const std::string& invalid = "") {
  proto::WorkerMessage m;
  proto::Request* r = m.mutable_announce()->add_requests();
  r->set_name(name);
  r->set_op(proto::ALLREDUCE);
  r->add_shape(4);
  r->set_invalid(invalid);
  return m;
}

inline proto::CoordinatorMessage PlanOf(uint64_t seq,
                                        const std::string& name = "") {
  proto::CoordinatorMessage m;
  m.mutable_fence()->set_incarnation(kIncarnation);
  m.mutable_fence()->set_epoch(kEpoch);
  m.mutable_plan()->set_seq(seq);
  if (!name.empty()) m.mutable_plan()->add_responses()->add_names(name);
  return m;
}

// A payload whose content depends on `key`, so that a frame cut short or
// spliced with another shows.
inline std::string PayloadFor(int key, size_t size) {
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
inline proto::WorkerMessage LinkHello(uint64_t incarnation,
                                      const std::string& job,
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
inline void ExpectGenericRefusal(RawClient& raw) {
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

}  // namespace kolo::coordinator::link_test

#endif  // KOLO_TESTS_COORDINATOR_LINK_TEST_FIXTURE_H_
