// Chunk and segment arithmetic of the collective algorithms: how a buffer of
// `count` elements is cut into one chunk per rank, and a chunk into segments
// (the unit of pipelining: one message each).
//
// Every rank computes the same cuts from the same arguments, which is what
// keeps the message streams of two ranks matched (the transport matches
// messages in order, see allreduce/transport.h).
//
// Thread-safety: pure functions.
#ifndef KOLO_ALLREDUCE_CHUNKING_H_
#define KOLO_ALLREDUCE_CHUNKING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace kolo {

// A contiguous run of elements: [offset, offset + count).
struct ElementRange {
  int64_t offset = 0;
  int64_t count = 0;

  bool operator==(const ElementRange&) const = default;
};

// Cuts `count` elements into `parts` contiguous chunks, as evenly as
// possible: the first count % parts chunks hold one element more. Chunks are
// empty when count < parts.
// REQUIRES: count >= 0, parts >= 1.
std::vector<ElementRange> PartitionEvenly(int64_t count, int parts);

// Lays chunks of the given sizes end to end (offsets are the prefix sums).
// REQUIRES: every size >= 0.
std::vector<ElementRange> PartitionBySizes(absl::Span<const int64_t> sizes);

// The segment size, in elements, for a segment of at most `segment_bytes`
// bytes: at least one element.
int64_t SegmentElements(size_t segment_bytes, size_t element_size);

// The segment size, in elements, of a pipelined pass whose largest chunk
// has `chunk_elems` elements: `segment_bytes` when it is > 0 (forced), else
// the automatic choice — about a quarter of the chunk, so that sending and
// reducing overlap, between kMinAutoSegmentBytes (below, per-message costs
// dominate) and kMaxAutoSegmentBytes (above, the pipeline fills too slowly).
// Every rank computes the same value from the same arguments.
inline constexpr int64_t kMinAutoSegmentBytes = 64 * 1024;
inline constexpr int64_t kMaxAutoSegmentBytes = 1024 * 1024;
int64_t PipelineSegmentElements(size_t segment_bytes, int64_t chunk_elems,
                                size_t element_size);

// How many segments of at most `segment` elements cover `count` elements:
// 0 for an empty chunk. REQUIRES: count >= 0, segment >= 1.
int64_t NumSegments(int64_t count, int64_t segment);

// Segment `k` of a chunk of `count` elements, relative to the chunk's start.
// REQUIRES: 0 <= k < NumSegments(count, segment).
ElementRange Segment(int64_t count, int64_t segment, int64_t k);

// a mod n in [0, n). REQUIRES: n >= 1.
int PositiveMod(int64_t a, int n);

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_CHUNKING_H_
