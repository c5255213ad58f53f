// Allreduce: argument checks, scaling and the choice between the ring
// (allreduce/ring.h, bandwidth-optimal: each rank sends 2(n-1)/n of the
// buffer) and recursive doubling (allreduce/small_allreduce.h,
// latency-optimal: log2(n) rounds).
#include <cstring>

#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/collectives.h"
#include "allreduce/kernels.h"
#include "allreduce/ring.h"
#include "allreduce/small_allreduce.h"

namespace kolo {

absl::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kSmall:
      return "small";
  }
  return "unknown";
}

size_t DefaultSmallBytes(int world_size) {
  if (world_size <= 2) return kDefaultSmallBytes;
  return world_size == 3 ? 2 * kDefaultSmallBytes : 4 * kDefaultSmallBytes;
}

Algorithm ChooseAlgorithm(size_t bytes, const AlgorithmOptions& options) {
  if (options.algorithm != Algorithm::kAuto) return options.algorithm;
  return bytes <= options.small_bytes ? Algorithm::kSmall : Algorithm::kRing;
}

absl::Status Allreduce(Transport& transport, DataType type, const void* input,
                       void* output, int64_t count, const ReduceOptions& reduce,
                       const AlgorithmOptions& options) {
  constexpr absl::string_view kName = "allreduce";
  if (absl::Status s =
          internal::CheckAllreduce(kName, type, input, output, count, reduce);
      !s.ok()) {
    return s;
  }
  if (count == 0) return absl::OkStatus();

  const int n = transport.size();
  const size_t elem = DataTypeSize(type);
  const size_t bytes = static_cast<size_t>(count) * elem;
  const Algorithm algorithm = ChooseAlgorithm(bytes, options);
  char* out = static_cast<char*>(output);
  const char* in = static_cast<const char*>(input);

  // The ring reads an out-of-place input directly (no copy); everything else
  // works in place on the output.
  const bool ring = n > 1 && algorithm == Algorithm::kRing;
  if (in != out && (!ring || reduce.prescale != 1.0)) {
    std::memcpy(out, in, bytes);
    in = out;
  }
  if (reduce.prescale != 1.0) {
    if (absl::Status s = Scale(type, out, count, reduce.prescale); !s.ok()) {
      return s;
    }
  }
  if (ring) {
    internal::RingPass pass;
    pass.type = type;
    pass.op = reduce.op;
    for (const ElementRange& chunk : PartitionEvenly(count, n)) {
      pass.blocks.push_back(
          {in + chunk.offset * elem, out + chunk.offset * elem, chunk.count});
    }
    // Chunk rank-1 leaves first, so that after the reduce-scatter this rank
    // holds chunk rank fully reduced, and the allgather sends it first.
    pass.first = PositiveMod(transport.rank() - 1, n);
    pass.reduce_steps = n - 1;
    pass.copy_steps = n - 1;
    pass.segment_elems =
        internal::RingSegmentElements(pass, options.segment_bytes);
    if (absl::Status s = internal::RunRing(transport, pass, "allreduce (ring)");
        !s.ok()) {
      return s;
    }
  } else if (n > 1) {
    if (absl::Status s =
            internal::SmallAllreduce(transport, type, reduce.op, out, count);
        !s.ok()) {
      return s;
    }
  }
  if (reduce.op == ReduceOp::kAverage && n > 1) {
    if (absl::Status s = DivideBy(type, out, count, n); !s.ok()) return s;
  }
  if (reduce.postscale != 1.0) {
    if (absl::Status s = Scale(type, out, count, reduce.postscale); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace kolo
