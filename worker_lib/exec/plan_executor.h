// Execute: runs one Response of a plan for one of this rank's ops on the
// data plane — the collective with the sizes the coordinator negotiated
// (allgather's per-rank rows, alltoall's split matrix), output memory from
// the op's allocator where its size was unknown before — or fails the op with
// the response's error.
//
// An allocator that fails (or returns null for a non-empty output) fails the
// op on this rank only: the collective still runs, into scratch memory, so
// that the other ranks are not left waiting.
//
// Thread-safety: called by OpRuntime's background thread only; `op` is not
// touched by anyone else meanwhile (it is marked running).
#ifndef KOLO_WORKER_LIB_EXEC_PLAN_EXECUTOR_H_
#define KOLO_WORKER_LIB_EXEC_PLAN_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "allreduce/data_plane.h"
#include "proto/kolo.pb.h"
#include "worker_lib/op_request.h"

namespace kolo::worker {

// The output memory `op`'s allocator gives for `shape` (`bytes`; null for
// an empty output), or nullopt with `problem` naming the op and the
// allocator's failure (or its null for a non-empty output); the collective
// then runs into scratch memory of `scratch_kind` ("host", "device") so that
// the other ranks go on.
std::optional<void*> FromAllocator(PendingOp& op,
                                   const std::vector<int64_t>& shape,
                                   int64_t bytes,
                                   absl::string_view scratch_kind,
                                   absl::Status& problem);

// Output memory of `bytes` for `op` (of shape `shape`) from its allocator;
// when the allocator fails or gives null for a non-empty output: `scratch`,
// and `problem` says so (the op then fails on this rank only); null (and
// `problem` kResourceExhausted) when even the scratch memory cannot be had.
void* AllocateOutput(PendingOp& op, const std::vector<int64_t>& shape,
                     int64_t bytes, std::unique_ptr<char[]>& scratch,
                     absl::Status& problem);

// `data`, `rank` and `size`: the op's process set's data plane, and this
// rank's place in the set. Join and process set ops only give their result
// (OpResult.splits = {the last rank to join / the set's id}).
// REQUIRES: response.names() contains op.name; 0 <= rank < size.
absl::Status Execute(const proto::Response& response, PendingOp& op,
                     DataPlane& data, int rank, int size, OpResult* result);

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_EXEC_PLAN_EXECUTOR_H_
