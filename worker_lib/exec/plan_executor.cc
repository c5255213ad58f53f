#include "worker_lib/exec/plan_executor.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/op_names.h"

namespace kolo::worker {
namespace {

absl::Status Disagree(const PendingOp& op, absl::string_view what) {
  return absl::InternalError(absl::StrCat(
      "the plan for ", proto::OpTypeName(op.op), " '", op.name, "' ", what,
      "; the coordinator and this worker disagree on the protocol"));
}

// Adds the rows a plan gives `op` from one rank to `total`, checked before
// any memory is allocated for them: none negative, and the output's bytes
// (total * row_bytes) within int64 (found by fuzz/plan_applier_fuzz.cc).
absl::Status AddRows(const PendingOp& op, int64_t rows, int64_t row_bytes,
                     int64_t& total) {
  const int64_t limit =
      std::numeric_limits<int64_t>::max() / std::max<int64_t>(row_bytes, 1);
  if (rows < 0 || rows > limit - total) {
    return Disagree(op, absl::StrCat("gives ", rows, " rows to a rank"));
  }
  total += rows;
  return absl::OkStatus();
}

}  // namespace

std::optional<void*> FromAllocator(PendingOp& op,
                                   const std::vector<int64_t>& shape,
                                   int64_t bytes,
                                   absl::string_view scratch_kind,
                                   absl::Status& problem) {
  absl::StatusOr<void*> got = op.allocator(shape);
  if (got.ok() && (*got != nullptr || bytes == 0)) return *got;
  problem =
      got.ok() ? absl::InvalidArgumentError("it returned null") : got.status();
  problem = absl::Status(
      problem.code(),
      absl::StrCat(proto::OpTypeName(op.op), " '", op.name,
                   "': the output allocator failed (", problem.message(),
                   "); the collective ran into scratch ", scratch_kind,
                   " memory so that the other ranks went on"));
  return std::nullopt;
}

void* AllocateOutput(PendingOp& op, const std::vector<int64_t>& shape,
                     int64_t bytes, std::unique_ptr<char[]>& scratch,
                     absl::Status& problem) {
  if (std::optional<void*> out =
          FromAllocator(op, shape, bytes, "host", problem)) {
    return *out;
  }
  // Without exceptions (so that ASan, too, reports a failure as null).
  scratch.reset(new (std::nothrow) char[static_cast<size_t>(bytes)]);
  if (scratch == nullptr) {
    // Not even scratch memory: this rank cannot take part. Its peers' data
    // plane then reports it and the coordinator ends the job, naming it.
    problem = absl::ResourceExhaustedError(
        absl::StrCat(proto::OpTypeName(op.op), " '", op.name,
                     "': the output allocator ", "failed and ", bytes,
                     " bytes of scratch memory could not be "
                     "allocated either (",
                     problem.message(), ")"));
    return nullptr;
  }
  return scratch.get();
}

namespace {

// `shape` with its first dimension set to `rows`.
std::vector<int64_t> WithRows(std::vector<int64_t> shape, int64_t rows) {
  shape[0] = rows;
  return shape;
}

// Runs a gather whose output of `total` rows (of `row` elements) is
// allocated here, with `run(out)`; an allocation problem is returned after
// the collective, so that the other ranks are not left waiting.
template <typename Run>
absl::Status RunIntoOutput(PendingOp& op, OpResult* result, int64_t total,
                           int64_t row, int64_t element, Run run) {
  result->shape = WithRows(op.input.shape, total);
  std::unique_ptr<char[]> scratch;
  absl::Status problem;
  void* out = AllocateOutput(op, result->shape, total * row * element, scratch,
                             problem);
  if (out == nullptr && total * row > 0) return problem;
  absl::Status s = run(out);
  return s.ok() ? problem : s;
}

// JOIN (sizes = {the last to join}), PROCESS_SET_ADD (sizes = {the set's
// id}) and PROCESS_SET_REMOVE: the answer is one number.
absl::Status ExecuteAnswer(const proto::Response& response, PendingOp& op,
                           OpResult* result) {
  if (response.sizes_size() != 1) {
    return absl::InternalError(absl::StrCat(
        "the plan for ", proto::OpTypeName(op.op), " '", op.name, "' carries ",
        response.sizes_size(),
        " sizes, not 1; the coordinator and this worker disagree on the "
        "protocol"));
  }
  result->splits = {response.sizes(0)};
  return absl::OkStatus();
}

absl::Status ExecuteAllgather(const proto::Response& response, PendingOp& op,
                              DataPlane& data, int rank, int size,
                              OpResult* result) {
  const Tensor& in = op.input;
  const int64_t row = RowElements(in.shape);
  const auto element = static_cast<int64_t>(DataTypeSize(in.dtype));
  int index = 0;
  while (index < response.names_size() && response.names(index) != op.name) {
    ++index;
  }
  if (response.sizes_size() < (index + 1) * size) {
    return absl::InternalError(
        absl::StrCat("the plan for allgather '", op.name, "' carries ",
                     response.sizes_size(), " sizes for ", size,
                     " ranks; the coordinator and this worker disagree on "
                     "the protocol"));
  }
  std::vector<int64_t> rows, counts;
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    int64_t n = response.sizes(index * size + r);
    if (absl::Status s = AddRows(op, n, row * element, total); !s.ok()) {
      return s;
    }
    rows.push_back(n);
    counts.push_back(n * row);
  }
  if (rows[rank] * row != in.num_elements()) {
    return Disagree(op, absl::StrCat("gives rank ", rank, " ", rows[rank],
                                     " rows, not the ones it announced"));
  }
  result->splits = rows;
  return RunIntoOutput(op, result, total, row, element, [&](void* out) {
    return data.Allgather(in.dtype, in.data, in.num_elements(), counts, out);
  });
}

absl::Status ExecuteAlltoall(const proto::Response& response, PendingOp& op,
                             DataPlane& data, int rank, int size,
                             OpResult* result) {
  const Tensor& in = op.input;
  const int64_t row = RowElements(in.shape);
  const auto element = static_cast<int64_t>(DataTypeSize(in.dtype));
  if (response.sizes_size() != size * size) {
    return absl::InternalError(
        absl::StrCat("the plan for alltoall '", op.name, "' carries ",
                     response.sizes_size(), " sizes for ", size,
                     " ranks; the coordinator and this worker disagree on "
                     "the protocol"));
  }
  std::vector<int64_t> send, recv_rows, recv;
  for (int64_t rows : op.splits) send.push_back(rows * row);
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    int64_t n = response.sizes(r * size + rank);
    if (absl::Status s = AddRows(op, n, row * element, total); !s.ok()) {
      return s;
    }
    recv_rows.push_back(n);
    recv.push_back(n * row);
  }
  // What this rank sends itself is known here.
  if (op.splits.size() != static_cast<size_t>(size) ||
      recv_rows[rank] != op.splits[rank]) {
    return Disagree(
        op, absl::StrCat("has rank ", rank, " receive ", recv_rows[rank],
                         " rows from itself, not the ones it "
                         "sends"));
  }
  result->splits = recv_rows;
  return RunIntoOutput(op, result, total, row, element, [&](void* out) {
    return data.Alltoall(in.dtype, in.data, send, out, recv);
  });
}

}  // namespace

absl::Status Execute(const proto::Response& response, PendingOp& op,
                     DataPlane& data, int rank, int size, OpResult* result) {
  if (response.error_code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(response.error_code()),
                        response.error());
  }
  if (!op.request.invalid().empty()) {
    // This rank announced it invalid: the coordinator answers with an error.
    return Disagree(op, "carries no error, but this rank announced it invalid");
  }
  const Tensor& in = op.input;
  if (in.shape.empty() &&
      (op.op == proto::ALLGATHER || op.op == proto::ALLTOALL)) {
    return Disagree(op, "runs it on a scalar");
  }
  switch (op.op) {
    case proto::ALLREDUCE:
      result->shape = op.output.shape;
      return data.Allreduce(in.dtype, in.data, op.output.data,
                            in.num_elements(), op.reduce);
    case proto::BROADCAST:
      result->shape = in.shape;
      return data.Broadcast(in.dtype, in.data, in.num_elements(), op.set_root);
    case proto::BARRIER:
      // Every rank announced it: they have all entered the barrier.
      return absl::OkStatus();
    case proto::MEMBERSHIP_CHECK:
      // Answered: the membership stays (a change ends the epoch instead,
      // failing the check with the hosts-updated error).
      return absl::OkStatus();
    case proto::JOIN:
    case proto::PROCESS_SET_ADD:
    case proto::PROCESS_SET_REMOVE:
      return ExecuteAnswer(response, op, result);
    case proto::REDUCESCATTER: {
      const int64_t row = RowElements(in.shape);
      std::vector<int64_t> counts;
      for (int64_t rows : op.splits) counts.push_back(rows * row);
      result->shape = op.output.shape;
      result->splits = op.splits;
      return data.Reducescatter(in.dtype, in.data, in.num_elements(), counts,
                                op.output.data, op.reduce);
    }
    case proto::ALLGATHER:
      return ExecuteAllgather(response, op, data, rank, size, result);
    case proto::ALLTOALL:
      return ExecuteAlltoall(response, op, data, rank, size, result);
    default:
      return absl::InternalError(absl::StrCat(
          "plan response for '", op.name, "' has op type ",
          static_cast<int>(op.op), ", which this worker does not know"));
  }
}

}  // namespace kolo::worker
