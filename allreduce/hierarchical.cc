#include "allreduce/hierarchical.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/kernels.h"
#include "allreduce/reduce.h"
#include "allreduce/ring.h"
#include "common/check.h"

namespace kolo {
namespace {

// Average reduces like sum until the final division.
ReduceOp Combining(ReduceOp op) {
  return op == ReduceOp::kAverage ? ReduceOp::kSum : op;
}

// Where each rank's block starts (in elements) when blocks of `counts` lie
// in the order `order` (a permutation of the ranks).
std::vector<int64_t> Offsets(absl::Span<const int64_t> counts,
                             const std::vector<int>& order) {
  std::vector<int64_t> at(counts.size());
  int64_t next = 0;
  for (int r : order) {
    at[r] = next;
    next += counts[r];
  }
  return at;
}

std::vector<int> Identity(int n) {
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  return order;
}

// Copies each rank's block from `from` (laid out at `from_at`) to `to`
// (laid out at `to_at`).
void Permute(const char* from, const std::vector<int64_t>& from_at, char* to,
             const std::vector<int64_t>& to_at,
             absl::Span<const int64_t> counts, size_t elem) {
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    std::memcpy(to + to_at[r] * elem, from + from_at[r] * elem,
                static_cast<size_t>(counts[r]) * elem);
  }
}

// The leader's scatter within the host: local rank i gets its block of
// `mine` (where the host's blocks follow one another in the host's rank
// order, `mates`); the leader's own goes to `out`.
absl::Status ScatterBlocks(Transport& local, const std::vector<int>& mates,
                           absl::Span<const int64_t> counts, const char* mine,
                           char* out, size_t elem) {
  std::vector<OpId> sends;
  int64_t next = 0;
  for (size_t i = 0; i < mates.size(); ++i) {
    const int p = mates[i];
    const char* block = mine + next * elem;
    next += counts[p];
    if (counts[p] == 0) continue;
    const size_t len = static_cast<size_t>(counts[p]) * elem;
    if (i == 0) {
      std::memcpy(out, block, len);
      continue;
    }
    auto id = local.StartSend(static_cast<int>(i), block, len);
    if (!id.ok()) {
      return internal::Fail(local, "scatter", id.status());
    }
    sends.push_back(*id);
  }
  if (absl::Status s = local.WaitAll(sends); !s.ok()) {
    return internal::Fail(local, "scatter", s);
  }
  return absl::OkStatus();
}

}  // namespace

HierarchicalCollectives::HierarchicalCollectives(Transport* transport,
                                                 Hierarchy hierarchy)
    : transport_(transport),
      hierarchy_(std::move(hierarchy)),
      rank_(transport->rank()),
      host_(hierarchy_.host_of.at(rank_)),
      local_(transport, hierarchy_.hosts[host_]),
      columns_in_host_order_(hierarchy_.ColumnsInHostOrder()) {
  KOLO_CHECK(hierarchy_.size() == transport->size())
      << "a hierarchy of " << hierarchy_.size() << " ranks over a transport of "
      << transport->size();
  if (leader()) {
    leaders_ =
        std::make_unique<SubsetTransport>(transport, hierarchy_.Leaders());
  }
  if (hierarchy_.Uniform()) {
    column_ = std::make_unique<SubsetTransport>(
        transport, hierarchy_.Column(hierarchy_.local_of[rank_]));
  }
}

absl::Status HierarchicalCollectives::InPhase(
    absl::string_view collective, absl::string_view phase,
    const absl::Status& status) const {
  absl::Status annotated(
      status.code(),
      absl::StrCat("hierarchical ", collective, " (", phase, ") on rank ",
                   rank_, " of ", transport_->size(), ": ", status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    annotated.SetPayload(url, payload);
  });
  return annotated;
}

absl::Status HierarchicalCollectives::Finish(DataType type,
                                             const ReduceOptions& reduce,
                                             void* data, int64_t count) const {
  if (count == 0) return absl::OkStatus();
  const int n = transport_->size();
  if (reduce.op == ReduceOp::kAverage && n > 1) {
    if (absl::Status s = DivideBy(type, data, count, n); !s.ok()) return s;
  }
  if (reduce.postscale != 1.0) {
    return Scale(type, data, count, reduce.postscale);
  }
  return absl::OkStatus();
}

absl::Status HierarchicalCollectives::Allreduce(
    DataType type, const void* input, void* output, int64_t count,
    const ReduceOptions& reduce, const HierarchicalOptions& options) {
  constexpr absl::string_view kName = "allreduce";
  if (absl::Status s =
          internal::CheckAllreduce(kName, type, input, output, count, reduce);
      !s.ok()) {
    return s;
  }
  if (count == 0) return absl::OkStatus();
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(type);
  const bool small = ChooseAlgorithm(bytes, options.cross) == Algorithm::kSmall;
  const bool sliced = !small && column_ != nullptr && local_.size() > 1;
  const bool columns = small && columns_in_host_order_;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  // The reductions read an out-of-place input directly; prescaling works on
  // a copy in the output.
  if (reduce.prescale != 1.0) {
    if (absl::Status s = ScaleCopy(type, in, out, count, reduce.prescale);
        !s.ok()) {
      return s;
    }
    in = out;
  }
  const ReduceOp op = Combining(reduce.op);
  if (sliced) return SlicedAllreduce(type, in, out, count, op, reduce, options);
  if (columns) {
    return ColumnsAllreduce(type, in, out, count, op, reduce, options);
  }
  return LeaderAllreduce(type, in, out, count, op, reduce, options);
}

absl::Status HierarchicalCollectives::SlicedAllreduce(
    DataType type, const char* in, char* out, int64_t count, ReduceOp op,
    const ReduceOptions& reduce, const HierarchicalOptions& options) {
  constexpr absl::string_view kName = "allreduce";
  const int l = local_.size();
  const int j = local_.rank();
  const size_t elem = DataTypeSize(type);
  const std::vector<ElementRange> chunks = PartitionEvenly(count, l);
  internal::RingPass pass;
  pass.type = type;
  pass.op = op;
  for (const ElementRange& c : chunks) {
    pass.blocks.push_back(
        {in + c.offset * elem, out + c.offset * elem, c.count});
  }
  // Reduce-scatter within the host: chunk j completes on local rank j.
  pass.first = PositiveMod(j - 1, l);
  pass.reduce_steps = l - 1;
  pass.segment_elems =
      internal::RingSegmentElements(pass, options.local.segment_bytes);
  if (absl::Status s = internal::RunRing(local_, pass, "reduce-scatter (ring)");
      !s.ok()) {
    return InPhase(kName, "within the host", s);
  }
  // Chunk j across hosts, among local rank j of every host. Every host cuts
  // the buffer alike, so the column's counts agree.
  char* mine = out + chunks[j].offset * elem;
  ReduceOptions cross;
  cross.op = op;
  if (absl::Status s = kolo::Allreduce(*column_, type, mine, mine,
                                       chunks[j].count, cross, options.cross);
      !s.ok()) {
    return InPhase(kName, "across hosts", s);
  }
  if (absl::Status s = Finish(type, reduce, mine, chunks[j].count); !s.ok()) {
    return s;
  }
  // Allgather within the host.
  pass.op = ReduceOp::kSum;
  for (internal::RingBlock& b : pass.blocks) b.src = b.dst;
  pass.first = j;
  pass.reduce_steps = 0;
  pass.copy_steps = l - 1;
  if (absl::Status s = internal::RunRing(local_, pass, "allgather (ring)");
      !s.ok()) {
    return InPhase(kName, "allgather within the host", s);
  }
  return absl::OkStatus();
}

absl::Status HierarchicalCollectives::ColumnsAllreduce(
    DataType type, const char* in, char* out, int64_t count, ReduceOp op,
    const ReduceOptions& reduce, const HierarchicalOptions& options) {
  constexpr absl::string_view kName = "allreduce";
  ReduceOptions combine;
  combine.op = op;
  // Every local rank gets the host's result, bitwise alike.
  if (absl::Status s =
          kolo::Allreduce(local_, type, in, out, count, combine, options.local);
      !s.ok()) {
    return InPhase(kName, "within the host", s);
  }
  // Each column holds the hosts' results in host order, so every column
  // computes the same bits.
  if (absl::Status s = kolo::Allreduce(*column_, type, out, out, count, combine,
                                       options.cross);
      !s.ok()) {
    return InPhase(kName, "across hosts", s);
  }
  return Finish(type, reduce, out, count);
}

absl::Status HierarchicalCollectives::LeaderAllreduce(
    DataType type, const char* in, char* out, int64_t count, ReduceOp op,
    const ReduceOptions& reduce, const HierarchicalOptions& options) {
  constexpr absl::string_view kName = "allreduce";
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(type);
  if (absl::Status s =
          internal::ReduceToRoot(local_, type, op, in, out, count, /*root=*/0,
                                 ChooseAlgorithm(bytes, options.local),
                                 options.local.segment_bytes, "reduce");
      !s.ok()) {
    return InPhase(kName, "reduce within the host", s);
  }
  if (leaders_ != nullptr) {
    ReduceOptions cross;
    cross.op = op;
    if (absl::Status s = kolo::Allreduce(*leaders_, type, out, out, count,
                                         cross, options.cross);
        !s.ok()) {
      return InPhase(kName, "across hosts, among the leaders", s);
    }
    if (absl::Status s = Finish(type, reduce, out, count); !s.ok()) return s;
  }
  if (absl::Status s =
          kolo::Broadcast(local_, type, out, count, 0, options.local);
      !s.ok()) {
    return InPhase(kName, "broadcast within the host", s);
  }
  return absl::OkStatus();
}

absl::Status HierarchicalCollectives::Allgather(
    DataType type, const void* input, int64_t input_count,
    absl::Span<const int64_t> counts, void* output,
    const HierarchicalOptions& options) {
  constexpr absl::string_view kName = "allgather";
  const int n = transport_->size();
  if (absl::Status s = internal::CheckAllgather(kName, type, input, input_count,
                                                counts, output, rank_, n);
      !s.ok()) {
    return s;
  }
  const int64_t total = internal::Total(counts);
  if (total == 0) return absl::OkStatus();

  const size_t elem = DataTypeSize(type);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const std::vector<int> order = hierarchy_.HostMajorOrder();
  const bool direct = hierarchy_.HostMajor();
  const std::vector<int64_t> at = Offsets(counts, order);
  const std::vector<int>& mates = hierarchy_.hosts[host_];

  if (!leader()) {
    if (input_count > 0) {
      auto id =
          local_.StartSend(0, in, static_cast<size_t>(input_count) * elem);
      absl::Status s = id.ok() ? local_.Wait(*id) : id.status();
      if (!s.ok()) {
        return InPhase(kName, "gather within the host",
                       internal::Fail(local_, "gather", s));
      }
    }
  } else {
    // The host's blocks, in host order: in the output when ranks are
    // numbered host by host, else in scratch.
    std::unique_ptr<char[]> scratch;
    char* buf = out;
    if (!direct) {
      scratch = std::make_unique_for_overwrite<char[]>(
          static_cast<size_t>(total) * elem);
      buf = scratch.get();
    }
    char* mine = buf + at[rank_] * elem;
    if (input_count > 0 && mine != in) {
      std::memcpy(mine, in, static_cast<size_t>(input_count) * elem);
    }
    std::vector<OpId> recvs;
    for (size_t i = 1; i < mates.size(); ++i) {
      const int p = mates[i];
      if (counts[p] == 0) continue;
      auto id = local_.StartRecv(static_cast<int>(i), buf + at[p] * elem,
                                 static_cast<size_t>(counts[p]) * elem);
      if (!id.ok()) {
        return InPhase(kName, "gather within the host",
                       internal::Fail(local_, "gather", id.status()));
      }
      recvs.push_back(*id);
    }
    if (absl::Status s = local_.WaitAll(recvs); !s.ok()) {
      return InPhase(kName, "gather within the host",
                     internal::Fail(local_, "gather", s));
    }
    // The host blocks across hosts (in place: this host's block lies where
    // the leaders' allgather expects it).
    std::vector<int64_t> host_counts(hierarchy_.num_hosts(), 0);
    for (int r = 0; r < n; ++r) host_counts[hierarchy_.host_of[r]] += counts[r];
    AlgorithmOptions cross = options.cross;
    cross.algorithm = Algorithm::kAuto;
    if (absl::Status s = kolo::Allgather(
            *leaders_, type, mine, host_counts[host_], host_counts, buf, cross);
        !s.ok()) {
      return InPhase(kName, "across hosts, among the leaders", s);
    }
    if (!direct)
      Permute(buf, at, out, Offsets(counts, Identity(n)), counts, elem);
  }
  if (absl::Status s =
          kolo::Broadcast(local_, type, out, total, 0, options.local);
      !s.ok()) {
    return InPhase(kName, "broadcast within the host", s);
  }
  return absl::OkStatus();
}

absl::Status HierarchicalCollectives::Broadcast(
    DataType type, void* data, int64_t count, int root,
    const HierarchicalOptions& options) {
  constexpr absl::string_view kName = "broadcast";
  const int n = transport_->size();
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
  const int root_host = hierarchy_.host_of[root];
  // Across hosts: the root for its host, the leaders for the others.
  const bool speaks = host_ == root_host ? rank_ == root : leader();
  if (speaks && hierarchy_.num_hosts() > 1) {
    std::vector<int> group = hierarchy_.Leaders();
    group[root_host] = root;
    std::sort(group.begin(), group.end());
    const int cross_root = static_cast<int>(
        std::find(group.begin(), group.end(), root) - group.begin());
    SubsetTransport cross(transport_, std::move(group));
    if (absl::Status s = kolo::Broadcast(cross, type, data, count, cross_root,
                                         options.cross);
        !s.ok()) {
      return InPhase(kName, "across hosts", s);
    }
  }
  const int local_root = host_ == root_host ? hierarchy_.local_of[root] : 0;
  if (absl::Status s =
          kolo::Broadcast(local_, type, data, count, local_root, options.local);
      !s.ok()) {
    return InPhase(kName, "within the host", s);
  }
  return absl::OkStatus();
}

absl::Status HierarchicalCollectives::Reducescatter(
    DataType type, const void* input, int64_t input_count,
    absl::Span<const int64_t> counts, void* output, const ReduceOptions& reduce,
    const HierarchicalOptions& options) {
  constexpr absl::string_view kName = "reducescatter";
  const int n = transport_->size();
  if (absl::Status s = internal::CheckReducescatter(
          kName, type, input, input_count, counts, output, reduce, rank_, n);
      !s.ok()) {
    return s;
  }
  const int64_t total = internal::Total(counts);
  if (total == 0) return absl::OkStatus();

  const size_t elem = DataTypeSize(type);
  const size_t bytes = static_cast<size_t>(total) * elem;
  const ReduceOp op = Combining(reduce.op);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const std::vector<int>& mates = hierarchy_.hosts[host_];
  const std::vector<int64_t> at = Offsets(counts, Identity(n));

  // The host's sum of the whole input, on the leader (scratch elsewhere).
  auto work = std::make_unique_for_overwrite<char[]>(bytes);
  if (reduce.prescale != 1.0) {
    if (absl::Status s =
            ScaleCopy(type, in, work.get(), total, reduce.prescale);
        !s.ok()) {
      return s;
    }
    in = work.get();
  }
  if (absl::Status s = internal::ReduceToRoot(
          local_, type, op, in, work.get(), total, /*root=*/0,
          ChooseAlgorithm(bytes, options.local), options.local.segment_bytes,
          "reduce");
      !s.ok()) {
    return InPhase(kName, "reduce within the host", s);
  }

  if (!leader()) {
    if (counts[rank_] > 0) {
      auto id =
          local_.StartRecv(0, out, static_cast<size_t>(counts[rank_]) * elem);
      absl::Status s = id.ok() ? local_.Wait(*id) : id.status();
      if (!s.ok()) {
        return InPhase(kName, "scatter within the host",
                       internal::Fail(local_, "scatter", s));
      }
    }
    return absl::OkStatus();
  }
  // Across hosts: reducescatter of the host blocks (ranks' blocks in host
  // order) among the leaders.
  std::vector<int64_t> host_counts(hierarchy_.num_hosts(), 0);
  for (int r = 0; r < n; ++r) host_counts[hierarchy_.host_of[r]] += counts[r];
  const std::vector<int> order = hierarchy_.HostMajorOrder();
  const std::vector<int64_t> host_at = Offsets(counts, order);
  std::unique_ptr<char[]> ordered;
  const char* blocks = work.get();
  if (!hierarchy_.HostMajor()) {
    ordered = std::make_unique_for_overwrite<char[]>(bytes);
    Permute(work.get(), at, ordered.get(), host_at, counts, elem);
    blocks = ordered.get();
  }
  auto mine = std::make_unique_for_overwrite<char[]>(
      static_cast<size_t>(host_counts[host_]) * elem);
  ReduceOptions cross;
  cross.op = op;
  AlgorithmOptions cross_algorithms = options.cross;
  cross_algorithms.algorithm = Algorithm::kAuto;
  if (absl::Status s =
          kolo::Reducescatter(*leaders_, type, blocks, total, host_counts,
                              mine.get(), cross, cross_algorithms);
      !s.ok()) {
    return InPhase(kName, "across hosts, among the leaders", s);
  }
  if (absl::Status s = Finish(type, reduce, mine.get(), host_counts[host_]);
      !s.ok()) {
    return s;
  }
  // Each rank of the host its block: they follow one another in `mine` in
  // the host's rank order.
  if (absl::Status s =
          ScatterBlocks(local_, mates, counts, mine.get(), out, elem);
      !s.ok()) {
    return InPhase(kName, "scatter within the host", s);
  }
  return absl::OkStatus();
}

}  // namespace kolo
