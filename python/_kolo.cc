// kolo._kolo: the native module of the `kolo` Python package, a thin pybind11
// layer over kolo's C++ API (include/kolo/kolo.h) on raw host buffers: a
// tensor is (data pointer as an int, shape, dtype code). It includes nothing
// of torch or NumPy; names, checks, dtype mapping and the handle map live in
// Python (kolo/_engine.py, kolo/torch/mpi_ops.py), which keeps every input
// and output alive until synchronize() returns -- except on the hot path of
// a training step (kolo.torch's allreduce_async_ and synchronize, one call
// per gradient), which does the same in C with the objects Python gives it
// at import (python/torch_fast_path.h).
//
// Outputs whose size is known only after negotiation (allgather, alltoall)
// are allocated here, on kolo's background thread, into a Buffer that
// synchronize() hands to Python (host: buffer protocol, writable,
// zero-copy; CUDA: a DLPack capsule, python/device_buffer.h). No Python code
// ever runs on kolo's threads.
//
// CUDA tensors: a pointer argument is a DevicePointer (device ordinal and
// ready event beside the address); a plain int is a host pointer.
//
// GIL: released in every wait (init, shutdown, synchronize, join, barrier);
// waits run in slices of kWaitSlice with the GIL released, checking for
// signals between slices, so that Ctrl-C ends a wait and other Python
// threads run meanwhile. Submissions hold the GIL: they never block.
//
// Errors: every failed absl::Status is raised as kolo._kolo.Error
// (a RuntimeError) with args (code: int, message: str, membership: str,
// skip_sync: bool): the absl code, and what kind of membership change
// ended the op (elastic_binding.h); kolo/common/exceptions.py maps it to
// Horovod's classes.
//
// Thread-safety: every function may be called from any Python thread.
// Invariant: an entry of `allocated` exists exactly while its handle is in
// flight (added at submission, removed by synchronize).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "kolo/kolo.h"
#include "kolo/types.h"
#include "python/c_api.h"
#include "python/device_buffer.h"
#include "python/elastic_binding.h"
#include "python/torch_fast_path.h"
#include "worker_lib/api/api_internal.h"

namespace py = pybind11;

namespace kolo::python {
namespace {

// How long a wait holds the GIL released before it looks for signals.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(200);

// A failed status, thrown to the translator registered in the module.
struct StatusError {
  absl::Status status;
};

[[noreturn]] void Throw(const absl::Status& s) { throw StatusError{s}; }
void Check(const absl::Status& s) {
  if (!s.ok()) Throw(s);
}
template <typename T>
T Value(absl::StatusOr<T> v) {
  if (!v.ok()) Throw(v.status());
  return *std::move(v);
}

DataType TypeOf(int code) {
  if (code < 0 || code >= kNumDataTypes) {
    Throw(absl::InvalidArgumentError(
        "kolo: dtype code " + std::to_string(code) + " is not one of kolo's"));
  }
  return static_cast<DataType>(code);
}

ReduceOp OpOf(int code) {
  if (code < 0 || code >= kNumReduceOps) {
    Throw(absl::InvalidArgumentError("kolo: reduce op code " +
                                     std::to_string(code) +
                                     " is not one of kolo's"));
  }
  return static_cast<ReduceOp>(code);
}

Tensor MakeTensor(const DevicePointer& p, std::vector<int64_t> shape,
                  int dtype) {
  Tensor t{TypeOf(dtype), std::move(shape), reinterpret_cast<void*>(p.ptr),
           p.device};
  t.ready_event = reinterpret_cast<void*>(p.ready_event);
  return t;
}

// Buffers of the handles in flight (see the invariant above).
Mutex allocated_mu;
absl::flat_hash_map<Handle, std::vector<std::shared_ptr<Buffer>>> allocated
    ABSL_GUARDED_BY(allocated_mu);

Handle Remember(absl::StatusOr<Handle> h,
                std::vector<std::shared_ptr<Buffer>> buffers) {
  Handle handle = Value(std::move(h));
  MutexLock lock(&allocated_mu);
  allocated[handle] = std::move(buffers);
  return handle;
}

std::vector<std::shared_ptr<Buffer>> Forget(Handle h) {
  MutexLock lock(&allocated_mu);
  auto it = allocated.find(h);
  if (it == allocated.end()) return {};
  std::vector<std::shared_ptr<Buffer>> out = std::move(it->second);
  allocated.erase(it);
  return out;
}

// Waits (GIL released, in slices) until `handle` finished.
void AwaitFinished(Handle handle) {
  while (true) {
    absl::StatusOr<size_t> done;
    {
      py::gil_scoped_release nogil;
      internal::SlicedWaits sliced;  // the loop waits again
      done = wait_any(absl::MakeConstSpan(&handle, 1), kWaitSlice);
    }
    if (done.ok()) return;
    if (done.status().code() != absl::StatusCode::kDeadlineExceeded) {
      Throw(done.status());
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

// (shape, splits, buffer or None, members) of one result.
py::tuple ResultTuple(const OpResult& r, std::shared_ptr<Buffer> buffer,
                      py::list members) {
  py::object buf = buffer ? py::cast(std::move(buffer)) : py::none();
  return py::make_tuple(py::tuple(py::cast(r.shape)), py::cast(r.splits),
                        std::move(buf), std::move(members));
}

// Waits for `handle`, releases it and returns its result tuple; a failed op
// raises Error.
py::tuple Synchronize(Handle handle) {
  // Most handles of a training step are done by the time they are
  // synchronized: then the GIL is not released at all, and one call
  // releases the handle.
  OpResult result;
  absl::StatusOr<bool> done = try_synchronize(handle, &result);
  absl::Status s = done.status();
  if (done.ok() && !*done) {
    AwaitFinished(handle);
    s = synchronize(handle, absl::ZeroDuration(), &result);
  }
  std::vector<std::shared_ptr<Buffer>> buffers = Forget(handle);
  Check(s);
  py::list members;
  for (size_t i = 0; i < result.members.size(); ++i) {
    members.append(ResultTuple(result.members[i],
                               i < buffers.size() ? buffers[i] : nullptr,
                               py::list()));
  }
  std::shared_ptr<Buffer> own =
      result.members.empty() && !buffers.empty() ? buffers[0] : nullptr;
  return ResultTuple(result, std::move(own), std::move(members));
}

// Synchronize for ops whose caller needs no result (allreduce, broadcast,
// reducescatter: the output is the caller's tensor): no result objects.
void Wait(Handle handle) {
  if (Value(try_synchronize(handle))) return;
  AwaitFinished(handle);
  Check(synchronize(handle, absl::ZeroDuration(), nullptr));
}

// allreduce_async on the hot path of a training step (one call per
// gradient), as a METH_FASTCALL function: pybind11's generic dispatch of
// nine arguments costs more than kolo's submission itself. Arguments as
// allreduce_async's (shape: a tuple or list of ints). Returns the handle, or
// NULL with kolo._kolo.Error (or TypeError) set.
PyObject* error_type = nullptr;  // kolo._kolo.Error, set at module init

PyObject* FastAllreduce(PyObject* /*self*/, PyObject* const* args,
                        Py_ssize_t nargs) {
  if (nargs != 9) {
    PyErr_SetString(PyExc_TypeError, "allreduce_async_fast takes 9 arguments");
    return nullptr;
  }
  const auto in = reinterpret_cast<uintptr_t>(PyLong_AsVoidPtr(args[0]));
  const auto out = reinterpret_cast<uintptr_t>(PyLong_AsVoidPtr(args[1]));
  PyObject* dims = PySequence_Fast(args[2], "shape must be a sequence");
  if (dims == nullptr) return nullptr;
  std::vector<int64_t> shape(
      static_cast<size_t>(PySequence_Fast_GET_SIZE(dims)));
  for (size_t i = 0; i < shape.size(); ++i) {
    shape[i] = PyLong_AsLongLong(
        PySequence_Fast_GET_ITEM(dims, static_cast<Py_ssize_t>(i)));
  }
  Py_DECREF(dims);
  const long dtype = PyLong_AsLong(args[3]);
  const long op = PyLong_AsLong(args[4]);
  const double pre = PyFloat_AsDouble(args[5]);
  const double post = PyFloat_AsDouble(args[6]);
  Py_ssize_t name_size = 0;
  const char* name = PyUnicode_AsUTF8AndSize(args[7], &name_size);
  const long ps = PyLong_AsLong(args[8]);
  if (PyErr_Occurred() != nullptr) return nullptr;
  if (dtype < 0 || dtype >= kNumDataTypes || op < 0 || op >= kNumReduceOps) {
    PyErr_SetString(PyExc_ValueError, "kolo: bad dtype or reduce op code");
    return nullptr;
  }
  Tensor input{static_cast<DataType>(dtype), std::move(shape),
               reinterpret_cast<void*>(in), kCpu};
  Tensor output = input;
  output.data = reinterpret_cast<void*>(out);
  absl::StatusOr<Handle> h = allreduce_async(
      input, output, AllreduceOptions{static_cast<ReduceOp>(op), pre, post},
      absl::string_view(name, static_cast<size_t>(name_size)),
      static_cast<ProcessSet>(ps));
  if (!h.ok()) {
    PyObject* value = ErrorArgs(h.status());
    PyErr_SetObject(error_type, value);
    Py_XDECREF(value);
    return nullptr;
  }
  return PyLong_FromLongLong(*h);
}

PyMethodDef fast_allreduce_def = {
    "allreduce_async_fast",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&FastAllreduce)),
    METH_FASTCALL, "allreduce_async for the hot path (see _kolo.cc)"};

// Sets the Python error for the exception being handled, as pybind11's
// dispatcher does (the module's translator turns a StatusError into
// kolo._kolo.Error); returns NULL. Call it in a catch block.
PyObject* RaiseCaught() {
  try {
    throw;
  } catch (const StatusError& e) {
    PyObject* value = ErrorArgs(e.status);
    PyErr_SetObject(error_type, value);
    Py_XDECREF(value);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    PyErr_SetString(PyExc_SystemError, "kolo: an unexpected C++ exception");
  }
  return nullptr;
}

// wait() on the hot path of a training step (one call per gradient), as a
// METH_O function: pybind11's dispatch costs as much as wait() on a finished
// op. Errors are raised by the module's exception translator, as pybind11's
// dispatcher does, so that both raise the same exception. Returns None, or
// NULL with the error set.
PyObject* FastWait(PyObject* /*self*/, PyObject* arg) {
  const Handle handle = PyLong_AsLongLong(arg);
  if (handle == -1 && PyErr_Occurred() != nullptr) return nullptr;
  try {
    Wait(handle);
  } catch (...) {
    return RaiseCaught();
  }
  Py_RETURN_NONE;
}

PyMethodDef fast_wait_def = {"wait_fast", &FastWait, METH_O,
                             "wait() for the hot path (see _kolo.cc)"};

// The engine's handle map (kolo/_engine.py: handle -> entry), set once at
// import (set_handle_map); never freed.
PyObject* handle_map = nullptr;

void SetHandleMap(py::dict handles) { handle_map = Py_NewRef(handles.ptr()); }

// synchronize_fast(handle): the engine's synchronize() for an entry that is
// the op's output itself (an in-place allreduce; not a tuple): waits as
// wait() does, removes the entry and returns the output. None for an
// unknown handle or another kind of entry (the engine's general path). A
// failed op raises kolo._kolo.Error, its entry removed; an interrupted
// wait (KeyboardInterrupt) leaves the entry, as the handle stays valid.
PyObject* FastSynchronize(PyObject* /*self*/, PyObject* key) {
  if (handle_map == nullptr) Py_RETURN_NONE;
  PyObject* entry = PyDict_GetItemWithError(handle_map, key);  // borrowed
  if (entry == nullptr) {
    if (PyErr_Occurred() != nullptr) return nullptr;
    Py_RETURN_NONE;
  }
  if (PyTuple_Check(entry)) Py_RETURN_NONE;
  const Handle handle = PyLong_AsLongLong(key);
  if (handle == -1 && PyErr_Occurred() != nullptr) return nullptr;
  Py_INCREF(entry);  // the map may lose it while the GIL is released
  bool failed = false, forget = true;
  try {
    Wait(handle);
  } catch (const StatusError&) {
    failed = true;
    RaiseCaught();
  } catch (...) {
    failed = true;
    forget = false;
    RaiseCaught();
  }
  if (forget) {
    // (init() on another thread may have emptied the map meanwhile.)
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    PyErr_Fetch(&type, &value, &traceback);
    if (PyDict_DelItem(handle_map, key) != 0) PyErr_Clear();
    PyErr_Restore(type, value, traceback);
  }
  if (failed) {
    Py_DECREF(entry);
    return nullptr;
  }
  return entry;
}

PyMethodDef fast_synchronize_def = {
    "synchronize_fast", &FastSynchronize, METH_O,
    "the engine's synchronize for in-place outputs (see _kolo.cc)"};

int Join(double timeout_seconds) {
  const absl::Time deadline =
      timeout_seconds < 0 ? absl::InfiniteFuture()
                          : absl::Now() + absl::Seconds(timeout_seconds);
  while (true) {
    absl::StatusOr<int> last;
    {
      py::gil_scoped_release nogil;
      last = join(std::min(kWaitSlice, deadline - absl::Now()));
    }
    if (last.ok()) return *last;
    if (last.status().code() != absl::StatusCode::kDeadlineExceeded ||
        absl::Now() >= deadline) {
      Throw(last.status());
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

void Init(const std::vector<std::vector<int>>& process_sets) {
  InitOptions options;
  options.process_sets = process_sets;
  absl::Status s;
  {
    py::gil_scoped_release nogil;
    s = init(options);
  }
  Check(s);
}

void Shutdown() {
  absl::Status s;
  {
    py::gil_scoped_release nogil;
    s = shutdown();
  }
  {
    MutexLock lock(&allocated_mu);
    allocated.clear();
  }
  Check(s);
}

AllreduceOptions Reduce(int op, double prescale, double postscale) {
  return AllreduceOptions{OpOf(op), prescale, postscale};
}

// Horovod's nccl_built(): the NCCL version that reduces CUDA tensors (0
// without NCCL; kolo.torch stages CUDA tensors through host memory then).
int NcclVersion() { return nccl_built(); }

// kolo._kolo.Error and the translator that raises every failed status as
// one (ErrorArgs); the fast path raises it too (error_type).
void BindErrors(py::module_& m) {
  static py::exception<StatusError> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyObject* args = ErrorArgs(e.status);
      PyErr_SetObject(error.ptr(), args);
      Py_XDECREF(args);
    }
  });
  error_type = error.ptr();
}

// The output buffers (buffer protocol; DLPack for CUDA ones) and the pointer
// arguments.
void BindBuffers(py::module_& m) {
  py::class_<Buffer, std::shared_ptr<Buffer>>(m, "Buffer",
                                              py::buffer_protocol())
      .def_buffer([](Buffer& b) {
        if (b.device != kCpu) {
          throw py::value_error(
              "kolo: a CUDA buffer has no host view; use kolo._kolo.dlpack");
        }
        return py::buffer_info(b.host.get(), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {b.bytes}, {1}, /*readonly=*/false);
      })
      .def("__len__", [](const Buffer& b) { return b.bytes; })
      .def_property_readonly("device",
                             [](const Buffer& b) { return b.device; });
  py::class_<DevicePointer>(m, "DevicePointer", py::dynamic_attr())
      .def(py::init<uintptr_t>(), py::arg("ptr"))
      .def(py::init<uintptr_t, int, uintptr_t>(), py::arg("ptr"),
           py::arg("device"), py::arg("ready_event") = 0)
      .def_readonly("ptr", &DevicePointer::ptr)
      .def_readonly("device", &DevicePointer::device)
      .def_readonly("ready_event", &DevicePointer::ready_event);
  py::implicitly_convertible<py::int_, DevicePointer>();
  m.def(
      "dlpack",
      [](std::shared_ptr<Buffer> b, const std::vector<int64_t>& shape,
         int dtype) {
        PyObject* capsule = ToDlpack(std::move(b), shape, TypeOf(dtype));
        if (capsule == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(capsule);
      },
      py::arg("buffer"), py::arg("shape"), py::arg("dtype"),
      "A DLPack capsule over a CUDA output buffer "
      "(torch.utils.dlpack.from_dlpack).");
  m.attr("DEVICE_BUFFERS") = DeviceBuffersBuilt();
}

// The dtype and op codes (an index into DTYPES / REDUCE_OPS) and the CPU
// device.
void BindCodes(py::module_& m) {
  py::list dtypes;
  for (int i = 0; i < kNumDataTypes; ++i) {
    dtypes.append(std::string(DataTypeName(static_cast<DataType>(i))));
  }
  m.attr("DTYPES") = dtypes;  // index = the dtype code
  py::list ops;
  for (int i = 0; i < kNumReduceOps; ++i) {
    ops.append(std::string(ReduceOpName(static_cast<ReduceOp>(i))));
  }
  m.attr("REDUCE_OPS") = ops;  // index = the op code
  m.attr("CPU") = kCpu;
}

// init, shutdown and the job's facts.
void BindLifecycle(py::module_& m) {
  m.def("init", &Init, py::arg("process_sets"));
  m.def("shutdown", &Shutdown);
  m.def("is_initialized", &is_initialized);
  m.def("rank", &rank);
  m.def("size", &size);
  m.def("local_rank", &local_rank);
  m.def("local_size", &local_size);
  m.def("cross_rank", &cross_rank);
  m.def("cross_size", &cross_size);
  m.def("nccl_version", &NcclVersion);
  m.def("cuda_built", [] { return cuda_built(); });
}

// The reducing collectives: allreduce and reducescatter, alone or grouped.
void BindReductions(py::module_& m) {
  m.def(
      "allreduce_async",
      [](const DevicePointer& in, const DevicePointer& out,
         std::vector<int64_t> shape, int dtype, int op, double pre, double post,
         const std::string& name, int ps) {
        Tensor input = MakeTensor(in, std::move(shape), dtype);
        Tensor output = input;
        output.data = reinterpret_cast<void*>(out.ptr);
        return Value(
            allreduce_async(input, output, Reduce(op, pre, post), name, ps));
      },
      py::arg("input"), py::arg("output"), py::arg("shape"), py::arg("dtype"),
      py::arg("op"), py::arg("prescale"), py::arg("postscale"), py::arg("name"),
      py::arg("process_set"));

  using InOut =
      std::tuple<DevicePointer, DevicePointer, std::vector<int64_t>, int>;
  m.def(
      "grouped_allreduce_async",
      [](const std::vector<InOut>& members, int op, double pre, double post,
         const std::string& name, int ps) {
        std::vector<Tensor> inputs, outputs;
        for (const auto& [in, out, shape, dtype] : members) {
          inputs.push_back(MakeTensor(in, shape, dtype));
          outputs.push_back(MakeTensor(out, shape, dtype));
        }
        return Value(grouped_allreduce_async(inputs, outputs,
                                             Reduce(op, pre, post), name, ps));
      },
      py::arg("members"), py::arg("op"), py::arg("prescale"),
      py::arg("postscale"), py::arg("name"), py::arg("process_set"));

  m.def(
      "reducescatter_async",
      [](const DevicePointer& in, std::vector<int64_t> shape, int dtype,
         const DevicePointer& out, std::vector<int64_t> out_shape, int op,
         double pre, double post, const std::string& name, int ps) {
        return Value(
            reducescatter_async(MakeTensor(in, std::move(shape), dtype),
                                MakeTensor(out, std::move(out_shape), dtype),
                                Reduce(op, pre, post), {}, name, ps));
      },
      py::arg("input"), py::arg("shape"), py::arg("dtype"), py::arg("output"),
      py::arg("output_shape"), py::arg("op"), py::arg("prescale"),
      py::arg("postscale"), py::arg("name"), py::arg("process_set"));

  using RsMember = std::tuple<DevicePointer, std::vector<int64_t>, int,
                              DevicePointer, std::vector<int64_t>>;
  m.def(
      "grouped_reducescatter_async",
      [](const std::vector<RsMember>& members, int op, double pre, double post,
         const std::string& name, int ps) {
        std::vector<Tensor> inputs, outputs;
        for (const auto& [in, shape, dtype, out, out_shape] : members) {
          inputs.push_back(MakeTensor(in, shape, dtype));
          outputs.push_back(MakeTensor(out, out_shape, dtype));
        }
        return Value(grouped_reducescatter_async(
            inputs, outputs, Reduce(op, pre, post), name, ps));
      },
      py::arg("members"), py::arg("op"), py::arg("prescale"),
      py::arg("postscale"), py::arg("name"), py::arg("process_set"));
}

// The collectives whose output is allocated here or in place: allgather
// (alone or grouped), broadcast, alltoall, and the barrier.
void BindGathers(py::module_& m) {
  m.def(
      "allgather_async",
      [](const DevicePointer& in, std::vector<int64_t> shape, int dtype,
         const std::string& name, int ps) {
        Tensor input = MakeTensor(in, std::move(shape), dtype);
        auto slot = std::make_shared<Buffer>();
        return Remember(
            allgather_async(input,
                            AllocatorInto(slot, input.dtype, input.device),
                            name, ps),
            {slot});
      },
      py::arg("input"), py::arg("shape"), py::arg("dtype"), py::arg("name"),
      py::arg("process_set"));

  using In = std::tuple<DevicePointer, std::vector<int64_t>, int>;
  m.def(
      "grouped_allgather_async",
      [](const std::vector<In>& members, const std::string& name, int ps) {
        std::vector<Tensor> inputs;
        std::vector<Allocator> outputs;
        std::vector<std::shared_ptr<Buffer>> slots;
        for (const auto& [in, shape, dtype] : members) {
          inputs.push_back(MakeTensor(in, shape, dtype));
          slots.push_back(std::make_shared<Buffer>());
          outputs.push_back(AllocatorInto(slots.back(), inputs.back().dtype,
                                          inputs.back().device));
        }
        return Remember(grouped_allgather_async(inputs, outputs, name, ps),
                        std::move(slots));
      },
      py::arg("members"), py::arg("name"), py::arg("process_set"));

  m.def(
      "broadcast_async",
      [](const DevicePointer& ptr, std::vector<int64_t> shape, int dtype,
         int root, const std::string& name, int ps) {
        return Value(broadcast_async(MakeTensor(ptr, std::move(shape), dtype),
                                     root, name, ps));
      },
      py::arg("tensor"), py::arg("shape"), py::arg("dtype"), py::arg("root"),
      py::arg("name"), py::arg("process_set"));

  m.def(
      "alltoall_async",
      [](const DevicePointer& in, std::vector<int64_t> shape, int dtype,
         const std::vector<int64_t>& splits, const std::string& name, int ps) {
        Tensor input = MakeTensor(in, std::move(shape), dtype);
        auto slot = std::make_shared<Buffer>();
        return Remember(
            alltoall_async(input,
                           AllocatorInto(slot, input.dtype, input.device),
                           splits, name, ps),
            {slot});
      },
      py::arg("input"), py::arg("shape"), py::arg("dtype"), py::arg("splits"),
      py::arg("name"), py::arg("process_set"));

  m.def(
      "barrier_async",
      [](const std::string& name, int ps) {
        return Value(barrier_async(name, ps));
      },
      py::arg("name"), py::arg("process_set"));
}

// Waiting for ops: poll, synchronize, wait and join, and the C fast path of
// a training step.
void BindWaits(py::module_& m) {
  m.def(
      "poll", [](Handle h) { return Value(poll(h)); }, py::arg("handle"));
  m.def("synchronize", &Synchronize, py::arg("handle"),
        "Waits for the op (GIL released); returns (shape, splits, buffer or "
        "None, members).");
  m.def("wait", &Wait, py::arg("handle"),
        "synchronize() without a result (GIL released while waiting).");
  m.attr("allreduce_async_fast") = py::reinterpret_steal<py::object>(
      PyCFunction_New(&fast_allreduce_def, nullptr));
  m.attr("wait_fast") = py::reinterpret_steal<py::object>(
      PyCFunction_New(&fast_wait_def, nullptr));
  BindTensorFastPath(m, error_type, &handle_map);
  m.def("set_handle_map", &SetHandleMap, py::arg("handles"));
  m.attr("synchronize_fast") = py::reinterpret_steal<py::object>(
      PyCFunction_New(&fast_synchronize_def, nullptr));
  m.def("join", &Join, py::arg("timeout_seconds") = -1.0,
        "Joins (GIL released); returns the last rank to join.");
}

// Process sets and the timeline.
void BindProcessSetsAndTimeline(py::module_& m) {
  m.def(
      "add_process_set",
      [](const std::vector<int>& ranks) {
        absl::StatusOr<ProcessSet> id;
        {
          py::gil_scoped_release nogil;
          id = add_process_set(ranks);
        }
        return Value(std::move(id));
      },
      py::arg("ranks"));
  m.def(
      "remove_process_set",
      [](int id) {
        absl::Status s;
        {
          py::gil_scoped_release nogil;
          s = remove_process_set(id);
        }
        Check(s);
      },
      py::arg("process_set"));
  m.def(
      "process_set_ranks", [](int id) { return Value(process_set_ranks(id)); },
      py::arg("process_set"));
  m.def("process_sets", [] { return process_sets(); });
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        Check(start_timeline(path, mark_cycles));
      },
      py::arg("path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", [] { Check(stop_timeline()); });
}

}  // namespace
}  // namespace kolo::python

PYBIND11_MODULE(_kolo, m) {
  using namespace kolo::python;  // NOLINT
  m.doc() = "kolo's native module (raw buffers); use kolo / kolo.torch";
  BindErrors(m);
  BindBuffers(m);
  BindCodes(m);
  BindLifecycle(m);
  BindReductions(m);
  BindGathers(m);
  BindWaits(m);
  BindProcessSetsAndTimeline(m);
  BindElastic(m);
  BindCApi(m);  // for kolo._kolo_c10d
}
