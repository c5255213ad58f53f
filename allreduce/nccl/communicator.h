// Communicator: one NCCL communicator of one epoch and process set — the
// way NCCL meets kolo's elastic membership (issue 23 point 3).
//
// Lifecycle:
//   1. Create() runs on every member of the set when the set's first
//      CUDA collective eligible for NCCL comes up (lazily: a job that never
//      sees a CUDA tensor never pays for NCCL). Every member calls the
//      exchange (the coordinator's control plane, kolo::control_allgather:
//      never a side channel) under a key naming the epoch and the set, with
//      "ok" or why it cannot use NCCL; rank 0 adds ncclGetUniqueId()'s id.
//      If any member cannot, every member gets the same kFailedPrecondition
//      (naming those ranks and why) and runs CUDA tensors through host
//      memory instead — the same decision on every rank, so no rank waits in
//      NCCL for another that went to TCP.
//      Every value also carries the member's device identity (host and PCI
//      bus id) and NCCL version. Members that share one GPU (ranks of one
//      host on one device): NCCL before 2.30 refuses them ("Duplicate GPU
//      detected"), so with the lowest member version below 2.30 every member
//      gets the same kFailedPrecondition naming the ranks and the device
//      (staging, as above); from 2.30 on, NCCL_MULTI_RANK_GPU_ENABLE=1 is set
//      in this process's environment (without overwriting a value the user
//      set) before ncclCommInitRank, which lets NCCL accept them. NCCL reads
//      that variable once per process: set it in the job's environment when
//      an earlier communicator of the process may have read it already.
//   2. ncclCommInitRankConfig with config.blocking = 0 (a non-blocking
//      communicator: NCCL's guide says a blocking one may hang in abort);
//      its completion is polled (ncclCommGetAsyncError) by the
//      CompletionWatcher, with the data-plane deadline.
//   3. Collectives are enqueued through Call() on kolo's stream.
//   4. Abort(), when the epoch ends (any thread): every later Call() and
//      AsyncError() fails with the abort's status at once, and
//      ncclCommAbort runs once, on a thread of its own (the reaper): NCCL's
//      clean-up may wait for the device (it frees device memory, and kolo's
//      stream may sit behind a caller's ready event), and no caller of Abort
//      -- the epoch's teardown failing its ops -- may wait for that. The
//      destructor aborts a communicator that is still live (an epoch's
//      communicators are never reused by the next epoch) and joins the
//      reaper: it returns once NCCL has released the communicator.
//
// Thread-safety: every method may be called from any thread; calls into
// NCCL on the communicator are serialised by an internal mutex (so Abort
// never runs concurrently with an enqueue or a CommGetAsyncError).
#ifndef KOLO_ALLREDUCE_NCCL_COMMUNICATOR_H_
#define KOLO_ALLREDUCE_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "allreduce/nccl/completion.h"
#include "allreduce/nccl/nccl_api.h"
#include "common/mutex.h"

namespace kolo::nccl {

struct CommOptions {
  uint64_t epoch = 0;
  int32_t process_set = 0;
  int rank = 0;  // in the set
  int size = 1;
  int device = 0;  // CUDA ordinal this rank's communicator uses
  // Which physical GPU `device` is: "<host>/<PCI bus id>" (DeviceIdentity).
  // Members with equal identities share a GPU; "" (unknown) shares with
  // no one.
  std::string device_identity;
  // "" when this rank can use NCCL; else why not (KOLO_CUDA_STAGING=1, no
  // device, ...), told to the other members.
  std::string local_problem;
  // The exchange and the communicator's creation each end after this.
  absl::Duration timeout = absl::Seconds(30);
};

// The coordinator's exchange among the members of `process_set` (0: every
// rank of the epoch): every member's value, in the set's rank order.
using Exchange = std::function<absl::StatusOr<std::vector<std::string>>(
    const std::string& key, int32_t process_set, const std::string& value,
    absl::Duration timeout)>;

// The exchange key of a set's communicator in an epoch.
std::string ExchangeKey(uint64_t epoch, int32_t process_set);

// CommOptions::device_identity of PCI bus id `pci_bus_id` on host `host`
// (the kernel's host name: network namespaces of one machine share its
// GPUs).
std::string DeviceIdentity(absl::string_view host,
                           absl::string_view pci_bus_id);

// The first NCCL version (NCCL_VERSION_CODE) that accepts two ranks of a
// communicator on one GPU (with NCCL_MULTI_RANK_GPU_ENABLE=1).
inline constexpr int kMultiRankGpuVersion = 23000;

class Communicator {
 public:
  // Steps 1 and 2 above. kFailedPrecondition: some member cannot use NCCL,
  // or members share a GPU that their NCCL cannot share (use host memory
  // instead; same on every member); other errors: the
  // exchange or NCCL failed (the op fails; the message names this rank).
  // `api` and `watcher` are borrowed and must outlive the Communicator.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      NcclApi* api, CompletionWatcher* watcher, const Exchange& exchange,
      const CommOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Runs `call(api, comm)` (an enqueue) unless aborted; an NCCL error
  // becomes kInternal naming `what`, this rank and NCCL's text. An answer
  // of "in progress" is polled (ncclCommGetAsyncError) until it leaves that
  // state, at most options().timeout (kDeadlineExceeded).
  absl::Status Call(absl::string_view what,
                    const std::function<Result(NcclApi&, Comm)>& call)
      ABSL_LOCKS_EXCLUDED(mu_);
  // ncclCommGetAsyncError as a status: OK, kUnavailable while in progress,
  // kInternal naming this rank on an error, the abort's status once
  // aborted.
  absl::Status AsyncError() ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the communicator aborted and starts ncclCommAbort on the reaper
  // (once); returns without waiting for NCCL. Idempotent.
  void Abort(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether ncclCommAbort has returned (true for a communicator never
  // initialised or not aborted yet: nothing to wait for), waiting up to
  // `deadline`. For tests and the teardown's log.
  bool Reaped(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  bool aborted() ABSL_LOCKS_EXCLUDED(mu_);

  const CommOptions& options() const { return options_; }

 private:
  Communicator(NcclApi* api, CommOptions options)
      : api_(api), options_(std::move(options)) {}
  absl::Status Error(absl::string_view what, const Result& r) const;

  NcclApi* const api_;
  const CommOptions options_;
  Mutex mu_;
  Comm comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);  // OK: live
  std::thread reaper_ ABSL_GUARDED_BY(mu_);    // runs ncclCommAbort
  bool reaping_ ABSL_GUARDED_BY(mu_) = false;  // reaper_ still in NCCL
  CondVar reaped_;                             // signalled when it returns
};

}  // namespace kolo::nccl

#endif  // KOLO_ALLREDUCE_NCCL_COMMUNICATOR_H_
