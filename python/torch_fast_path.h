// The torch fast path of kolo._kolo: allreduce_tensor_fast, kolo.torch's
// allreduce_async_ on the hot path of a training step (one call per
// gradient), done in C with a torch tensor in hand, and
// set_tensor_fast_path, which gives it the objects it needs at import. It
// includes no torch header: it reads a tensor with the reader of
// kolo._kolo_c10d (python/tensor_reader.h; set_tensor_reader), or through
// torch's Python attributes in a build without that module. Arguments that
// are not for the hot path make it return None, and kolo.torch takes its
// general path.
//
// Thread-safety: every function runs with the GIL held and never releases
// it; the GIL guards the state here (the objects from set_tensor_fast_path
// and set_tensor_reader, and the reused request buffers).
// Invariants: the objects from set_tensor_fast_path are set once and never
// freed; every handle it returns is in the engine's handle map, with the
// tensor as its entry.
#ifndef KOLO_PYTHON_TORCH_FAST_PATH_H_
#define KOLO_PYTHON_TORCH_FAST_PATH_H_

#include <Python.h>

namespace pybind11 {
class module_;
}

namespace kolo::python {

// Adds allreduce_tensor_fast, set_tensor_fast_path and set_tensor_reader to
// kolo._kolo.
// `error` is kolo._kolo.Error (a failed submission raises it); `handles`
// points at the engine's handle map (kolo/_engine.py: handle -> entry),
// which is null until set_handle_map and read at each call.
void BindTensorFastPath(pybind11::module_& m, PyObject* error,
                        PyObject* const* handles);

}  // namespace kolo::python

#endif  // KOLO_PYTHON_TORCH_FAST_PATH_H_
