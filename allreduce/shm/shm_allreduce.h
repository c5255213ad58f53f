// ShmAllreduce: allreduce among ranks that all share one host, straight
// through the epoch's segment (segment.h) instead of messages: each rank
// copies its input into its own slot, and the ranks reduce out of each
// other's slots — one pass over the data where the ring sends it twice, and
// one or two synchronisations per chunk where the ring needs 2(n-1) steps.
//
// Two forms, chosen by size alone (so the same on every rank):
//  - direct (at most direct_max_bytes and half a slot): every rank copies its
//    input into its slot, publishes its phase word, waits until every rank
//    has, and reduces all slots, in rank order, into its output. One
//    synchronisation, and no system call at all while the peers spin. Up to
//    16 bytes (shm::kInlineBytes) the input goes in the phase word's own
//    cache line instead of the slot.
//  - sliced: per chunk (at most half a slot): copy in, synchronise; each rank
//    reduces its slice (1/n of the chunk) out of every slot, in rank order,
//    into its output, finishes it (average, postscale) and publishes it in
//    its own slot; synchronise; each rank copies the other slices out of
//    their owners' slots.
// A fused allreduce may give its tensors as pieces (AllreducePieces): the
// sliced form then copies each rank's pieces straight into its slot and the
// results straight out of the slots into the pieces, instead of through a
// fusion buffer (one pass over the data less each way). Ranks 0 and 1 reduce
// their slice into their own slot; ranks 2 and up from a copy of it.
// Chunks alternate between the two halves of each slot, so that a rank
// copies the next chunk in while a slower peer still copies this one out.
//
// Results: the same on every rank, bitwise: a direct result is computed by
// every rank in the same order from the same bytes, a sliced one once and
// copied. (Float sums may differ in the last bit from the ring's, which
// adds in ring order.)
//
// Synchronisation: each rank's phase word (segment.h) counts the phases it
// completed; every rank runs the same sequence of collectives, so the
// targets agree. A slot half is rewritten two chunks after its last use,
// once every peer arrived at the chunk in between and so finished reading it.
//
// Faults: waits are ShmTransport::WaitFor's (the epoch's abort, a dead peer,
// the inactivity deadline); a peer cut for a fault fails the next call. An
// error leaves the phase words out of step, so it aborts `whole` (the
// epoch's transport), as a transport error does for the other collectives.
//
// Thread-safety: one thread calls Allreduce (the transport's thread); the
// transport's Abort, from any thread, ends its waits.
// Lifetime: one per epoch, with the epoch's transport (it borrows both).
#ifndef KOLO_ALLREDUCE_SHM_SHM_ALLREDUCE_H_
#define KOLO_ALLREDUCE_SHM_SHM_ALLREDUCE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "allreduce/chunking.h"
#include "allreduce/collectives.h"
#include "allreduce/shm/segment.h"
#include "allreduce/shm/shm_transport.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo {

class ShmAllreduce {
 public:
  // Tuning, measured with kolo-bench on 2 vCPUs (docs/performance.md). Up
  // to the direct size every rank reduces the whole buffer (one
  // synchronisation); above it each reduces a slice, chunk by chunk (two per
  // chunk). When the ranks spin (no more ranks than cores), 16 KiB and
  // chunks of 256 KiB, which stay in cache between the ranks; when they
  // sleep, every synchronisation costs futex wake-ups, so 64 KiB and chunks
  // of half a slot.
  static constexpr size_t kSpinDirectMaxBytes = 16 * 1024;
  static constexpr size_t kSleepDirectMaxBytes = 64 * 1024;
  static constexpr size_t kSpinChunkBytes = 256 * 1024;

  // REQUIRES: shm and whole outlive this; shm->segment().slot_bytes() > 0;
  // shm has at least 2 ranks, and its ranks are all of whole's (the caller
  // runs every allreduce of `whole` through this object).
  ShmAllreduce(ShmTransport* shm, Transport* whole);

  // As kolo::Allreduce (collectives.h): the same checks and arguments.
  absl::Status Allreduce(DataType type, const void* input, void* output,
                         int64_t count, const ReduceOptions& reduce);
  // As Allreduce of `pieces` laid end to end in one buffer, bit for bit,
  // without that buffer: each rank copies its pieces (prescaled) straight
  // into its slot, and the results straight from the slots into the
  // pieces' outputs. Always the sliced form, whatever the size; every rank
  // must give pieces of the same total count.
  absl::Status AllreducePieces(DataType type,
                               absl::Span<const AllreducePiece> pieces,
                               const ReduceOptions& reduce);
  // Whether Allreduce takes the sliced form for `bytes` (else the direct
  // one, where laying pieces end to end costs less than a second
  // synchronisation).
  bool Slices(size_t bytes) const;

 private:
  uint8_t* Half(int rank, uint64_t use) const;
  // OK when every peer can still be reached, else the transport's error,
  // failing `whole` as the collectives' errors do.
  absl::Status PeersUsable(absl::string_view collective);
  // Publishes this rank's next phase, tagged `tag`, and waits until every
  // rank reached it; kInvalidArgument naming the ranks whose tag differs
  // (another collective, size, dtype or op: a caller's mistake).
  absl::Status Sync(uint64_t tag);
  absl::Status Direct(DataType type, const char* in, char* out, int64_t count,
                      const ReduceOptions& reduce, uint64_t tag);
  // One chunk of the sliced form: its first element and count, this rank's
  // slot half for it, and each rank's slice (offsets within the chunk).
  struct Chunk {
    int64_t first = 0;
    int64_t count = 0;
    uint64_t use = 0;
    uint8_t* mine = nullptr;
    std::vector<ElementRange> slices;
    ElementRange own;  // this rank's
  };
  // The sliced form's steps, chunk by chunk: `fill` copies this rank's
  // input into its slot half; synchronise; `finish` reduces this rank's
  // slice, finishes it and leaves it in its slot half; synchronise; `take`
  // copies a peer's finished slice (element `offset` of the chunk on, from
  // `from`) into the output.
  using ChunkStep = std::function<absl::Status(const Chunk&)>;
  using TakeSlice = std::function<void(const Chunk&, const ElementRange& slice,
                                       const uint8_t* from)>;
  // acc (this rank's slice of chunk k) = op over ranks of their slot
  // halves there, in rank order (this rank's part from `own_input` when not
  // null), then the average's division and the postscale.
  absl::Status FinishOwnSlice(DataType type, const ReduceOptions& reduce,
                              const Chunk& k, char* acc,
                              const char* own_input) const;
  absl::Status RunSliced(DataType type, int64_t count, uint64_t tag,
                         const ChunkStep& fill, const ChunkStep& finish,
                         const TakeSlice& take);
  absl::Status Sliced(DataType type, const char* in, char* out, int64_t count,
                      const ReduceOptions& reduce, uint64_t tag);
  // Sliced over `pieces`: the same chunks, slices and synchronisations.
  absl::Status SlicedPieces(DataType type,
                            absl::Span<const AllreducePiece> pieces,
                            int64_t count, const ReduceOptions& reduce,
                            uint64_t tag);
  absl::Status Mismatch() const;
  // Sequence number, size, dtype and op, mixed.
  uint64_t Tag(DataType type, ReduceOp op, size_t bytes) const;
  // out (count elements) = op over ranks of each slot's half `use`, from
  // byte `offset` on, in rank order; this rank's part from `own` instead of
  // its slot when not null.
  absl::Status ReduceSlots(DataType type, ReduceOp op, char* out, uint64_t use,
                           size_t offset, int64_t count,
                           const char* own = nullptr) const;

  ShmTransport* const shm_;
  Transport* const whole_;
  shm::Segment& segment_;
  const int rank_;
  const int n_;
  const size_t half_bytes_;
  const size_t direct_max_bytes_;
  const size_t chunk_bytes_;
  std::vector<shm::PhaseWord*> phases_;
  uint64_t phase_ = 0;  // this rank's phase word
  uint64_t uses_ = 0;   // slot halves used so far
  // SlicedPieces' scratch, kept between calls: where each piece starts (in
  // elements, and one past the last), and this rank's slice as it went in
  // (ranks 2 and up reduce into their own slot).
  std::vector<int64_t> piece_starts_;
  std::vector<uint8_t> own_input_;
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_SHM_SHM_ALLREDUCE_H_
