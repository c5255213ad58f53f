#include "allreduce/nccl/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace kolo::nccl {
namespace {
constexpr absl::string_view kOk = "ok:";
constexpr absl::string_view kNo = "no:";

// A member's exchange value: kOk or kNo, then the device identity and the
// NCCL version on a line each, then rank 0's unique id (128 bytes, any
// byte) or why this member cannot use NCCL.
struct Value {
  bool ok = false;
  std::string identity;
  int version = 0;
  std::string rest;  // the unique id (rank 0) or the problem
};

std::string Encode(const Value& v) {
  std::string identity = v.identity;
  std::replace(identity.begin(), identity.end(), '\n', ' ');
  return absl::StrCat(v.ok ? kOk : kNo, identity, "\n", v.version, "\n",
                      v.rest);
}

// False when `text` is not a value of this protocol.
bool Decode(const std::string& text, Value* v) {
  if (absl::StartsWith(text, kOk)) {
    v->ok = true;
  } else if (!absl::StartsWith(text, kNo)) {
    return false;
  }
  const size_t a = text.find('\n', kOk.size());
  const size_t b = a == std::string::npos ? a : text.find('\n', a + 1);
  if (b == std::string::npos) return false;
  v->identity = text.substr(kOk.size(), a - kOk.size());
  if (!absl::SimpleAtoi(text.substr(a + 1, b - a - 1), &v->version)) {
    return false;
  }
  v->rest = text.substr(b + 1);
  return true;
}

// 22809 -> "2.28.9".
std::string VersionText(int code) {
  return absl::StrCat(code / 10000, ".", code % 10000 / 100, ".", code % 100);
}

// Why the members cannot share their GPUs on NCCL ("" when they share none,
// or their NCCL can); the same text on every member (it depends only on
// the exchanged values). Sets NCCL_MULTI_RANK_GPU_ENABLE when they share
// one and can.
std::string SharedDevices(const std::vector<Value>& values) {
  std::map<std::string, std::vector<int>> ranks_of;
  int oldest = std::numeric_limits<int>::max();
  for (size_t r = 0; r < values.size(); ++r) {
    if (!values[r].identity.empty()) {
      ranks_of[values[r].identity].push_back(static_cast<int>(r));
    }
    oldest = std::min(oldest, values[r].version);
  }
  std::vector<std::string> shared;
  for (const auto& [identity, ranks] : ranks_of) {
    if (ranks.size() > 1) {
      shared.push_back(absl::StrCat("ranks ", absl::StrJoin(ranks, ", "),
                                    " share CUDA device ", identity));
    }
  }
  if (shared.empty()) return "";
  if (oldest < kMultiRankGpuVersion) {
    return absl::StrCat(absl::StrJoin(shared, "; "), ", and NCCL ",
                        VersionText(oldest),
                        " (before 2.30) refuses two ranks of a communicator "
                        "on one GPU");
  }
  // Process-wide, and never over the user's own value.
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", /*overwrite=*/0);
  return "";
}

}  // namespace

std::string ExchangeKey(uint64_t epoch, int32_t process_set) {
  return absl::StrCat("kolo/nccl-unique-id/epoch-", epoch, "/set-",
                      process_set);
}

std::string DeviceIdentity(absl::string_view host,
                           absl::string_view pci_bus_id) {
  return absl::StrCat(host, "/", absl::AsciiStrToLower(pci_bus_id));
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
  Value mine;
  mine.identity = options.device_identity;
  if (!options.local_problem.empty()) {
    mine.rest = options.local_problem;
  } else if (options.rank == 0) {
    mine.version = api->Version();
    Result r = api->GetUniqueId(&mine.rest);
    mine.ok = r.ok();
    if (!r.ok())
      mine.rest = absl::StrCat("ncclGetUniqueId failed: ", r.message);
  } else {
    mine.version = api->Version();
    mine.ok = true;
  }
  absl::StatusOr<std::vector<std::string>> all =
      exchange(ExchangeKey(options.epoch, options.process_set),
               options.process_set, Encode(mine), options.timeout);
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
  std::vector<Value> values(all->size());
  std::vector<std::string> refusals;
  for (int r = 0; r < options.size; ++r) {
    Value& v = values[r];
    if (!Decode((*all)[r], &v)) {
      refusals.push_back(absl::StrCat(
          "rank ", r, ": no answer of this kolo version's protocol"));
    } else if (!v.ok) {
      refusals.push_back(absl::StrCat("rank ", r, ": ", v.rest));
    }
  }
  if (refusals.empty()) {
    if (std::string why = SharedDevices(values); !why.empty()) {
      refusals.push_back(std::move(why));
    }
  }
  if (!refusals.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL is not used for process set ", options.process_set, " in epoch ",
        options.epoch, " (", absl::StrJoin(refusals, "; "),
        "); its CUDA tensors go through host memory (staging)"));
  }
  const std::string& id = values[0].rest;
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
  std::thread reaper;
  {
    MutexLock lock(&mu_);
    reaper = std::move(reaper_);
  }
  if (reaper.joinable()) reaper.join();
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
  if (comm_ == nullptr) return;
  // No other call uses the handle from here on: Call and AsyncError check
  // aborted_ under mu_ first.
  Comm doomed = comm_;
  comm_ = nullptr;
  reaping_ = true;
  reaper_ = std::thread([this, doomed] {
    api_->CommAbort(doomed);
    MutexLock done(&mu_);
    reaping_ = false;
    reaped_.SignalAll();
  });
}

bool Communicator::Reaped(absl::Time deadline) {
  MutexLock lock(&mu_);
  while (reaping_ && absl::Now() < deadline) {
    reaped_.WaitWithDeadline(&mu_, deadline);
  }
  return !reaping_;
}

bool Communicator::aborted() {
  MutexLock lock(&mu_);
  return !aborted_.ok();
}

}  // namespace kolo::nccl
