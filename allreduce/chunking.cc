#include "allreduce/chunking.h"

#include <algorithm>

#include "common/check.h"

namespace kolo {

std::vector<ElementRange> PartitionEvenly(int64_t count, int parts) {
  KOLO_CHECK(count >= 0 && parts >= 1)
      << "count " << count << " parts " << parts;
  std::vector<ElementRange> chunks(static_cast<size_t>(parts));
  const int64_t base = count / parts;
  const int64_t extra = count % parts;
  int64_t offset = 0;
  for (int i = 0; i < parts; ++i) {
    chunks[i].offset = offset;
    chunks[i].count = base + (i < extra ? 1 : 0);
    offset += chunks[i].count;
  }
  return chunks;
}

std::vector<ElementRange> PartitionBySizes(absl::Span<const int64_t> sizes) {
  std::vector<ElementRange> chunks(sizes.size());
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    KOLO_CHECK(sizes[i] >= 0) << "size " << sizes[i] << " at " << i;
    chunks[i].offset = offset;
    chunks[i].count = sizes[i];
    offset += sizes[i];
  }
  return chunks;
}

int64_t SegmentElements(size_t segment_bytes, size_t element_size) {
  KOLO_CHECK(element_size > 0);
  return std::max<int64_t>(1,
                           static_cast<int64_t>(segment_bytes / element_size));
}

int64_t PipelineSegmentElements(size_t segment_bytes, int64_t chunk_elems,
                                size_t element_size) {
  KOLO_CHECK(element_size > 0 && chunk_elems >= 0);
  if (segment_bytes > 0) return SegmentElements(segment_bytes, element_size);
  const int64_t chunk_bytes = chunk_elems * static_cast<int64_t>(element_size);
  const int64_t bytes = std::clamp<int64_t>(
      chunk_bytes / 4, kMinAutoSegmentBytes, kMaxAutoSegmentBytes);
  return SegmentElements(static_cast<size_t>(bytes), element_size);
}

int64_t NumSegments(int64_t count, int64_t segment) {
  KOLO_CHECK(count >= 0 && segment >= 1)
      << "count " << count << " segment " << segment;
  return (count + segment - 1) / segment;
}

ElementRange Segment(int64_t count, int64_t segment, int64_t k) {
  KOLO_CHECK(k >= 0 && k < NumSegments(count, segment))
      << "segment " << k << " of a chunk of " << count << " elements";
  const int64_t offset = k * segment;
  return ElementRange{offset, std::min(segment, count - offset)};
}

int PositiveMod(int64_t a, int n) {
  KOLO_CHECK(n >= 1);
  const int64_t m = a % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

}  // namespace kolo
