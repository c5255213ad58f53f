// Negotiator (negotiator.h), readiness: announcements (by request and by
// cache bit), joins, groups and process sets waiting for their members,
// Done, ticks and the stall inspector. Building plans from the held
// responses and dispatching them: negotiator_plans.cc.
#include "coordinator/negotiator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/log.h"
#include "coordinator/negotiator_checks.h"
#include "coordinator/negotiator_internal.h"

namespace kolo::coordinator {

using negotiator_internal::ListSome;

namespace {

// "61.0 s"
std::string FormatAge(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

// "60", "0.5": a knob's value in the unit of its variable.
std::string KnobSeconds(absl::Duration d) {
  return absl::StrCat(absl::ToDoubleSeconds(d));
}

constexpr absl::string_view kStallCause =
    "a rank may be stuck, or the ranks submit different tensors";

}  // namespace

Negotiator::Negotiator(NegotiatorOptions options)
    : options_(std::move(options)),
      fusion_threshold_(options_.fusion_threshold),
      cycle_time_(options_.cycle_time),
      fusion_direct_bytes_(options_.fusion_direct_bytes),
      ranks_capacity_(options_.cache_capacity),
      cache_(options_.size, options_.cache_capacity) {
  KOLO_CHECK(options_.size >= 1) << "negotiator size " << options_.size;
  done_.assign(options_.size, 0);
  settings_.resize(options_.size);
  joined_.assign(options_.size, 0);
  left_.assign(options_.size, 0);
  left_who_.resize(options_.size);
  announces_.assign(options_.size, 0);
  fast_exited_.assign(options_.size, 0);
  for (int r = 0; r < options_.size; ++r) all_ranks_.push_back(r);
}

void Negotiator::SetTuning(const std::optional<NegotiatorTuning>& tuning) {
  if (tuning.has_value()) {
    tuned_threshold_ = tuning->fusion_threshold;
    fusion_threshold_ = tuning->fusion_threshold;
    cycle_time_ = tuning->cycle_time;
    hold_fast_path_ = tuning->hold_fast_path;
    tuned_cache_off_ = !tuning->cache_enabled;
  } else {
    tuned_threshold_.reset();
    fusion_threshold_ = ranks_threshold_.value_or(options_.fusion_threshold);
    cycle_time_ = options_.cycle_time;
    hold_fast_path_ = false;
    tuned_cache_off_ = false;
  }
  ApplyCapacity();
}

const std::vector<int>* Negotiator::Members(int32_t set) const {
  if (set == 0) return &all_ranks_;
  auto it = sets_.find(set);
  return it == sets_.end() ? nullptr : &it->second;
}

void Negotiator::UpdateSettings(int rank, const proto::Settings& settings) {
  settings_[rank] = settings;
  uint64_t threshold = UINT64_MAX, direct = UINT64_MAX;
  uint32_t capacity = UINT32_MAX;
  bool timeline = false, disable_group_fusion = false, fast = true;
  RanksDataPlane data{.message_allreduce = true,
                      .small_allreduce_bytes = UINT64_MAX,
                      .segment_bytes = UINT64_MAX,
                      .hierarchical_tunable = true,
                      .hierarchical = true};
  for (const std::optional<proto::Settings>& s : settings_) {
    if (!s.has_value()) return;  // until every rank sent its own
    fast = fast && s->fast_path();
    data.message_allreduce = data.message_allreduce && s->message_allreduce();
    data.small_allreduce_bytes = std::min<uint64_t>(data.small_allreduce_bytes,
                                                    s->small_allreduce_bytes());
    data.segment_bytes =
        std::min<uint64_t>(data.segment_bytes, s->segment_bytes());
    data.hierarchical_tunable =
        data.hierarchical_tunable && s->hierarchical_tunable();
    data.hierarchical = data.hierarchical && s->hierarchical();
    threshold = std::min<uint64_t>(threshold, s->fusion_threshold());
    direct = std::min<uint64_t>(direct, s->fusion_direct_bytes());
    capacity = std::min(capacity, s->cache_capacity());
    timeline = timeline || s->timeline();
    disable_group_fusion = disable_group_fusion || s->disable_group_fusion();
  }
  ranks_threshold_ = threshold;
  fusion_threshold_ = tuned_threshold_.value_or(threshold);
  fusion_direct_bytes_ = direct;
  timeline_ = timeline;
  disable_group_fusion_ = disable_group_fusion;
  fast_wanted_ = fast;
  ranks_data_plane_ = data;
  ranks_capacity_ = capacity;
  ApplyCapacity();
}

void Negotiator::ApplyCapacity() {
  const uint32_t capacity = tuned_cache_off_ ? 0 : ranks_capacity_;
  if (fast_) {
    // The ranks number their own plans meanwhile: a cache change belongs
    // in the first plan after their exits (EndFastPath).
    capacity_after_fast_ = capacity;
    return;
  }
  if (capacity != cache_.capacity()) {
    const size_t from = evicted_.size();
    cache_.SetCapacity(capacity, last_seq_ + 1, &evicted_);
    DivertEvicted(from);
  }
}

void Negotiator::Announce(int rank, const proto::Announce& announce,
                          absl::Time now, NegotiatorOutput& out) {
  KOLO_CHECK(rank >= 0 && rank < options_.size)
      << "rank " << rank << " of " << options_.size;
  ++announces_[rank];
  if (announce.has_settings()) UpdateSettings(rank, announce.settings());
  for (uint32_t bit : announce.cached()) AnnounceBit(rank, bit, now);
  for (const proto::Request& request : announce.requests()) {
    AnnounceOne(rank, request, -1, now);
  }
  if (!broken_now_.empty()) FailGroupLeftovers(now);
  MaybeDispatch(out);
}

void Negotiator::FailGroupLeftovers(absl::Time now) {
  std::vector<std::pair<std::string, proto::Response>> broken;
  broken.swap(broken_now_);
  for (const auto& [group, error] : broken) {
    // Members some ranks announced by bit continue by name first.
    for (uint32_t bit = 0; bit < bits_.size(); ++bit) {
      if (!bits_[bit].active) continue;
      for (int r = 0; r < options_.size; ++r) {
        const proto::Request* q = cache_.Lookup(bit, r);
        if (bits_[bit].ranks[r] != 0 && q != nullptr && q->group() == group) {
          ToNamePartial(bit);
          break;
        }
      }
    }
    std::vector<std::string> leftovers;
    for (const auto& [name, p] : partial_) {
      for (const std::optional<proto::Request>& q : p.by_rank) {
        if (q.has_value() && q->group() == group) {
          leftovers.push_back(name);
          break;
        }
      }
    }
    std::sort(leftovers.begin(), leftovers.end());
    for (const std::string& name : leftovers) {
      auto it = partial_.find(name);
      Partial& p = it->second;
      std::vector<int> announced, missing;
      const std::vector<int>* members = Members(p.set);
      const std::vector<int>& set_ranks =
          members != nullptr ? *members : all_ranks_;
      for (int r : set_ranks) {
        (p.by_rank[r].has_value() ? announced : missing).push_back(r);
      }
      Held& held = NewHeld();
      if (held_size_ == 1) held_since_ = now;
      held.set = p.set;
      for (std::optional<proto::Request>& q : p.by_rank) {
        if (q.has_value()) held.requests.push_back(std::move(*q));
      }
      held.response.add_names(name);
      held.response.set_op(held.requests[0].op());
      held.response.set_process_set(p.set);
      held.response.set_error_code(error.error_code());
      held.response.set_error(
          absl::StrCat("tensor '", name, "' of group '", group,
                       "' (announced by ranks ", absl::StrJoin(announced, ","),
                       ", never by ranks ", absl::StrJoin(missing, ","),
                       ") fails with its group: ", error.error()));
      held_names_.insert(name);
      by_order_.Erase(p.order);
      partial_.erase(it);
    }
    // The leftovers were members still to come of this use of the group.
    if (auto b = broken_groups_.find(group); b != broken_groups_.end()) {
      b->second -= static_cast<int>(leftovers.size());
      if (b->second <= 0) broken_groups_.erase(b);
    }
  }
}

void Negotiator::Warn(int rank, const std::string& name) const {
  GetLogger("coordinator")
      ->warn(
          "rank {} announced tensor '{}' again before its response was "
          "dispatched; the duplicate is ignored (the worker should have "
          "refused it)",
          rank, name);
}

void Negotiator::AnnounceBit(int rank, uint32_t bit, absl::Time now) {
  const proto::Request* request = cache_.Lookup(bit, rank);
  if (request == nullptr) {
    GetLogger("coordinator")
        ->error(
            "rank {} announced response cache bit {}, which no tensor "
            "holds; ignored (a worker bug: that rank's op will stall)",
            rank, bit);
    return;
  }
  if (left_count_ > 0) {  // set 0 lost a member: the name path fails it
    AnnounceOne(rank, *request, bit, now);
    return;
  }
  const bool idle =
      bit >= bits_.size() || (!bits_[bit].active && !bits_[bit].held);
  // A tombstone (evicted after this rank announced it), or a name some rank
  // announced in full (a metadata change): the name path.
  if (cache_.Response(bit) == nullptr ||
      (idle && !partial_.empty() && partial_.contains(request->name()))) {
    AnnounceOne(rank, *request, bit, now);
    return;
  }
  if (bit >= bits_.size()) bits_.resize(bit + 1);
  BitPartial& b = bits_[bit];
  if (b.held || (b.active && b.ranks[rank] != 0)) {
    Warn(rank, request->name());
    return;
  }
  if (!b.active) {
    b.active = true;
    b.count = 0;
    b.ranks.assign(options_.size, 0);
    b.at.resize(options_.size);
    b.first = now;
    b.order = next_order_++;
    by_order_.Append(b.order, PartialKey{static_cast<int64_t>(bit), {}});
  }
  b.ranks[rank] = 1;
  b.at[rank] = now;
  ++b.count;
  if (!request->order_stream().empty() && !CheckOrder(rank, *request, now)) {
    return;  // a mismatch: failed
  }
  if (joined_count_ == 0 ? b.count < options_.size : !Complete(0, [&](int r) {
        return b.ranks[r] != 0;
      })) {
    return;
  }
  CompleteBit(bit, now);
}

void Negotiator::CompleteBit(uint32_t bit, absl::Time now) {
  BitPartial& b = bits_[bit];
  const proto::Request& first = *cache_.Lookup(bit, 0);
  if (options_.stats != nullptr) {
    options_.stats->wait_seconds.Observe(absl::ToDoubleSeconds(now - b.first));
  }
  by_order_.Erase(b.order);
  b.active = false;
  b.held = true;
  // A hit: every rank (that has not joined) announced this bit. Not grouped
  // (the steady state of a training step): built in place in a reused
  // record, without a Response of its own.
  auto fill = [&](Held& held) {
    held.hit_bit = bit;
    held.absent = Absent(0, [&](int r) { return b.ranks[r] != 0; });
    if (timeline_) {
      for (int r = 0; r < options_.size; ++r) {
        held.ready_us.push_back(
            b.ranks[r] != 0 ? absl::ToInt64Microseconds(b.at[r] - b.first) : 0);
      }
    }
  };
  if (first.group().empty()) {
    if (held_size_ == 0) held_since_ = now;
    fill(NewHeld());
    return;
  }
  Held held;
  fill(held);
  held.group = first.group();
  held.group_size = first.group_size();
  Hold(std::move(held), now);
}

Negotiator::Held& Negotiator::NewHeld() {
  if (held_size_ == held_.size()) held_.emplace_back();
  return held_[held_size_++];
}

void Negotiator::Hold(Held held, absl::Time now) {
  const bool was_empty = held_size_ == 0;
  const bool grouped = !held.group.empty();
  if (grouped && held.response.names_size() == 0) {
    // A fast hit that may wait for its group across plans: it takes its
    // response and requests along now (the entry may be evicted meanwhile).
    const auto bit = static_cast<uint32_t>(held.hit_bit);
    held.response = *cache_.Response(bit);
    held.response.clear_cache_bits();
    for (int r = 0; r < options_.size; ++r) {
      held.requests.push_back(*cache_.Lookup(bit, r));
    }
    held.cacheable = held.absent.empty();
    bits_[bit].held = false;
  }
  auto broken =
      grouped ? broken_groups_.find(held.group) : broken_groups_.end();
  if (!grouped || broken != broken_groups_.end()) {
    if (broken != broken_groups_.end() && --broken->second <= 0) {
      broken_groups_.erase(broken);  // the next use of the name waits again
    }
    if (held.response.names_size() > 0) {
      held_names_.insert(held.response.names(0));
    }
    NewHeld() = std::move(held);
  } else {
    const std::string group = held.group;
    std::vector<Held>& members = groups_[group];
    const bool error = held.response.error_code() != 0;
    const auto want = static_cast<size_t>(std::max(1, held.group_size));
    group_names_.insert(held.response.names(0));
    members.push_back(std::move(held));
    // An error releases the group at once (its members may never all
    // come, when the ranks disagree on the group); the rest of this use of
    // the group go alone.
    if (error && members.size() < want) {
      broken_groups_[group] = static_cast<int>(want - members.size());
    }
    if (error) broken_now_.emplace_back(group, members.back().response);
    if (!error && members.size() < want) return;
    for (Held& m : members) {
      group_names_.erase(m.response.names(0));
      held_names_.insert(m.response.names(0));
      NewHeld() = std::move(m);
    }
    groups_.erase(group);
  }
  if (was_empty && held_size_ > 0) held_since_ = now;
}

void Negotiator::Join(int rank, const proto::Request& request, absl::Time now) {
  if (left_count_ > 0) {  // every rank can never join now
    if (!held_names_.contains(request.name())) {
      HoldLeftError(request.name(), 0, proto::JOIN, {request}, now);
    }
    return;
  }
  if (joined_[rank] != 0) {
    Warn(rank, request.name());
    return;
  }
  joined_[rank] = 1;
  ++joined_count_;
  last_joined_ = rank;
  CompleteJoined(now);
  if (joined_count_ < options_.size) return;
  Held held;  // every rank joined
  held.response.add_names(request.name());
  held.response.set_op(proto::JOIN);
  held.response.add_sizes(last_joined_);
  joined_.assign(options_.size, 0);
  joined_count_ = 0;
  last_joined_ = -1;
  Hold(std::move(held), now);
}

void Negotiator::CompleteJoined(absl::Time now) {
  std::vector<PartialKey> keys;
  keys.reserve(by_order_.size());
  by_order_.ForEach([&](const PartialKey& key) { keys.push_back(key); });
  for (const PartialKey& key : keys) {
    if (key.bit >= 0) {
      const auto bit = static_cast<uint32_t>(key.bit);
      const BitPartial& b = bits_[bit];
      if (b.active && Complete(0, [&](int r) { return b.ranks[r] != 0; })) {
        CompleteBit(bit, now);
      }
      continue;
    }
    auto it = partial_.find(key.name);
    if (it == partial_.end()) continue;
    const Partial& p = it->second;
    if (Complete(p.set, [&](int r) { return p.by_rank[r].has_value(); })) {
      CompleteName(key.name, now);
    }
  }
}

void Negotiator::ToNamePartial(uint32_t bit) {
  BitPartial& b = bits_[bit];
  const std::string name = cache_.Lookup(bit, 0)->name();
  Partial& p = partial_[name];
  p.by_rank.resize(options_.size);
  p.at.resize(options_.size);
  for (int r = 0; r < options_.size; ++r) {
    if (b.ranks[r] == 0) continue;
    p.by_rank[r] = *cache_.Lookup(bit, r);
    p.at[r] = b.at[r];
  }
  p.count = p.by_bit = b.count;
  p.bit = bit;
  p.first = b.first;
  p.order = b.order;
  PartialKey* key = by_order_.Find(b.order);
  KOLO_CHECK(key != nullptr) << "bit partial " << bit << " has no order";
  *key = PartialKey{-1, name};
  b.active = false;
}

void Negotiator::DivertEvicted(size_t from) {
  for (size_t i = from; i < evicted_.size(); ++i) {
    const uint32_t bit = evicted_[i];
    if (bit < bits_.size() && bits_[bit].active) ToNamePartial(bit);
  }
}

void Negotiator::AnnounceOne(int rank, const proto::Request& request,
                             int64_t bit, absl::Time now) {
  const std::string& name = request.name();
  if (request.op() == proto::JOIN) {
    Join(rank, request, now);
    return;
  }
  const std::vector<int>* members = Members(request.process_set());
  if (members == nullptr ||
      !std::binary_search(members->begin(), members->end(), rank)) {
    GetLogger("coordinator")
        ->error(
            "rank {} announced tensor '{}' on process set {}, {}; ignored "
            "(the worker should have refused it)",
            rank, name, request.process_set(),
            members == nullptr ? "which does not exist"
                               : "which it is not a member of");
    return;
  }
  if (NeedsLeft(request.process_set())) {
    // It can never complete: it fails at once, on every rank (the error
    // already held for this name covers this rank too).
    if (!held_names_.contains(name)) {
      HoldLeftError(name, request.process_set(), request.op(), {request}, now);
    }
    return;
  }
  const std::optional<uint32_t> live = cache_.BitOf(name);
  const BitPartial* bp =
      live.has_value() && *live < bits_.size() ? &bits_[*live] : nullptr;
  // A name whose bit some ranks announced: it continues by name.
  if (bp != nullptr && bp->active) ToNamePartial(*live);
  auto [it, inserted] = partial_.try_emplace(name);
  Partial& p = it->second;
  if (held_names_.contains(name) || group_names_.contains(name) ||
      (bp != nullptr && bp->held) ||
      (!inserted && p.by_rank[rank].has_value())) {
    if (inserted) partial_.erase(it);
    Warn(rank, name);
    return;
  }
  if (inserted) {
    p.set = request.process_set();
    p.by_rank.resize(options_.size);
    p.at.resize(options_.size);
    p.first = now;
    p.order = next_order_++;
    by_order_.Append(p.order, PartialKey{-1, name});
  }
  p.by_rank[rank] = request;
  p.at[rank] = now;
  if (bit >= 0) {
    if (p.by_bit == 0 || p.bit == bit) ++p.by_bit;
    p.bit = bit;
  }
  ++p.count;
  if (!request.order_stream().empty() && !CheckOrder(rank, request, now)) {
    return;  // a mismatch: failed (p with it)
  }
  if (joined_count_ == 0 && p.set == 0
          ? p.count < options_.size
          : !Complete(p.set, [&](int r) { return p.by_rank[r].has_value(); })) {
    return;
  }
  CompleteName(name, now);
}

namespace {

// The ops the response cache keeps: the collectives.
bool Cacheable(proto::OpType op) {
  return op != proto::JOIN && op != proto::MEMBERSHIP_CHECK &&
         op != proto::PROCESS_SET_ADD && op != proto::PROCESS_SET_REMOVE;
}

}  // namespace

void Negotiator::CompleteName(const std::string& name, absl::Time now) {
  auto it = partial_.find(name);
  Partial& p = it->second;
  if (options_.stats != nullptr) {
    options_.stats->wait_seconds.Observe(absl::ToDoubleSeconds(now - p.first));
  }
  auto announced = [&](int r) { return p.by_rank[r].has_value(); };
  Held held;
  held.set = p.set;
  held.absent = Absent(p.set, announced);
  const std::optional<uint32_t> now_live = cache_.BitOf(name);
  if (p.by_bit == options_.size && now_live.has_value() && *now_live == p.bit) {
    held.response = *cache_.Response(*now_live);  // unchanged: a hit
    held.response.clear_cache_bits();  // set again as the plan goes out
    held.hit_bit = p.bit;
  } else {
    held.response = Resolve(name, p.by_rank);
  }
  if (timeline_) {
    for (int r = 0; r < options_.size; ++r) {
      held.ready_us.push_back(
          announced(r) ? absl::ToInt64Microseconds(p.at[r] - p.first) : 0);
    }
  }
  held.requests.reserve(options_.size);
  for (std::optional<proto::Request>& r : p.by_rank) {
    if (r.has_value()) held.requests.push_back(std::move(*r));
  }
  const proto::Request& first = held.requests[0];
  held.group = first.group();
  held.group_size = first.group_size();
  held.cacheable = p.set == 0 && Cacheable(first.op()) &&
                   held.requests.size() == static_cast<size_t>(options_.size);
  by_order_.Erase(p.order);
  partial_.erase(it);
  Hold(std::move(held), now);
}

void Negotiator::Done(int rank, uint64_t seq, absl::Time /*now*/,
                      NegotiatorOutput& out) {
  KOLO_CHECK(rank >= 0 && rank < options_.size)
      << "rank " << rank << " of " << options_.size;
  if (seq <= done_[rank]) return;
  if (fast_ && seq > last_seq_) {
    // A fast plan (the fast path numbers its own): its exit follows.
    done_[rank] = seq;
    return;
  }
  if (seq > last_seq_) {
    GetLogger("coordinator")
        ->warn(
            "rank {} reported plan {} done, but only {} plans were sent; "
            "ignored (a worker bug)",
            rank, seq, last_seq_);
    return;
  }
  done_[rank] = seq;
  uint64_t all_done = last_seq_;  // over the members that did not leave
  for (int r = 0; r < options_.size; ++r) {
    if (left_[r] == 0) all_done = std::min(all_done, done_[r]);
  }
  cache_.Retire(all_done);
  MaybeDispatch(out);
}

void Negotiator::Tick(absl::Time now, NegotiatorOutput& out) {
  if (!held_.empty() && now >= held_since_ + cycle_time_) Flush(out);
  Inspect(now, out);
}

absl::Time Negotiator::NextWake() const {
  absl::Time wake = absl::InfiniteFuture();
  if (!held_.empty()) wake = held_since_ + cycle_time_;
  if (by_order_.empty()) return wake;
  const absl::Time oldest = KeyFirst(by_order_.oldest());
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
  by_order_.ForEach([&](const PartialKey& key) {
    proto::PendingTensor& t = out.emplace_back();
    t.set_name(KeyName(key));
    for (int r = 0; r < options_.size; ++r) {
      if (KeyAnnounced(key, r)) t.add_ranks(r);
    }
    t.set_seconds(absl::ToDoubleSeconds(now - KeyFirst(key)));
  });
  return out;
}

std::string Negotiator::KeyName(const PartialKey& key) const {
  if (key.bit < 0) return key.name;
  return cache_.Lookup(static_cast<uint32_t>(key.bit), 0)->name();
}

int32_t Negotiator::KeySet(const PartialKey& key) const {
  return key.bit < 0 ? partial_.at(key.name).set : 0;
}

absl::Time Negotiator::KeyFirst(const PartialKey& key) const {
  if (key.bit < 0) return partial_.at(key.name).first;
  return bits_[key.bit].first;
}

bool Negotiator::KeyAnnounced(const PartialKey& key, int rank) const {
  if (key.bit < 0) return partial_.at(key.name).by_rank[rank].has_value();
  return bits_[key.bit].ranks[rank] != 0;
}

proto::Response Negotiator::Resolve(
    const std::string& name,
    const std::vector<std::optional<proto::Request>>& r) {
  std::vector<const proto::Request*> requests;
  std::vector<int> ranks;
  for (int rank = 0; rank < static_cast<int>(r.size()); ++rank) {
    if (!r[rank].has_value()) continue;  // joined, or not a member
    requests.push_back(&*r[rank]);
    ranks.push_back(rank);
  }
  KOLO_CHECK(!requests.empty()) << "tensor '" << name << "' not ready";
  return CheckAgreement(name, requests, ranks);
}

void Negotiator::Inspect(absl::Time now, NegotiatorOutput& out) {
  if (by_order_.empty()) return;
  // "'grad/b' waits for rank 1 (submitted by ranks 0,2)" for every partial
  // name at least `age` old, oldest first; `waited` adds its age.
  auto describe = [&](absl::Duration age, bool waited) {
    std::vector<std::string> items;
    by_order_.ForEach([&](const PartialKey& key) {
      const absl::Time first = KeyFirst(key);
      if (now - first < age) return;
      std::vector<int> missing, submitted;
      const std::vector<int>* members = Members(KeySet(key));
      for (int r : members != nullptr ? *members : all_ranks_) {
        if (KeyAnnounced(key, r)) {
          submitted.push_back(r);
        } else if (joined_[r] == 0) {
          missing.push_back(r);
        }
      }
      items.push_back(absl::StrCat(
          "'", KeyName(key), "' ",
          waited ? absl::StrCat("waited ", FormatAge(now - first), " for ")
                 : "waits for ",
          RankList(missing), " (submitted by ", RankList(submitted), ")"));
    });
    return items;
  };
  const absl::Duration oldest_age = now - KeyFirst(by_order_.oldest());

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
