// Output memory that kolo's background thread allocates for kolo._kolo
// (allgather and alltoall outputs, whose shape is known only after
// negotiation), on the host or on a CUDA device, and its hand-over to
// Python: host buffers through the buffer protocol (zero-copy), device
// buffers as a DLPack capsule that torch.utils.dlpack.from_dlpack turns into
// a CUDA tensor without a copy (the tensor owns the memory from then on).
//
// A pointer argument of kolo._kolo (DevicePointer, Python name) is a data
// pointer with the device it lives on: a plain int converts to a host
// pointer; kolo.torch passes DevicePointer(ptr, device, ready_event) for a
// CUDA tensor, the ready event being a cudaEvent_t recorded on the tensor's
// stream after the work that wrote it (include/kolo/kolo.h, Tensor).
//
// Thread-safety: a Buffer is filled once by kolo's thread (the allocator)
// and read by Python only after synchronize() (kolo's completion orders the
// two); device memory is freed by the last owner (Buffer or capsule).
#ifndef KOLO_PYTHON_DEVICE_BUFFER_H_
#define KOLO_PYTHON_DEVICE_BUFFER_H_

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/types.h"

namespace kolo::python {

struct DevicePointer {
  DevicePointer() = default;
  explicit DevicePointer(uintptr_t p) : ptr(p) {}
  DevicePointer(uintptr_t p, int d, uintptr_t ready)
      : ptr(p), device(d), ready_event(ready) {}
  uintptr_t ptr = 0;
  int device = kCpu;
  uintptr_t ready_event = 0;  // cudaEvent_t, 0 for none
};

// One output's memory: host (`host`) or device (`device_data` on `device`).
struct Buffer {
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  std::unique_ptr<std::byte[]> host;
  void* device_data = nullptr;
  int device = kCpu;
  int64_t bytes = 0;
};

// The allocator of one output: fills `slot` (on kolo's thread) with memory
// for the negotiated shape, on `device` (kCpu: the host).
Allocator AllocatorInto(std::shared_ptr<Buffer> slot, DataType type,
                        int device);

// A DLPack capsule ("dltensor") over a device Buffer with `shape` and
// `type`, keeping the Buffer alive until the consumer's tensor dies. NULL
// with a Python error set when `type` has no DLPack code or the buffer is
// not on a device.
PyObject* ToDlpack(std::shared_ptr<Buffer> buffer,
                   const std::vector<int64_t>& shape, DataType type);

// Whether this module can allocate device memory (built with CUDA).
bool DeviceBuffersBuilt();

}  // namespace kolo::python

#endif  // KOLO_PYTHON_DEVICE_BUFFER_H_
