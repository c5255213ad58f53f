#include "coordinator/negotiator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/log.h"
#include "coordinator/negotiator_checks.h"

namespace kolo::coordinator {
namespace {

// A stall warning or shutdown lists at most this many tensors.
constexpr size_t kMaxListed = 5;

// "61.0 s"
std::string FormatAge(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

// "60", "0.5": a knob's value in the unit of its variable.
std::string KnobSeconds(absl::Duration d) {
  return absl::StrCat(absl::ToDoubleSeconds(d));
}

// The first kMaxListed items, then ", and N more".
std::string ListSome(const std::vector<std::string>& items) {
  if (items.size() <= kMaxListed) return absl::StrJoin(items, ", ");
  return absl::StrCat(
      absl::StrJoin(items.begin(), items.begin() + kMaxListed, ", "), ", and ",
      items.size() - kMaxListed, " more");
}

constexpr absl::string_view kStallCause =
    "a rank may be stuck, or the ranks submit different tensors";

}  // namespace

Negotiator::Negotiator(NegotiatorOptions options)
    : options_(std::move(options)) {
  KOLO_CHECK(options_.size >= 1) << "negotiator size " << options_.size;
  done_.assign(options_.size, 0);
}

void Negotiator::Announce(int rank, const proto::Announce& announce,
                          absl::Time now, NegotiatorOutput& out) {
  KOLO_CHECK(rank >= 0 && rank < options_.size)
      << "rank " << rank << " of " << options_.size;
  for (const proto::Request& request : announce.requests()) {
    const std::string& name = request.name();
    auto [it, inserted] = partial_.try_emplace(name);
    Partial& p = it->second;
    if (held_names_.contains(name) ||
        (!inserted && p.by_rank[rank].has_value())) {
      if (inserted) partial_.erase(it);
      GetLogger("coordinator")
          ->warn(
              "rank {} announced tensor '{}' again before its response was "
              "dispatched; the duplicate is ignored (the worker should have "
              "refused it)",
              rank, name);
      continue;
    }
    if (inserted) {
      p.by_rank.resize(options_.size);
      p.first = now;
      p.order = next_order_++;
      by_order_.emplace(p.order, name);
    }
    p.by_rank[rank] = request;
    if (++p.count < options_.size) continue;
    proto::Response response = Resolve(name, p.by_rank);
    by_order_.erase(p.order);
    partial_.erase(it);
    Ready(std::move(response), now, out);
  }
}

void Negotiator::Done(int rank, uint64_t seq, absl::Time /*now*/,
                      NegotiatorOutput& out) {
  KOLO_CHECK(rank >= 0 && rank < options_.size)
      << "rank " << rank << " of " << options_.size;
  if (seq <= done_[rank]) return;
  if (seq > last_seq_) {
    GetLogger("coordinator")
        ->warn(
            "rank {} reported plan {} done, but only {} plans were sent; "
            "ignored (a worker bug)",
            rank, seq, last_seq_);
    return;
  }
  done_[rank] = seq;
  if (!held_.empty() && DataPlaneIdle()) Flush(out);
}

void Negotiator::Tick(absl::Time now, NegotiatorOutput& out) {
  if (!held_.empty() && now >= held_since_ + options_.cycle_time) Flush(out);
  Inspect(now, out);
}

absl::Time Negotiator::NextWake() const {
  absl::Time wake = absl::InfiniteFuture();
  if (!held_.empty()) wake = held_since_ + options_.cycle_time;
  if (by_order_.empty()) return wake;
  const absl::Time oldest = partial_.at(by_order_.begin()->second).first;
  if (options_.stall_check > absl::ZeroDuration()) {
    wake = std::min(
        wake, std::max(oldest + options_.stall_check, next_stall_warning_));
  }
  if (options_.stall_shutdown > absl::ZeroDuration() && !shutdown_given_) {
    wake = std::min(wake, oldest + options_.stall_shutdown);
  }
  return wake;
}

std::vector<proto::PendingTensor> Negotiator::Pending(absl::Time now) const {
  std::vector<proto::PendingTensor> out;
  for (const auto& [order, name] : by_order_) {
    const Partial& p = partial_.at(name);
    proto::PendingTensor& t = out.emplace_back();
    t.set_name(name);
    for (int r = 0; r < options_.size; ++r) {
      if (p.by_rank[r].has_value()) t.add_ranks(r);
    }
    t.set_seconds(absl::ToDoubleSeconds(now - p.first));
  }
  return out;
}

proto::Response Negotiator::Resolve(
    const std::string& name,
    const std::vector<std::optional<proto::Request>>& r) {
  std::vector<const proto::Request*> requests;
  requests.reserve(r.size());
  for (const std::optional<proto::Request>& request : r) {
    KOLO_CHECK(request.has_value()) << "tensor '" << name << "' not ready";
    requests.push_back(&*request);
  }
  return CheckAgreement(name, requests);
}

bool Negotiator::DataPlaneIdle() const {
  return std::all_of(done_.begin(), done_.end(),
                     [&](uint64_t seq) { return seq >= last_seq_; });
}

void Negotiator::Ready(proto::Response response, absl::Time now,
                       NegotiatorOutput& out) {
  if (held_.empty() && DataPlaneIdle()) {
    proto::Plan& plan = out.plans.emplace_back();
    plan.set_seq(++last_seq_);
    *plan.add_responses() = std::move(response);
    return;
  }
  if (held_.empty()) held_since_ = now;
  for (const std::string& name : response.names()) held_names_.insert(name);
  held_.push_back(std::move(response));
}

void Negotiator::Flush(NegotiatorOutput& out) {
  proto::Plan& plan = out.plans.emplace_back();
  plan.set_seq(++last_seq_);
  for (proto::Response& response : held_) {
    *plan.add_responses() = std::move(response);
  }
  held_.clear();
  held_names_.clear();
  held_since_ = absl::InfiniteFuture();
}

void Negotiator::Inspect(absl::Time now, NegotiatorOutput& out) {
  if (by_order_.empty()) return;
  // "'grad/b' waits for rank 1 (submitted by ranks 0,2)" for every partial
  // name at least `age` old, oldest first; `waited` adds its age.
  auto describe = [&](absl::Duration age, bool waited) {
    std::vector<std::string> items;
    for (const auto& [order, name] : by_order_) {
      const Partial& p = partial_.at(name);
      if (now - p.first < age) continue;
      std::vector<int> missing, submitted;
      for (int r = 0; r < options_.size; ++r) {
        (p.by_rank[r].has_value() ? submitted : missing).push_back(r);
      }
      items.push_back(absl::StrCat(
          "'", name, "' ",
          waited ? absl::StrCat("waited ", FormatAge(now - p.first), " for ")
                 : "waits for ",
          RankList(missing), " (submitted by ", RankList(submitted), ")"));
    }
    return items;
  };
  const absl::Duration oldest_age =
      now - partial_.at(by_order_.begin()->second).first;

  if (options_.stall_check > absl::ZeroDuration() &&
      now >= next_stall_warning_ && oldest_age >= options_.stall_check) {
    const std::vector<std::string> items =
        describe(options_.stall_check, false);
    out.warnings.push_back(absl::StrCat(
        "stall: ", items.size(), items.size() == 1 ? " tensor" : " tensors",
        " submitted by some ranks but not others, the oldest for ",
        FormatAge(oldest_age), ": ", ListSome(items), "; ", kStallCause,
        " (warning every KOLO_STALL_CHECK_TIME_SECONDS=",
        KnobSeconds(options_.stall_check), ")"));
    next_stall_warning_ = now + options_.stall_check;
  }

  if (options_.stall_shutdown > absl::ZeroDuration() && !shutdown_given_ &&
      oldest_age >= options_.stall_shutdown) {
    // Every partial tensor fails with it, so every one is named (oldest
    // first), not only those past the shutdown time.
    out.shutdown = absl::StrCat(
        "stall shutdown: ", ListSome(describe(absl::ZeroDuration(), true)),
        "; ", kStallCause, " (KOLO_STALL_SHUTDOWN_TIME_SECONDS=",
        KnobSeconds(options_.stall_shutdown), ")");
    shutdown_given_ = true;
  }
}

}  // namespace kolo::coordinator
