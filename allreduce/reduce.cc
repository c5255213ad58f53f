#include "allreduce/reduce.h"

#include <cstring>
#include <memory>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/kernels.h"
#include "allreduce/ring.h"

namespace kolo::internal {
namespace {

absl::Status Tree(Transport& t, DataType type, ReduceOp op, char* data,
                  int64_t count, int root) {
  const int n = t.size();
  const int v = PositiveMod(t.rank() - root, n);
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(type);
  std::unique_ptr<char[]> scratch;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      auto id = t.StartSend(PositiveMod(t.rank() - mask, n), data, bytes);
      if (!id.ok()) return id.status();
      return t.Wait(*id);
    }
    if (v + mask >= n) continue;
    if (scratch == nullptr)
      scratch = std::make_unique_for_overwrite<char[]>(bytes);
    auto id =
        t.StartRecv(PositiveMod(t.rank() + mask, n), scratch.get(), bytes);
    if (!id.ok()) return id.status();
    if (absl::Status s = t.Wait(*id); !s.ok()) return s;
    // This rank's partial (lower relative rank) on the left.
    if (absl::Status s = ReduceInto(type, op, data, scratch.get(),
                                    static_cast<size_t>(count));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// After the reduce-scatter pass, rank r holds chunk r: each sends it to the
// root, which receives them in place.
absl::Status Gather(Transport& t, char* out, size_t elem,
                    const std::vector<ElementRange>& chunks, int root) {
  const int rank = t.rank();
  std::vector<OpId> ops;
  for (int p = 0; p < t.size(); ++p) {
    const ElementRange& c = chunks[p];
    if (c.count == 0 || (rank != root && p != rank) ||
        (rank == root && p == root)) {
      continue;
    }
    char* at = out + c.offset * elem;
    const size_t bytes = static_cast<size_t>(c.count) * elem;
    auto id =
        rank == root ? t.StartRecv(p, at, bytes) : t.StartSend(root, at, bytes);
    if (!id.ok()) return id.status();
    ops.push_back(*id);
  }
  return t.WaitAll(ops);
}

}  // namespace

absl::Status ReduceToRoot(Transport& transport, DataType type, ReduceOp op,
                          const void* input, void* output, int64_t count,
                          int root, Algorithm algorithm, size_t segment_bytes,
                          absl::string_view collective) {
  const int n = transport.size();
  const size_t elem = DataTypeSize(type);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (count == 0) return absl::OkStatus();
  if (n == 1 || algorithm != Algorithm::kRing) {
    if (in != out) std::memcpy(out, in, static_cast<size_t>(count) * elem);
    if (n == 1) return absl::OkStatus();
    absl::Status s = Tree(transport, type, op, out, count, root);
    if (!s.ok()) return Fail(transport, collective, s);
    return absl::OkStatus();
  }
  const std::vector<ElementRange> chunks = PartitionEvenly(count, n);
  RingPass pass;
  pass.type = type;
  pass.op = op;
  for (const ElementRange& c : chunks) {
    pass.blocks.push_back(
        {in + c.offset * elem, out + c.offset * elem, c.count});
  }
  // As in the ring allreduce: chunk rank-1 leaves first, so that chunk rank
  // completes here.
  pass.first = PositiveMod(transport.rank() - 1, n);
  pass.reduce_steps = n - 1;
  pass.segment_elems = RingSegmentElements(pass, segment_bytes);
  if (absl::Status s = RunRing(transport, pass, collective); !s.ok()) return s;
  absl::Status s = Gather(transport, out, elem, chunks, root);
  if (!s.ok()) return Fail(transport, collective, s);
  return absl::OkStatus();
}

}  // namespace kolo::internal
