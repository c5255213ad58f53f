// OpRuntime (op_runtime.h), part 4 of 4: talking to the coordinator — the
// outbox of announcements and the Done that rides with it (Flush), and reading
// plans from the negotiation link, by the background thread (NextPlanFromLink)
// or by a waiting caller (AwaitProgress).
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "worker_lib/runtime/fast_path_link.h"
#include "worker_lib/runtime/op_runtime.h"
#include "worker_lib/runtime/op_runtime_internal.h"
#include "worker_lib/runtime_log.h"

namespace kolo::worker {

using op_runtime_internal::kDoneDelay;

namespace {

// The background thread keeps waking once per announce window for this
// long after the last submission (see NextPlanFromLink).
constexpr absl::Duration kActive = absl::Seconds(1);

// A caller whose deadline is closer than this leaves the fast path's rounds
// (which wait for the peers, past any deadline) to the background thread;
// one with a longer deadline (or none) runs them itself, saving a wake-up.
// A round waits for live peers at most about kFastPathPatience (each rank
// comes to a round within it, even one whose caller is busy elsewhere), so
// a caller that runs rounds only with more than that left returns by its
// deadline.
const absl::Duration kShortestRoundWait =
    kFastPathPatience + absl::Milliseconds(500);
// The same for a sliced wait (ThreadWaitsSliced): its caller waits again
// until the op finishes, so a slice that ends late costs nothing. Shorter
// than kolo.torch's wait slices (200 ms, python/_kolo.cc): with a second,
// each of its waits handed the rounds to the background thread and paid
// that thread's wake-up (about 400 µs a 4-byte op at 2 ranks, against 7 µs).
constexpr absl::Duration kShortestSlicedRoundWait = absl::Milliseconds(100);

thread_local bool waits_sliced = false;

}  // namespace

bool ThreadWaitsSliced() { return waits_sliced; }
void SetThreadWaitsSliced(bool sliced) { waits_sliced = sliced; }

absl::Status OpRuntime::Flush() {
  std::optional<proto::WorkerMessage> announce;
  uint64_t done = 0;
  {
    MutexLock lock(&mu_);
    announce = outbox_.TakeAnnounce();
    done = std::exchange(outbox_.unsent_done, 0);
  }
  proto::WorkerMessage msgs[2];
  size_t n = 0;
  if (announce.has_value()) msgs[n++] = std::move(*announce);
  if (done != 0) msgs[n++].mutable_done()->set_seq(done);
  if (n == 0) return absl::OkStatus();
  return link_->SendAll(absl::MakeSpan(msgs, n));
}

void OpRuntime::FlushFromUnderLock() {
  mu_.Unlock();  // send_mu_ is taken before mu_
  {
    MutexLock send_lock(&send_mu_);
    (void)Flush();
  }
  mu_.Lock();
}

void OpRuntime::FlushOutbox(bool reads_next) {
  {
    MutexLock lock(&mu_);
    // Nothing to announce and no Done held back for the announcements.
    if (!outbox_.announcing() && outbox_.unsent_done == 0) return;
  }
  {
    MutexLock send_lock(&send_mu_);
    if (absl::Status s = Flush(); !s.ok()) {
      OnFlushError(s);
      return;
    }
  }
  if (!reads_next) WakeQuietReader();
}

void OpRuntime::WakeQuietReader() {
  MutexLock lock(&mu_);
  WakeQuietReaderLocked();
}

void OpRuntime::WakeQuietReaderLocked() {
  if (!bg_quiet_) return;
  const absl::Time now = absl::Now();
  if (link_->ReadBy(now) <= now) plan_cv_.SignalAll();
}

void OpRuntime::OnFlushError(const absl::Status&) {
  // The link broke: the coordinator closes links when the job or the epoch
  // ends (and a broken stream is the Session's end), and the Session's
  // verdict (the job's end, the membership error, an eviction) is what the
  // ops must fail with. The background thread reads the broken link, waits
  // for the verdict a little, then gives the link's error (OnLinkBroken).
  MutexLock lock(&mu_);
  link_broken_ = true;
  plan_cv_.SignalAll();
}

std::optional<proto::Plan> OpRuntime::NextPlanFromLink(
    std::unique_ptr<PlanRunner>& held) {
  while (true) {
    bool done_waits = false;
    absl::Duration timeout;
    {
      MutexLock lock(&mu_);
      std::optional<proto::Plan> queued;
      switch (AwaitLinkTurn(queued, held)) {
        case LinkTurn::kStop:
          return std::nullopt;
        case LinkTurn::kQueued:
          return queued;
        case LinkTurn::kRead:
          break;
      }
      timeout = LinkReadTimeout(done_waits);
    }
    absl::StatusOr<std::optional<proto::CoordinatorMessage>> msg =
        link_->Receive(timeout);
    const bool got_plan = msg.ok() && msg->has_value() && (*msg)->has_plan();
    AfterLinkRead(got_plan, done_waits, held);
    if (msg.ok()) {
      if (got_plan) return std::move(*(*msg)->mutable_plan());
      if (msg->has_value()) {
        RuntimeLog()->warn(
            "ignored a message of kind {} on the negotiation link",
            (*msg)->body_case());
      }
      continue;
    }
    OnLinkBroken(msg.status());
    return std::nullopt;
  }
}

OpRuntime::LinkTurn OpRuntime::AwaitLinkTurn(
    std::optional<proto::Plan>& queued, std::unique_ptr<PlanRunner>& held) {
  while (true) {
    if (stop_) {
      outbox_.unsent_done = 0;  // shutting down: nothing follows
      return LinkTurn::kStop;
    }
    const absl::Time now = absl::Now();
    if (outbox_.flush_at <= now) {  // the outbox's window ended: it goes
      FlushFromUnderLock();
      continue;
    }
    // Off the link while a waiting caller reads it; for kDoneDelay after
    // this thread ran a plan that left nothing pending here (the caller
    // comes back with its next step); and while the caller is submitting
    // (the outbox waits). The caller then waits for the plan and reads
    // the link itself, and runs the plan without a wake-up of this
    // thread and one of its own. The outbox's window bounds the park:
    // then this thread sends the outbox and reads again, so that plans
    // that come while the caller keeps submitting run within one
    // announce window.
    const bool after_plan = now < bg_park_until_;
    // The fast path with nothing kept here: a read would only wait, so this
    // thread waits off the link until the next round is due, and a caller
    // that comes to wait for its ops runs the round itself (no wake-up of
    // this thread, then of the caller). A caller's write that leaves the
    // link work wakes this thread unless the caller reads next
    // (WakeQuietReader).
    absl::Time read_by = absl::InfinitePast();
    if (runner_ != nullptr) {
      if (!plans_.empty()) {
        queued = std::move(plans_.front());
        plans_.pop_front();
        held = std::move(runner_);  // back in ThreadMain after the run
        return LinkTurn::kQueued;
      }
      if (!outbox_.announcing() && !after_plan && !link_broken_) {
        read_by = link_->ReadBy(now);
      }
      // A caller found the link broken: read it now for the verdict.
      if ((!outbox_.announcing() && !after_plan && read_by <= now) ||
          link_broken_) {
        held = std::move(runner_);
        return LinkTurn::kRead;
      }
    }
    const bool quiet = read_by > now;
    absl::Time until = outbox_.flush_at;
    if (after_plan) until = std::min(until, bg_park_until_);
    if (quiet) until = std::min(until, read_by);
    if (runner_ == nullptr || quiet) {
      // A caller that lets go of the link does not wake this thread:
      // it comes back by the end of the park.
      until = std::min(until,
                       now + (now - last_submit_ < kActive ? announce_window_
                                                           : absl::Seconds(1)));
    }
    bg_wakes_at_ = until;
    bg_quiet_ = quiet;
    const bool ended = plan_cv_.WaitWithDeadline(&mu_, until);
    bg_quiet_ = false;
    bg_wakes_at_ = absl::InfinitePast();
    // A Done with nothing to ride with (no submission since its plan)
    // goes at the end of the park.
    if (ended && !stop_ && runner_ != nullptr && outbox_.unsent_done != 0 &&
        !outbox_.announcing() && absl::Now() >= bg_park_until_) {
      FlushFromUnderLock();
    }
  }
}

absl::Duration OpRuntime::LinkReadTimeout(bool& done_waits) {
  absl::Duration timeout = absl::Seconds(1);
  // A Done waits for the caller's next announcement (see RunPlan): up to
  // kDoneDelay for the first, then with the outbox.
  done_waits = outbox_.unsent_done != 0;
  if (done_waits && !outbox_.announcing()) {
    timeout = kDoneDelay;
  }
  const absl::Time now = absl::Now();
  // While the caller submits, wake at least once per announce window,
  // so that a submission never needs a wake-up of its own (a Wake per
  // op costs a context switch on a busy host).
  if (now - last_submit_ < kActive) {
    timeout = std::min(timeout, announce_window_);
  }
  if (outbox_.announcing()) {
    timeout = std::min(timeout,
                       std::max(absl::ZeroDuration(), outbox_.flush_at - now));
  }
  bg_wakes_at_ = now + timeout;
  return timeout;
}

void OpRuntime::AfterLinkRead(bool got_plan, bool done_waits,
                              std::unique_ptr<PlanRunner>& held) {
  bool flush = false;
  {
    MutexLock lock(&mu_);
    // A plan: the runner goes back in ThreadMain after the run.
    if (!got_plan) runner_ = std::move(held);
    bg_wakes_at_ = absl::InfinitePast();  // awake
    const absl::Time now = absl::Now();
    if (outbox_.flush_at <= now) {
      flush = true;  // the outbox's window ended: everything goes
    } else if (done_waits && outbox_.unsent_done != 0 &&
               !outbox_.announcing()) {
      // No submission came to take the Done along: it goes alone. While
      // the caller is submitting, it stays with the outbox (the caller's
      // wait or the window's end sends both): the coordinator holds what
      // becomes ready until it comes, so the step's tensors go in one
      // plan and one write.
      flush = true;
    }
    if (stop_) flush = false;
  }
  if (flush) {
    MutexLock send_lock(&send_mu_);
    (void)Flush();
  }
}

void OpRuntime::OnLinkBroken(const absl::Status& why) {
  // Wait for the Session's verdict a little, then give ours
  // (announcements cannot reach the coordinator any more either).
  bool verdict = false;
  {
    MutexLock lock(&mu_);
    const absl::Time verdict_by = absl::Now() + absl::Seconds(2);
    while (terminal_.ok() && !stop_) {
      if (plan_cv_.WaitWithDeadline(&mu_, verdict_by)) break;
    }
    verdict = !terminal_.ok() || stop_;
  }
  if (!verdict) {
    Fail(absl::UnavailableError(
        absl::StrCat("rank ", rank_, ": ", why.message(),
                     "; no plan can reach this rank any more")));
  }
  MutexLock lock(&mu_);
  while (!stop_) plan_cv_.Wait(&mu_);  // Fail cleared the queue for good
}

bool OpRuntime::AwaitProgress(absl::Time deadline) {
  if (!link_->carries_plans() || runner_ == nullptr || link_broken_ || stop_ ||
      !terminal_.ok() || !plans_.empty()) {
    return done_cv_.WaitWithDeadline(&mu_, deadline);
  }
  if (deadline - absl::Now() <
          (waits_sliced ? kShortestSlicedRoundWait : kShortestRoundWait) &&
      link_->may_overrun_timeout()) {
    // A fast-path round may wait for the peers past a deadline this close:
    // the background thread runs it.
    plan_cv_.SignalAll();
    return done_cv_.WaitWithDeadline(&mu_, deadline);
  }
  // The link is free: this caller takes the runner, reads the link and
  // runs what comes (a Done this caller leaves unsent is the background
  // thread's, see NextPlanFromLink).
  std::unique_ptr<PlanRunner> held = std::move(runner_);
  absl::Time now = absl::Now();
  const absl::Time until =
      std::min({deadline, outbox_.flush_at, now + absl::Seconds(1)});
  mu_.Unlock();
  absl::StatusOr<std::optional<proto::CoordinatorMessage>> msg =
      link_->Receive(std::max(absl::ZeroDuration(), until - now));
  std::optional<proto::Plan> plan;
  if (msg.ok() && msg->has_value()) {
    if ((*msg)->has_plan()) {
      plan = std::move(*(*msg)->mutable_plan());
    } else {
      RuntimeLog()->warn("ignored a message of kind {} on the negotiation link",
                         (*msg)->body_case());
    }
  }
  if (plan.has_value()) RunPlan(*plan, absl::Now(), *held);
  mu_.Lock();
  runner_ = std::move(held);
  now = absl::Now();
  const bool flush =
      !stop_ && outbox_.flush_at <= now;  // another thread's outbox
  if (!msg.ok()) {
    // The background thread gives the verdict (NextPlanFromLink).
    link_broken_ = true;
    plan_cv_.SignalAll();
  }
  // Others waiting may take the link now; Stop may be waiting for it. The
  // background thread runs queued plans, and sends a Done left unsent here
  // when nothing comes to take it along: it comes back by itself within an
  // announce window, else it is woken.
  done_cv_.SignalAll();
  if (!plans_.empty() ||
      (outbox_.unsent_done != 0 && bg_wakes_at_ > now + announce_window_)) {
    plan_cv_.SignalAll();
  }
  if (flush) {
    FlushFromUnderLock();
    WakeQuietReaderLocked();  // this caller does not read again
  }
  return absl::Now() >= deadline;
}

}  // namespace kolo::worker
