// kolo._kolo_c10d's torch tensor reader (python/tensor_reader.h): kolo.torch's
// hot path reads a tensor's layout, device, contiguity, dtype, shape and
// data pointer through torch's C++ accessors, a few nanoseconds each, rather
// than through six Python attribute lookups.
//
// Thread-safety: the reader runs with the GIL held; the table is immutable.
#ifndef KOLO_PYTHON_C10D_TENSOR_READER_H_
#define KOLO_PYTHON_C10D_TENSOR_READER_H_

namespace pybind11 {
class module_;
}

namespace kolo::c10d_backend {

// Sets `m.tensor_reader`, the capsule kolo._kolo.set_tensor_reader takes.
void BindTensorReader(pybind11::module_& m);

}  // namespace kolo::c10d_backend

#endif  // KOLO_PYTHON_C10D_TENSOR_READER_H_
