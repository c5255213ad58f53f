// ProcessGroupKolo's machinery (process_group_kolo.h): KoloWork, the
// progress thread, names, barrier and the refused point-to-point ops. The
// collectives are in collectives.cc.
//
// Thread-safety and invariants: see process_group_kolo.h.
#include "python/c10d/process_group_kolo.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"

namespace kolo::c10d_backend {
namespace {

// The error of an op that failed with `s`. A membership change (an elastic
// job's epoch ended: workers lost, joined or left) is named in words and in
// a tag that kolo.torch.elastic reads back, "[kolo membership=KIND
// code=N]", since torch hands the user this message only.
std::exception_ptr Error(const python::CApi* api, const std::string& what,
                         const absl::Status& s) {
  std::string message = "kolo backend: " + what +
                        " failed: " + std::string(s.message()) + " [" +
                        absl::StatusCodeToString(s.code()) + "]";
  const std::string kind = api->membership_kind(s);
  if (!kind.empty()) {
    message +=
        "; kolo membership change (" + kind +
        "): the job's epoch ended, so this process group's pending "
        "collectives failed on every member. Under kolo.torch.elastic.run "
        "the loop restores the last commit and goes on in the next epoch: "
        "make that epoch's group with kolo.torch.distributed.reinit() and "
        "wrap the model in DDP again [kolo membership=" +
        kind + " code=" + std::to_string(static_cast<int>(s.code())) + "]";
  }
  return std::make_exception_ptr(std::runtime_error(message));
}

// A timeout in words.
std::string TimeoutText(absl::Duration timeout) {
  return absl::StrCat(absl::ToInt64Milliseconds(timeout), " ms");
}

}  // namespace

KoloWork::KoloWork(const python::CApi* api, std::shared_ptr<Progress> progress,
                   int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                   Pending pending, absl::Duration timeout)
    // The title only while a profiler listens: c10d::Work makes a
    // RecordFunction for every titled work.
    : c10d::Work(rank, type, at::hasCallbacks() ? pending.title : nullptr),
      api_(api),
      progress_(std::move(progress)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      deadline_(absl::Now() + timeout),
      pending_(std::move(pending)) {}

KoloWork::~KoloWork() {
  if (!Claim()) return;
  // Dropped unclaimed: the progress thread waits for the op no longer than
  // a waiter would have (past it, the handles stay kolo's, and so does the
  // slot: the slot's next call finds it busy and fails on it).
  pending_.drain_by = deadline_;
  progress_->Drain(std::move(pending_));
}

bool KoloWork::Finished(absl::Time until) {
  for (Handle h : pending_.handles) {
    absl::StatusOr<size_t> done =
        api_->wait_any(absl::MakeConstSpan(&h, 1),
                       std::max(until - absl::Now(), absl::ZeroDuration()));
    if (!done.ok() &&
        done.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return false;
    }
  }
  return true;
}

bool KoloWork::isCompleted() {
  if (!claimed_.load() && !c10d::Work::isCompleted()) {
    if (Finished(absl::InfinitePast()) && Claim()) Run();
  }
  return c10d::Work::isCompleted();
}

bool KoloWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == ::kNoTimeout) {
    if (Claim()) Run();  // here, until the group's deadline
    return c10d::Work::wait(::kNoTimeout);
  }
  absl::Time until =
      std::min(deadline_, absl::Now() + absl::FromChrono(timeout));
  if (!claimed_.load()) {
    if (Finished(until) || until >= deadline_) {
      if (Claim()) Run();  // finished, or fails at the group's deadline
    } else {
      EnsureDriven();  // completes it later
    }
  }
  if (until < deadline_) {  // else whoever claimed it ends it by then
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock,
                 absl::ToChronoMilliseconds(
                     std::max(until - absl::Now(), absl::ZeroDuration())),
                 [this] { return completed_; });
    if (!completed_) {
      throw std::runtime_error(
          "kolo backend: " + pending_.What() + ": wait() timed out after " +
          TimeoutText(absl::FromChrono(timeout)) +
          "; the collective goes on (the group's timeout is " +
          TimeoutText(timeout_) + "): wait() again to complete it");
    }
  }
  return c10d::Work::wait(::kNoTimeout);
}

c10::intrusive_ptr<c10::ivalue::Future> KoloWork::getFuture() {
  EnsureDriven();
  absl::MutexLock lock(&future_mu_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    if (done_) {
      if (error_) {
        future_->setError(error_);
      } else {
        future_->markCompleted(c10::IValue(outputs_));
      }
    }
  }
  return future_;
}

std::vector<at::Tensor> KoloWork::result() { return outputs_; }

void KoloWork::EnsureDriven() {
  if (driven_.exchange(true) || claimed_.load()) return;
  progress_->Drive(c10::intrusive_ptr<KoloWork>::reclaim_copy(this));
}

void KoloWork::Drive() {
  for (Handle h : pending_.handles) {
    while (!claimed_.load() && absl::Now() < deadline_) {
      // Not releasing the handle: a waiter may claim it meanwhile. Any
      // answer but a deadline (finished, or gone: a waiter released it)
      // ends the wait.
      absl::StatusOr<size_t> done = api_->wait_any(
          absl::MakeConstSpan(&h, 1),
          std::min(absl::Milliseconds(200), deadline_ - absl::Now()));
      if (done.ok() ||
          done.status().code() != absl::StatusCode::kDeadlineExceeded) {
        break;
      }
    }
  }
  if (Claim()) Run();
}

void KoloWork::Run() {
  std::vector<OpResult> results(pending_.handles.size());
  absl::Status first;
  for (size_t i = 0; i < pending_.handles.size(); ++i) {
    absl::Status s = api_->synchronize(
        pending_.handles[i],
        std::max(deadline_ - absl::Now(), absl::ZeroDuration()), &results[i]);
    if (s.code() == absl::StatusCode::kDeadlineExceeded &&
        absl::Now() >= deadline_) {
      TimeOut(i);  // the handle is still kolo's
      return;
    }
    if (!s.ok() && first.ok()) first = s;
  }
  pending_.ClearSlot();  // every handle released
  std::exception_ptr error;
  if (!first.ok()) {
    error = Error(api_, pending_.What(), first);
  } else if (pending_.finish) {
    try {
      pending_.finish(results);
    } catch (...) {
      error = std::current_exception();
    }
  }
  pending_.finish = nullptr;
  pending_.keep.clear();
  Complete(error);
}

void KoloWork::TimeOut(size_t i) {
  std::string what = pending_.What();
  progress_->MarkTimedOut(what + " timed out after " + TimeoutText(timeout_));
  // The unfinished handles and the tensors go; title, name and handles
  // stay, as other threads read them.
  Pending rest;
  rest.title = pending_.title;
  rest.name = pending_.name;
  rest.handles.assign(pending_.handles.begin() + static_cast<std::ptrdiff_t>(i),
                      pending_.handles.end());
  rest.keep = std::move(pending_.keep);
  rest.slots = pending_.slots;
  rest.slot = pending_.slot;
  pending_.finish = nullptr;  // nothing is copied out any more
  progress_->Drain(std::move(rest));
  Complete(std::make_exception_ptr(std::runtime_error(
      "kolo backend: " + what + " timed out: not complete within the " +
      "process group's timeout of " + TimeoutText(timeout_) + " (rank " +
      std::to_string(rank_) +
      "), so a member has not called it yet or is stuck. This group is "
      "unusable on this rank from now on (as torch's groups after a "
      "timeout): destroy it and make a new one. The collective goes on in "
      "kolo until the others join it or kolo fails it, and may still write "
      "its tensors. To wait longer, pass a longer timeout to "
      "init_process_group / new_group")));
}

void KoloWork::Complete(std::exception_ptr error) {
  finish(error);
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    absl::MutexLock lock(&future_mu_);
    done_ = true;
    error_ = error;
    future = future_;
  }
  if (!future) return;  // getFuture() completes it when it makes it
  if (error) {
    future->setError(error);
  } else {
    future->markCompleted(c10::IValue(outputs_));
  }
}

Progress::Progress(const python::CApi* api)
    : api_(api), thread_([this] { Loop(); }) {}

Progress::~Progress() { Stop(); }

void Progress::Drive(c10::intrusive_ptr<KoloWork> work) {
  Item item;
  item.work = std::move(work);
  Enqueue(std::move(item));
}

void Progress::Drain(Pending pending) {
  Item item;
  item.pending = std::move(pending);
  Enqueue(std::move(item));
}

void Progress::Enqueue(Item item) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_) {
      queue_.push_back(std::move(item));
      cv_.Signal();
      return;
    }
  }
  // Stopped: a thread of its own, as the item may wait for peers that
  // never come (up to the group's timeout) and the caller (a work
  // dropped, a future asked for) must not.
  std::thread([self = shared_from_this(), item = std::move(item)]() mutable {
    self->Run(std::move(item));
  }).detach();
}

void Progress::Stop() {
  bool detach = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    // What the thread still has to do (a work to complete, an op to drain)
    // may wait for peers that never come, up to the group's timeout (or
    // for ever with none), and a timed-out op's handles until kolo fails
    // the op: the group's destruction waits for none of it.
    if (timed_out_.load() || busy_ || !queue_.empty()) {
      self_ = weak_from_this().lock();  // null from ~Progress: join
      detach = self_ != nullptr;
    }
    cv_.Signal();
  }
  if (detach) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void Progress::MarkTimedOut(std::string what) {
  absl::MutexLock lock(&mu_);
  if (timed_out_.load()) return;
  timed_out_what_ = std::move(what);
  timed_out_.store(true);
}

void Progress::CheckUsable(const char* op) {
  if (!timed_out_.load()) return;
  std::string what;
  {
    absl::MutexLock lock(&mu_);
    what = timed_out_what_;
  }
  throw std::runtime_error(
      std::string("kolo backend: ") + op +
      ": this process group is unusable on this rank: its " + what +
      " (the group's timeout). Destroy it "
      "(dist.destroy_process_group) and make a new one");
}

void Progress::Loop() {
  // Released last, after the lock: it may be the last hold on this object.
  std::shared_ptr<Progress> self;
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      while (queue_.empty() && !stopped_) cv_.Wait(&mu_);
      if (queue_.empty()) {
        self = std::move(self_);
        break;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Run(std::move(item));
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void Progress::Run(Item item) {
  if (item.work) {
    item.work->Drive();
    return;
  }
  const absl::Time by = item.pending.drain_by;
  bool released = true;
  for (Handle h : item.pending.handles) {
    absl::Status s = api_->synchronize(
        h, std::max(by - absl::Now(), absl::ZeroDuration()), nullptr);
    if (absl::IsDeadlineExceeded(s) && absl::Now() >= by) released = false;
  }
  if (released) item.pending.ClearSlot();
}

ProcessGroupKolo::ProcessGroupKolo(const python::CApi* api, int rank, int size,
                                   ProcessSet process_set, std::string uid,
                                   absl::Duration timeout)
    : c10d::ProcessGroup(rank, size),
      api_(api),
      process_set_(process_set),
      uid_(std::move(uid)),
      stream_("c10d." + uid_),
      prefix_(stream_ + "."),
      timeout_(timeout) {
  absl::StatusOr<std::vector<int>> ranks = api_->process_set_ranks(process_set);
  if (!ranks.ok()) {
    throw std::runtime_error("kolo backend: kolo process set " +
                             std::to_string(process_set) + ": " +
                             std::string(ranks.status().message()));
  }
  global_ranks_ = *std::move(ranks);
  if (static_cast<int>(global_ranks_.size()) != size) {
    throw std::runtime_error(
        "kolo backend: the group has " + std::to_string(size) +
        " ranks but kolo process set " + std::to_string(process_set) + " has " +
        std::to_string(global_ranks_.size()));
  }
  progress_ = std::make_shared<Progress>(api_);
}

ProcessGroupKolo::~ProcessGroupKolo() { progress_->Stop(); }

std::string CallSignature(const at::Tensor& like, bool numel) {
  std::string sig = c10::toString(like.scalar_type());
  if (numel) absl::StrAppend(&sig, ".", like.numel());
  return sig;
}

Call ProcessGroupKolo::NextCall(const char* op) {
  progress_->CheckUsable(op);
  Call call;
  call.slot = static_cast<uint32_t>(seq_.fetch_add(1) % kOrderSlots);
  call.name = absl::StrCat(prefix_, call.slot, ".", op);
  // The call one lap of the slots earlier, while it may be in flight: it
  // would share this call's slot (and maybe its name). 0 once its work
  // released it (the steady state of a blocking loop): no question to kolo.
  const Handle before = slots_->Get(call.slot);
  if (before == 0) return call;
  absl::StatusOr<size_t> done =
      api_->wait_any(absl::MakeConstSpan(&before, 1), timeout_);
  if (!done.ok() && absl::IsDeadlineExceeded(done.status())) {
    std::string what =
        absl::StrCat(op, " ", call.name, ": the group's call ", kOrderSlots,
                     " calls earlier did not finish within the group's "
                     "timeout (",
                     absl::FormatDuration(timeout_), ")");
    progress_->MarkTimedOut(what);
    throw std::runtime_error(absl::StrCat(
        "kolo backend: ", what, "; a group holds at most ", kOrderSlots,
        " collectives in flight. Wait for earlier works, or "
        "check that every rank makes the same calls."));
  }
  return call;
}

void ProcessGroupKolo::Name(Call& call, const std::string& sig) {
  if (!sig.empty()) absl::StrAppend(&call.name, ".", sig);
}

void ProcessGroupKolo::Void(const Call& call, absl::string_view why) {
  // The other ranks read it in their error: without this backend's prefix.
  absl::ConsumePrefix(&why, "kolo backend: ");
  absl::StatusOr<Handle> h =
      api_->order_void(stream_, call.slot, process_set_, call.name, why);
  if (!h.ok()) return;  // kolo is gone: so are the others' calls
  // It ends (failed, as it always does) once every member called in the
  // slot; the slot's next call waits for it, the progress thread releases
  // it.
  slots_->Set(call.slot, *h);
  Pending p;
  p.title = "void";
  p.name = call.name;
  p.handles.push_back(*h);
  p.slots = slots_;
  p.slot = call.slot;
  p.drain_by = absl::Now() + timeout_;
  progress_->Drain(std::move(p));
}

int ProcessGroupKolo::GlobalRank(int64_t group_rank, const char* what) const {
  if (group_rank < 0 ||
      group_rank >= static_cast<int64_t>(global_ranks_.size())) {
    throw std::runtime_error("kolo backend: " + std::string(what) + ": root " +
                             std::to_string(group_rank) +
                             " is not a rank of the group (size " +
                             std::to_string(global_ranks_.size()) + ")");
  }
  return global_ranks_[static_cast<size_t>(group_rank)];
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::Submit(
    c10d::OpType type, const char* title, const Call& call,
    std::vector<absl::StatusOr<Handle>> submitted,
    std::vector<at::Tensor> outputs,
    std::function<void(const std::vector<OpResult>&)> finish,
    std::vector<at::Tensor> keep) {
  Pending p;
  p.keep = std::move(keep);
  p.title = title;
  p.name = call.name;
  absl::Status refused;
  for (absl::StatusOr<Handle>& h : submitted) {
    if (h.ok()) {
      p.handles.push_back(*h);
    } else if (refused.ok()) {
      refused = h.status();
    }
  }
  if (p.handles.empty()) {
    Void(call, refused.message());  // kolo refused the call: void its slot
  } else {
    slots_->Set(call.slot, p.handles.back());
    p.slots = slots_;
    p.slot = call.slot;
  }
  // After a refusal what was submitted still completes (on the progress
  // thread); the caller learns of the refusal now.
  if (refused.ok()) p.finish = std::move(finish);
  auto work =
      c10::make_intrusive<KoloWork>(api_, progress_, getRank(), type,
                                    std::move(outputs), std::move(p), timeout_);
  if (!refused.ok()) {
    std::rethrow_exception(Error(api_, title + (" " + call.name), refused));
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::barrier(
    const c10d::BarrierOptions& /*opts*/) {
  return Collective("barrier", [&](Call& call) {
    std::vector<absl::StatusOr<Handle>> h;
    Order(call);
    h.push_back(api_->barrier_async(call.name, process_set_));
    return Submit(c10d::OpType::BARRIER, "barrier", call, std::move(h), {},
                  nullptr, {});
  });
}

namespace {

[[noreturn]] void RefusePointToPoint(const char* op) {
  throw std::runtime_error(
      std::string("kolo backend: ") + op +
      " is not supported: kolo has no point-to-point transfers. Use a "
      "collective instead (broadcast, scatter, gather, all_to_all with "
      "splits), or a gloo group for send/recv "
      "(dist.new_group(ranks, backend='gloo')).");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::send(
    std::vector<at::Tensor>& /*tensors*/, int /*dst*/, int /*tag*/) {
  RefusePointToPoint("send");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::recv(
    std::vector<at::Tensor>& /*tensors*/, int /*src*/, int /*tag*/) {
  RefusePointToPoint("recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupKolo::recvAnysource(
    std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  RefusePointToPoint("recv (from any source)");
}

}  // namespace kolo::c10d_backend
