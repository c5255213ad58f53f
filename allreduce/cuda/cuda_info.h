// What this build and this machine offer for CUDA tensors: the answers
// behind kolo::cuda_built(), nccl_built(), cuda_device_count() and
// cuda_status() (include/kolo/kolo.h).
//
// Thread-safety: every function may be called from any thread; the device
// probe runs once (the first call) and is then cached.
#ifndef KOLO_ALLREDUCE_CUDA_CUDA_INFO_H_
#define KOLO_ALLREDUCE_CUDA_CUDA_INFO_H_

#include <string>

namespace kolo::cuda {

// Whether kolo was built with CUDA and NCCL (KOLO_WITH_CUDA, cmake/
// KoloCuda.cmake: the two come together).
bool Built();
// ncclGetVersion() (e.g. 22809), 0 when not built.
int NcclVersion();
// Usable devices (cudaGetDeviceCount), 0 when none or not built.
int DeviceCount();
// "" when device `device` (or, for -1, any device) can run CUDA tensors,
// else why not, as a sentence that says what to do.
std::string Unusable(int device = -1);

}  // namespace kolo::cuda

#endif  // KOLO_ALLREDUCE_CUDA_CUDA_INFO_H_
