// Segment: the shared memory of one epoch's local ranks — an anonymous
// memfd (never a name in /dev/shm, so a crash leaves nothing behind), mapped
// by every local rank, laid out as:
//
//   [header: magic, layout version, epoch, nonce, ranks, ring size]
//   [one doorbell per rank: a futex word, a waiter count, a probe]
//   [one ring control per ordered pair (src, dst): head, tail, acks,
//    whether dst can read src's memory]
//   [one byte ring per ordered pair src != dst, ring_bytes each]
//   [one phase word per rank (shm_allreduce.h), a cache line each]
//   [one slot per rank, slot_bytes each (0: none)]
//
// The creator (the lowest local rank) sizes and seals the memfd (no shrink or
// grow, so a peer cannot make another's access fault), writes the header and
// passes the descriptor to its peers (shm_setup.h); a rank that maps it
// checks the header against the epoch and nonce it was told over the
// authenticated TCP connection, so a segment of another epoch or job is never
// read. The mapping is released with the Segment; the memory is freed when
// the last process holding the descriptor or a mapping exits.
//
// Thread-safety: the layout is immutable once created; the shared words are
// atomics used by the transport (shm_transport.h).
#ifndef KOLO_ALLREDUCE_SHM_SEGMENT_H_
#define KOLO_ALLREDUCE_SHM_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace kolo::shm {

inline constexpr size_t kNonceBytes = 16;

struct alignas(64) Doorbell {
  std::atomic<uint32_t> word{0};     // bumped by whoever wants us to look
  std::atomic<uint32_t> waiters{0};  // threads of the owner in FutexWait
  // Where the owner keeps a value its peers may read by cross-memory attach
  // (process_vm_readv) to find out whether they can; 0 until published.
  std::atomic<uint64_t> probe_address{0};
  std::atomic<uint64_t> probe_value{0};
  // Set when the owner's transport aborted or closed: its buffers may change
  // from then on, so a message read from them by reference is void.
  std::atomic<uint32_t> gone{0};
};

// Words written by the producer (head) and by the consumer (the rest), on
// separate cache lines.
struct alignas(64) RingControl {
  std::atomic<uint64_t> head{0};  // bytes ever written
  char pad[56];
  std::atomic<uint64_t> tail{0};  // bytes ever read
  // Messages the consumer read straight out of the producer's memory.
  std::atomic<uint64_t> acks{0};
  // Whether the consumer can read the producer's memory: 0 not known yet,
  // 1 yes, 2 no (refused: containers, Yama, another user).
  std::atomic<uint32_t> attach{0};
};

// A rank's progress through the collectives that work in the slots
// (shm_allreduce.h): written by its rank only, read by the others.
struct alignas(64) PhaseWord {
  std::atomic<uint64_t> phase{0};
  // What the collective of phase p is (its sequence number, size, dtype,
  // op), in tag[p % 2], written before the phase: the peers check that they
  // run the same one. A peer is at most one phase ahead of a rank that
  // waits for it, so the tag it reads is still in place.
  std::atomic<uint64_t> tag[2] = {};
  // The input of a tiny allreduce (at most kInlineBytes) of phase p, in
  // inline_data[p % 2]: it travels with the phase, in the same cache line.
  std::atomic<uint64_t> inline_data[2][2] = {};
};
inline constexpr size_t kInlineBytes = 16;
static_assert(sizeof(PhaseWord) == 64);

// How KOLO_SHM_BYTES splits between the rings and the slots.
struct SegmentPlan {
  size_t ring_bytes = 0;
  size_t slot_bytes = 0;  // 0: no slots (too small a segment)
};

class Segment {
 public:
  // The size a segment of `ranks` ranks needs for rings of `ring_bytes`.
  static size_t Size(int ranks, size_t ring_bytes, size_t slot_bytes = 0);
  // The largest ring (a multiple of 4 KiB) that `total_bytes` allows for
  // `ranks` ranks; kInvalidArgument (saying how much is needed) when not
  // even 4 KiB per ordered pair fits.
  static absl::StatusOr<size_t> RingBytesFor(int ranks, size_t total_bytes);
  // Half of `total_bytes` (at most 2 MiB per rank, whole 4 KiB pages) for
  // one slot per rank when that gives each at least 64 KiB (else no slots),
  // the rest for the rings (RingBytesFor's error when they do not fit).
  static absl::StatusOr<SegmentPlan> PlanFor(int ranks, size_t total_bytes);

  // Creates and maps a new segment for `ranks` ranks (sealed memfd, mode
  // 0600 by construction, close-on-exec). slot_bytes: a multiple of 4 KiB.
  static absl::StatusOr<std::unique_ptr<Segment>> Create(
      int ranks, size_t ring_bytes, uint64_t epoch, const std::string& nonce,
      size_t slot_bytes = 0);
  // Maps a segment received from the creator; fails (naming what differs)
  // unless its header says `ranks`, `epoch` and `nonce`.
  static absl::StatusOr<std::unique_ptr<Segment>> Map(net::UniqueFd fd,
                                                      int ranks, uint64_t epoch,
                                                      const std::string& nonce);

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int ranks() const { return ranks_; }
  size_t ring_bytes() const { return ring_bytes_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // The memfd (for passing to peers); -1 once Close()d.
  int fd() const { return fd_.get(); }
  // Drops the descriptor; the mapping stays.
  void CloseFd() { fd_.Reset(); }

  Doorbell* bell(int rank) const;
  RingControl* control(int src, int dst) const;
  uint8_t* ring(int src, int dst) const;
  PhaseWord* phase(int rank) const;
  // REQUIRES: slot_bytes() > 0.
  uint8_t* slot(int rank) const;

 private:
  Segment(net::UniqueFd fd, void* base, size_t size, int ranks,
          size_t ring_bytes, size_t slot_bytes)
      : fd_(std::move(fd)),
        base_(static_cast<uint8_t*>(base)),
        size_(size),
        ranks_(ranks),
        ring_bytes_(ring_bytes),
        slot_bytes_(slot_bytes) {}

  net::UniqueFd fd_;
  uint8_t* const base_;
  const size_t size_;
  const int ranks_;
  const size_t ring_bytes_;
  const size_t slot_bytes_;
};

}  // namespace kolo::shm

#endif  // KOLO_ALLREDUCE_SHM_SEGMENT_H_
