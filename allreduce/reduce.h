// Reduce to one rank: the first phase of the hierarchical allreduce and
// reducescatter (allreduce/hierarchical.h), where the ranks of one host
// combine their buffers on the host's leader.
//
// Small buffers (kSmall): a binomial tree toward the root. Ranks are
// renumbered relative to the root (v = rank - root mod size); in round j
// (mask 2^j) a rank with bit j set sends its partial result to v - 2^j and
// is done, a rank without it receives from v + 2^j (if there is one) and
// combines: partial = partial op received. ceil(log2 size) rounds of one
// whole-buffer message.
//
// Large buffers (kRing): the reduce-scatter half of the ring allreduce
// (allreduce/ring.h), after which rank r holds chunk r of the reduction,
// then every rank sends its chunk to the root: each rank sends about
// 2(size-1)/size of the buffer, the root receives (size-1)/size of it.
//
// Fixed order: in the tree the lower relative rank's partial is always the
// left operand, in the ring each chunk is combined along the ring in one
// order; both depend only on (size, root, count), so the same inputs give
// the same bits on every run that cuts the buffer alike.
//
// Thread-safety: runs on the transport's thread.
#ifndef KOLO_ALLREDUCE_REDUCE_H_
#define KOLO_ALLREDUCE_REDUCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "allreduce/collectives.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo::internal {

// Leaves op over ranks of `input` (count elements) in the root's `output`.
// `output` holds count elements on every rank: on the others it is scratch
// and its content afterwards is unspecified. input may equal output;
// otherwise they must not overlap. Average reduces like sum (the caller
// divides). `algorithm` is kSmall or kRing (resolve kAuto first). On a
// transport error, Fail()s the transport with the error prefixed by
// `collective` and returns it.
absl::Status ReduceToRoot(Transport& transport, DataType type, ReduceOp op,
                          const void* input, void* output, int64_t count,
                          int root, Algorithm algorithm, size_t segment_bytes,
                          absl::string_view collective);

}  // namespace kolo::internal

#endif  // KOLO_ALLREDUCE_REDUCE_H_
