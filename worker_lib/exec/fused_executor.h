// Fused execution: one allreduce or allgather Response that covers several
// tensors (proto Response, "fused"), run as one collective over this
// worker's persistent fusion buffer.
//
// Allreduce: every member is copied into the buffer at its offset (each at
// the previous member's end rounded up to fusion::kAlignment, in name order,
// as the coordinator planned it) with its prescale applied in the same
// pass; the padding is zeroed; one allreduce (sum for an average) runs in
// place over the buffer; each member is copied out with the average's
// division and its postscale applied in the same pass (FinishCopy:
// bitwise what the unfused op computes from the same sums).
// Allgather: this rank's members go back to back into the buffer; one
// allgather with per-rank counts (each rank's members' rows) gathers every
// rank's block; each member's output (from its allocator) is assembled from
// its segment of every block.
//
// A member missing on this rank (a protocol bug) fails the whole group on
// this rank without running it; the other ranks then fail on the data
// plane's inactivity deadline.
//
// Thread-safety: OpRuntime's background thread only; the buffer and the ops
// are not touched by anyone else meanwhile (the ops are marked running).
#ifndef KOLO_WORKER_LIB_EXEC_FUSED_EXECUTOR_H_
#define KOLO_WORKER_LIB_EXEC_FUSED_EXECUTOR_H_

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "allreduce/data_plane.h"
#include "proto/kolo.pb.h"
#include "worker_lib/op_request.h"

namespace kolo::worker {

class Timeline;

// Memory for fused ops, kept from op to op (it grows to the largest group
// seen, at most the fusion threshold plus alignment; it never shrinks).
class FusionBuffer {
 public:
  // At least `bytes` bytes, aligned to 64; the contents are not kept.
  char* Reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t capacity_ = 0;
};

// Whether `response` is a fused one (several names, allreduce or allgather,
// no error).
bool IsFused(const proto::Response& response);

// Runs fused `response`. `ops[i]` is this rank's op for response.names(i)
// (nullptr: not pending here). Returns one status per entry of `ops`
// (nullptr entries included). `timeline` may be null.
std::vector<absl::Status> ExecuteFused(const proto::Response& response,
                                       absl::Span<PendingOp* const> ops,
                                       DataPlane& data, int rank, int size,
                                       FusionBuffer& buffer,
                                       Timeline* timeline);

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_EXEC_FUSED_EXECUTOR_H_
