// Fusion planner: which ready responses share one fusion buffer, and where
// each sits in it (docs/design.md "Negotiation and fusion"). A pure function
// over a list of candidates — one tensor each, in plan order — that returns
// groups; it knows nothing of names, plans, buffers or gRPC, so the
// coordinator (which decides the groups) and the worker (which packs and
// unpacks them) can share it, and tests drive it directly.
//
// Rules:
// - Only allreduce and allgather fuse. Two candidates are compatible when
//   they have the same op and, for allreduce, the same dtype, reduce op,
//   prescale, postscale and device; for allgather, the same dtype and device
//   (reduce op and scale factors are ignored); always the same domain (the
//   caller's partition: a process set, a group). Scale factors compare
//   bitwise, so that a fused group gives bitwise the result of its members
//   run alone (0.0 and -0.0 differ; a NaN matches only the same NaN). kOther
//   is compatible with nothing, itself included.
// - Packing is greedy with look-ahead, as Horovod's FuseResponses: walk the
//   candidates in order; the first not yet grouped starts a group, then every
//   later ungrouped candidate that is compatible with it and still fits joins
//   it. A candidate that does not match or does not fit is skipped, not a
//   stop: mixed-precision models interleave dtypes, and stopping at the first
//   mismatch would break fusion up. (Horovod bounds the look-ahead by the
//   bytes skipped, because a skipped tensor waits; here every candidate is
//   ready already and a skipped one runs in a later group of the same plan,
//   so the look-ahead is unbounded.)
// - Layout: members sit in the buffer in member order, each at the end of the
//   previous one rounded up to kAlignment (64 bytes: a cache line, and enough
//   for any vector width the reduction kernels use, so each member's data
//   starts aligned). A member fits when its aligned offset + bytes <=
//   threshold: the padding counts against the threshold.
// - A candidate bigger than the threshold is a group of its own (offset 0);
//   threshold 0 turns fusion off (every candidate a group of its own).
//   Zero-byte candidates follow the same rule: they fit wherever their
//   aligned offset does not pass the threshold.
//
// Cost: O(candidates × groups) — each group scans the candidates not yet
// grouped once.
//
// Thread-safety: pure functions and value types; any thread may call them.
// Invariants of PlanFusion's result: every candidate index is in exactly one
// group; members of a group ascend and are compatible with its first member;
// groups are ordered by their first member; offsets[0] == 0 and each offset
// is the previous member's end rounded up to kAlignment; buffer_bytes is the
// last member's end and is <= threshold unless the group has one member.
#ifndef KOLO_FUSION_FUSION_PLANNER_H_
#define KOLO_FUSION_FUSION_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kolo/types.h"

namespace kolo::fusion {

// Alignment of every member's offset in a fusion buffer, in bytes.
inline constexpr size_t kAlignment = 64;

// The collectives the planner tells apart; kOther (broadcast, alltoall,
// reducescatter, barrier, error responses, ...) never fuses.
enum class OpKind : uint8_t { kAllreduce, kAllgather, kOther };

// One ready response (one tensor), in plan order.
struct Candidate {
  OpKind op = OpKind::kOther;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;  // allreduce only
  double prescale = 1.0;                // allreduce only
  double postscale = 1.0;               // allreduce only
  int device = -1;                      // -1 = host memory
  // Only candidates of the same domain fuse. The coordinator uses the
  // process set, and a grouped op's group under KOLO_DISABLE_GROUP_FUSION.
  uint64_t domain = 0;
  // The bytes this member takes in the fusion buffer. The planner does not
  // interpret it: the caller decides what it is per op (for an allgather,
  // the whole gathered output, say).
  size_t bytes = 0;
};

// Candidates that run as one collective over one fusion buffer.
struct Group {
  std::vector<size_t> members;  // indices into the candidate list, ascending
  // Byte offset of each member in the fusion buffer (same length as
  // members), each a multiple of kAlignment.
  std::vector<size_t> offsets;
  // The end of the last member: what the buffer must hold.
  size_t buffer_bytes = 0;

  bool operator==(const Group&) const = default;
};

// Whether `a` and `b` may share a group (the compatibility rule above).
bool Compatible(const Candidate& a, const Candidate& b);

// `bytes` rounded up to a multiple of kAlignment.
// REQUIRES: bytes <= SIZE_MAX - (kAlignment - 1).
constexpr size_t AlignUp(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// Groups `candidates` into fusion buffers of at most `threshold_bytes` (the
// fusion threshold; 0 = fusion off), by the rules above.
std::vector<Group> PlanFusion(absl::Span<const Candidate> candidates,
                              size_t threshold_bytes);

}  // namespace kolo::fusion

#endif  // KOLO_FUSION_FUSION_PLANNER_H_
