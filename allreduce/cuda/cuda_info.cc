#include "allreduce/cuda/cuda_info.h"

#include <mutex>

#include "absl/strings/str_cat.h"

#if KOLO_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace kolo::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string why;  // "" when count > 0
};

const Probe& GetProbe() {
  static const Probe probe = [] {
    Probe probe_value;
    Probe* p = &probe_value;
#if KOLO_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky error for later calls
      p->why = absl::StrCat(
          "no CUDA device is usable in this process (cudaGetDeviceCount: ",
          cudaGetErrorName(e), ": ", cudaGetErrorString(e),
          "); check the NVIDIA driver and CUDA_VISIBLE_DEVICES, or pass host "
          "tensors (device kolo::kCpu)");
    } else if (n == 0) {
      p->why =
          "no CUDA device is visible to this process (cudaGetDeviceCount "
          "returned 0); check CUDA_VISIBLE_DEVICES, or pass host tensors "
          "(device kolo::kCpu)";
    } else {
      p->count = n;
    }
#else
    p->why =
        "this kolo was built without CUDA (KOLO_WITH_CUDA=OFF, or the CUDA "
        "toolkit and NCCL were not found at build time); rebuild with "
        "-DKOLO_WITH_CUDA=ON, or pass host tensors (device kolo::kCpu)";
#endif
    return probe_value;
  }();
  return probe;
}

}  // namespace

bool Built() { return KOLO_HAVE_CUDA != 0; }

int NcclVersion() {
#if KOLO_HAVE_CUDA
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
#else
  return 0;
#endif
}

int DeviceCount() { return GetProbe().count; }

std::string Unusable(int device) {
  const Probe& p = GetProbe();
  if (!p.why.empty()) return p.why;
  if (device >= p.count) {
    return absl::StrCat("CUDA device ", device, " does not exist: ", p.count,
                        " device(s) are visible to this process (ordinals 0..",
                        p.count - 1, "; check CUDA_VISIBLE_DEVICES)");
  }
  return "";
}

}  // namespace kolo::cuda
