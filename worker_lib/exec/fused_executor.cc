#include "worker_lib/exec/fused_executor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/kernels.h"
#include "common/check.h"
#include "fusion/fusion_planner.h"
#include "proto/op_names.h"
#include "worker_lib/exec/plan_executor.h"
#include "worker_lib/timeline.h"

namespace kolo::worker {
namespace {

// Timeline activities of a group: the same on every member's row.
class Phases {
 public:
  Phases(Timeline* timeline, absl::Span<PendingOp* const> ops)
      : timeline_(timeline), ops_(ops) {}
  void Begin(absl::string_view phase) { Begin(phase, Now()); }
  // As it began at `at` (from Now()).
  void Begin(absl::string_view phase, absl::Time at) {
    if (timeline_ == nullptr) return;
    for (PendingOp* op : ops_) timeline_->Begin(op->name, phase, at);
  }
  // The time, when there is a timeline.
  absl::Time Now() const {
    return timeline_ == nullptr ? absl::InfinitePast() : absl::Now();
  }
  void End() {
    if (timeline_ == nullptr) return;
    const absl::Time now = absl::Now();
    for (PendingOp* op : ops_) timeline_->End(op->name, now);
  }

 private:
  Timeline* const timeline_;
  absl::Span<PendingOp* const> ops_;
};

std::vector<absl::Status> All(size_t n, const absl::Status& s) {
  return std::vector<absl::Status>(n, s);
}

std::vector<absl::Status> FusedAllreduce(absl::Span<PendingOp* const> ops,
                                         DataPlane& data, int size,
                                         FusionBuffer& buffer,
                                         Timeline* timeline) {
  const DataType dtype = ops[0]->input.dtype;
  const ReduceOptions& reduce = ops[0]->reduce;
  const size_t element = DataTypeSize(dtype);
  Phases phases(timeline, ops);
  // Where the data plane reduces the tensors in place of a fusion buffer
  // (shared memory, sliced), it does: no copies in and out of the buffer.
  std::vector<AllreducePiece> pieces;
  pieces.reserve(ops.size());
  for (PendingOp* op : ops) {
    pieces.push_back(
        {op->input.data, op->output.data, op->input.num_elements()});
  }
  const absl::Time start = phases.Now();
  std::optional<absl::Status> ran = data.AllreducePieces(dtype, pieces, reduce);
  if (ran.has_value()) {
    phases.Begin("ALLREDUCE", start);
    phases.End();
    if (!ran->ok()) return All(ops.size(), *ran);
    for (PendingOp* op : ops) op->result.shape = op->output.shape;
    return std::vector<absl::Status>(ops.size());
  }
  std::vector<size_t> offsets;
  size_t end = 0;
  for (PendingOp* op : ops) {
    const size_t at = offsets.empty() ? 0 : fusion::AlignUp(end);
    offsets.push_back(at);
    end = at + static_cast<size_t>(op->input.num_bytes());
  }
  char* buf = buffer.Reserve(end);

  phases.Begin("MEMCPY_IN_FUSION_BUFFER");
  absl::Status status;
  for (size_t i = 0; i < ops.size() && status.ok(); ++i) {
    const size_t count = static_cast<size_t>(ops[i]->input.num_elements());
    status = ScaleCopy(dtype, ops[i]->input.data, buf + offsets[i], count,
                       reduce.prescale);
    const size_t member_end = offsets[i] + count * element;
    const size_t next = i + 1 < ops.size() ? offsets[i + 1] : end;
    if (next > member_end) std::memset(buf + member_end, 0, next - member_end);
  }
  phases.End();
  if (!status.ok()) return All(ops.size(), status);

  phases.Begin("ALLREDUCE");
  ReduceOptions sum = reduce;
  if (sum.op == ReduceOp::kAverage) sum.op = ReduceOp::kSum;
  sum.prescale = 1.0;
  sum.postscale = 1.0;
  status =
      data.Allreduce(dtype, buf, buf, static_cast<int64_t>(end / element), sum);
  phases.End();
  if (!status.ok()) return All(ops.size(), status);

  phases.Begin("MEMCPY_OUT_FUSION_BUFFER");
  const int64_t divisor = reduce.op == ReduceOp::kAverage ? size : 1;
  std::vector<absl::Status> results;
  for (size_t i = 0; i < ops.size(); ++i) {
    PendingOp& op = *ops[i];
    op.result.shape = op.output.shape;
    results.push_back(FinishCopy(dtype, buf + offsets[i], op.output.data,
                                 static_cast<size_t>(op.input.num_elements()),
                                 divisor, reduce.postscale));
  }
  phases.End();
  return results;
}

// The fused allgather's sizes: one per member and rank, every one
// non-negative, and all the bytes together within int64, before anything is
// computed from them (found by fuzz/plan_applier_fuzz.cc).
absl::Status CheckAllgatherSizes(const proto::Response& response,
                                 absl::Span<PendingOp* const> ops, int size,
                                 int64_t element) {
  const size_t n = ops.size();
  if (response.sizes_size() != static_cast<int>(n) * size) {
    return absl::InternalError(absl::StrCat(
        "the plan for a fused allgather of ", n, " tensors ('", ops[0]->name,
        "', ...) carries ", response.sizes_size(), " sizes for ", size,
        " ranks; the coordinator and this worker disagree on the protocol"));
  }
  int64_t all_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t row_bytes =
        std::max<int64_t>(RowElements(ops[i]->input.shape) * element, 1);
    for (int r = 0; r < size; ++r) {
      const int64_t rows = response.sizes(static_cast<int>(i) * size + r);
      if (rows < 0 || rows > (std::numeric_limits<int64_t>::max() - all_bytes) /
                                 row_bytes) {
        return absl::InternalError(absl::StrCat(
            "the plan for allgather '", ops[i]->name, "' gives ", rows,
            " rows to rank ", r,
            "; the coordinator and this worker disagree on the protocol"));
      }
      all_bytes += rows * row_bytes;
    }
  }
  return absl::OkStatus();
}

std::vector<absl::Status> FusedAllgather(const proto::Response& response,
                                         absl::Span<PendingOp* const> ops,
                                         DataPlane& data, int rank, int size,
                                         FusionBuffer& buffer,
                                         Timeline* timeline) {
  const DataType dtype = ops[0]->input.dtype;
  const auto element = static_cast<int64_t>(DataTypeSize(dtype));
  const size_t n = ops.size();
  if (absl::Status s = CheckAllgatherSizes(response, ops, size, element);
      !s.ok()) {
    return All(n, s);
  }
  // rows[i][r], per-rank counts, and where member i starts in rank r's block.
  std::vector<int64_t> row(n), counts(size, 0);
  std::vector<std::vector<int64_t>> start(n, std::vector<int64_t>(size));
  for (size_t i = 0; i < n; ++i) {
    row[i] = RowElements(ops[i]->input.shape);
    for (int r = 0; r < size; ++r) {
      start[i][r] = counts[r];
      counts[r] += response.sizes(static_cast<int>(i) * size + r) * row[i];
    }
    if (response.sizes(static_cast<int>(i) * size + rank) * row[i] !=
        ops[i]->input.num_elements()) {
      return All(n, absl::InternalError(absl::StrCat(
                        "the plan for allgather '", ops[i]->name,
                        "' gives rank ", rank,
                        " a different first dimension "
                        "than it announced; the coordinator and this worker "
                        "disagree on the protocol")));
    }
  }
  std::vector<int64_t> block(size + 1, 0);  // each rank's block offset
  for (int r = 0; r < size; ++r) block[r + 1] = block[r] + counts[r];
  const size_t in_bytes = fusion::AlignUp(counts[rank] * element);
  char* buf = buffer.Reserve(in_bytes + block[size] * element);
  char* in = buf;
  char* out = buf + in_bytes;
  Phases phases(timeline, ops);

  phases.Begin("MEMCPY_IN_FUSION_BUFFER");
  for (size_t i = 0; i < n; ++i) {
    const int64_t bytes = ops[i]->input.num_bytes();
    if (bytes == 0) continue;  // no rows here: the data may be null
    std::memcpy(in + start[i][rank] * element, ops[i]->input.data,
                static_cast<size_t>(bytes));
  }
  phases.End();

  phases.Begin("ALLGATHER");
  absl::Status status = data.Allgather(dtype, in, counts[rank], counts, out);
  phases.End();
  if (!status.ok()) return All(n, status);

  phases.Begin("MEMCPY_OUT_FUSION_BUFFER");
  std::vector<absl::Status> results;
  for (size_t i = 0; i < n; ++i) {
    PendingOp& op = *ops[i];
    std::vector<int64_t> rows;
    int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      rows.push_back(response.sizes(static_cast<int>(i) * size + r));
      total += rows.back();
    }
    op.result.shape = op.input.shape;
    op.result.shape[0] = total;
    op.result.splits = rows;
    std::unique_ptr<char[]> scratch;
    absl::Status problem;
    char* dst = static_cast<char*>(AllocateOutput(
        op, op.result.shape, total * row[i] * element, scratch, problem));
    for (int r = 0; r < size && dst != nullptr; ++r) {
      const int64_t bytes = rows[r] * row[i] * element;
      if (bytes == 0) continue;
      std::memcpy(dst, out + (block[r] + start[i][r]) * element, bytes);
      dst += bytes;
    }
    results.push_back(problem);
  }
  phases.End();
  return results;
}

}  // namespace

char* FusionBuffer::Reserve(size_t bytes) {
  if (bytes > capacity_ || data_ == nullptr) {
    const size_t want =
        fusion::AlignUp(std::max<size_t>(bytes, 2 * capacity_) + 1);
    data_.reset(
        static_cast<char*>(std::aligned_alloc(fusion::kAlignment, want)));
    KOLO_CHECK(data_ != nullptr) << "fusion buffer of " << want << " bytes";
    capacity_ = want;
  }
  return data_.get();
}

bool IsFused(const proto::Response& response) {
  // A plan of hits may list them by bit only (Response.by_bit).
  const int tensors = response.by_bit() && response.names_size() == 0
                          ? response.cache_bits_size()
                          : response.names_size();
  return tensors > 1 && response.error_code() == 0 &&
         (response.op() == proto::ALLREDUCE ||
          response.op() == proto::ALLGATHER);
}

std::vector<absl::Status> ExecuteFused(const proto::Response& response,
                                       absl::Span<PendingOp* const> ops,
                                       DataPlane& data, int rank, int size,
                                       FusionBuffer& buffer,
                                       Timeline* timeline) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i] == nullptr) {
      return All(ops.size(),
                 absl::InternalError(absl::StrCat(
                     "fused ", proto::OpTypeName(response.op()), " of ",
                     ops.size(), " tensors names '",
                     i < static_cast<size_t>(response.names_size())
                         ? response.names(static_cast<int>(i))
                         : absl::StrCat("cache bit ", response.cache_bits(
                                                          static_cast<int>(i))),
                     "', which is not pending on rank ", rank,
                     "; the group did not run here")));
    }
  }
  // Every member is this response's kind of op, of the first one's dtype
  // (and reduce op), announced valid and, for an allgather, with rows: what
  // the coordinator fuses (found by fuzz/plan_applier_fuzz.cc: an op of
  // another kind or dtype in the group made the copies overrun).
  for (const PendingOp* op : ops) {
    const char* problem = nullptr;
    if (op->op != response.op()) {
      problem = "is another kind of op on this rank";
    } else if (!op->request.invalid().empty()) {
      problem = "was announced invalid by this rank";
    } else if (op->input.dtype != ops[0]->input.dtype) {
      problem = "has another dtype than the group's first tensor";
    } else if (op->op == proto::ALLREDUCE &&
               op->reduce.op != ops[0]->reduce.op) {
      problem = "has another reduce op than the group's first tensor";
    } else if (op->op == proto::ALLGATHER && op->input.shape.empty()) {
      problem = "is a scalar";
    }
    if (problem != nullptr) {
      return All(ops.size(),
                 absl::InternalError(absl::StrCat(
                     "fused ", proto::OpTypeName(response.op()), " of ",
                     ops.size(), " tensors: '", op->name, "' ", problem,
                     "; the coordinator and this worker disagree on the "
                     "protocol; the group did not run here")));
    }
  }
  if (response.op() == proto::ALLREDUCE) {
    return FusedAllreduce(ops, data, size, buffer, timeline);
  }
  return FusedAllgather(response, ops, data, rank, size, buffer, timeline);
}

}  // namespace kolo::worker
