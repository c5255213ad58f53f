#include "allreduce/cuda/staging.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo::cuda {

const char* CopyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kDeviceToHost:
      return "device to host";
    case CopyKind::kHostToDevice:
      return "host to device";
    case CopyKind::kDeviceToDevice:
      return "device to device";
  }
  return "?";
}

namespace {
size_t Align(size_t n) {
  return (n + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
}
}  // namespace

std::vector<size_t> Pack(absl::Span<const size_t> sizes, size_t* total) {
  std::vector<size_t> offsets;
  offsets.reserve(sizes.size());
  size_t end = 0;
  for (size_t s : sizes) {
    const size_t at = Align(end);
    offsets.push_back(at);
    end = at + s;
  }
  *total = end;
  return offsets;
}

Stager::~Stager() {
  if (device_pack_.data != nullptr) ops_->FreeDevice(device_pack_.data);
  if (host_in_.data != nullptr) ops_->FreeHost(host_in_.data);
  if (host_out_.data != nullptr) ops_->FreeHost(host_out_.data);
  for (ScratchBlock& s : scratch_) ops_->FreeHost(s.block.data);
}

absl::Status Stager::Grow(Block& b, size_t bytes, bool device) {
  if (b.data != nullptr && b.bytes >= bytes) return absl::OkStatus();
  // Twice what is asked, so that a slowly growing workload reallocates a
  // few times only. The old buffer's pending copies are ordered before the
  // free by the stream (cudaFree synchronises).
  const size_t want = Align(std::max(bytes, 2 * b.bytes));
  if (b.data != nullptr) {
    if (device) {
      ops_->FreeDevice(b.data);
    } else {
      ops_->FreeHost(b.data);
    }
    b = Block{};
  }
  absl::StatusOr<void*> p =
      device ? ops_->AllocDevice(want) : ops_->AllocHost(want);
  if (!p.ok()) return p.status();
  b.data = *p;
  b.bytes = want;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<void*>> Stager::In(
    absl::Span<const void* const> inputs, absl::Span<const size_t> sizes) {
  KOLO_CHECK(inputs.size() == sizes.size());
  size_t total = 0;
  const std::vector<size_t> at = Pack(sizes, &total);
  if (absl::Status s = Grow(host_in_, total, false); !s.ok()) return s;
  char* host = static_cast<char*>(host_in_.data);
  std::vector<void*> out;
  for (size_t i = 0; i < at.size(); ++i) out.push_back(host + at[i]);
  if (inputs.size() == 1) {
    if (absl::Status s =
            ops_->Copy(host, inputs[0], sizes[0], CopyKind::kDeviceToHost);
        !s.ok()) {
      return s;
    }
    return out;
  }
  if (absl::Status s = Grow(device_pack_, total, true); !s.ok()) return s;
  char* dev = static_cast<char*>(device_pack_.data);
  for (size_t i = 0; i < at.size(); ++i) {
    if (absl::Status s = ops_->Copy(dev + at[i], inputs[i], sizes[i],
                                    CopyKind::kDeviceToDevice);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ops_->Copy(host, dev, total, CopyKind::kDeviceToHost);
      !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<std::vector<void*>> Stager::OutHost(
    absl::Span<const size_t> sizes) {
  out_offsets_ = Pack(sizes, &out_total_);
  out_sizes_.assign(sizes.begin(), sizes.end());
  if (absl::Status s = Grow(host_out_, out_total_, false); !s.ok()) return s;
  char* host = static_cast<char*>(host_out_.data);
  std::vector<void*> out;
  for (size_t at : out_offsets_) out.push_back(host + at);
  return out;
}

absl::Status Stager::Out(absl::Span<void* const> outputs) {
  KOLO_CHECK(outputs.size() == out_sizes_.size())
      << outputs.size() << " outputs for " << out_sizes_.size() << " regions";
  char* host = static_cast<char*>(host_out_.data);
  if (outputs.size() == 1) {
    return ops_->Copy(outputs[0], host, out_sizes_[0], CopyKind::kHostToDevice);
  }
  if (absl::Status s = Grow(device_pack_, out_total_, true); !s.ok()) {
    return s;
  }
  char* dev = static_cast<char*>(device_pack_.data);
  if (absl::Status s =
          ops_->Copy(dev, host, out_total_, CopyKind::kHostToDevice);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (absl::Status s = ops_->Copy(outputs[i], dev + out_offsets_[i],
                                    out_sizes_[i], CopyKind::kDeviceToDevice);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> Stager::Scratch(size_t bytes) {
  bytes = Align(std::max<size_t>(bytes, 1));
  for (ScratchBlock& s : scratch_) {
    if (s.block.bytes - s.used >= bytes) {
      void* p = static_cast<char*>(s.block.data) + s.used;
      s.used += bytes;
      return p;
    }
  }
  ScratchBlock s;
  if (absl::Status st =
          Grow(s.block, std::max<size_t>(bytes, size_t{1} << 20), false);
      !st.ok()) {
    return st;
  }
  s.used = bytes;
  scratch_.push_back(s);
  return scratch_.back().block.data;
}

void Stager::Reset() {
  for (ScratchBlock& s : scratch_) s.used = 0;
}

}  // namespace kolo::cuda
