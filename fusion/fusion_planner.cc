#include "fusion/fusion_planner.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace kolo::fusion {
namespace {

bool SameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// Where a member of `bytes` would start after a group ending at `end`, if it
// fits within `threshold`; written so that nothing overflows.
bool Fits(size_t end, size_t bytes, size_t threshold, size_t& offset) {
  if (end > threshold) return false;  // an oversized first member: full
  const size_t rem = end % kAlignment;
  const size_t pad = rem == 0 ? 0 : kAlignment - rem;
  if (pad > threshold - end) return false;
  const size_t start = end + pad;
  if (bytes > threshold - start) return false;
  offset = start;
  return true;
}

}  // namespace

bool Compatible(const Candidate& a, const Candidate& b) {
  if (a.op != b.op || a.domain != b.domain) return false;
  switch (a.op) {
    case OpKind::kAllreduce:
      return a.dtype == b.dtype && a.reduce_op == b.reduce_op &&
             SameBits(a.prescale, b.prescale) &&
             SameBits(a.postscale, b.postscale) && a.device == b.device;
    case OpKind::kAllgather:
      return a.dtype == b.dtype && a.device == b.device;
    case OpKind::kOther:
      return false;
  }
  return false;
}

std::vector<Group> PlanFusion(absl::Span<const Candidate> candidates,
                              size_t threshold_bytes) {
  std::vector<Group> groups;
  // The candidates not grouped yet, ascending; each pass takes the first as
  // the start of a group and keeps those it skips for the next pass.
  std::vector<size_t> rest(candidates.size());
  for (size_t i = 0; i < rest.size(); ++i) rest[i] = i;
  std::vector<size_t> skipped;
  while (!rest.empty()) {
    const size_t first = rest.front();
    const Candidate& head = candidates[first];
    Group group;
    group.members.push_back(first);
    group.offsets.push_back(0);
    size_t end = head.bytes;
    skipped.clear();
    for (size_t k = 1; k < rest.size(); ++k) {
      const size_t i = rest[k];
      size_t offset = 0;
      if (threshold_bytes > 0 && Compatible(head, candidates[i]) &&
          Fits(end, candidates[i].bytes, threshold_bytes, offset)) {
        group.members.push_back(i);
        group.offsets.push_back(offset);
        end = offset + candidates[i].bytes;
      } else {
        skipped.push_back(i);
      }
    }
    group.buffer_bytes = end;
    groups.push_back(std::move(group));
    std::swap(rest, skipped);
  }
  return groups;
}

}  // namespace kolo::fusion
