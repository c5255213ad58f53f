// LinkServer: the coordinator's end of the negotiation links — a TCP listener
// beside the gRPC server and one thread that serves every link with epoll.
// Wire format and handshake: the header comment of proto/kolo.proto; why:
// worker_lib/session/negotiation_link.h.
//
// A connection first proves the job secret (auth::ServerHandshake, a fresh
// nonce per connection, the coordinator proving first; the Hello's job id and
// incarnation are checked after the Proof, and until then a refusal is the
// generic auth::kUnauthenticatedRefusal, logged once per address per
// minute, naming the peer: its address, or on the local socket its process,
// pid and uid; so is a connection closed before it bound, e.g. a refused
// TLS handshake); then `bind` maps its
// worker id to a member's Session, and from then on every message it sends
// goes to `on_message` under that Session's id, exactly as if it had come on
// the stream. Send() writes to the link bound to a Session (false when there
// is none, and the caller uses the stream). A connection that has not bound
// within the handshake timeout is closed.
//
// Timers: `on_timer` (optional) runs on the link thread after every batch of
// events and whenever the deadline it returned passes; it returns the next
// deadline, which bounds the thread's epoll wait. The coordinator runs its
// negotiation deadlines there (a message that sets one is handled on this
// thread, so no other thread has to wake for it).
//
// It implements WorkerLinks (coordinator/worker_links.h), the interface the
// service and the server hold whether links are on or off.
//
// Thread-safety: Send, Unbind, port and Stop may be called from any thread;
// the callbacks run on the link thread with no lock of this class held, so
// they may call Send and Unbind (lock order: the caller's locks, then this
// class's mutex).
// Lifetime: Stop() (or the destructor) joins the thread; the callbacks must
// stay valid until then.
#ifndef KOLO_COORDINATOR_LINK_SERVER_H_
#define KOLO_COORDINATOR_LINK_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "common/tls_stream.h"
#include "common/unique_fd.h"
#include "coordinator/core.h"
#include "coordinator/worker_links.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

struct LinkServerOptions {
  std::string bind_host = "127.0.0.1";
  int port = 0;  // 0: the kernel picks
  std::string job_id, secret;
  uint64_t incarnation = 0;
  absl::Duration handshake_timeout = auth::kHandshakeTimeout;
  // The job's certificates (common/tls.h): set, every link (TCP and local
  // socket) runs TLS 1.3 with mutual authentication (common/tls_stream.h)
  // under the secret's handshake; a TLS failure closes the link and is
  // logged as any refusal.
  std::optional<tls::TlsMaterial> tls;
};

class LinkServer final : public WorkerLinks {
 public:
  // Binds the listening socket (no thread yet, so that the port can go into
  // the core's options before the callbacks exist).
  static absl::StatusOr<std::unique_ptr<LinkServer>> Listen(
      LinkServerOptions options);
  ~LinkServer() override;
  LinkServer(const LinkServer&) = delete;
  LinkServer& operator=(const LinkServer&) = delete;

  int port() const override { return port_; }
  // Starts the link thread. REQUIRES: called once.
  absl::Status Start(BindFn bind, MessageFn on_message,
                     TimerFn on_timer = nullptr) override;
  // Whether the calling thread is the link thread (callbacks run there).
  bool OnLinkThread() const override {
    return std::this_thread::get_id() ==
           link_thread_id_.load(std::memory_order_relaxed);
  }
  // Writes `msg` on the link bound to `session`; false when none is bound.
  bool Send(SessionId session, const proto::CoordinatorMessage& msg) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Closes the link bound to `session`, if any.
  void Unbind(SessionId session) override ABSL_LOCKS_EXCLUDED(mu_);
  // Closes every link and joins the thread. Idempotent.
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Conn;
  LinkServer(LinkServerOptions options, net::UniqueFd listener,
             net::UniqueFd local_listener, net::UniqueFd epoll,
             net::UniqueFd wake, int port);

  void Loop();
  // Accepts what `listener` (the TCP or the local one) has waiting.
  void Accept(int listener) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads what `id` sent and handles whole messages.
  void OnReadable(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs one message of an unbound connection (the handshake).
  void Handshake(uint64_t id, const proto::WorkerMessage& msg)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Handshake's steps: the Hello answered with a Challenge; the Proof, job
  // and incarnation checked (false: refused); and, after `bind` ran, the
  // link bound to `session` (or refused with its error).
  void ChallengeLocked(uint64_t id, Conn& c, const proto::WorkerMessage& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CheckProofLocked(uint64_t id, Conn& c, const proto::WorkerMessage& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BindLocked(uint64_t id, Conn& c, const std::string& worker_id,
                  uint64_t epoch, const absl::StatusOr<SessionId>& session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes what is queued for `conn`; false when the link broke.
  bool Flush(Conn& conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueLocked(Conn& conn, const google::protobuf::MessageLite& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends a Refusal to `c` and closes it. A peer that has not `proven` the
  // secret gets the generic auth::kUnauthenticatedRefusal (a version
  // mismatch excepted) and `message` goes to the log, rate-limited per
  // address.
  void RefuseLocked(uint64_t id, Conn& c, proto::Refusal::Reason reason,
                    const std::string& message, bool proven)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked(uint64_t id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseExpired(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  const LinkServerOptions options_;
  // Made from options_.tls; null without TLS.
  std::shared_ptr<const tls::TlsContext> tls_;
  // The TCP listener, and the local one (net::LocalLinkName; -1 when it
  // could not be made).
  net::UniqueFd listener_, local_listener_, epoll_, wake_;
  const int port_;
  BindFn bind_;
  MessageFn on_message_;
  TimerFn on_timer_;
  std::thread thread_;
  // Set by the link thread as it starts (no thread has that id before).
  std::atomic<std::thread::id> link_thread_id_;

  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Conn>> conns_
      ABSL_GUARDED_BY(mu_);
  // Bound links: Session -> connection id.
  absl::flat_hash_map<SessionId, uint64_t> bound_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_LINK_SERVER_H_
