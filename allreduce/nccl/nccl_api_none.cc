// RealNcclApi for a kolo built without NCCL: none.
#include "allreduce/nccl/nccl_api.h"

namespace kolo::nccl {

std::unique_ptr<NcclApi> RealNcclApi() { return nullptr; }

}  // namespace kolo::nccl
