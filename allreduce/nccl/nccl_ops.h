// The collectives on an NCCL communicator, enqueued on kolo's stream (they
// return once enqueued; the caller awaits the stream through the
// CompletionWatcher). Pointers are device memory of the communicator's
// device. Counts are elements of `dtype`.
//
// What NCCL cannot compute exactly as kolo's host kernels do is refused by
// NcclCanReduce, and the caller stages it through host memory instead:
// bool and int16 reductions, integer average (kolo truncates toward zero),
// and pre/post scale factors other than 1. Average of floating-point types
// uses ncclAvg.
//
// allgather with per-rank sizes: one ncclBroadcast per rank (root r's block
// into its place), in one NCCL group; alltoall: ncclSend/ncclRecv pairs in
// one group; reducescatter: ncclReduceScatter when every rank gets the same
// count, else one ncclReduce per rank (root r gets its block) in one group;
// barrier: an allreduce of one int32.
//
// Thread-safety: as Communicator::Call.
#ifndef KOLO_ALLREDUCE_NCCL_NCCL_OPS_H_
#define KOLO_ALLREDUCE_NCCL_NCCL_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "allreduce/collectives.h"
#include "allreduce/nccl/communicator.h"
#include "kolo/types.h"

namespace kolo::nccl {

// "" when NCCL computes `dtype` × `reduce` as kolo does; else why not.
std::string NcclCanReduce(DataType dtype, const ReduceOptions& reduce);

absl::Status Allreduce(Communicator& comm, void* stream, DataType dtype,
                       const ReduceOptions& reduce, const void* in, void* out,
                       int64_t count);
absl::Status Broadcast(Communicator& comm, void* stream, void* data,
                       int64_t bytes, int root);
// counts: bytes from each rank (rank order); `out` holds their sum.
absl::Status Allgatherv(Communicator& comm, void* stream, const void* in,
                        absl::Span<const int64_t> bytes, void* out);
absl::Status Alltoallv(Communicator& comm, void* stream, const void* in,
                       absl::Span<const int64_t> send_bytes, void* out,
                       absl::Span<const int64_t> recv_bytes);
// counts: elements each rank gets.
absl::Status Reducescatter(Communicator& comm, void* stream, DataType dtype,
                           const ReduceOptions& reduce, const void* in,
                           absl::Span<const int64_t> counts, void* out);
// `scratch`: 4 bytes of device memory.
absl::Status Barrier(Communicator& comm, void* stream, void* scratch);

}  // namespace kolo::nccl

#endif  // KOLO_ALLREDUCE_NCCL_NCCL_OPS_H_
