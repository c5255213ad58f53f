#include "bench/device_buffer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

#if KOLO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kolo::bench {

#if KOLO_HAVE_CUDA

namespace {
absl::Status Err(cudaError_t e, const char* what, int device) {
  return absl::InternalError(absl::StrCat("kolo-bench: ", what,
                                          " on CUDA device ", device, ": ",
                                          cudaGetErrorString(e)));
}
}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Make(int device,
                                                                 size_t bytes) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return Err(e, "cudaSetDevice", device);
  }
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
      e != cudaSuccess) {
    return Err(e, "cudaMalloc", device);
  }
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(p, device));
}

DeviceBuffer::~DeviceBuffer() {
  cudaSetDevice(device_);
  cudaFree(data_);
}

absl::Status DeviceBuffer::Upload(const void* host, size_t bytes) {
  cudaSetDevice(device_);
  cudaError_t e = cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice);
  // A pageable copy may return before it lands, and kolo's stream does not
  // wait for the legacy default stream (no ready_event here).
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return e == cudaSuccess ? absl::OkStatus() : Err(e, "upload", device_);
}

absl::Status DeviceBuffer::Download(void* host, size_t bytes) const {
  cudaSetDevice(device_);
  cudaError_t e = cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost);
  return e == cudaSuccess ? absl::OkStatus() : Err(e, "download", device_);
}

#else

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Make(int, size_t) {
  return absl::FailedPreconditionError(
      "kolo-bench --device cuda: this kolo was built without CUDA "
      "(-DKOLO_WITH_CUDA=ON to build with it)");
}
DeviceBuffer::~DeviceBuffer() { (void)device_; }  // no device to free
absl::Status DeviceBuffer::Upload(const void*, size_t) {
  return absl::FailedPreconditionError("no CUDA");
}
absl::Status DeviceBuffer::Download(void*, size_t) const {
  return absl::FailedPreconditionError("no CUDA");
}

#endif

}  // namespace kolo::bench
