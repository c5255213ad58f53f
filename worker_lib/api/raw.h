// kolo::raw: the blocking collectives of include/kolo/kolo.h run directly on
// the current epoch's data plane (allreduce/data_plane.h), without
// negotiation, in call order. Internal: kolo-bench's raw mode measures the
// transport with them, and tests use them; users get the negotiated calls.
//
// Thread-safety: any thread, but every rank must call the same sequence, and
// no negotiated op may be in flight meanwhile (their bytes would share the
// connections). Each call fails with kFailedPrecondition before kolo::init().
#ifndef KOLO_WORKER_LIB_API_RAW_H_
#define KOLO_WORKER_LIB_API_RAW_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kolo/types.h"

namespace kolo::raw {

// allreduce() without negotiation.
absl::Status allreduce(const void* input, void* output, int64_t count,
                       DataType type, ReduceOp op = ReduceOp::kSum,
                       double prescale = 1.0, double postscale = 1.0);
// allgather() without negotiation.
absl::Status allgather(const void* input, int64_t count, DataType type,
                       absl::Span<const int64_t> counts, void* output);
// broadcast() without negotiation.
absl::Status broadcast(void* buffer, int64_t count, DataType type, int root);
// alltoall() without negotiation.
absl::Status alltoall(const void* input, DataType type,
                      absl::Span<const int64_t> send_splits, void* output,
                      absl::Span<const int64_t> recv_splits);
// reducescatter() without negotiation.
absl::Status reducescatter(const void* input, int64_t count, DataType type,
                           absl::Span<const int64_t> counts, void* output,
                           ReduceOp op = ReduceOp::kSum);
// barrier() on the data plane.
absl::Status barrier();

}  // namespace kolo::raw

#endif  // KOLO_WORKER_LIB_API_RAW_H_
