// ShmTransport: the Transport (allreduce/transport.h) between the ranks of
// one host, over one epoch's shared Segment (segment.h).
//
// Each ordered pair (src, dst) has a single-producer single-consumer byte
// ring. A message is a 32-byte header (epoch, sequence, length, address)
// followed by its bytes, streamed through the ring as space frees up: the
// sender copies in, the receiver copies out, each in pieces of at most 64 KiB
// published one by one, so that the two copies overlap. A message of at least
// options.attach_min_bytes goes by reference instead when the receiver can
// read the sender's memory (cross-memory attach, process_vm_readv, probed
// once per pair: containers and Yama may refuse it): the header carries the
// sender's address, the receiver copies the bytes straight from it (one copy
// instead of two) and acknowledges in the pair's control block, which
// completes the send. Messages of one direction are FIFO,
// matched against the receives started for that peer; a header whose epoch,
// sequence or length differs from the receive fails it, naming the peer.
//
// Waiting: Wait drives every pending op of this rank. It polls (spins) up to
// options.spin, then sleeps on its own doorbell futex. Whoever makes progress
// that a peer may wait for (bytes written for it, ring space freed for it)
// bumps that peer's doorbell word and issues FUTEX_WAKE only when the peer
// counts a waiter, so a spinning peer costs no system call. Abort bumps and
// wakes this rank's own doorbell, so a sleeping Wait returns at once. A Wait
// fails with kDeadlineExceeded naming the peers after options.timeout with
// no byte moving, and with kUnavailable naming the peer at most ~20 ms after
// a peer process it waits on exited (options.pids, watched by pidfd).
//
// Epochs: a Segment belongs to one epoch (its header is checked when mapped)
// and is unmapped with its transport; headers carry the epoch too.
//
// Thread-safety: as Transport — one thread calls everything except Abort(),
// which any thread may call at any time. The peers run in other processes
// (or threads) and touch only the shared words, through atomics.
// Invariants: ring heads/tails only grow; head - tail <= ring size (a peer
// breaking it is reported as a corrupt segment, never followed).
#ifndef KOLO_ALLREDUCE_SHM_SHM_TRANSPORT_H_
#define KOLO_ALLREDUCE_SHM_SHM_TRANSPORT_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "allreduce/shm/segment.h"
#include "allreduce/transport.h"
#include "common/mutex.h"
#include "common/unique_fd.h"

namespace kolo {

struct ShmOptions {
  // This rank among the segment's ranks (0 .. segment ranks - 1).
  int rank = 0;
  uint64_t epoch = 0;
  // Per segment rank: its name in messages ("rank 3 (worker w3)") and its
  // rank in the epoch's full transport (error payloads name those, see
  // kPeersPayloadUrl). Empty: "rank i" and i.
  std::vector<std::string> names;
  std::vector<int> epoch_ranks;
  // Per segment rank: its process id, watched so that a peer that died fails
  // the waits on it at once. Empty: not watched (ranks as threads).
  std::vector<pid_t> pids;
  absl::Duration timeout = absl::Seconds(30);
  absl::Duration spin = absl::Microseconds(50);
  // Messages this long or longer go by reference where the receiver can
  // read the sender's memory; 0 never does.
  size_t attach_min_bytes = 256 * 1024;
};

class ShmTransport : public Transport {
 public:
  // REQUIRES: segment != nullptr; 0 <= options.rank < segment->ranks();
  // names, epoch_ranks and pids empty or one per segment rank.
  ShmTransport(std::unique_ptr<shm::Segment> segment, ShmOptions options);
  ~ShmTransport() override;

  int rank() const override { return options_.rank; }
  int size() const override { return segment_->ranks(); }
  void BeginOperation(uint64_t seq) override { seq_ = seq; }
  absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                 size_t len) override;
  absl::StatusOr<OpId> StartRecv(int peer, void* data, size_t len) override;
  absl::Status Wait(OpId op) override;
  void Abort(absl::Status why) override;
  // Fault injection (kolorun --fault drop): this rank stops using its
  // queues with `peer` (-1: every peer): pending and later ops with it fail
  // with kUnavailable naming it. The peer is not told; its waits end when
  // the coordinator ends the epoch on this rank's report.
  absl::Status CutForFault(int peer) override;
  void SetInactivityTimeout(absl::Duration timeout) override {
    inactivity_ = timeout;
  }

  // For a transport that drives this one beside another
  // (hybrid_transport.h): moves what can move; when nothing moved and
  // `block` > 0, sleeps on the doorbell at most `block` and moves again.
  // Returns the bytes moved, or the abort status / first op error / a dead
  // peer's error.
  absl::StatusOr<size_t> Drive(absl::Duration block);
  // Whether `op` completed (Wait(op) then returns at once).
  bool Completed(OpId op) const;
  // Whether some started op has not completed.
  bool HasPending() const;
  // The error of a Wait that saw no byte move for `idle`.
  absl::Status InactivityError(absl::Duration idle) const;

  // For the collectives that work in the segment's slots (shm_allreduce.h),
  // under the same waiting policy, abort and fault rules as messages:
  shm::Segment& segment() const { return *segment_; }
  // Whether waits spin before they sleep (options.spin > 0).
  bool spins() const { return options_.spin > absl::ZeroDuration(); }
  // The sequence number of the last BeginOperation.
  uint64_t seq() const { return seq_; }
  // Name(r) and EpochRank(r), for messages and error payloads.
  std::string PeerName(int r) const { return Name(r); }
  int PeerEpochRank(int r) const { return EpochRank(r); }
  // OK, or why nothing may be exchanged with `peer` now (the abort status;
  // kUnavailable if it was cut for a fault).
  absl::Status Usable(int peer) const { return CheckStart(peer); }
  // Wakes every peer that sleeps on its doorbell (no system call for a peer
  // that spins or is busy).
  void NotifyPeers();
  // Returns once `laggard()` returns -1; until then it returns a peer this
  // rank still waits for. Spins up to options.spin, then sleeps on this
  // rank's doorbell (NotifyPeers wakes it). Fails with the abort status;
  // with kUnavailable naming the laggard when its process exited (within
  // ~20 ms); with kDeadlineExceeded naming it after options.timeout (`what`
  // says what was awaited, e.g. "allreduce of 4096 bytes").
  absl::Status WaitFor(absl::FunctionRef<int()> laggard,
                       absl::string_view what);

 private:
  struct Msg {
    OpId id = 0;
    uint8_t* data = nullptr;  // const for sends
    size_t len = 0;
    uint64_t seq = 0;
    size_t header_done = 0;  // header bytes written / read
    size_t done = 0;         // payload bytes written / read
    uint64_t remote = 0;     // by reference: the sender's address
    unsigned char header[32] = {};
  };
  struct Peer {
    std::deque<Msg> sends;
    std::deque<Msg> recvs;
    uint64_t head = 0;  // of ring (me -> peer), mine to write
    uint64_t tail = 0;  // of ring (peer -> me), mine to write
    // Sends by reference waiting for the peer's ack: (ticket, op).
    std::deque<std::pair<uint64_t, OpId>> awaiting;
    uint64_t refs_sent = 0;   // tickets handed out (me -> peer)
    uint64_t acks_given = 0;  // messages I read by reference (peer -> me)
    net::UniqueFd pidfd;
    bool cut = false;  // CutForFault
  };

  std::string Name(int r) const;
  int EpochRank(int r) const;
  absl::Status CheckStart(int peer) const;
  absl::Status CutError(int peer) const;
  absl::Status AbortStatus() const;
  void Complete(OpId id, absl::Status status);
  // Moves bytes of every peer; returns the bytes moved.
  size_t ProgressAll();
  size_t ProgressSends(int peer);
  size_t ProgressRecvs(int peer);
  size_t ProgressAcks(int peer);
  // Finds out once whether this rank can read `peer`'s memory.
  void ProbeAttach(int peer);
  pid_t Pid(int r) const;
  // Lets `peer` know there is something to look at.
  void Ring(int peer);
  // kUnavailable naming a peer with pending ops whose process exited.
  absl::Status CheckPeersAlive();

  const std::unique_ptr<shm::Segment> segment_;
  const ShmOptions options_;
  // options_.timeout until SetInactivityTimeout.
  absl::Duration inactivity_ = options_.timeout;
  shm::Doorbell* const my_bell_;
  std::vector<Peer> peers_;
  uint64_t seq_ = 0;
  OpId next_op_ = 1;
  size_t pending_ = 0;
  // Per op: done, and its status once done.
  absl::flat_hash_map<OpId, std::pair<bool, absl::Status>> ops_;
  absl::Status first_error_;
  absl::Time next_liveness_check_ = absl::InfinitePast();
  // Read by the peers' probes (ProbeAttach); published in my doorbell.
  const uint64_t probe_value_;

  std::atomic<bool> aborted_{false};
  mutable Mutex abort_mu_;
  absl::Status abort_status_ ABSL_GUARDED_BY(abort_mu_);
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_SHM_SHM_TRANSPORT_H_
