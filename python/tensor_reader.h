// The torch tensor reader: how kolo.torch's hot path (torch_fast_path.h, in
// kolo._kolo, which includes no torch header) reads a torch tensor through
// torch's C++ accessors instead of its Python attributes. kolo._kolo_c10d
// (linked against libtorch) implements it (c10d/tensor_reader.h) and
// exports it in a capsule; kolo.torch hands that capsule to
// kolo._kolo.set_tensor_reader at import. Without it (a build without
// Torch's C++ package), the hot path reads the Python attributes.
//
// Thread-safety: the table is immutable; `read` runs with the GIL held.
// Invariants: both modules come from one build with one compiler (the
// capsule's table carries kTensorReaderVersion, checked when it is set), so
// kolo::Tensor has one layout in both.
#ifndef KOLO_PYTHON_TENSOR_READER_H_
#define KOLO_PYTHON_TENSOR_READER_H_

#include <Python.h>

#include "kolo/kolo.h"

namespace kolo::python {

// Bumped whenever the table changes.
inline constexpr int kTensorReaderVersion = 1;
// The capsule's name.
inline constexpr char kTensorReaderCapsuleName[] =
    "kolo._kolo_c10d.tensor_reader";

struct TensorReader {
  int version;
  // `object`, an instance of torch.Tensor (the caller checked), as a kolo
  // tensor in `*out` (its shape's storage reused) when it is what the hot
  // path takes: dense (strided), on the CPU, contiguous, of a dtype kolo has
  // other than bool. False, with `*out` unspecified and no Python error
  // set, for anything else; the general path then judges it.
  bool (*read)(PyObject* object, Tensor* out);
};

}  // namespace kolo::python

#endif  // KOLO_PYTHON_TENSOR_READER_H_
