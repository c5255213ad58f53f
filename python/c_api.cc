// kolo._kolo._c_api: the capsule holding kolo's C++ API table (c_api.h).
//
// Thread-safety: the table is a constant initialised at compile time.
#include "python/c_api.h"

#include <pybind11/pybind11.h>

#include "python/elastic_binding.h"
#include "worker_lib/api/api_internal.h"

namespace kolo::python {
namespace {

const CApi kCApi = {
    kCApiVersion,
    &is_initialized,
    &rank,
    &size,
    &allreduce_async,
    &grouped_allreduce_async,
    &allgather_async,
    &broadcast_async,
    &alltoall_async,
    &reducescatter_async,
    &barrier_async,
    &synchronize,
    &wait_any,
    &process_set_ranks,
    &MembershipKind,
    &internal::OrderNextSubmission,
    &internal::VoidOrderedCall,
};

}  // namespace

void BindCApi(pybind11::module_& m) {
  m.attr("_c_api") =
      pybind11::capsule(const_cast<CApi*>(&kCApi), kCApiCapsuleName);
}

}  // namespace kolo::python
