// Broadcast from any root. Ranks are renumbered relative to the root
// (v = rank - root mod size), so both algorithms below are written for root 0.
//
// Small buffers (kSmall): a binomial tree. A rank v receives the whole buffer
// from v minus its lowest set bit, then sends it to v + 2^j for every 2^j
// below that bit: ceil(log2 size) rounds of latency.
//
// Large buffers (kRing): a pipelined chain root -> v1 -> v2 -> ... The buffer
// is cut into segments; a rank forwards segment k to the next rank as soon
// as it has received it, while receives of the next segments are already
// posted (kChainRecvDepth ahead). Every link carries the buffer once, and
// the time is about size/bandwidth plus (size-1) segment hops, instead of
// the tree's log2(size) whole-buffer hops.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/collectives.h"

namespace kolo {
namespace {

constexpr int kChainRecvDepth = 8;

absl::Status Tree(Transport& t, char* data, size_t bytes, int root) {
  const int n = t.size();
  const int v = PositiveMod(t.rank() - root, n);
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      auto id = t.StartRecv(PositiveMod(t.rank() - mask, n), data, bytes);
      if (!id.ok()) return id.status();
      if (absl::Status s = t.Wait(*id); !s.ok()) return s;
      break;
    }
    mask <<= 1;
  }
  std::vector<OpId> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) {
      auto id = t.StartSend(PositiveMod(t.rank() + mask, n), data, bytes);
      if (!id.ok()) return id.status();
      sends.push_back(*id);
    }
  }
  return t.WaitAll(sends);
}

absl::Status Chain(Transport& t, char* data, int64_t count, size_t elem,
                   int root, int64_t segment) {
  const int n = t.size();
  const int v = PositiveMod(t.rank() - root, n);
  const int prev = PositiveMod(t.rank() - 1, n);
  const int next = PositiveMod(t.rank() + 1, n);
  const bool forwards = v + 1 < n;
  const int64_t segments = NumSegments(count, segment);
  auto at = [&](int64_t k) { return Segment(count, segment, k); };
  std::vector<OpId> sends;
  if (v == 0) {
    for (int64_t k = 0; k < segments; ++k) {
      const ElementRange seg = at(k);
      auto id = t.StartSend(next, data + seg.offset * elem, seg.count * elem);
      if (!id.ok()) return id.status();
      sends.push_back(*id);
    }
    return t.WaitAll(sends);
  }
  std::vector<OpId> recvs(static_cast<size_t>(segments));
  auto post = [&](int64_t k) -> absl::Status {
    const ElementRange seg = at(k);
    auto id = t.StartRecv(prev, data + seg.offset * elem, seg.count * elem);
    if (!id.ok()) return id.status();
    recvs[k] = *id;
    return absl::OkStatus();
  };
  const int64_t ahead = std::min<int64_t>(kChainRecvDepth, segments);
  for (int64_t k = 0; k < ahead; ++k) {
    if (absl::Status s = post(k); !s.ok()) return s;
  }
  for (int64_t k = 0; k < segments; ++k) {
    if (absl::Status s = t.Wait(recvs[k]); !s.ok()) return s;
    if (forwards) {
      const ElementRange seg = at(k);
      auto id = t.StartSend(next, data + seg.offset * elem, seg.count * elem);
      if (!id.ok()) return id.status();
      sends.push_back(*id);
    }
    if (k + ahead < segments) {
      if (absl::Status s = post(k + ahead); !s.ok()) return s;
    }
  }
  return t.WaitAll(sends);
}

}  // namespace

absl::Status Broadcast(Transport& transport, DataType type, void* data,
                       int64_t count, int root,
                       const AlgorithmOptions& options) {
  constexpr absl::string_view kName = "broadcast";
  const int n = transport.size();
  if (absl::Status s = internal::CheckType(kName, type); !s.ok()) return s;
  if (absl::Status s = internal::CheckCount(kName, "count", count); !s.ok()) {
    return s;
  }
  if (absl::Status s = internal::CheckBuffer(kName, "data", data, count);
      !s.ok()) {
    return s;
  }
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError(absl::StrCat(kName, ": root ", root,
                                                   " is out of range for ", n,
                                                   " ranks (0..", n - 1, ")"));
  }
  if (count == 0 || n == 1) return absl::OkStatus();
  const size_t elem = DataTypeSize(type);
  const size_t bytes = static_cast<size_t>(count) * elem;
  char* bytes_at = static_cast<char*>(data);
  absl::Status status;
  if (ChooseAlgorithm(bytes, options) == Algorithm::kSmall) {
    status = Tree(transport, bytes_at, bytes, root);
    if (!status.ok())
      return internal::Fail(transport, "broadcast (tree)", status);
  } else {
    status = Chain(transport, bytes_at, count, elem, root,
                   PipelineSegmentElements(options.segment_bytes, count, elem));
    if (!status.ok())
      return internal::Fail(transport, "broadcast (chain)", status);
  }
  return absl::OkStatus();
}

}  // namespace kolo
