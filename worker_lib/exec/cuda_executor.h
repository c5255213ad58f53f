// CudaExecutor: runs the plan responses whose tensors are CUDA tensors
// (Tensor::device >= 0), on one of two backends picked per response at run
// time from an ordered list (docs/design.md "Data plane": the first that is
// enabled and can serve the tensor):
//   1. NCCL (allreduce/nccl/): when kolo is built with it, no rank has
//      joined, NCCL computes its reduction as kolo does (nccl_ops.h
//      NcclCanReduce), and the communicator of the response's process set
//      exists or can be made (every member agrees, and NCCL can take members
//      that share a GPU: communicator.h) — not with KOLO_CUDA_STAGING=1.
//      Every process set has its own communicator, made lazily at the
//      set's first eligible CUDA response with this rank's rank and size in
//      the set (the exchange key names the epoch and the set); a set's
//      refusal or failure is that set's alone. Every input of this rank must
//      be on the communicator's device.
//   2. Staging (allreduce/cuda/staging.h): the tensors cross to pinned host
//      memory on kolo's stream (a fused group packed on the device first:
//      one copy), the host executors (plan_executor.h, fused_executor.h)
//      run them on kolo's data plane exactly as host tensors, and the
//      results cross back.
// Every criterion of the choice is the same on every rank of the response
// (negotiated metadata, or the communicator's all-member agreement), so
// the ranks never split between NCCL and TCP.
//
// Each op's ready_event is waited for on kolo's stream before its input is
// read; its done_event is recorded after its output is written; Run returns
// once the stream got there (bounded by the data-plane timeout), so
// synchronize() after it sees the output.
//
// Thread-safety: Run from the plan runner only (one at a time); Abort from
// any thread (the epoch ended): it wakes a Run in progress with `why` and
// aborts the NCCL communicators of every process set.
#ifndef KOLO_WORKER_LIB_EXEC_CUDA_EXECUTOR_H_
#define KOLO_WORKER_LIB_EXEC_CUDA_EXECUTOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "allreduce/cuda/device_ops.h"
#include "allreduce/cuda/staging.h"
#include "allreduce/data_plane.h"
#include "allreduce/nccl/communicator.h"
#include "allreduce/nccl/completion.h"
#include "allreduce/nccl/nccl_api.h"
#include "common/mutex.h"
#include "proto/kolo.pb.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/op_request.h"

namespace kolo::worker {

class Timeline;

struct CudaOptions {
  uint64_t epoch = 0;
  bool force_staging = false;  // KOLO_CUDA_STAGING
  // Each wait for the device (and the NCCL communicator's creation) ends
  // after it (KOLO_TIMEOUT_SECONDS).
  absl::Duration timeout = absl::Seconds(30);
  nccl::Exchange exchange;  // the coordinator's (control_allgather)
  // This machine's name in the device identity that tells ranks sharing a
  // GPU (nccl::DeviceIdentity). Empty: the kernel's host name.
  std::string host_name;
  // Opens a device; tests substitute a fake. Default: cuda::OpenDevice.
  std::function<absl::StatusOr<std::unique_ptr<cuda::DeviceOps>>(int)> open;
  // NCCL; tests substitute a fake. Default: nccl::RealNcclApi() (null
  // without NCCL: staging only).
  std::unique_ptr<nccl::NcclApi> nccl;
};

// Whether any op of `ops` (nullptr entries skipped) has a CUDA tensor.
bool HasCudaTensor(absl::Span<PendingOp* const> ops);

class CudaExecutor {
 public:
  explicit CudaExecutor(CudaOptions options);
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Runs `response` for `ops` (as ExecuteFused / Execute would: one status
  // per entry of ops) on `plane` (the response's process set's: rank and
  // size in it). `buffer`: the host fusion buffer (staging of fused
  // groups). `timeline` may be null.
  std::vector<absl::Status> Run(const proto::Response& response,
                                absl::Span<PendingOp* const> ops,
                                DataPlane& plane, int rank, int size,
                                FusionBuffer& buffer, Timeline* timeline);

  void Abort(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);

  // Which backend ran the last Run ("nccl" or "staging"), for tests and
  // logs.
  const char* last_backend() const { return last_backend_; }
  // Process set `set`'s NCCL communicator (null: none yet, or refused), for
  // tests.
  std::shared_ptr<nccl::Communicator> communicator(int32_t set)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Device {
    std::unique_ptr<cuda::DeviceOps> ops;
    std::unique_ptr<cuda::Stager> stager;
  };
  absl::StatusOr<Device*> DeviceFor(int ordinal) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<absl::Status> RunStaged(const proto::Response& response,
                                      absl::Span<PendingOp* const> ops,
                                      DataPlane& plane, int rank, int size,
                                      FusionBuffer& buffer, Timeline* timeline);
  // Why `response` cannot run on NCCL ("" when it can, as far as the
  // negotiated metadata says).
  static std::string NcclIneligible(const proto::Response& response,
                                    absl::Span<PendingOp* const> ops);
  // One process set's NCCL state.
  struct NcclSet {
    bool tried = false;
    absl::Status refused;  // why NCCL is not used for it this epoch
    // Made with the communicator (its thread runs only where NCCL does).
    std::shared_ptr<nccl::CompletionWatcher> watcher;
    std::shared_ptr<nccl::Communicator> comm;
  };
  // Makes process set `set`'s communicator on its first eligible response
  // (rank and size in the set); its NcclSet then says which backend runs
  // the set's CUDA responses (comm, or why not in refused).
  void EnsureCommunicator(int32_t set, Device& device, int rank, int size)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<absl::Status> RunNccl(const proto::Response& response,
                                    absl::Span<PendingOp* const> ops,
                                    Device& device, int rank, int size)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The device fusion buffer: at least `bytes` on `dev` (grown or moved).
  absl::Status ReserveNcclFusion(cuda::DeviceOps& dev, size_t bytes);
  // Waits for the ready events, the common first step.
  absl::Status WaitReady(Device& device, absl::Span<PendingOp* const> ops);
  absl::Status RecordDone(Device& device, absl::Span<PendingOp* const> ops);

  CudaOptions options_;
  const char* last_backend_ = "";
  Mutex mu_;  // devices_' map and the abort status (Abort's thread)
  std::map<int, std::unique_ptr<Device>> devices_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  // NCCL per process set, written by the plan runner; Abort's thread aborts
  // every watcher and communicator (both thread-safe).
  std::map<int32_t, NcclSet> nccl_sets_ ABSL_GUARDED_BY(mu_);
  // The device fusion buffer, shared by the sets' communicators (the plan
  // runner's; on the device of the last fused allreduce).
  void* nccl_fusion_ = nullptr;
  cuda::DeviceOps* nccl_fusion_device_ = nullptr;  // its owner
  size_t nccl_fusion_bytes_ = 0;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_EXEC_CUDA_EXECUTOR_H_
