// The pipelined ring pass that ring allreduce, ring allgather and
// reducescatter are made of.
//
// How the buffer is cut, and why. The buffer is cut into one chunk per rank
// (RingBlock, sizes may differ and be 0). Ranks form a ring: each sends to
// rank+1 and receives from rank-1. At step g a rank sends chunk first-g and
// receives chunk first-g-1 (mod size), so what it receives at step g is
// exactly what it sends at step g+1: every chunk travels around the ring,
// one hop per step. In the first `reduce_steps` steps a received chunk is
// combined with the local one (reduce-scatter: after size-1 such steps the
// rank holds the full reduction of chunk first-size+1 = first+1); in the
// next `copy_steps` steps it is stored as is (allgather).
//
// Chunks are cut further into segments of `segment_elems` elements, one
// message each, and the pass runs on (step, segment) units: as soon as
// segment k of step g is received (and reduced), segment k of step g+1 is
// sent on, while the receives of the next units are already posted (up to
// kRingRecvDepth ahead, into a small ring of staging slots for reduce
// steps). So sending, receiving and reducing overlap, both within a chunk
// and across steps, with staging memory of a few segments instead of a
// chunk. A segment of a few hundred KiB amortises per-message costs while
// keeping the pipeline's fill time short.
//
// Deadlock freedom, even on a transport that does not buffer: a rank sends
// unit u+1 only after receiving unit u, every rank posts receives in unit
// order ahead of need, and the only other wait (before receiving into a
// region that an earlier send still reads) is on a send of a unit size-1
// steps older, which the neighbour has already asked for.
//
// Thread-safety: runs on the transport's thread.
#ifndef KOLO_ALLREDUCE_RING_H_
#define KOLO_ALLREDUCE_RING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo::internal {

// Receives posted ahead of the one being waited for.
inline constexpr int kRingRecvDepth = 4;

// One chunk of the ring: `count` elements read from `src` (the rank's own
// contribution, for reduce steps and for the first send) and written to
// `dst` (results). src may equal dst.
struct RingBlock {
  const char* src = nullptr;
  char* dst = nullptr;
  int64_t count = 0;
};

struct RingPass {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;   // for reduce steps
  std::vector<RingBlock> blocks;  // one per rank, indexed by chunk
  int first = 0;                  // chunk sent at step 0, from its src
  int reduce_steps = 0;           // first steps: received data is reduced
  int copy_steps = 0;             // then: received data is stored
  int64_t segment_elems = 1;      // >= 1
};

// Runs `pass` on this rank. On a transport error, Fail()s the transport
// (before its staging slots are freed) with the error prefixed by
// `collective`, and returns it. REQUIRES: blocks.size() == transport.size().
// The segment size of `pass` (its blocks and type set): `segment_bytes` if
// > 0, else the automatic choice for its largest block
// (PipelineSegmentElements in chunking.h). Equal on every rank.
int64_t RingSegmentElements(const RingPass& pass, size_t segment_bytes);

absl::Status RunRing(Transport& transport, const RingPass& pass,
                     absl::string_view collective);

}  // namespace kolo::internal

#endif  // KOLO_ALLREDUCE_RING_H_
