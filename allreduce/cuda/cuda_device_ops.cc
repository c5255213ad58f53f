// DeviceOps on a real device through the CUDA runtime API (CUDA::cudart;
// never the driver library, which machines without a GPU lack). Built only
// with KOLO_HAVE_CUDA; device_ops_none.cc stands in otherwise.
//
// The current device is per thread in the CUDA runtime and plans may run on
// more than one thread (the background thread, or a caller that waits), so
// every call sets it first (cheap: no context switch once set).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/cuda/cuda_info.h"
#include "allreduce/cuda/device_ops.h"
#include "common/mutex.h"

namespace kolo::cuda {
namespace {

absl::Status CudaError(cudaError_t e, absl::string_view what, int device) {
  return absl::InternalError(absl::StrCat("CUDA ", what, " on device ", device,
                                          " failed: ", cudaGetErrorName(e),
                                          ": ", cudaGetErrorString(e)));
}

cudaMemcpyKind KindOf(CopyKind k) {
  switch (k) {
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToDevice:
      // Default (unified addressing): also right when a tensor lives on
      // another device of this process than kolo's stream.
      return cudaMemcpyDefault;
  }
  return cudaMemcpyDefault;
}

class CudaDeviceOps final : public DeviceOps {
 public:
  explicit CudaDeviceOps(int device) : device_(device) {}
  ~CudaDeviceOps() override {
    cudaSetDevice(device_);
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      return CudaError(e, "cudaSetDevice", device_);
    }
    int least = 0, greatest = 0;
    if (cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
        e != cudaSuccess) {
      return CudaError(e, "cudaDeviceGetStreamPriorityRange", device_);
    }
    if (cudaError_t e = cudaStreamCreateWithPriority(
            &stream_, cudaStreamNonBlocking, greatest);
        e != cudaSuccess) {
      return CudaError(e, "cudaStreamCreateWithPriority", device_);
    }
    if (cudaError_t e =
            cudaEventCreateWithFlags(&done_, cudaEventDisableTiming);
        e != cudaSuccess) {
      return CudaError(e, "cudaEventCreate", device_);
    }
    return absl::OkStatus();
  }

  int device() const override { return device_; }
  void* stream() override { return stream_; }
  absl::StatusOr<std::string> PciBusId() override {
    char id[64] = {};
    if (cudaError_t e = cudaDeviceGetPCIBusId(id, sizeof(id) - 1, device_);
        e != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaError(e, "cudaDeviceGetPCIBusId", device_);
    }
    return std::string(id);
  }

  absl::Status Copy(void* dst, const void* src, size_t bytes,
                    CopyKind kind) override {
    if (bytes == 0) return absl::OkStatus();
    cudaSetDevice(device_);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, KindOf(kind), stream_);
    return e == cudaSuccess
               ? absl::OkStatus()
               : CudaError(e,
                           absl::StrCat("copy (", CopyKindName(kind), ", ",
                                        bytes, " bytes)"),
                           device_);
  }

  absl::Status WaitEvent(void* event) override {
    cudaSetDevice(device_);
    cudaError_t e =
        cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event), 0);
    return e == cudaSuccess
               ? absl::OkStatus()
               : CudaError(e, "cudaStreamWaitEvent (the tensor's ready_event)",
                           device_);
  }

  absl::Status RecordEvent(void* event) override {
    cudaSetDevice(device_);
    cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(event), stream_);
    return e == cudaSuccess
               ? absl::OkStatus()
               : CudaError(e, "cudaEventRecord (the tensor's done_event)",
                           device_);
  }

  absl::Status Synchronize(absl::Time deadline) override {
    cudaSetDevice(device_);
    if (cudaError_t e = cudaEventRecord(done_, stream_); e != cudaSuccess) {
      return CudaError(e, "cudaEventRecord", device_);
    }
    // Polls with a growing sleep (10 us .. 1 ms): no core spins on a GPU
    // that takes long, and short copies are seen within microseconds.
    absl::Duration nap = absl::Microseconds(10);
    while (true) {
      if (aborted_.load(std::memory_order_acquire)) {
        MutexLock lock(&mu_);
        return why_;
      }
      cudaError_t e = cudaEventQuery(done_);
      if (e == cudaSuccess) return absl::OkStatus();
      if (e != cudaErrorNotReady) {
        return CudaError(e, "work on kolo's stream", device_);
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "the CUDA work on kolo's stream (device ", device_,
            ") did not finish in time; a ready_event that is never recorded "
            "also stalls it"));
      }
      absl::SleepFor(nap);
      nap = std::min(nap * 2, absl::Milliseconds(1));
    }
  }

  absl::Status Mark() override {
    cudaSetDevice(device_);
    cudaError_t e = cudaEventRecord(done_, stream_);
    return e == cudaSuccess ? absl::OkStatus()
                            : CudaError(e, "cudaEventRecord", device_);
  }
  absl::StatusOr<bool> Reached() override {
    cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    return CudaError(e, "work on kolo's stream", device_);
  }

  void Abort(absl::Status why) override {
    MutexLock lock(&mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    why_ = std::move(why);
    aborted_.store(true, std::memory_order_release);
  }

  absl::StatusOr<void*> AllocDevice(size_t bytes) override {
    cudaSetDevice(device_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("cudaMalloc of ", bytes, " bytes on device ", device_,
                       " failed: ", cudaGetErrorString(e),
                       "; lower KOLO_FUSION_THRESHOLD or free device memory"));
    }
    return p;
  }
  void FreeDevice(void* p) override {
    cudaSetDevice(device_);
    cudaFree(p);
  }
  absl::StatusOr<void*> AllocHost(size_t bytes) override {
    void* p = nullptr;
    cudaError_t e = cudaMallocHost(&p, std::max<size_t>(bytes, 1));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "cudaMallocHost of ", bytes,
          " bytes of pinned host memory failed: ", cudaGetErrorString(e)));
    }
    return p;
  }
  void FreeHost(void* p) override { cudaFreeHost(p); }

 private:
  const int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  std::atomic<bool> aborted_{false};
  Mutex mu_;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceOps>> OpenDevice(int device) {
  if (std::string why = Unusable(device); !why.empty()) {
    return absl::FailedPreconditionError(why);
  }
  auto ops = std::make_unique<CudaDeviceOps>(device);
  if (absl::Status s = ops->Init(); !s.ok()) return s;
  return ops;
}

}  // namespace kolo::cuda
