// The torch fast path of kolo._kolo (see torch_fast_path.h): what
// allreduce_tensor_fast reads from a torch tensor and submits.
//
// Thread-safety: the GIL, held throughout every call, guards all state here.
// Invariants: `fast_path` is set once (set_tensor_fast_path) and never freed;
// a handle is returned only once it is in the handle map.
#include "python/torch_fast_path.h"

#include <pybind11/pybind11.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "absl/status/statusor.h"
#include "kolo/kolo.h"
#include "kolo/types.h"
#include "python/elastic_binding.h"
#include "python/tensor_reader.h"

namespace py = pybind11;

namespace kolo::python {
namespace {

// kolo._kolo.Error and the engine's handle map (BindTensorFastPath).
PyObject* error_type = nullptr;
PyObject* const* handle_map = nullptr;

// allreduce_async_ of kolo.torch on the hot path, tensor in hand (one call
// per gradient): Python's checks, dtype mapping, op and scale resolution
// and handle map cost more than the submission itself. The objects it
// needs come from kolo.torch at import (set_tensor_fast_path): the tensor
// type, the strided layout, dtype -> code for the dtypes it takes, Horovod
// op -> kolo op code and Horovod's Average. It includes no torch header: it
// reads a tensor with kolo._kolo_c10d's reader when kolo.torch set one
// (tensor_reader.h), else through torch's Python attributes (layout,
// is_cpu, is_contiguous(), dtype, data_ptr(), shape). Its handles go in the
// engine's handle map, its tensor as the entry.
struct TensorFastPath {
  PyObject* tensor_type = nullptr;
  PyObject* strided = nullptr;
  PyObject* codes = nullptr;  // dtype -> dtype code
  PyObject* ops = nullptr;    // Horovod op -> reduce op code
  PyObject* average = nullptr;
  PyObject* layout = nullptr;  // attribute names, interned
  PyObject* is_cpu = nullptr;
  PyObject* is_contiguous = nullptr;
  PyObject* dtype = nullptr;
  PyObject* data_ptr = nullptr;
  PyObject* shape = nullptr;
  PyObject* empty = nullptr;  // "" for format()
};
TensorFastPath fast_path;  // set once at import; never freed
// kolo._kolo_c10d's, when kolo.torch set it (set_tensor_reader); null: the
// tensor's Python attributes are read.
const TensorReader* reader = nullptr;

void SetTensorFastPath(py::object tensor_type, py::object strided,
                       py::dict codes, py::dict ops, py::object average) {
  auto keep = [](py::handle h) { return Py_NewRef(h.ptr()); };
  auto name = [](const char* s) { return PyUnicode_InternFromString(s); };
  fast_path =
      TensorFastPath{keep(tensor_type), keep(strided),         keep(codes),
                     keep(ops),         keep(average),         name("layout"),
                     name("is_cpu"),    name("is_contiguous"), name("dtype"),
                     name("data_ptr"),  name("shape"),         name("")};
}

// set_tensor_reader(capsule): reads tensors with kolo._kolo_c10d's reader
// from now on (None: through the Python attributes again); raises unless
// the capsule is one of the same version.
void SetTensorReader(const py::object& capsule) {
  if (capsule.is_none()) {
    reader = nullptr;
    return;
  }
  auto* table = static_cast<const TensorReader*>(
      PyCapsule_GetPointer(capsule.ptr(), kTensorReaderCapsuleName));
  if (table == nullptr) throw py::error_already_set();
  if (table->version != kTensorReaderVersion) {
    throw std::runtime_error(
        "kolo._kolo: the tensor reader of kolo._kolo_c10d is version " +
        std::to_string(table->version) + ", this module wants " +
        std::to_string(kTensorReaderVersion) +
        " (both must come from one build)");
  }
  reader = table;
}

// The attribute (or, `call`, the result of the no-argument method) `name`
// of `o` (a new reference), or NULL with an error set.
PyObject* Attribute(PyObject* o, PyObject* name, bool call = false) {
  if (!call) return PyObject_GetAttr(o, name);
  PyObject* args[] = {o};
  return PyObject_VectorcallMethod(name, args,
                                   1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

// What the hot path submits, read from the arguments; false when they are
// not the hot path's (any Python error on the way is cleared: the general
// path in Python raises it again, at its own point).
struct FastRequest {
  Tensor tensor;
  AllreduceOptions options;
  std::string name;
};

// The tensor as a kolo tensor read through its Python attributes (layout,
// is_cpu, is_contiguous(), dtype, shape, data_ptr()); false when it is not
// the hot path's.
bool ReadTensorAttributes(PyObject* tensor, Tensor& out) {
  const TensorFastPath& f = fast_path;
  auto is = [](PyObject* got, PyObject* want) {  // steals `got`
    const bool same = got == want;
    Py_XDECREF(got);
    return same;
  };
  if (!is(Attribute(tensor, f.layout), f.strided) ||
      !is(Attribute(tensor, f.is_cpu), Py_True) ||
      !is(Attribute(tensor, f.is_contiguous, /*call=*/true), Py_True)) {
    return false;
  }
  PyObject* dtype = Attribute(tensor, f.dtype);
  if (dtype == nullptr) return false;
  PyObject* code = PyDict_GetItemWithError(f.codes, dtype);  // borrowed
  Py_DECREF(dtype);
  if (code == nullptr) return false;
  out.dtype = static_cast<DataType>(PyLong_AsLong(code));
  PyObject* shape = Attribute(tensor, f.shape);
  if (shape == nullptr) return false;
  const bool tuple = PyTuple_Check(shape) != 0;
  if (tuple) {
    const Py_ssize_t dims = PyTuple_GET_SIZE(shape);
    out.shape.resize(static_cast<size_t>(dims));
    for (Py_ssize_t i = 0; i < dims; ++i) {
      out.shape[static_cast<size_t>(i)] =
          PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    }
  }
  Py_DECREF(shape);
  if (!tuple) return false;
  PyObject* ptr = Attribute(tensor, f.data_ptr, /*call=*/true);
  if (ptr == nullptr) return false;
  out.data = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  out.device = kCpu;
  return PyErr_Occurred() == nullptr;
}

bool ReadFastRequest(PyObject* const* args, FastRequest& r) {
  PyObject* tensor = args[0];
  const TensorFastPath& f = fast_path;
  if (f.tensor_type == nullptr ||
      PyObject_TypeCheck(tensor,
                         reinterpret_cast<PyTypeObject*>(f.tensor_type)) == 0) {
    return false;
  }
  if (reader != nullptr ? !reader->read(tensor, &r.tensor)
                        : !ReadTensorAttributes(tensor, r.tensor)) {
    return false;
  }
  const int world = size();
  if (world <= 0) return false;  // not initialised
  // Horovod's op: Average is a Sum whose postscale is divided by the size.
  PyObject* op = args[1];
  const int average = PyObject_RichCompareBool(op, f.average, Py_EQ);
  if (average < 0) return false;
  PyObject* op_code =
      average != 0 ? nullptr : PyDict_GetItemWithError(f.ops, op);
  if (average == 0 && op_code == nullptr) return false;  // Adasum, unknown
  r.options.op = average != 0 ? ReduceOp::kSum
                              : static_cast<ReduceOp>(PyLong_AsLong(op_code));
  // float() of each factor, as Python.
  PyObject* pre = PyNumber_Float(args[2]);
  if (pre == nullptr) return false;
  r.options.prescale = PyFloat_AS_DOUBLE(pre);
  Py_DECREF(pre);
  PyObject* post = PyNumber_Float(args[3]);
  if (post == nullptr) return false;
  r.options.postscale = PyFloat_AS_DOUBLE(post) / (average != 0 ? world : 1);
  Py_DECREF(post);
  // "allreduce.<name>" (format(name), as an f-string), or "" for None.
  r.name.clear();
  if (args[4] != Py_None) {
    PyObject* text = PyObject_Format(args[4], f.empty);
    if (text == nullptr) return false;
    Py_ssize_t n = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    if (utf8 != nullptr) {
      r.name.reserve(10 + static_cast<size_t>(n));
      r.name.append("allreduce.").append(utf8, static_cast<size_t>(n));
    }
    Py_DECREF(text);
    if (utf8 == nullptr) return false;
  }
  return PyErr_Occurred() == nullptr;
}

// allreduce_tensor_fast(tensor, op, prescale, postscale, name): submits an
// in-place allreduce of `tensor` over the global set, records it in the
// handle map and returns the handle; None when the arguments are not for
// the hot path (see ReadFastRequest), so that the caller takes the general
// path. A failed submission raises kolo._kolo.Error.
PyObject* FastAllreduceTensor(PyObject* /*self*/, PyObject* const* args,
                              Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "allreduce_tensor_fast takes 5 arguments");
    return nullptr;
  }
  if (*handle_map == nullptr) Py_RETURN_NONE;
  // Its buffers are reused. One for the process: the GIL, held throughout,
  // guards it (a thread_local costs a TLS lookup per call in a module).
  static FastRequest r;
  if (!ReadFastRequest(args, r)) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  absl::StatusOr<Handle> h =
      allreduce_async(r.tensor, r.tensor, r.options, r.name, kGlobalProcessSet);
  if (!h.ok()) {
    PyObject* value = ErrorArgs(h.status());
    PyErr_SetObject(error_type, value);
    Py_XDECREF(value);
    return nullptr;
  }
  PyObject* handle = PyLong_FromLongLong(*h);
  if (handle == nullptr || PyDict_SetItem(*handle_map, handle, args[0]) != 0) {
    Py_XDECREF(handle);
    return nullptr;
  }
  return handle;
}

PyMethodDef fast_tensor_def = {
    "allreduce_tensor_fast",
    reinterpret_cast<PyCFunction>(
        reinterpret_cast<void (*)()>(&FastAllreduceTensor)),
    METH_FASTCALL, "allreduce_async_ for the hot path (see torch_fast_path.h)"};

}  // namespace

void BindTensorFastPath(py::module_& m, PyObject* error,
                        PyObject* const* handles) {
  error_type = error;
  handle_map = handles;
  m.attr("allreduce_tensor_fast") = py::reinterpret_steal<py::object>(
      PyCFunction_New(&fast_tensor_def, nullptr));
  m.def("set_tensor_reader", &SetTensorReader, py::arg("capsule"));
  m.def("set_tensor_fast_path", &SetTensorFastPath, py::arg("tensor_type"),
        py::arg("strided"), py::arg("codes"), py::arg("ops"),
        py::arg("average"));
}

}  // namespace kolo::python
