#include "allreduce/nccl/communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace kolo::nccl {
namespace {
constexpr absl::string_view kOk = "ok:";
constexpr absl::string_view kNo = "no:";
}  // namespace

std::string ExchangeKey(uint64_t epoch, int32_t process_set) {
  return absl::StrCat("kolo/nccl-unique-id/epoch-", epoch, "/set-",
                      process_set);
}

absl::Status Communicator::Error(absl::string_view what,
                                 const Result& r) const {
  return absl::InternalError(absl::StrCat(
      "NCCL ", what, " failed on rank ", options_.rank, " of ", options_.size,
      " (process set ", options_.process_set, ", epoch ", options_.epoch,
      ", CUDA device ", options_.device, "): ", r.message));
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    NcclApi* api, CompletionWatcher* watcher, const Exchange& exchange,
    const CommOptions& options) {
  std::unique_ptr<Communicator> c(new Communicator(api, options));
  std::string mine;
  if (!options.local_problem.empty()) {
    mine = absl::StrCat(kNo, options.local_problem);
  } else if (options.rank == 0) {
    std::string id;
    Result r = api->GetUniqueId(&id);
    mine = r.ok() ? absl::StrCat(kOk, id)
                  : absl::StrCat(kNo, "ncclGetUniqueId failed: ", r.message);
  } else {
    mine = std::string(kOk);
  }
  absl::StatusOr<std::vector<std::string>> all = exchange(
      ExchangeKey(options.epoch, options.process_set), mine, options.timeout);
  if (!all.ok()) {
    return absl::Status(
        all.status().code(),
        absl::StrCat("NCCL communicator of process set ", options.process_set,
                     " (epoch ", options.epoch, "): exchanging the unique id ",
                     "through the coordinator failed on rank ", options.rank,
                     ": ", all.status().message()));
  }
  if (static_cast<int>(all->size()) != options.size) {
    return absl::InternalError(
        absl::StrCat("NCCL communicator of process set ", options.process_set,
                     ": the unique-id exchange returned ", all->size(),
                     " values for ", options.size, " ranks"));
  }
  std::vector<std::string> refusals;
  for (int r = 0; r < options.size; ++r) {
    const std::string& v = (*all)[r];
    if (!absl::StartsWith(v, kOk)) {
      refusals.push_back(absl::StrCat(
          "rank ", r, ": ",
          absl::StartsWith(v, kNo) ? v.substr(kNo.size()) : "no answer"));
    }
  }
  if (!refusals.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL is not used for process set ", options.process_set, " in epoch ",
        options.epoch, " (", absl::StrJoin(refusals, "; "),
        "); its CUDA tensors go through host memory"));
  }
  const std::string id = (*all)[0].substr(kOk.size());
  {
    MutexLock lock(&c->mu_);
    Result r = api->CommInitRank(&c->comm_, options.size, id, options.rank,
                                 options.device);
    if (r.code == Result::kError) {
      if (c->comm_ != nullptr) api->CommAbort(c->comm_);
      c->comm_ = nullptr;
      c->aborted_ = c->Error("ncclCommInitRankConfig", r);
      return c->aborted_;
    }
  }
  // Non-blocking: the communicator is ready when the async error is no
  // longer "in progress". The watcher polls it, with the deadline.
  Communicator* raw = c.get();
  absl::Status ready = watcher->Await(
      [raw]() -> absl::StatusOr<bool> {
        absl::Status s = raw->AsyncError();
        if (absl::IsUnavailable(s)) return false;
        if (!s.ok()) return s;
        return true;
      },
      absl::Now() + options.timeout,
      absl::StrCat("creating the NCCL communicator of process set ",
                   options.process_set, " on rank ", options.rank));
  if (!ready.ok()) {
    c->Abort(ready);
    return ready;
  }
  return c;
}

Communicator::~Communicator() {
  Abort(absl::AbortedError("the NCCL communicator was destroyed"));
}

absl::Status Communicator::Call(
    absl::string_view what, const std::function<Result(NcclApi&, Comm)>& call) {
  MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  Result r = call(*api_, comm_);
  // A non-blocking communicator may answer "in progress" (ncclGroupEnd
  // does, typically): NCCL's guide asks to poll its state until it leaves
  // that before the next call. Bounded by the communicator's timeout.
  const absl::Time deadline = absl::Now() + options_.timeout;
  absl::Duration nap = absl::Microseconds(5);
  while (r.code == Result::kInProgress) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("NCCL ", what, " on rank ", options_.rank, " of ",
                       options_.size, " stayed in progress past the timeout"));
    }
    absl::SleepFor(nap);
    nap = std::min(nap * 2, absl::Milliseconds(1));
    r = api_->CommGetAsyncError(comm_);
  }
  if (r.code == Result::kError) return Error(what, r);
  return absl::OkStatus();  // enqueued: runs on the stream
}

absl::Status Communicator::AsyncError() {
  MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  Result r = api_->CommGetAsyncError(comm_);
  if (r.code == Result::kInProgress) {
    return absl::UnavailableError("in progress");
  }
  if (r.code == Result::kError) return Error("(asynchronous error)", r);
  return absl::OkStatus();
}

void Communicator::Abort(absl::Status why) {
  MutexLock lock(&mu_);
  if (!aborted_.ok()) return;
  aborted_ = why.ok() ? absl::AbortedError("NCCL communicator aborted")
                      : std::move(why);
  if (comm_ != nullptr) {
    api_->CommAbort(comm_);
    comm_ = nullptr;
  }
}

bool Communicator::aborted() {
  MutexLock lock(&mu_);
  return !aborted_.ok();
}

}  // namespace kolo::nccl
