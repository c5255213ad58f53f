// DeviceBuffer: CUDA device memory for kolo-bench --device cuda, with the
// copies that fill and read it outside the timed region. Built over the
// CUDA runtime (device_buffer.cc) when kolo has CUDA; otherwise Make fails
// saying so.
//
// Thread-safety: one thread (the bench's).
#ifndef KOLO_BENCH_DEVICE_BUFFER_H_
#define KOLO_BENCH_DEVICE_BUFFER_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kolo::bench {

class DeviceBuffer {
 public:
  // `bytes` (at least 1) on CUDA device `device`.
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> Make(int device,
                                                            size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  absl::Status Upload(const void* host, size_t bytes);
  absl::Status Download(void* host, size_t bytes) const;

 private:
  DeviceBuffer(void* data, int device) : data_(data), device_(device) {}
  void* data_;
  int device_;
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_DEVICE_BUFFER_H_
