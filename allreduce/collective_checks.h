// Argument checks and error plumbing shared by the collectives of
// allreduce/collectives.h. Each check judges what one rank can see on its
// own and returns kInvalidArgument with a message naming the collective, the
// argument and the rule, e.g. "broadcast: root 4 is out of range for 4 ranks
// (0..3)".
//
// Thread-safety: pure functions, except Fail, which aborts the transport
// (Transport::Abort is thread-safe).
#ifndef KOLO_ALLREDUCE_COLLECTIVE_CHECKS_H_
#define KOLO_ALLREDUCE_COLLECTIVE_CHECKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "allreduce/collectives.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo::internal {

// `type` is one of the DataType values.
absl::Status CheckType(absl::string_view collective, DataType type);

// `count` (named `name`) is >= 0.
absl::Status CheckCount(absl::string_view collective, absl::string_view name,
                        int64_t count);

// `buffer` (named `name`) is not null when it must hold count > 0 elements.
absl::Status CheckBuffer(absl::string_view collective, absl::string_view name,
                         const void* buffer, int64_t count);

// `counts` (named `name`) has one entry per rank, each >= 0.
absl::Status CheckCounts(absl::string_view collective, absl::string_view name,
                         absl::Span<const int64_t> counts, int world_size);

// The op and scale factors are defined for `type`: no average of bool, no
// scaling of bool, finite factors.
absl::Status CheckReduce(absl::string_view collective, DataType type,
                         const ReduceOptions& reduce);

// All of allreduce's own checks, in order: type, count, input and output
// buffers, op and scale factors.
absl::Status CheckAllreduce(absl::string_view collective, DataType type,
                            const void* input, const void* output,
                            int64_t count, const ReduceOptions& reduce);

// All of allgather's own checks on `rank` of `world_size`, in order: type,
// input count, counts, the input count listed for this rank, input and
// output buffers.
absl::Status CheckAllgather(absl::string_view collective, DataType type,
                            const void* input, int64_t input_count,
                            absl::Span<const int64_t> counts,
                            const void* output, int rank, int world_size);

// All of reducescatter's own checks on `rank` of `world_size`, in order:
// type, input count, counts (covering the input exactly), input and output
// buffers, op and scale factors.
absl::Status CheckReducescatter(absl::string_view collective, DataType type,
                                const void* input, int64_t input_count,
                                absl::Span<const int64_t> counts,
                                const void* output, const ReduceOptions& reduce,
                                int rank, int world_size);

// Sum of `counts`.
int64_t Total(absl::Span<const int64_t> counts);

// Prefixes `status` with the collective and this rank, aborts the transport
// with it (so no unfinished op touches a buffer after the call returns, and
// the out-of-step stream is not used again), and returns it.
absl::Status Fail(Transport& transport, absl::string_view collective,
                  const absl::Status& status);

}  // namespace kolo::internal

#endif  // KOLO_ALLREDUCE_COLLECTIVE_CHECKS_H_
