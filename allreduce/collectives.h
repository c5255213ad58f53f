// The collectives of kolo's data plane, on host buffers, written against the
// Transport interface only (allreduce/transport.h): allreduce (a pipelined
// ring, or recursive doubling for small buffers), allgather with per-rank
// counts, broadcast from any root, alltoall with per-peer splits,
// reducescatter with per-rank counts, and a barrier.
//
// Calling convention: every rank of the transport calls the same collective
// with consistent arguments (same dtype, count, op, root, counts, tuning),
// after the same Transport::BeginOperation(seq). This layer checks the
// arguments each rank can judge on its own (kInvalidArgument, before any byte
// moves, so every rank refuses alike); consistency across ranks is the job of
// the plan that drives it (a mismatch shows up as a transport error).
//
// Results: for the same inputs, every rank's output is bitwise identical
// (the ring computes each chunk on one rank and copies it; recursive doubling
// always reduces the lower rank's data as the left operand). Average is a
// sum followed by DivideBy(size); prescale multiplies the inputs before the
// reduction, postscale the result after it.
//
// Errors: a transport error ends the collective and leaves the transport
// aborted with that error (its message names the peer), since the message
// streams are then out of step and buffers of unfinished ops are released.
//
// Thread-safety: calls on one transport come from one thread, like the
// transport's own calls. Buffers are owned by the caller and used only for
// the duration of the call.
#ifndef KOLO_ALLREDUCE_COLLECTIVES_H_
#define KOLO_ALLREDUCE_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo {

// Which algorithm a collective uses.
//   allreduce: kRing = reduce-scatter + allgather ring; kSmall = direct
//              exchange (2 ranks) or recursive doubling (more).
//   broadcast: kRing = pipelined chain from the root; kSmall = binomial tree.
// kAuto picks kSmall when the buffer has at most `small_bytes` bytes.
enum class Algorithm : uint8_t { kAuto, kRing, kSmall };
absl::string_view AlgorithmName(Algorithm a);

// Default for KOLO_SMALL_ALLREDUCE_BYTES (the parsing lives in the config):
// the size up to which the latency-optimal algorithm beats the ring, as
// measured over TCP loopback (docs/benchmarks.md): 64 KiB at 2 ranks (a
// direct exchange against a 2-step ring), 128 KiB at 3 and 256 KiB from 4
// (recursive doubling's log2(n) rounds against the ring's 2(n-1) steps).
inline constexpr size_t kDefaultSmallBytes = 64 * 1024;
size_t DefaultSmallBytes(int world_size);
// Segment size 0: the pipelined algorithms choose it from the chunk size
// (PipelineSegmentElements in chunking.h).
inline constexpr size_t kAutoSegmentBytes = 0;

struct AlgorithmOptions {
  Algorithm algorithm = Algorithm::kAuto;
  // kAuto chooses kSmall for buffers of at most this many bytes.
  size_t small_bytes = kDefaultSmallBytes;
  // Pipelined algorithms cut chunks into messages of at most this many
  // bytes (at least one element); kAutoSegmentBytes lets them choose.
  size_t segment_bytes = kAutoSegmentBytes;
};

// The algorithm kAuto resolves to for a buffer of `bytes` bytes (kRing or
// kSmall; a forced choice is returned as is).
Algorithm ChooseAlgorithm(size_t bytes, const AlgorithmOptions& options);

struct ReduceOptions {
  ReduceOp op = ReduceOp::kSum;
  // Inputs are multiplied by `prescale` before the reduction, the result by
  // `postscale` after it (and after the division of an average). Not
  // allowed for bool unless 1.
  double prescale = 1.0;
  double postscale = 1.0;
};

// One tensor of an allreduce of several laid end to end (a fused one):
// `count` elements read from `input`, the result written to `output` (the
// same memory, in place, or memory that does not overlap it).
struct AllreducePiece {
  const void* input = nullptr;
  void* output = nullptr;
  int64_t count = 0;
};

// output[i] = op over ranks of input[i], i < count, on every rank. In place
// when input == output; otherwise the buffers must not overlap and input is
// left unchanged. REQUIRES: both buffers hold `count` elements of `type`.
absl::Status Allreduce(Transport& transport, DataType type, const void* input,
                       void* output, int64_t count,
                       const ReduceOptions& reduce = {},
                       const AlgorithmOptions& options = {});

// Every rank r contributes counts[r] elements (input_count must equal
// counts[rank]); output receives all contributions in rank order (sum of
// counts elements). Counts may differ and be 0. `input` may be exactly
// output + (sum of counts before this rank) elements (in place); otherwise
// input and output must not overlap.
absl::Status Allgather(Transport& transport, DataType type, const void* input,
                       int64_t input_count, absl::Span<const int64_t> counts,
                       void* output, const AlgorithmOptions& options = {});

// Copies root's `count` elements of `data` into `data` on every rank.
absl::Status Broadcast(Transport& transport, DataType type, void* data,
                       int64_t count, int root,
                       const AlgorithmOptions& options = {});

// input holds input_count elements cut by send_splits (one entry per rank,
// summing to input_count): block p goes to rank p. output receives, in rank
// order, recv_splits[p] elements from each rank p (sum of recv_splits
// elements). recv_splits[p] must equal rank p's send_splits[rank]. input and
// output must not overlap.
absl::Status Alltoall(Transport& transport, DataType type, const void* input,
                      int64_t input_count,
                      absl::Span<const int64_t> send_splits, void* output,
                      absl::Span<const int64_t> recv_splits);

// input holds input_count = sum of counts elements on every rank; rank r's
// output receives counts[r] elements: the reduction over ranks of block r of
// the input (blocks laid end to end in rank order). Counts may differ and be
// 0. input and output must not overlap.
absl::Status Reducescatter(Transport& transport, DataType type,
                           const void* input, int64_t input_count,
                           absl::Span<const int64_t> counts, void* output,
                           const ReduceOptions& reduce = {},
                           const AlgorithmOptions& options = {});

// Returns once every rank has entered the barrier (dissemination barrier:
// ceil(log2 size) rounds of one-byte messages).
absl::Status Barrier(Transport& transport);

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_COLLECTIVES_H_
