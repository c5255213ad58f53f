// kolo._kolo_c10d: the native half of kolo.torch.distributed, and the torch
// tensor reader of kolo.torch's hot path (tensor_reader.h). create()
// makes a ProcessGroupKolo (returned as torch's c10d ProcessGroup, so torch
// wraps it as its own); kolo's API comes from kolo._kolo's capsule
// (python/c_api.h), so both modules drive the one engine _kolo holds.
//
// Thread-safety: create() runs with the GIL released; the API table is read
// once at import, with the GIL held, and never changes.
#include <pybind11/chrono.h>
#include <torch/python.h>

#include <chrono>
#include <string>

#include "absl/time/time.h"
#include "python/c10d/process_group_kolo.h"
#include "python/c10d/tensor_reader.h"

namespace {

const kolo::python::CApi* api = nullptr;

// timeout: the group's (torch's timedelta); zero or less is none.
c10::intrusive_ptr<c10d::ProcessGroup> Create(
    int rank, int size, int process_set, const std::string& uid,
    std::chrono::milliseconds timeout) {
  absl::Duration t = timeout.count() > 0 ? absl::FromChrono(timeout)
                                         : absl::InfiniteDuration();
  return c10::make_intrusive<kolo::c10d_backend::ProcessGroupKolo>(
      api, rank, size, process_set, uid, t);
}

}  // namespace

PYBIND11_MODULE(_kolo_c10d, m) {
  namespace py = pybind11;
  m.doc() = "kolo's torch.distributed backend (use kolo.torch.distributed)";
  py::module_::import("torch.distributed");  // registers ProcessGroup
  void* table = PyCapsule_Import(kolo::python::kCApiCapsuleName, 0);
  if (table == nullptr) throw py::error_already_set();
  api = static_cast<const kolo::python::CApi*>(table);
  if (api->version != kolo::python::kCApiVersion) {
    throw std::runtime_error(
        "kolo._kolo_c10d: kolo._kolo's API table is version " +
        std::to_string(api->version) + ", this module wants " +
        std::to_string(kolo::python::kCApiVersion) +
        " (both must come from one build)");
  }
  m.def("create", &Create, py::arg("rank"), py::arg("size"),
        py::arg("process_set"), py::arg("uid"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  kolo::c10d_backend::BindTensorReader(m);
}
