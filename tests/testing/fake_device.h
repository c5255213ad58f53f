// Test doubles for kolo's CUDA paths on machines without a GPU:
// FakeDeviceOps (allreduce/cuda/device_ops.h) plays a device with host
// memory and records every copy; FakeNccl (allreduce/nccl/nccl_api.h) plays
// a one-rank NCCL (a collective copies input to output) and records the
// calls, with knobs to make creation slow or fail.
//
// Thread-safety: FakeDeviceOps is used by one thread (as DeviceOps), except
// Reached() (the completion thread polls it), Abort() (any thread) and
// `hold` (the test's thread: while true the stream never reaches its marker,
// so a collective stays in flight); FakeNccl's counters are atomics and its
// log is locked (the completion thread polls it).
#ifndef KOLO_TESTS_TESTING_FAKE_DEVICE_H_
#define KOLO_TESTS_TESTING_FAKE_DEVICE_H_

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/cuda/device_ops.h"
#include "allreduce/nccl/nccl_api.h"
#include "common/mutex.h"
#include "gtest/gtest.h"

namespace kolo::testing {

class FakeDeviceOps : public cuda::DeviceOps {
 public:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
    cuda::CopyKind kind;
  };
  explicit FakeDeviceOps(int device = 0) : device_(device) {}
  ~FakeDeviceOps() override { EXPECT_EQ(live_, 0) << "buffers leaked"; }

  int device() const override { return device_; }
  void* stream() override { return nullptr; }
  absl::StatusOr<std::string> PciBusId() override {
    if (pci_bus_id.empty()) return absl::InternalError("no bus id (fake)");
    return pci_bus_id;
  }
  absl::Status Copy(void* dst, const void* src, size_t bytes,
                    cuda::CopyKind kind) override {
    if (bytes == 0) return absl::OkStatus();
    copies.push_back({dst, src, bytes, kind});
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status WaitEvent(void* event) override {
    waited.push_back(event);
    return absl::OkStatus();
  }
  absl::Status RecordEvent(void* event) override {
    recorded.push_back(event);
    return absl::OkStatus();
  }
  absl::Status Synchronize(absl::Time) override {
    ++syncs;
    MutexLock lock(&mu_);
    return aborted_;
  }
  absl::Status Mark() override { return absl::OkStatus(); }
  absl::StatusOr<bool> Reached() override {
    ++reached_polls;
    return !hold.load();
  }
  void Abort(absl::Status why) override {
    MutexLock lock(&mu_);
    aborted_ = std::move(why);
  }
  absl::StatusOr<void*> AllocDevice(size_t bytes) override {
    ++live_;
    return std::calloc(bytes == 0 ? 1 : bytes, 1);
  }
  void FreeDevice(void* p) override {
    --live_;
    std::free(p);
  }
  absl::StatusOr<void*> AllocHost(size_t bytes) override {
    ++live_;
    return std::calloc(bytes == 0 ? 1 : bytes, 1);
  }
  void FreeHost(void* p) override {
    --live_;
    std::free(p);
  }

  // Copies of `kind`.
  int Count(cuda::CopyKind kind) const {
    int n = 0;
    for (const auto& c : copies) n += c.kind == kind ? 1 : 0;
    return n;
  }

  std::vector<struct Copy> copies;
  std::vector<void*> waited, recorded;
  int syncs = 0;
  // While true, Reached() answers "not yet": the work enqueued stays in
  // flight (a stream that waits for a caller's event that never comes).
  std::atomic<bool> hold{false};
  std::atomic<int> reached_polls{0};
  // What PciBusId answers ("": an error).
  std::string pci_bus_id = "0000:00:04.0";

 private:
  const int device_;
  int live_ = 0;
  Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

class FakeNccl : public nccl::NcclApi {
 public:
  // CommGetAsyncError answers "in progress" this many times after init.
  std::atomic<int> init_polls{2};
  // Once init finished: report this error (kError) at the next poll.
  std::atomic<bool> fail_async{false};
  std::atomic<int> inits{0}, aborts{0}, unique_ids{0}, collectives{0};
  std::string last_id;  // the id CommInitRank got (one thread)

  std::atomic<int> version{22809};  // what Version answers
  int Version() override { return version.load(); }
  nccl::Result GetUniqueId(std::string* id) override {
    ++unique_ids;
    id->assign(128, 'u');
    (*id)[0] = 'x';
    return {};
  }
  nccl::Result CommInitRank(nccl::Comm* comm, int nranks, const std::string& id,
                            int rank, int) override {
    ++inits;
    last_id = id;
    {
      MutexLock lock(&mu_);
      init_args_.push_back({rank, nranks});
    }
    *comm = &comms_[rank % 4];
    return {nccl::Result::kInProgress, ""};
  }
  nccl::Result CommGetAsyncError(nccl::Comm) override {
    if (init_polls.load() > 0) {
      --init_polls;
      return {nccl::Result::kInProgress, ""};
    }
    if (fail_async.load()) {
      return {nccl::Result::kError, "unhandled system error (fake)"};
    }
    return {};
  }
  nccl::Result CommAbort(nccl::Comm) override {
    ++aborts;
    return {};
  }
  nccl::Result GroupStart() override {
    Log("group{");
    return {};
  }
  nccl::Result GroupEnd() override {
    Log("}");
    if (group_in_progress.load()) return {nccl::Result::kInProgress, ""};
    return {};
  }
  // GroupEnd answers "in progress" (then CommGetAsyncError, per
  // init_polls).
  std::atomic<bool> group_in_progress{false};
  nccl::Result AllReduce(const void* send, void* recv, size_t count,
                         nccl::Wire type, nccl::Op op, nccl::Comm,
                         void*) override {
    Log(absl::StrCat("allreduce(", count, ",op", static_cast<int>(op), ")"));
    std::memmove(recv, send, count * Bytes(type));
    return {};
  }
  nccl::Result Broadcast(const void* send, void* recv, size_t count,
                         nccl::Wire type, int root, nccl::Comm,
                         void*) override {
    Log(absl::StrCat("bcast(", count, ",root", root, ")"));
    std::memmove(recv, send, count * Bytes(type));
    return {};
  }
  nccl::Result Reduce(const void* send, void* recv, size_t count,
                      nccl::Wire type, nccl::Op, int root, nccl::Comm,
                      void*) override {
    Log(absl::StrCat("reduce(", count, ",root", root, ")"));
    if (recv != nullptr) std::memmove(recv, send, count * Bytes(type));
    return {};
  }
  nccl::Result ReduceScatter(const void* send, void* recv, size_t count,
                             nccl::Wire type, nccl::Op, nccl::Comm,
                             void*) override {
    Log(absl::StrCat("reducescatter(", count, ")"));
    std::memmove(recv, send, count * Bytes(type));
    return {};
  }
  nccl::Result Send(const void* send, size_t count, nccl::Wire /*type*/,
                    int peer, nccl::Comm, void*) override {
    Log(absl::StrCat("send(", count, ",peer", peer, ")"));
    pending_ = send;
    return {};
  }
  nccl::Result Recv(void* recv, size_t count, nccl::Wire type, int peer,
                    nccl::Comm, void*) override {
    Log(absl::StrCat("recv(", count, ",peer", peer, ")"));
    // One rank: what it sent itself.
    if (pending_ != nullptr) std::memmove(recv, pending_, count * Bytes(type));
    return {};
  }

  std::vector<std::string> calls() {
    MutexLock lock(&mu_);
    return calls_;
  }
  // (rank, size) of each CommInitRank, in call order.
  std::vector<std::pair<int, int>> init_args() {
    MutexLock lock(&mu_);
    return init_args_;
  }

 private:
  static size_t Bytes(nccl::Wire w) {
    switch (w) {
      case nccl::Wire::kInt8:
      case nccl::Wire::kUint8:
        return 1;
      case nccl::Wire::kFloat16:
      case nccl::Wire::kBfloat16:
        return 2;
      case nccl::Wire::kInt32:
      case nccl::Wire::kFloat32:
        return 4;
      case nccl::Wire::kInt64:
      case nccl::Wire::kFloat64:
        return 8;
    }
    return 1;
  }
  void Log(std::string s) {
    ++collectives;
    MutexLock lock(&mu_);
    calls_.push_back(std::move(s));
  }
  int comms_[4] = {};
  const void* pending_ = nullptr;
  Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, int>> init_args_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_FAKE_DEVICE_H_
