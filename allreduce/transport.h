// Transport: how the collective algorithms move bytes between the ranks of
// one epoch. Algorithms (ring, recursive doubling, ...) see only this
// interface, never sockets; TCP (allreduce/tcp/), shared memory
// (allreduce/shm/: ShmTransport, and HybridTransport mixing it with TCP) and
// SubsetTransport (a process set's view) implement it. NCCL does not: CUDA
// tensors run whole collectives on an NCCL communicator (allreduce/nccl/,
// driven by worker_lib/exec/cuda_executor.h) or are staged through host memory
// onto this interface.
//
// Model: point-to-point byte messages. Between two ranks, messages are
// matched in the order they were started (FIFO per direction), so both sides
// must run the same algorithm, which the global plan order guarantees. Every
// message belongs to one operation: BeginOperation(seq) stamps the messages
// that follow with (epoch, seq); a receiver that gets a message of another
// epoch or operation, or of another length than it expects, fails with an
// error naming the peer: bytes of two operations never mix.
//
// Operations are started (non-blocking) and then waited for. A Wait drives
// the progress of every started operation of this transport (no background
// thread), spinning at most KOLO_SPIN_US before it blocks. It fails with
// kDeadlineExceeded naming the peer after the inactivity timeout passes with
// no byte moving, and with kAborted at once after Abort().
//
// Thread-safety: one thread (the one running plans) calls everything except
// Abort(), which any thread may call at any time.
// Lifetime: buffers passed to StartSend/StartRecv must stay valid until the
// op completed (Wait returned) or the transport was aborted and destroyed.
#ifndef KOLO_ALLREDUCE_TRANSPORT_H_
#define KOLO_ALLREDUCE_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace kolo {

// A data-plane error caused by peers (no bytes from them within the
// inactivity deadline, their connection broke) names them in a payload: the
// ranks of the epoch's full transport (a subset transport passes its
// parent's errors through unchanged). The worker reports them to the
// coordinator, which alone decides who failed.
inline constexpr absl::string_view kPeersPayloadUrl = "kolo/peers";
// Sets the payload of `status` (not OK) to `peers`.
void SetPeers(absl::Status& status, absl::Span<const int> peers);
// The peers named by `status`'s payload; empty when none.
std::vector<int> PeersOf(const absl::Status& status);

// Identifies a started send or receive on one transport.
using OpId = uint64_t;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Stamps subsequent messages with plan sequence `seq` (within the epoch the
  // transport was built for). REQUIRES: no op of the previous sequence is
  // still pending.
  virtual void BeginOperation(uint64_t seq) = 0;

  // Starts sending `len` bytes (len may be 0) to `peer` != rank().
  virtual absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                         size_t len) = 0;
  // Starts receiving exactly `len` bytes from `peer` != rank() into `data`.
  virtual absl::StatusOr<OpId> StartRecv(int peer, void* data, size_t len) = 0;

  // Waits until `op` completed, making progress on all pending ops.
  virtual absl::Status Wait(OpId op) = 0;
  // Waits for every op in `ops`.
  virtual absl::Status WaitAll(absl::Span<const OpId> ops);

  // Makes every current and future Wait return `why` (kAborted) at once.
  // Thread-safe; idempotent (the first reason is kept).
  virtual void Abort(absl::Status why) = 0;

  // Fault injection (kolorun --fault drop:...): shuts down the connection to
  // `peer` (-1: every peer) as a network fault would, so that the ops on it
  // fail on both ends. kUnimplemented where the transport cannot.
  // REQUIRES: called from the thread that runs this transport's ops.
  virtual absl::Status CutForFault(int peer);

  // Changes the inactivity timeout of the Waits that follow (the options'
  // value at construction). The worker's fast path waits for peers that may
  // be computing for minutes (worker_lib/runtime/fast_path_link.h) with a
  // long one: the coordinator's liveness checks bound that wait, and an
  // epoch's end aborts it. REQUIRES: the thread that runs this transport's
  // ops. A transport without an inactivity deadline (the tests' fakes)
  // ignores it.
  virtual void SetInactivityTimeout(absl::Duration /*timeout*/) {}

  // Convenience: send to one peer and receive from another, concurrently.
  absl::Status SendRecv(int send_peer, const void* send_data, size_t send_len,
                        int recv_peer, void* recv_data, size_t recv_len);
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_TRANSPORT_H_
