// FastPathLink (fast_path_link.h): keeping announcements on the fast path,
// the rounds over the data plane, the plans they derive, and the exit.
#include "worker_lib/runtime/fast_path_link.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "allreduce/collectives.h"
#include "kolo/types.h"
#include "worker_lib/runtime_log.h"

namespace kolo::worker {
namespace {

// After a round that ran nothing, the next waits this long for something
// new here (the peers' contributions change too: they wait as long at most).
constexpr absl::Duration kEmptyRoundPause = absl::Microseconds(200);

// A round's data-plane stamp: in the space of the next plan's sequence
// number, above any response's (plan_runner.cc StampOf), so that a round's
// bytes never pass for a plan's.
uint64_t RoundStamp(uint64_t next_seq, uint64_t round) {
  return (next_seq << 32) | 0x80000000u | ((round & 0x7fffffu) << 8);
}

}  // namespace

absl::Duration RoundPatience(absl::Duration data_timeout) {
  return std::max(data_timeout, kShortestRoundPatience);
}

FastPathLink::FastPathLink(std::unique_ptr<CoordinatorLink> inner,
                           DataPlane* data, absl::Duration data_timeout,
                           int rank, Hooks hooks)
    : inner_(std::move(inner)),
      data_(data),
      data_timeout_(data_timeout),
      rank_(rank),
      hooks_(std::move(hooks)) {}

absl::Status FastPathLink::SendAll(absl::Span<proto::WorkerMessage> msgs) {
  {
    MutexLock lock(&mu_);
    if (fast_) {
      const absl::Time now = absl::Now();
      for (proto::WorkerMessage& msg : msgs) Keep(msg, now);
      cv_.SignalAll();
      return absl::OkStatus();
    }
    for (const proto::WorkerMessage& msg : msgs) {
      if (msg.has_announce()) ++announces_sent_;
    }
  }
  return inner_->SendAll(msgs);
}

void FastPathLink::Keep(proto::WorkerMessage& msg, absl::Time now) {
  if (msg.has_done()) return;  // the exit reports the last plan run
  active_at_ = now;
  if (!msg.has_announce()) {
    // Nothing else travels on the link; should it, it needs the coordinator.
    need_ = true;
    return;
  }
  proto::Announce& a = *msg.mutable_announce();
  // Settings first, as the coordinator reads an Announce: a tensor
  // announced with or after a change of settings runs under the new ones,
  // so only the coordinator may plan it (fenced: kKeptAfterSettings).
  if (a.has_settings()) {
    *kept_.mutable_settings() = a.settings();
    need_ = true;
  }
  const uint8_t kept = kept_.has_settings() ? kKeptAfterSettings : kKept;
  for (uint32_t bit : a.cached()) {
    if (bit >= bits_kept_.size()) {
      // Given out before the grant, so below bits_end; a bit beyond it is
      // the coordinator's to judge.
      bits_kept_.resize(bit + 1, 0);
      kept_at_.resize(bit + 1);
      need_ = true;
    }
    if (bits_kept_[bit] == 0) {
      bits_kept_[bit] = kept;
      kept_at_[bit] = now;
      ready_.push_back(bit);
    }
  }
  for (proto::Request& r : *a.mutable_requests()) {
    *kept_.add_requests() = std::move(r);
    need_ = true;
  }
}

void FastPathLink::Grant(const proto::FastPath& grant, uint64_t seq) {
  MutexLock lock(&mu_);
  fast_ = true;
  grant_ = grant;
  fast_seq_ = seq;
  rounds_in_seq_ = 0;
  // Announcements the coordinator had not read when it granted are its own.
  need_ = rank_ >= grant.announces_size() ||
          announces_sent_ > grant.announces(rank_);
  // Shutting down: leave at once (Leave).
  if (leaving_) need_ = true;
  failed_ = false;
  active_at_ = absl::Now();
  granted_at_ = active_at_;
  tally_.Clear();
  const size_t n = grant.bits_end();
  described_.assign(n, 0);
  candidates_.assign(n, fusion::Candidate{});
  bits_kept_.assign(n, 0);
  kept_at_.assign(n, absl::InfinitePast());
  used_at_.assign(n, 0);
  use_clock_ = 0;
  ready_.clear();
  kept_.Clear();
  RuntimeLog()->debug(
      "fast path granted after plan {} ({} cache bits{})", seq, n,
      need_ ? "; announcements in flight: leaving at once" : "");
}

absl::StatusOr<std::optional<proto::CoordinatorMessage>> FastPathLink::Receive(
    absl::Duration timeout) {
  bool fast = false;
  {
    MutexLock lock(&mu_);
    fast = fast_;
  }
  if (!fast) {
    absl::StatusOr<std::optional<proto::CoordinatorMessage>> msg =
        inner_->Receive(timeout);
    if (msg.ok() && msg->has_value() && (*msg)->has_plan() &&
        (*msg)->plan().has_fast_path()) {
      Grant((*msg)->plan().fast_path(), (*msg)->plan().seq());
    }
    return msg;
  }
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (true) {
    if (woken_) {
      woken_ = false;
      return std::nullopt;
    }
    if (ready_.empty() && !MustLeave(absl::Now())) {
      // Idle: wait for something kept, or until idle too long (then this
      // rank's round leaves the fast path for every rank).
      const absl::Time idle_end = active_at_ + kFastPathPatience;
      if (cv_.WaitWithDeadline(&mu_, std::min(deadline, idle_end)) &&
          absl::Now() >= deadline) {
        return std::nullopt;
      }
      continue;
    }
    (void)MustLeave(absl::Now());  // a stalled bit
    DescribeNewBits();
    bool exit = false;
    absl::StatusOr<std::optional<proto::Plan>> plan = Round(exit);
    if (!plan.ok()) return plan.status();
    const size_t ran =
        plan->has_value() ? static_cast<size_t>((*plan)->responses_size()) : 0;
    if (exit) {
      if (absl::Status s = Exit(); !s.ok()) return s;
    }
    if (hooks_.on_round) {
      mu_.Unlock();  // the hook takes the runtime's lock
      hooks_.on_round(ran, exit);
      mu_.Lock();
    }
    if (plan->has_value()) {
      proto::CoordinatorMessage m;
      *m.mutable_plan() = std::move(**plan);
      return m;
    }
    if (exit) return std::nullopt;
    const absl::Time now = absl::Now();
    if (now >= deadline) return std::nullopt;
    (void)cv_.WaitWithDeadline(&mu_,
                               std::min(deadline, now + kEmptyRoundPause));
  }
}

bool FastPathLink::MustLeave(absl::Time now) {
  if (need_) return true;
  const char* why = nullptr;
  absl::Duration after = kFastPathPatience;
  if (rank_ == 0 && now - granted_at_ >= kFastPathReportEvery) {
    why = "a report to the coordinator due";
    after = kFastPathReportEvery;
  } else if (ready_.empty()) {
    if (now - active_at_ >= kFastPathPatience) why = "nothing to run";
  } else if (ready_.front() < kept_at_.size() &&
             now - kept_at_[ready_.front()] >= kFastPathPatience) {
    why = "a tensor waiting for the other ranks";
  }
  if (why == nullptr) return false;
  RuntimeLog()->debug(
      "fast path: {} after {}; this rank hands over to the coordinator", why,
      absl::FormatDuration(after));
  need_ = true;
  return true;
}

void FastPathLink::DescribeNewBits() {
  std::vector<uint32_t> fresh;
  for (uint32_t bit : ready_) {
    if (bit < described_.size() && described_[bit] == 0) fresh.push_back(bit);
  }
  if (fresh.empty()) return;
  const uint64_t direct = grant_.fusion_direct_bytes();
  std::vector<std::optional<fusion::Candidate>> found;
  found.reserve(fresh.size());
  mu_.Unlock();  // describe takes the runtime's lock
  for (uint32_t bit : fresh) found.push_back(hooks_.describe(bit, direct));
  mu_.Lock();
  for (size_t i = 0; i < fresh.size(); ++i) {
    const uint32_t bit = fresh[i];
    if (found[i].has_value()) {
      described_[bit] = 1;
      candidates_[bit] = *found[i];
    } else {
      described_[bit] = 2;
    }
  }
}

absl::StatusOr<std::optional<proto::Plan>> FastPathLink::Round(bool& exit) {
  const size_t n = grant_.bits_end();
  round_.assign(1 + n, 0);
  bool need = need_;
  for (uint32_t bit : ready_) {
    if (leaving_) break;  // its ops were abandoned: no bit from this rank
    if (bit < n && described_[bit] == 1 &&
        bits_kept_[bit] != kKeptAfterSettings) {
      round_[1 + bit] = 1;
    } else {
      need = true;  // a bit the fast path cannot run: the coordinator's
    }
  }
  need_ = need;
  round_[0] = need ? 0 : 1;
  const uint64_t stamp = RoundStamp(fast_seq_ + 1, rounds_in_seq_++);
  ++rounds_;
  uint8_t* buffer = round_.data();
  in_round_ = true;
  mu_.Unlock();
  // The peers come within about kFastPathPatience (see the header); then
  // the plans' collectives get their own deadline back.
  data_->SetInactivityTimeout(RoundPatience(data_timeout_));
  data_->Stamp(stamp);
  ReduceOptions reduce;
  reduce.op = ReduceOp::kMin;  // bytes of 0/1: the AND of every rank's
  absl::Status status = data_->Allreduce(DataType::kUInt8, buffer, buffer,
                                         static_cast<int64_t>(1 + n), reduce);
  data_->SetInactivityTimeout(data_timeout_);
  mu_.Lock();
  in_round_ = false;
  if (!status.ok()) {
    failed_ = true;
    cv_.SignalAll();
    return status;
  }
  exit = round_[0] == 0;
  std::vector<uint32_t> bits;
  for (uint32_t bit = 0; bit < n; ++bit) {
    if (round_[1 + bit] == 0) continue;
    bits.push_back(bit);
    bits_kept_[bit] = 0;
  }
  if (bits.empty()) return std::optional<proto::Plan>();
  active_at_ = absl::Now();
  ready_.erase(std::remove_if(ready_.begin(), ready_.end(),
                              [&](uint32_t bit) {
                                mu_.AssertHeld();
                                return bit < n && bits_kept_[bit] == 0;
                              }),
               ready_.end());
  return std::optional<proto::Plan>(PlanOf(bits));
}

proto::Plan FastPathLink::PlanOf(const std::vector<uint32_t>& bits) {
  std::vector<fusion::Candidate> candidates;
  candidates.reserve(bits.size());
  for (uint32_t bit : bits) candidates.push_back(candidates_[bit]);
  proto::Plan plan;
  plan.set_seq(++fast_seq_);
  rounds_in_seq_ = 0;
  tally_.set_plans(tally_.plans() + 1);
  for (const fusion::Group& group :
       fusion::PlanFusion(candidates, grant_.fusion_threshold())) {
    proto::Response& r = *plan.add_responses();
    r.set_op(proto::ALLREDUCE);
    r.set_by_bit(true);
    uint64_t bytes = 0;
    for (size_t m : group.members) {
      r.add_cache_bits(static_cast<int32_t>(bits[m]));
      used_at_[bits[m]] = ++use_clock_;
      bytes += candidates[m].bytes;
    }
    const uint64_t tensors = group.members.size();
    tally_.set_collectives(tally_.collectives() + 1);
    tally_.set_tensors(tally_.tensors() + tensors);
    tally_.set_bytes(tally_.bytes() + bytes);
    if (tensors > 1) {
      tally_.set_fused_buffers(tally_.fused_buffers() + 1);
      tally_.set_fused_tensors(tally_.fused_tensors() + tensors);
    }
  }
  return plan;
}

absl::Status FastPathLink::Exit() {
  proto::WorkerMessage msgs[2];
  proto::Done& done = *msgs[0].mutable_done();
  done.set_seq(fast_seq_);
  done.set_fast_exit(true);
  std::vector<std::pair<uint64_t, uint32_t>> used;
  for (uint32_t bit = 0; bit < used_at_.size(); ++bit) {
    if (used_at_[bit] != 0) used.emplace_back(used_at_[bit], bit);
  }
  std::sort(used.begin(), used.end());
  for (const auto& [at, bit] : used) done.add_fast_used(bit);
  done.mutable_fast_tally()->Swap(&tally_);
  size_t count = 1;
  proto::Announce& a = *msgs[1].mutable_announce();
  if (!leaving_) {  // a leaving rank's ops were abandoned
    a.Swap(&kept_);
    for (uint32_t bit : ready_) a.add_cached(bit);
  }
  if (a.requests_size() > 0 || a.cached_size() > 0 || a.has_settings()) {
    count = 2;
    ++announces_sent_;
  }
  RuntimeLog()->debug(
      "fast path left after plan {}: {} request(s) and {} cache bit(s) go to "
      "the coordinator",
      fast_seq_, a.requests_size(), a.cached_size());
  fast_ = false;
  need_ = false;
  ready_.clear();
  kept_.Clear();
  cv_.SignalAll();  // AwaitExit
  // Under mu_: a SendAll that finds the fast path over writes after this.
  return inner_->SendAll(absl::MakeSpan(msgs, count));
}

void FastPathLink::Wake() {
  {
    MutexLock lock(&mu_);
    woken_ = true;
    cv_.SignalAll();
  }
  inner_->Wake();
}

bool FastPathLink::may_overrun_timeout() const {
  MutexLock lock(&mu_);
  return fast_;
}

absl::Time FastPathLink::ReadBy(absl::Time now) const {
  MutexLock lock(&mu_);
  if (!fast_ || woken_ || need_ || leaving_ || failed_ || !ready_.empty()) {
    return now;
  }
  // As MustLeave: idle for kFastPathPatience, rank 0's report.
  absl::Time due = active_at_ + kFastPathPatience;
  if (rank_ == 0) due = std::min(due, granted_at_ + kFastPathReportEvery);
  return due;
}

bool FastPathLink::Leave() {
  MutexLock lock(&mu_);
  leaving_ = true;
  if (!fast_) return false;
  RuntimeLog()->debug(
      "shutdown: leaving the fast path with the other ranks after plan {}",
      fast_seq_);
  need_ = true;
  cv_.SignalAll();
  return true;
}

bool FastPathLink::AwaitExit(absl::Time deadline) {
  MutexLock lock(&mu_);
  while (fast_ && !failed_) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return !fast_;
}

uint64_t FastPathLink::rounds() const {
  MutexLock lock(&mu_);
  return rounds_;
}

}  // namespace kolo::worker
