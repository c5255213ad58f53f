#include "bench/case.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/workload.h"
#include "worker_lib/api/raw.h"

namespace kolo::bench {

absl::Status MaxOverRanks(Mode mode, std::vector<double>& values) {
  const auto count = static_cast<int64_t>(values.size());
  if (mode == Mode::kRaw) {
    return raw::allreduce(values.data(), values.data(), count,
                          DataType::kFloat64, ReduceOp::kMax);
  }
  return kolo::allreduce(values.data(), values.data(), count,
                         DataType::kFloat64, ReduceOp::kMax);
}

int64_t RoundedBytes(const BenchOptions& o, int64_t bytes, int n) {
  const auto elem = static_cast<int64_t>(DataTypeSize(o.dtype));
  const int64_t unit = SplitsSize(o.op) ? elem * n : elem;
  return bytes / unit * unit;
}

Case::Case(const BenchOptions& o, int64_t bytes, int rank, int n)
    : o_(o),
      rank_(rank),
      n_(n),
      elem_(DataTypeSize(o.dtype)),
      name_(absl::StrCat("kolo-bench.", CollectiveName(o.op))) {
  count_ = RoundedBytes(o, bytes, n) / static_cast<int64_t>(elem_);
  per_rank_ = SplitsSize(o.op) ? count_ / n : count_;
  switch (o.op) {
    case Collective::kAllreduce:
      in_.resize(count_ * elem_);
      if (!o.inplace) out_.resize(count_ * elem_);
      break;
    case Collective::kAllgather:
      in_.resize(per_rank_ * elem_);
      out_.resize(count_ * elem_);
      break;
    case Collective::kBroadcast:
      in_.resize(count_ * elem_);
      break;
    case Collective::kAlltoall:
    case Collective::kReducescatter:
      in_.resize(count_ * elem_);
      out_.resize((o.op == Collective::kAlltoall ? count_ : per_rank_) * elem_);
      break;
  }
  splits_.assign(n, per_rank_);
  if (o.cuda) {
    const int devices = cuda_device_count();
    if (devices == 0) {
      device_error_ = absl::FailedPreconditionError(
          absl::StrCat("kolo-bench --device cuda: ", cuda_status()));
    } else {
      device_ = local_rank() % devices;
      auto in = DeviceBuffer::Make(device_, in_.size());
      auto out = DeviceBuffer::Make(device_, out_.size());
      if (!in.ok() || !out.ok()) {
        device_error_ = in.ok() ? out.status() : in.status();
      } else {
        d_in_ = *std::move(in);
        d_out_ = *std::move(out);
      }
    }
  }
  Restore();
}

void Case::Upload(const std::vector<char>& host,
                  const std::unique_ptr<DeviceBuffer>& dev) {
  if (dev == nullptr || host.empty() || !device_error_.ok()) return;
  device_error_ = dev->Upload(host.data(), host.size());
}

absl::Status Case::Download() {
  if (!o_.cuda) return absl::OkStatus();
  if (!device_error_.ok()) return device_error_;
  std::vector<char>& host = out_.empty() ? in_ : out_;
  const std::unique_ptr<DeviceBuffer>& dev = out_.empty() ? d_in_ : d_out_;
  if (host.empty()) return absl::OkStatus();
  return dev->Download(host.data(), host.size());
}

void BusyFor(int64_t us) {
  if (us <= 0) return;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

void Case::Restore() {
  if (!restored_.empty()) {
    std::memcpy(in_.data(), restored_.data(), restored_.size());
    Upload(in_, d_in_);
    return;
  }
  switch (o_.op) {
    case Collective::kAllreduce:
    case Collective::kReducescatter:
      InputStream(o_.dtype, o_.reduce, rank_).Fill(0, count_, in_.data());
      break;
    case Collective::kAllgather:
      InputStream(o_.dtype, ReduceOp::kSum, rank_ + 1)
          .Fill(0, per_rank_, in_.data());
      break;
    case Collective::kBroadcast:
      if (rank_ == o_.root) {
        InputStream(o_.dtype, ReduceOp::kSum, o_.root)
            .Fill(0, count_, in_.data());
      } else {
        Poison(in_.data(), in_.size());
      }
      break;
    case Collective::kAlltoall:
      for (int j = 0; j < n_; ++j) {
        InputStream(o_.dtype, ReduceOp::kSum, int64_t{rank_} * n_ + j)
            .Fill(0, per_rank_, in_.data() + j * per_rank_ * elem_);
      }
      break;
  }
  restored_ = in_;
  Upload(in_, d_in_);
}

void Case::PoisonResult() {
  if (o_.inplace) {
    if (o_.op == Collective::kBroadcast) Restore();  // non-roots poisoned
    return;  // in-place allreduce: the input was just restored
  }
  Poison(out_.data(), out_.size());
  Upload(out_, d_out_);
}

absl::Status Case::RunOnce() {
  return o_.mode == Mode::kNegotiated ? RunNegotiated() : RunRaw();
}

absl::Status Case::RunRaw() {
  switch (o_.op) {
    case Collective::kAllreduce:
      return raw::allreduce(in_.data(), o_.inplace ? in_.data() : out_.data(),
                            count_, o_.dtype, o_.reduce);
    case Collective::kAllgather:
      return raw::allgather(in_.data(), per_rank_, o_.dtype, splits_,
                            out_.data());
    case Collective::kBroadcast:
      return raw::broadcast(in_.data(), count_, o_.dtype, o_.root);
    case Collective::kAlltoall:
      return raw::alltoall(in_.data(), o_.dtype, splits_, out_.data(), splits_);
    case Collective::kReducescatter:
      return raw::reducescatter(in_.data(), count_, o_.dtype, splits_,
                                out_.data(), o_.reduce);
  }
  return absl::InternalError("unknown collective");
}

absl::Status Case::RunNegotiated() {
  if (!device_error_.ok()) return device_error_;
  absl::StatusOr<Handle> handle = Submit();
  if (!handle.ok()) return handle.status();
  return synchronize(*handle, kOpTimeout);
}

absl::StatusOr<Handle> Case::Submit() {
  AllreduceOptions reduce;
  reduce.op = o_.reduce;
  switch (o_.op) {
    case Collective::kAllreduce:
      return allreduce_async(Vector(in_, count_),
                             Vector(o_.inplace ? in_ : out_, count_), reduce,
                             name_);
    case Collective::kAllgather:
      return allgather_async(Vector(in_, per_rank_), OutputAllocator(), name_);
    case Collective::kBroadcast:
      return broadcast_async(Vector(in_, count_), o_.root, name_);
    case Collective::kAlltoall:
      return alltoall_async(Vector(in_, count_), OutputAllocator(), splits_,
                            name_);
    case Collective::kReducescatter:
      return reducescatter_async(Vector(in_, count_), Vector(out_, per_rank_),
                                 reduce, splits_, name_);
  }
  return absl::InternalError("unknown collective");
}

Tensor Case::Vector(std::vector<char>& buffer, int64_t count) const {
  Tensor t;
  t.dtype = o_.dtype;
  t.shape = {count};
  t.data = buffer.data();
  if (o_.cuda && device_error_.ok()) {
    t.data = (&buffer == &in_ ? d_in_ : d_out_)->get();
    t.device = device_;
  }
  return t;
}

Allocator Case::OutputAllocator() {
  return [this](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    if (shape.size() != 1 || shape[0] != count_) {
      return absl::InvalidArgumentError(
          absl::StrCat("kolo-bench: ", name_, " on rank ", rank_,
                       " was given output shape [", absl::StrJoin(shape, ","),
                       "] but preallocated [", count_,
                       "]; the ranks disagree on the size (a kolo-bench bug)"));
    }
    return o_.cuda ? d_out_->get() : static_cast<void*>(out_.data());
  };
}

void Case::Corrupt() {
  std::vector<char>& result = out_.empty() ? in_ : out_;
  if (!result.empty()) result[0] = static_cast<char>(result[0] ^ 0x21);
}

absl::Status Case::Check() const {
  const std::string what = absl::StrCat(CollectiveName(o_.op), " of ", bytes(),
                                        " B on rank ", rank_, " of ", n_);
  const char* result = out_.empty() ? in_.data() : out_.data();
  switch (o_.op) {
    case Collective::kAllreduce:
      return ExpectedReduction(o_.dtype, o_.reduce, n_)
          .Check(0, count_, result, what);
    case Collective::kReducescatter:
      return ExpectedReduction(o_.dtype, o_.reduce, n_)
          .Check(rank_ * per_rank_, per_rank_, result, what);
    case Collective::kBroadcast:
      return InputStream(o_.dtype, ReduceOp::kSum, o_.root)
          .Check(0, count_, result, what);
    case Collective::kAllgather:
    case Collective::kAlltoall:
      for (int j = 0; j < n_; ++j) {
        const int64_t stream =
            o_.op == Collective::kAllgather ? j + 1 : int64_t{j} * n_ + rank_;
        absl::Status st =
            InputStream(o_.dtype, ReduceOp::kSum, stream)
                .Check(0, per_rank_, result + j * per_rank_ * elem_,
                       absl::StrCat(what, ", block from rank ", j));
        if (!st.ok()) return st;
      }
      return absl::OkStatus();
  }
  return absl::InternalError("unknown collective");
}

}  // namespace kolo::bench
