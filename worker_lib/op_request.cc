#include "worker_lib/op_request.h"

#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/collective_checks.h"
#include "allreduce/cuda/cuda_info.h"
#include "proto/op_names.h"

namespace kolo {

int64_t Tensor::num_elements() const {
  absl::StatusOr<int64_t> n = CheckedElements("", dtype, shape);
  return n.ok() ? *n : -1;
}

int64_t Tensor::num_bytes() const {
  const int64_t n = num_elements();
  return n < 0 ? -1 : n * static_cast<int64_t>(DataTypeSize(dtype));
}

namespace worker {
namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string DeviceName(int device) {
  return device == kCpu ? std::string("the host (kolo::kCpu)")
                        : absl::StrCat("CUDA device ", device);
}

// The problem with `t` (named `what`) as this rank sees it, or "".
std::string CheckTensor(const char* op, const char* what, const Tensor& t) {
  if (absl::Status s = internal::CheckType(op, t.dtype); !s.ok()) {
    return std::string(s.message());
  }
  if (t.device < kCpu) {
    return absl::StrCat(op, ": ", what, " has device ", t.device,
                        ", which is neither kolo::kCpu (-1) nor a CUDA "
                        "device ordinal (0, 1, ...)");
  }
  if (t.device != kCpu) {
    if (std::string why = cuda::Unusable(t.device); !why.empty()) {
      return absl::StrCat(op, ": ", what, " is on CUDA device ", t.device,
                          ", but ", why);
    }
  }
  // Negative, overflowing or impossibly large shapes (before anything
  // multiplies the dimensions).
  // The label is built for a message only: every submission passes here.
  absl::StatusOr<int64_t> n = CheckedElements("", t.dtype, t.shape);
  if (!n.ok()) {
    return std::string(
        CheckedElements(absl::StrCat(op, ": ", what), t.dtype, t.shape)
            .status()
            .message());
  }
  if (t.data == nullptr && *n > 0) {
    return absl::StrCat(op, ": ", what, " data is null but its shape ",
                        Shape(t.shape), " holds ", *n, " elements");
  }
  return "";
}

// Checks caller-given row splits (size entries, each >= 0, summing to
// `rows`); returns the problem or "".
std::string CheckSplits(const char* op, const char* what,
                        const std::vector<int64_t>& splits, int64_t rows,
                        int size) {
  if (static_cast<int>(splits.size()) != size) {
    return absl::StrCat(op, ": ", what, " has ", splits.size(),
                        " entries, but there are ", size,
                        " ranks (one entry per rank)");
  }
  int64_t sum = 0;
  for (int64_t s : splits) {
    if (s < 0) {
      return absl::StrCat(op, ": ", what, " [", absl::StrJoin(splits, ","),
                          "] has a negative entry");
    }
    if (__builtin_add_overflow(sum, s, &sum)) {
      return absl::StrCat(op, ": ", what, " [", absl::StrJoin(splits, ","),
                          "] add up to more than the input's first "
                          "dimension, ",
                          rows);
    }
  }
  if (sum != rows) {
    return absl::StrCat(op, ": ", what, " [", absl::StrJoin(splits, ","),
                        "] add up to ", sum,
                        " rows, but the input's first "
                        "dimension is ",
                        rows);
  }
  return "";
}

// add_process_set: ranks (in op.splits) in range, sorted, none twice.
std::string ValidateProcessSetAdd(const PendingOp& op, int size) {
  const std::vector<int64_t>& ranks = op.splits;
  if (ranks.empty()) return "add_process_set: no ranks given";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size) {
      return absl::StrCat("add_process_set: rank ", ranks[i],
                          " is out of range for ", size, " ranks (0..",
                          size - 1, ")");
    }
    if (i > 0 && ranks[i] == ranks[i - 1]) {
      return absl::StrCat("add_process_set: rank ", ranks[i],
                          " is given twice");
    }
  }
  return "";
}

// allreduce: the output is like the input, on the same device.
std::string ValidateAllreduce(const PendingOp& op, const char* name) {
  const std::vector<int64_t>& shape = op.input.shape;
  if (op.output.device != op.input.device) {
    return absl::StrCat("allreduce: the output is on ",
                        DeviceName(op.output.device), " but the input on ",
                        DeviceName(op.input.device),
                        "; both must be on the same device");
  }
  if (op.output.shape != shape || op.output.dtype != op.input.dtype) {
    return absl::StrCat(
        "allreduce: the output (", DataTypeName(op.output.dtype), " ",
        Shape(op.output.shape), ") must have the input's dtype and shape (",
        DataTypeName(op.input.dtype), " ", Shape(shape), ")");
  }
  return CheckTensor(name, "the output", op.output);
}

// reducescatter: the counts (op.splits; even when not given) cover the
// first dimension; this rank's output holds its rows.
std::string ValidateReducescatter(PendingOp& op, const char* name, int rank,
                                  int size) {
  const std::vector<int64_t>& shape = op.input.shape;
  if (shape.empty()) {
    return "reducescatter: the input is a scalar; it needs a first "
           "dimension to scatter";
  }
  if (op.splits.empty()) {
    for (int r = 0; r < size; ++r) {
      op.splits.push_back(shape[0] / size + (r < shape[0] % size ? 1 : 0));
    }
  } else if (std::string b =
                 CheckSplits(name, "counts", op.splits, shape[0], size);
             !b.empty()) {
    op.splits.clear();
    return b;
  }
  if (op.output.device != op.input.device) {
    return absl::StrCat("reducescatter: the output is on ",
                        DeviceName(op.output.device), " but the input on ",
                        DeviceName(op.input.device),
                        "; both must be on the same device");
  }
  std::vector<int64_t> want = shape;
  want[0] = op.splits[rank];
  if (op.output.shape != want || op.output.dtype != op.input.dtype) {
    return absl::StrCat("reducescatter: rank ", rank, "'s output (",
                        DataTypeName(op.output.dtype), " ",
                        Shape(op.output.shape), ") must be ",
                        DataTypeName(op.input.dtype), " ", Shape(want));
  }
  return CheckTensor(name, "the output", op.output);
}

// broadcast: the root is a rank of the job, or a member of the process set
// (op.set_root: its index there).
std::string ValidateBroadcast(PendingOp& op, int size) {
  if (op.members.empty()) {
    if (op.root < 0 || op.root >= size) {
      return absl::StrCat("broadcast: root ", op.root, " is out of range for ",
                          size, " ranks (0..", size - 1, ")");
    }
    op.set_root = op.root;
    return "";
  }
  for (size_t i = 0; i < op.members.size(); ++i) {
    if (op.members[i] == op.root) {
      op.set_root = static_cast<int>(i);
      return "";
    }
  }
  return absl::StrCat("broadcast: root ", op.root,
                      " is not a member of process set ", op.process_set,
                      " (ranks ", absl::StrJoin(op.members, ","), ")");
}

// allgather and alltoall: an allocator for the output, a first dimension,
// and (alltoall) splits of it (even when not given).
std::string ValidateGather(PendingOp& op, const char* name, int size) {
  const std::vector<int64_t>& shape = op.input.shape;
  if (!op.allocator) {
    return absl::StrCat(name, ": no output allocator given");
  }
  if (shape.empty()) {
    return absl::StrCat(
        name,
        ": the input is a scalar (0-d); it needs a "
        "first dimension to ",
        op.op == proto::ALLGATHER ? "concatenate along" : "split");
  }
  if (op.op == proto::ALLGATHER) return "";
  if (op.splits.empty()) {
    if (shape[0] % size != 0) {
      return absl::StrCat("alltoall: without splits the first dimension (",
                          shape[0], ") must divide by the ", size,
                          " ranks; pass splits");
    }
    op.splits.assign(size, shape[0] / size);
    return "";
  }
  if (std::string b = CheckSplits(name, "splits", op.splits, shape[0], size);
      !b.empty()) {
    op.splits.clear();
    return b;
  }
  return "";
}

}  // namespace

void PendingOp::Reset() {
  handle = 0;
  name.clear();
  op = proto::OP_UNSPECIFIED;
  auto clear_tensor = [](Tensor& t) {
    t.dtype = Tensor{}.dtype;
    t.shape.clear();
    t.data = nullptr;
    t.device = kCpu;
    t.ready_event = nullptr;
    t.done_event = nullptr;
  };
  clear_tensor(input);
  clear_tensor(output);
  allocator = nullptr;
  reduce = ReduceOptions{};
  root = 0;
  splits.clear();
  process_set = 0;
  members.clear();
  set_root = 0;
  expect.clear();
  group.clear();
  group_size = 0;
  order_stream.clear();
  order_slot = 0;
  order_void.clear();
  request.Clear();
  cache_bit = -1;
  submitted = absl::Time();
  running = false;
  done = false;
  status = absl::OkStatus();
  result.shape.clear();
  result.splits.clear();
  result.members.clear();
}

int64_t RowElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::string ValidateOp(PendingOp& op, int rank, int size) {
  const std::string op_name = proto::OpTypeName(op.op);
  const char* name = op_name.c_str();
  if (op.op == proto::BARRIER || op.op == proto::JOIN ||
      op.op == proto::MEMBERSHIP_CHECK || op.op == proto::PROCESS_SET_REMOVE) {
    return "";
  }
  if (op.op == proto::PROCESS_SET_ADD) return ValidateProcessSetAdd(op, size);
  std::string bad = CheckTensor(name, "the input", op.input);
  if (!bad.empty()) return bad;
  switch (op.op) {
    case proto::ALLREDUCE:
    case proto::REDUCESCATTER:
      if (absl::Status s =
              internal::CheckReduce(name, op.input.dtype, op.reduce);
          !s.ok()) {
        return std::string(s.message());
      }
      return op.op == proto::ALLREDUCE
                 ? ValidateAllreduce(op, name)
                 : ValidateReducescatter(op, name, rank, size);
    case proto::BROADCAST:
      return ValidateBroadcast(op, size);
    case proto::ALLGATHER:
    case proto::ALLTOALL:
      return ValidateGather(op, name, size);
    default:
      return absl::StrCat("unknown op type ", static_cast<int>(op.op));
  }
}

namespace {

// Whether the op carries a tensor's dtype, shape and device.
bool HasTensor(proto::OpType op) {
  return op != proto::BARRIER && op != proto::JOIN &&
         op != proto::MEMBERSHIP_CHECK && op != proto::PROCESS_SET_ADD &&
         op != proto::PROCESS_SET_REMOVE;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// A Request's list against a list (a vector or another Request's list).
template <typename Repeated, typename List>
bool SameList(const Repeated& a, const List& b) {
  if (static_cast<size_t>(a.size()) != static_cast<size_t>(b.size())) {
    return false;
  }
  for (int i = 0; i < a.size(); ++i) {
    if (a.Get(i) != b[i]) return false;
  }
  return true;
}

}  // namespace

void FillRequest(const PendingOp& op, std::string invalid,
                 proto::Request* out) {
  proto::Request& r = *out;
  r.Clear();  // keeps the strings' and lists' storage
  r.set_name(op.name);
  r.set_op(op.op);
  r.set_process_set(op.process_set);
  if (!op.group.empty()) {
    r.set_group(op.group);
    r.set_group_size(op.group_size);
  }
  if (!op.order_stream.empty()) {
    r.set_order_stream(op.order_stream);
    r.set_order_slot(op.order_slot);
    if (!op.order_void.empty()) r.set_order_void(op.order_void);
  }
  if (HasTensor(op.op)) {
    r.set_dtype(static_cast<int>(op.input.dtype));
    r.mutable_shape()->Add(op.input.shape.begin(), op.input.shape.end());
    r.set_device(op.input.device);
  } else {
    r.set_device(kCpu);
  }
  r.set_reduce_op(static_cast<int>(op.reduce.op));
  r.set_prescale(op.reduce.prescale);
  r.set_postscale(op.reduce.postscale);
  r.set_root(op.root);
  for (int64_t s : op.splits) r.add_splits(s);
  for (int64_t e : op.expect) r.add_expect(e);
  if (!invalid.empty()) r.set_invalid(std::move(invalid));
}

bool Announces(const PendingOp& op, const proto::Request& r) {
  // Field by field as FillRequest writes them, with an empty `invalid`.
  const bool tensor = HasTensor(op.op);
  return r.name() == op.name && r.op() == op.op &&
         r.process_set() == op.process_set && r.group() == op.group &&
         r.group_size() == (op.group.empty() ? 0 : op.group_size) &&
         r.order_stream() == op.order_stream &&
         r.order_slot() == (op.order_stream.empty() ? 0 : op.order_slot) &&
         (op.order_stream.empty() ? r.order_void().empty()
                                  : r.order_void() == op.order_void) &&
         r.dtype() == (tensor ? static_cast<int>(op.input.dtype) : 0) &&
         (tensor ? SameList(r.shape(), op.input.shape) : r.shape_size() == 0) &&
         r.device() == (tensor ? op.input.device : kCpu) &&
         r.reduce_op() == static_cast<int>(op.reduce.op) &&
         SameBits(r.prescale(), op.reduce.prescale) &&
         SameBits(r.postscale(), op.reduce.postscale) && r.root() == op.root &&
         SameList(r.splits(), op.splits) && SameList(r.expect(), op.expect) &&
         r.invalid().empty();
}

bool SameRequest(const proto::Request& a, const proto::Request& b) {
  return a.op() == b.op() && a.dtype() == b.dtype() &&
         a.reduce_op() == b.reduce_op() && a.root() == b.root() &&
         a.device() == b.device() && SameBits(a.prescale(), b.prescale()) &&
         SameBits(a.postscale(), b.postscale()) &&
         SameList(a.shape(), b.shape()) && SameList(a.splits(), b.splits()) &&
         SameList(a.expect(), b.expect()) && a.name() == b.name() &&
         a.invalid() == b.invalid() && a.process_set() == b.process_set() &&
         a.group() == b.group() && a.group_size() == b.group_size() &&
         a.order_stream() == b.order_stream() &&
         a.order_slot() == b.order_slot() && a.order_void() == b.order_void();
}

proto::Request MakeRequest(PendingOp& op, int rank, int size) {
  proto::Request r;
  std::string invalid = ValidateOp(op, rank, size);
  FillRequest(op, std::move(invalid), &r);
  return r;
}

}  // namespace worker
}  // namespace kolo
