// OpenDevice for a kolo built without CUDA: there is no device to open.
#include "allreduce/cuda/cuda_info.h"
#include "allreduce/cuda/device_ops.h"

namespace kolo::cuda {

absl::StatusOr<std::unique_ptr<DeviceOps>> OpenDevice(int /*device*/) {
  return absl::FailedPreconditionError(Unusable());
}

}  // namespace kolo::cuda
