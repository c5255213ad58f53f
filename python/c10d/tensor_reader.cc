#include "python/c10d/tensor_reader.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/python.h>

#include "python/c10d/tensors.h"
#include "python/tensor_reader.h"

namespace kolo::c10d_backend {
namespace {

bool ReadHotTensor(PyObject* object, Tensor* out) {
  try {
    const at::Tensor& t = THPVariable_Unpack(object);
    if (!t.defined() || t.layout() != at::kStrided || !t.is_cpu() ||
        !t.is_contiguous()) {
      return false;
    }
    DataType type = DataType::kFloat32;
    if (!KoloType(t.scalar_type(), &type) || type == DataType::kBool) {
      return false;
    }
    const at::IntArrayRef sizes = t.sizes();
    out->shape.assign(sizes.begin(), sizes.end());
    out->data = t.data_ptr();  // throws for a tensor without storage
    out->dtype = type;
    out->device = kCpu;
    return true;
  } catch (const std::exception&) {
    return false;  // the general path reads it again and says what is wrong
  }
}

const python::TensorReader reader{python::kTensorReaderVersion, &ReadHotTensor};

}  // namespace

void BindTensorReader(pybind11::module_& m) {
  m.attr("tensor_reader") = pybind11::reinterpret_steal<pybind11::object>(
      PyCapsule_New(const_cast<python::TensorReader*>(&reader),
                    python::kTensorReaderCapsuleName, nullptr));
}

}  // namespace kolo::c10d_backend
