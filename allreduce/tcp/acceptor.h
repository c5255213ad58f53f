// Acceptor: takes a data-plane listening socket's connections all the time,
// on a thread of its own, and holds each until a forming mesh takes it
// (allreduce/tcp/mesh.h) or the handshake deadline passes.
//
// Why: a worker forms its mesh only while an epoch forms. If nobody accepts
// between epochs, connections from outside fill the kernel's backlog, and the
// next recovery's connections wait in SYN retransmission (~1 s each) behind
// them. Here the backlog is always drained, and:
// - a connection that has not proven the job secret by `handshake_timeout`
//   after it was accepted is closed (the mesh enforces the same deadline on
//   those it took), and the refusal logged (warn, once per address per
//   minute: common/rate_limited_log.h);
// - a connection is handed to a mesh only once it has sent something (a real
//   peer sends its Hello at once); idle ones never reach a mesh, and one
//   whose first bytes are not the handshake's magic is refused at once;
// - at most `max_held` connections are held: to make room, the oldest idle
//   one is dropped first, then the oldest that sent something. A recovery's
//   connections are the newest, so strangers that came before make room for
//   them instead of the other way round.
//
// Thread-safety: Take, ready_fd, held and Stop may be called from any thread.
// Invariants: ready_fd() is readable while some connection waits to be
// taken; every held connection is closed by its deadline + one poll round.
// Lifetime: Stop (or the destructor) joins the thread and closes what is
// held; the listening socket is borrowed and stays open.
#ifndef KOLO_ALLREDUCE_TCP_ACCEPTOR_H_
#define KOLO_ALLREDUCE_TCP_ACCEPTOR_H_

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/mutex.h"
#include "common/unique_fd.h"

namespace kolo::tcp {

struct AcceptorOptions {
  absl::Duration handshake_timeout = auth::kHandshakeTimeout;
  size_t max_held = 256;  // REQUIRES: >= 1
  // Who listens, for log lines ("worker w1").
  std::string owner = "this worker";
};

// One accepted connection: non-blocking, close-on-exec.
struct AcceptedConn {
  net::UniqueFd fd;
  std::string remote;  // "ip:port"
  absl::Time accepted;
};

class Acceptor {
 public:
  // Starts accepting from `listen_fd` (made non-blocking), which must stay
  // open until Stop.
  static absl::StatusOr<std::unique_ptr<Acceptor>> Start(
      int listen_fd, AcceptorOptions options);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  const AcceptorOptions& options() const { return options_; }
  // Readable while connections wait in Take().
  int ready_fd() const { return ready_.get(); }
  // The connections that sent something, oldest first (ready_fd() is
  // reset). The caller owns them and enforces their deadline
  // (accepted + handshake_timeout) until they prove the secret.
  std::vector<AcceptedConn> Take() ABSL_LOCKS_EXCLUDED(mu_);
  // Connections held now, idle or ready (for tests and logs).
  size_t held() const ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the thread and closes what is held. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Held {
    AcceptedConn conn;
    bool dead = false;
  };
  Acceptor(int listen_fd, AcceptorOptions options, net::UniqueFd wake,
           net::UniqueFd ready);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Accepts what the backlog holds, making room as the header says.
  void AcceptAll() ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the oldest idle connection, else the oldest ready one.
  void MakeRoomLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes what passed its deadline; returns the next deadline.
  absl::Time ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Drop(const AcceptedConn& c, const std::string& why);

  const int listen_fd_;
  const AcceptorOptions options_;
  net::UniqueFd wake_;   // eventfd: Stop
  net::UniqueFd ready_;  // eventfd: ready_conns_ is not empty
  std::thread thread_;
  // The thread's own: the listener rests until then (out of descriptors).
  absl::Time rest_until_ = absl::InfinitePast();

  mutable Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Sent nothing yet, in accept order. Only the thread adds or removes.
  std::vector<Held> idle_ ABSL_GUARDED_BY(mu_);
  // Sent something: waits for Take, in accept order.
  std::vector<Held> ready_conns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_ACCEPTOR_H_
