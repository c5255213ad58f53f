// DeviceOps: the few CUDA runtime operations kolo's CUDA paths need, behind
// an interface, so that the staging and NCCL code above it is written once
// and unit-tested on machines without a GPU (tests use a host-memory fake
// that records every copy).
//
// Everything is enqueued on one stream, kolo's own (created non-blocking,
// at the highest priority the device offers), so it runs in call order and
// never waits for the caller's default stream; callers order their work
// against it with events (Tensor::ready_event / done_event).
//
// Events and streams cross this interface as void* (cudaEvent_t,
// cudaStream_t), so that no header outside the CUDA implementation needs
// the CUDA headers.
//
// Thread-safety: one thread at a time (the plan runner), except Abort(),
// which any thread may call.
#ifndef KOLO_ALLREDUCE_CUDA_DEVICE_OPS_H_
#define KOLO_ALLREDUCE_CUDA_DEVICE_OPS_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kolo::cuda {

enum class CopyKind { kDeviceToHost, kHostToDevice, kDeviceToDevice };
const char* CopyKindName(CopyKind kind);

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;

  // The device ordinal everything is enqueued for.
  virtual int device() const = 0;
  // cudaStream_t of kolo's stream (null for the fake).
  virtual void* stream() = 0;
  // The device's PCI bus id (cudaDeviceGetPCIBusId, "0000:3b:00.0"): which
  // physical GPU this is, whatever CUDA_VISIBLE_DEVICES renumbered — what
  // tells that two processes of one host share a GPU (nccl/communicator.h).
  virtual absl::StatusOr<std::string> PciBusId() = 0;

  // Enqueues a copy of `bytes` bytes; bytes == 0 enqueues nothing.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes,
                            CopyKind kind) = 0;
  // kolo's stream waits for the caller's `event` (cudaEvent_t) first.
  virtual absl::Status WaitEvent(void* event) = 0;
  // Records the caller's `event` (cudaEvent_t) on kolo's stream.
  virtual absl::Status RecordEvent(void* event) = 0;
  // Waits (polling an event, sleeping between polls) until the work
  // enqueued so far has finished. kDeadlineExceeded after `deadline`;
  // kAborted (with Abort's status) as soon as Abort() is called.
  virtual absl::Status Synchronize(absl::Time deadline) = 0;
  // Non-blocking completion: Mark() records a marker after the work
  // enqueued so far; Reached() says whether the stream got there (an error
  // when the stream failed). For a thread that polls (nccl/completion.h).
  virtual absl::Status Mark() = 0;
  virtual absl::StatusOr<bool> Reached() = 0;
  // Makes Synchronize() return `why` from now on.
  virtual void Abort(absl::Status why) = 0;

  // Device memory on device(), and pinned (page-locked) host memory.
  virtual absl::StatusOr<void*> AllocDevice(size_t bytes) = 0;
  virtual void FreeDevice(void* p) = 0;
  virtual absl::StatusOr<void*> AllocHost(size_t bytes) = 0;
  virtual void FreeHost(void* p) = 0;
};

// A DeviceOps on the real device `device` (CUDA runtime API), or why there
// is none: kolo built without CUDA, no driver, no such device.
absl::StatusOr<std::unique_ptr<DeviceOps>> OpenDevice(int device);

}  // namespace kolo::cuda

#endif  // KOLO_ALLREDUCE_CUDA_DEVICE_OPS_H_
