// Ring allgather with per-rank counts: the allgather half of the ring
// (allreduce/ring.h) on chunks of the given sizes, laid end to end in the
// output. Each rank first places its own contribution, then size-1 steps
// pass every chunk one hop further, segmented and pipelined; a rank sends
// (size-1)/size of the output, the minimum.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/collectives.h"
#include "allreduce/ring.h"

namespace kolo {

absl::Status Allgather(Transport& transport, DataType type, const void* input,
                       int64_t input_count, absl::Span<const int64_t> counts,
                       void* output, const AlgorithmOptions& options) {
  constexpr absl::string_view kName = "allgather";
  const int n = transport.size();
  const int rank = transport.rank();
  if (absl::Status s = internal::CheckType(kName, type); !s.ok()) return s;
  if (absl::Status s = internal::CheckCount(kName, "input count", input_count);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = internal::CheckCounts(kName, "counts", counts, n);
      !s.ok()) {
    return s;
  }
  if (counts[rank] != input_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": rank ", rank, " passes ", input_count,
                     " elements but counts[", rank, "] is ", counts[rank],
                     "; each rank's input must have the count listed for it"));
  }
  if (absl::Status s =
          internal::CheckBuffer(kName, "input", input, input_count);
      !s.ok()) {
    return s;
  }
  const int64_t total = internal::Total(counts);
  if (absl::Status s = internal::CheckBuffer(kName, "output", output, total);
      !s.ok()) {
    return s;
  }
  if (total == 0) return absl::OkStatus();

  const size_t elem = DataTypeSize(type);
  char* out = static_cast<char*>(output);
  const std::vector<ElementRange> chunks = PartitionBySizes(counts);
  char* mine = out + chunks[rank].offset * elem;
  if (input_count > 0 && mine != input) {
    std::memcpy(mine, input, static_cast<size_t>(input_count) * elem);
  }
  internal::RingPass pass;
  pass.type = type;
  for (const ElementRange& chunk : chunks) {
    char* at = out + chunk.offset * elem;
    pass.blocks.push_back({at, at, chunk.count});
  }
  pass.first = rank;
  pass.copy_steps = n - 1;
  pass.segment_elems =
      internal::RingSegmentElements(pass, options.segment_bytes);
  return internal::RunRing(transport, pass, "allgather (ring)");
}

}  // namespace kolo
