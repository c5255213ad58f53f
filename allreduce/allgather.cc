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
  if (absl::Status s = internal::CheckAllgather(kName, type, input, input_count,
                                                counts, output, rank, n);
      !s.ok()) {
    return s;
  }
  const int64_t total = internal::Total(counts);
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
