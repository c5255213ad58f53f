// TcpTransport: the Transport (allreduce/transport.h) over TCP sockets, one
// authenticated connection per peer rank, for one epoch.
//
// Create() builds the full mesh (mesh.h: connect to lower ranks, accept from
// higher ones on the borrowed listening socket, handshake.h on each) and
// fails after options.connect_timeout. Afterwards there is no background
// thread: Wait() drives every pending send and receive of every peer through
// one edge-triggered epoll set that also holds an eventfd, so that Abort()
// from any thread releases a blocked Wait at once. Wait spins (polls without
// blocking) up to options.spin before it sleeps.
//
// With options.encryption (KOLO_DATA_ENCRYPTION), each connection's frames
// are encrypted and authenticated (peer_channel.h, record_cipher.h) with
// keys derived per direction from the secret, the epoch, the two ranks and
// the connection's handshake nonces; a frame that fails authentication
// fails its channel like a broken peer.
//
// Errors: an op that fails (peer closed, frame mismatch, socket error) keeps
// its error until its Wait returns it. Since one broken connection breaks the
// collective, a Wait for any other op also fails with the first such error
// instead of waiting out the inactivity deadline. A Wait with no byte moving
// for options.timeout fails with kDeadlineExceeded naming the peers it
// waits for. After Abort(why), every Wait and Start* fails with kAborted.
//
// Thread-safety: one thread calls everything except Abort(), which any
// thread may call at any time (see Transport).
// Lifetime: destroying the transport closes its connections (they belong to
// one epoch) but never the listening socket.
#ifndef KOLO_ALLREDUCE_TCP_TCP_TRANSPORT_H_
#define KOLO_ALLREDUCE_TCP_TCP_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allreduce/tcp/peer_channel.h"
#include "allreduce/tcp/poller.h"
#include "allreduce/tcp/tcp_options.h"
#include "allreduce/transport.h"
#include "common/mutex.h"

namespace kolo {

class TcpTransport : public Transport {
 public:
  // Validates `options`, connects and authenticates the mesh. Errors name
  // the peers that could not be reached or refused, and why.
  static absl::StatusOr<std::unique_ptr<TcpTransport>> Create(
      const TcpOptions& options);

  TcpTransport(const TcpOptions& options, std::unique_ptr<tcp::Poller> poller,
               std::vector<std::unique_ptr<tcp::PeerChannel>> channels);
  ~TcpTransport() override = default;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  void BeginOperation(uint64_t seq) override { seq_ = seq; }
  absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                 size_t len) override;
  absl::StatusOr<OpId> StartRecv(int peer, void* data, size_t len) override;
  absl::Status Wait(OpId op) override;
  void Abort(absl::Status why) override;
  // shutdown(2) of the peer's socket (both directions).
  absl::Status CutForFault(int peer) override;
  void SetInactivityTimeout(absl::Duration timeout) override {
    inactivity_ = timeout;
  }

  // For a transport that drives this one beside another
  // (allreduce/shm/hybrid_transport.h): moves what can move; when nothing
  // moved and `block` > 0, sleeps in epoll at most `block` and moves again.
  // Returns the bytes moved, or the abort status / first op error.
  absl::StatusOr<size_t> Drive(absl::Duration block);
  // Whether `op` completed (Wait(op) then returns at once).
  bool Completed(OpId op) const;
  // Whether some started op has not completed.
  bool HasPending() const;
  // The error of a Wait that saw no byte move for `idle`.
  absl::Status InactivityError(absl::Duration idle) const;

 private:
  struct OpRecord {
    bool done = false;
    absl::Status status;
  };

  std::string Self() const;
  absl::Status CheckStart(int peer) const;
  OpId NewOp();
  absl::Status AbortStatus() const;
  // Progresses every channel that has pending ops and is ready; returns the
  // bytes moved.
  size_t ProgressAll();
  // Polls (timeout zero) or blocks up to `timeout`, recording readiness.
  absl::Status Poll(absl::Duration timeout);

  const TcpOptions options_;
  // options_.timeout until SetInactivityTimeout.
  absl::Duration inactivity_ = options_.timeout;
  std::unique_ptr<tcp::Poller> poller_;
  std::vector<std::unique_ptr<tcp::PeerChannel>> channels_;  // [rank] null
  uint64_t seq_ = 0;
  OpId next_op_ = 1;
  absl::flat_hash_map<OpId, OpRecord> ops_;
  absl::Status first_error_;
  std::vector<std::pair<OpId, absl::Status>> done_scratch_;

  std::atomic<bool> aborted_{false};
  mutable Mutex abort_mu_;
  absl::Status abort_status_ ABSL_GUARDED_BY(abort_mu_);
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_TCP_TCP_TRANSPORT_H_
