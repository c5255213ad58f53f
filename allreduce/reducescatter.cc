// Reducescatter with per-rank counts: the reduce-scatter half of the ring
// (allreduce/ring.h) on blocks of the given sizes. Block r's running sum
// travels around the ring and is complete when it reaches rank r, which
// reduces it straight into its output. Partial sums of the other blocks go
// to a work buffer (they are sent on and never read by the caller); a rank
// sends (size-1)/size of the input, the minimum.
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/collectives.h"
#include "allreduce/kernels.h"
#include "allreduce/ring.h"

namespace kolo {

absl::Status Reducescatter(Transport& transport, DataType type,
                           const void* input, int64_t input_count,
                           absl::Span<const int64_t> counts, void* output,
                           const ReduceOptions& reduce,
                           const AlgorithmOptions& options) {
  constexpr absl::string_view kName = "reducescatter";
  const int n = transport.size();
  const int rank = transport.rank();
  if (absl::Status s = internal::CheckReducescatter(
          kName, type, input, input_count, counts, output, reduce, rank, n);
      !s.ok()) {
    return s;
  }
  const int64_t total = internal::Total(counts);
  if (total == 0) return absl::OkStatus();

  const size_t elem = DataTypeSize(type);
  const std::vector<ElementRange> chunks = PartitionBySizes(counts);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const size_t mine_bytes = static_cast<size_t>(counts[rank]) * elem;

  // Prescaling needs a scaled copy of the input, which then also serves as
  // the work buffer.
  std::unique_ptr<char[]> scaled;
  std::unique_ptr<char[]> work;
  if (reduce.prescale != 1.0) {
    scaled = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(total) *
                                                    elem);
    std::memcpy(scaled.get(), in, static_cast<size_t>(total) * elem);
    if (absl::Status s = Scale(type, scaled.get(), total, reduce.prescale);
        !s.ok()) {
      return s;
    }
    in = scaled.get();
  } else if (n > 1) {
    work = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(total) *
                                                  elem);
  }
  char* work_base = scaled ? scaled.get() : work.get();

  if (n == 1) {
    if (mine_bytes > 0) std::memcpy(out, in, mine_bytes);
  } else {
    internal::RingPass pass;
    pass.type = type;
    pass.op = reduce.op;
    for (int c = 0; c < n; ++c) {
      const size_t at = static_cast<size_t>(chunks[c].offset) * elem;
      pass.blocks.push_back(
          {in + at, c == rank ? out : work_base + at, chunks[c].count});
    }
    // Chunk rank-1 leaves first, so that chunk rank completes here.
    pass.first = PositiveMod(rank - 1, n);
    pass.reduce_steps = n - 1;
    pass.segment_elems =
        internal::RingSegmentElements(pass, options.segment_bytes);
    if (absl::Status s =
            internal::RunRing(transport, pass, "reducescatter (ring)");
        !s.ok()) {
      return s;
    }
  }
  if (counts[rank] == 0) return absl::OkStatus();
  if (reduce.op == ReduceOp::kAverage && n > 1) {
    if (absl::Status s = DivideBy(type, out, counts[rank], n); !s.ok())
      return s;
  }
  if (reduce.postscale != 1.0) {
    if (absl::Status s = Scale(type, out, counts[rank], reduce.postscale);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace kolo
