// HybridTransport: one epoch's Transport when some peers share this host —
// messages to the ranks of this host go through shared memory (ShmTransport),
// those to other hosts through TCP (TcpTransport). The collectives run on it
// unchanged, on any membership.
//
// Progress: a Wait drives both transports, whichever the awaited op belongs
// to, so that neither side's traffic stalls while the other is awaited (a
// ring over hosts needs both at once). It polls both up to `spin`, then
// sleeps: on the shared-memory doorbell when only shared-memory ops are
// pending, in epoll when only TCP ops are, and when both are, in epoll for
// slices growing from 20 us to 1 ms between looks at the shared memory.
// The inactivity deadline covers both: it fails when neither moved a byte
// for `timeout`, with the error of the transport that waits.
//
// Thread-safety: as Transport — one thread calls everything except Abort(),
// which any thread may call: it aborts both transports.
// Invariants: local ranks are this rank's host's ranks (this rank
// included), ascending; the shared-memory transport's rank i is local[i].
#ifndef KOLO_ALLREDUCE_SHM_HYBRID_TRANSPORT_H_
#define KOLO_ALLREDUCE_SHM_HYBRID_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allreduce/shm/shm_transport.h"
#include "allreduce/tcp/tcp_transport.h"
#include "allreduce/transport.h"

namespace kolo {

class HybridTransport : public Transport {
 public:
  // REQUIRES: the invariants above; shm->size() == local.size().
  HybridTransport(std::unique_ptr<TcpTransport> tcp,
                  std::unique_ptr<ShmTransport> shm, std::vector<int> local,
                  absl::Duration timeout, absl::Duration spin);

  int rank() const override { return tcp_->rank(); }
  int size() const override { return tcp_->size(); }
  void BeginOperation(uint64_t seq) override {
    tcp_->BeginOperation(seq);
    shm_->BeginOperation(seq);
  }
  absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                 size_t len) override;
  absl::StatusOr<OpId> StartRecv(int peer, void* data, size_t len) override;
  absl::Status Wait(OpId op) override;
  void Abort(absl::Status why) override;
  // Cuts the TCP connection of a remote peer, the shared-memory queues of a
  // local one (-1: every peer, both kinds).
  absl::Status CutForFault(int peer) override;
  void SetInactivityTimeout(absl::Duration timeout) override {
    timeout_ = timeout;
    tcp_->SetInactivityTimeout(timeout);
    shm_->SetInactivityTimeout(timeout);
  }

 private:
  // Composite op ids: inner id * 2 + (1 for shared memory, 0 for TCP).
  static OpId Tcp(OpId id) { return id * 2; }
  static OpId Shm(OpId id) { return id * 2 + 1; }

  const std::unique_ptr<TcpTransport> tcp_;
  const std::unique_ptr<ShmTransport> shm_;
  std::vector<int> local_of_;  // by epoch rank: index among local, or -1
  absl::Duration timeout_;     // SetInactivityTimeout changes it
  const absl::Duration spin_;
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_SHM_HYBRID_TRANSPORT_H_
