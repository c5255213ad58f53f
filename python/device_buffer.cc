#include "python/device_buffer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#if KOLO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kolo::python {
namespace {

// DLPack's C ABI (the unversioned "dltensor" capsule, DLPack 0.x), written
// out here: a handful of plain structs that every consumer reads.
struct DLDevice {
  int32_t device_type;  // 1: CPU, 2: CUDA
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCUDA = 2;
constexpr const char* kCapsuleName = "dltensor";

bool DlpackType(DataType type, DLDataType& out) {
  const auto bits = static_cast<uint8_t>(8 * DataTypeSize(type));
  switch (type) {
    case DataType::kUInt8:
      out = {1, bits, 1};
      return true;
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      out = {0, bits, 1};
      return true;
    case DataType::kFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      out = {2, bits, 1};
      return true;
    case DataType::kBFloat16:
      out = {4, bits, 1};
      return true;
    case DataType::kBool:
      out = {6, bits, 1};
      return true;
  }
  return false;
}

// What a capsule owns: the buffer, and the shape and strides DLTensor
// points at.
struct Managed {
  DLManagedTensor tensor{};
  std::shared_ptr<Buffer> buffer;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

void DeleteManaged(DLManagedTensor* t) {
  delete static_cast<Managed*>(t->manager_ctx);
}

// An unconsumed capsule frees its tensor; a consumer renames it
// ("used_dltensor") and calls the deleter itself.
void CapsuleDestructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsuleName) == 0) return;
  auto* t = static_cast<DLManagedTensor*>(
      PyCapsule_GetPointer(capsule, kCapsuleName));
  if (t != nullptr) t->deleter(t);
}

}  // namespace

Buffer::~Buffer() {
#if KOLO_HAVE_CUDA
  if (device_data != nullptr) (void)cudaFree(device_data);
#endif
}

bool DeviceBuffersBuilt() { return KOLO_HAVE_CUDA != 0; }

Allocator AllocatorInto(std::shared_ptr<Buffer> slot, DataType type,
                        int device) {
  return [slot = std::move(slot), type,
          device](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    absl::StatusOr<int64_t> n = CheckedElements("output", type, shape);
    if (!n.ok()) return n.status();
    slot->bytes = *n * static_cast<int64_t>(DataTypeSize(type));
    // At least one byte, so that an empty output has a valid pointer.
    const auto bytes = static_cast<size_t>(std::max<int64_t>(slot->bytes, 1));
    if (device == kCpu) {
      slot->host = std::make_unique_for_overwrite<std::byte[]>(bytes);
      return static_cast<void*>(slot->host.get());
    }
#if KOLO_HAVE_CUDA
    int before = 0;
    (void)cudaGetDevice(&before);
    void* p = nullptr;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaMalloc(&p, bytes);
    (void)cudaSetDevice(before);
    if (e != cudaSuccess) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "kolo.torch: allocating ", bytes, " bytes on CUDA device ", device,
          " for the output failed: ", cudaGetErrorString(e)));
    }
    slot->device_data = p;
    slot->device = device;
    return p;
#else
    return absl::FailedPreconditionError(
        "kolo's Python module was built without CUDA: no device outputs");
#endif
  };
}

PyObject* ToDlpack(std::shared_ptr<Buffer> buffer,
                   const std::vector<int64_t>& shape, DataType type) {
  DLDataType dtype{};
  if (buffer == nullptr || buffer->device_data == nullptr ||
      !DlpackType(type, dtype)) {
    PyErr_SetString(PyExc_ValueError,
                    "kolo: no device output to hand over (or a dtype DLPack "
                    "cannot describe)");
    return nullptr;
  }
  auto managed = std::make_unique<Managed>();
  managed->shape = shape;
  managed->strides.assign(shape.size(), 1);
  for (size_t i = shape.size(); i > 1; --i) {
    managed->strides[i - 2] =
        managed->strides[i - 1] * std::max<int64_t>(shape[i - 1], 1);
  }
  DLTensor& t = managed->tensor.dl_tensor;
  t.data = buffer->device_data;
  t.device = DLDevice{kDLCUDA, buffer->device};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = managed->shape.data();
  t.strides = managed->strides.data();
  t.byte_offset = 0;
  managed->buffer = std::move(buffer);
  managed->tensor.manager_ctx = managed.get();
  managed->tensor.deleter = &DeleteManaged;
  PyObject* capsule =
      PyCapsule_New(&managed->tensor, kCapsuleName, &CapsuleDestructor);
  if (capsule != nullptr) managed.release();  // the capsule owns it now
  return capsule;
}

}  // namespace kolo::python
