// Stager: moves CUDA tensors' bytes through pinned host memory, so that
// kolo's host data plane (TCP) can reduce them — the path of CUDA tensors
// without NCCL, or that NCCL cannot serve (docs/design.md "Data plane").
//
// In: one tensor is copied device-to-host directly; several (a fused group)
// are first packed into a persistent device buffer, one device-to-device
// copy each, and then cross to the host in ONE copy (PCIe moves one large
// transfer far better than many small ones). Out: the reverse — the host
// results lie packed in one pinned buffer, cross in one copy, and are
// unpacked on the device. Outputs whose size is known only after
// negotiation (allgather, alltoall) get pinned scratch (Scratch) and are
// copied one by one.
//
// Layout: member i at offset Pack(sizes)[i]: back to back in order, each
// start rounded up to kStagingAlignment, so that every member is aligned
// for any dtype and for the copy engines.
//
// Every copy is enqueued on DeviceOps' stream; the caller synchronises
// (DeviceOps::Synchronize) before it reads host memory that In filled and
// after Out, before it reports the op done.
//
// Thread-safety: one thread at a time (the plan runner). Pointers returned
// stay valid until the next call of the same method, or Reset() for
// Scratch.
#ifndef KOLO_ALLREDUCE_CUDA_STAGING_H_
#define KOLO_ALLREDUCE_CUDA_STAGING_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "allreduce/cuda/device_ops.h"

namespace kolo::cuda {

inline constexpr size_t kStagingAlignment = 256;

// Offsets of `sizes` packed as described above; *total = the end of the
// last one (0 for none).
std::vector<size_t> Pack(absl::Span<const size_t> sizes, size_t* total);

class Stager {
 public:
  // `ops` is borrowed and must outlive the Stager.
  explicit Stager(DeviceOps* ops) : ops_(ops) {}
  ~Stager();
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;

  // Enqueues the copies of device buffers `inputs[i]` (`sizes[i]` bytes) to
  // pinned host memory; returns where each will be (packed as Pack says).
  absl::StatusOr<std::vector<void*>> In(absl::Span<const void* const> inputs,
                                        absl::Span<const size_t> sizes);
  // Pinned host regions for outputs of `sizes` bytes, packed; Out copies
  // them to the device.
  absl::StatusOr<std::vector<void*>> OutHost(absl::Span<const size_t> sizes);
  // Enqueues the copies of the regions OutHost gave last to `outputs`
  // (device buffers; one per size given there).
  absl::Status Out(absl::Span<void* const> outputs);
  // Pinned host memory of `bytes`, valid until Reset().
  absl::StatusOr<void*> Scratch(size_t bytes);
  // Ends an op: the scratch blocks are kept for reuse.
  void Reset();

 private:
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Grows `b` to at least `bytes` (contents not kept).
  absl::Status Grow(Block& b, size_t bytes, bool device);

  DeviceOps* const ops_;
  Block device_pack_;  // device: packed inputs, then packed outputs
  Block host_in_;      // pinned: packed inputs
  Block host_out_;     // pinned: packed outputs
  std::vector<size_t> out_offsets_, out_sizes_;
  size_t out_total_ = 0;
  struct ScratchBlock {
    Block block;
    size_t used = 0;
  };
  std::vector<ScratchBlock> scratch_;
};

}  // namespace kolo::cuda

#endif  // KOLO_ALLREDUCE_CUDA_STAGING_H_
