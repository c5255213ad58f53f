// Negotiator (negotiator.h), members that left: a rank that shut down while
// the others stay takes part in nothing more, so every op that needs it
// fails on every rank at once, naming it (Horovod's "one or more ranks
// finished execution"), instead of waiting for it forever.
//
// What fails: the names partially announced when it left (by request or by
// cache bit), the complete responses still held or waiting for their group
// (it announced them, then left without running them), and every name
// announced later on a process set it belongs to. Ops on sets without it
// run as before.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "coordinator/negotiator.h"
#include "proto/op_names.h"

namespace kolo::coordinator {

bool Negotiator::NeedsLeft(int32_t set) const {
  if (left_count_ == 0) return false;
  const std::vector<int>* members = Members(set);
  if (members == nullptr) return false;
  return std::any_of(members->begin(), members->end(),
                     [&](int r) { return left_[r] != 0; });
}

std::string Negotiator::LeftError(proto::OpType op, const std::string& name,
                                  int32_t set) const {
  std::vector<std::string> who;
  const std::vector<int>* members = Members(set);
  for (int r : members != nullptr ? *members : all_ranks_) {
    if (left_[r] != 0) who.push_back(left_who_[r]);
  }
  return absl::StrCat(
      proto::OpTypeName(op), " '", name.substr(0, 200),
      "' cannot complete: ", absl::StrJoin(who, " and "),
      who.size() == 1 ? " has" : " have",
      " shut down (kolo::shutdown(), or the process ended) and takes no "
      "part in collectives any more: one or more ranks finished execution. "
      "Every rank must submit the same collectives; a rank that runs out of "
      "data first can call join() (allreduces and barriers go on without "
      "it), or every rank stops at the same step");
}

void Negotiator::HoldLeftError(const std::string& name, int32_t set,
                               proto::OpType op,
                               std::vector<proto::Request> requests,
                               absl::Time now) {
  Held& held = NewHeld();
  if (held_size_ == 1) held_since_ = now;
  held.set = set;
  held.requests = std::move(requests);
  held.response.add_names(name);
  held.response.set_op(op);
  held.response.set_process_set(set);
  held.response.set_error_code(
      static_cast<int>(absl::StatusCode::kFailedPrecondition));
  held.response.set_error(LeftError(op, name, set));
  held_names_.insert(name);
}

void Negotiator::FailHeldForLeft(Held& held) {
  if (held.response.error_code() != 0 || !NeedsLeft(held.set)) return;
  if (held.hit_bit >= 0 && held.response.names_size() == 0) {
    // A fast hit: its name and requests live in the cache.
    const auto bit = static_cast<uint32_t>(held.hit_bit);
    for (int r = 0; r < options_.size; ++r) {
      held.requests.push_back(*cache_.Lookup(bit, r));
    }
    bits_[bit].held = false;
  }
  KOLO_CHECK(!held.requests.empty() || held.response.names_size() > 0)
      << "a held response without a name";
  const std::string name = held.response.names_size() > 0
                               ? held.response.names(0)
                               : held.requests[0].name();
  const proto::OpType op =
      held.requests.empty() ? held.response.op() : held.requests[0].op();
  held.response.Clear();
  held.response.add_names(name);
  held.response.set_op(op);
  held.response.set_process_set(held.set);
  held.response.set_error_code(
      static_cast<int>(absl::StatusCode::kFailedPrecondition));
  held.response.set_error(LeftError(op, name, held.set));
  held.hit_bit = -1;
  held.cacheable = false;
  held.absent.clear();
  held.ready_us.clear();
  held_names_.insert(name);
}

void Negotiator::Leave(int rank, const std::string& who, absl::Time now,
                       NegotiatorOutput& out) {
  KOLO_CHECK(rank >= 0 && rank < options_.size)
      << "rank " << rank << " of " << options_.size;
  if (left_[rank] != 0) return;
  left_[rank] = 1;
  left_who_[rank] = who;
  ++left_count_;
  if (joined_[rank] != 0) {  // it contributes nothing any more
    joined_[rank] = 0;
    --joined_count_;
  }
  // Cache bits some ranks announced continue by name, and fail below.
  for (uint32_t bit = 0; bit < bits_.size(); ++bit) {
    if (bits_[bit].active) ToNamePartial(bit);
  }
  // Partial names on its sets, oldest first.
  std::vector<std::pair<uint64_t, std::string>> doomed;
  for (const auto& [name, p] : partial_) {
    if (NeedsLeft(p.set)) doomed.emplace_back(p.order, name);
  }
  std::sort(doomed.begin(), doomed.end());
  absl::flat_hash_map<std::string, int> failed_in_group;
  for (const auto& [order, name] : doomed) {
    auto it = partial_.find(name);
    Partial& p = it->second;
    std::vector<proto::Request> requests;
    for (std::optional<proto::Request>& q : p.by_rank) {
      if (q.has_value()) requests.push_back(std::move(*q));
    }
    KOLO_CHECK(!requests.empty()) << "partial '" << name << "' has no request";
    if (!requests[0].group().empty()) ++failed_in_group[requests[0].group()];
    const proto::OpType op = requests[0].op();
    const int32_t set = p.set;
    by_order_.Erase(p.order);
    partial_.erase(it);
    HoldLeftError(name, set, op, std::move(requests), now);
  }
  // Complete responses not dispatched yet: it announced them, then left.
  for (size_t i = 0; i < held_size_; ++i) FailHeldForLeft(held_[i]);
  // Groups waiting for members: released now, as an error releases them
  // (negotiator.cc Hold); members still to come go alone.
  std::vector<std::string> groups;
  for (const auto& [group, members] : groups_) groups.push_back(group);
  std::sort(groups.begin(), groups.end());
  for (const std::string& group : groups) {
    std::vector<Held>& members = groups_[group];
    bool doomed_group = failed_in_group.contains(group);
    for (const Held& m : members)
      doomed_group = doomed_group || NeedsLeft(m.set);
    if (!doomed_group) continue;
    const auto want = static_cast<int>(std::max(1, members[0].group_size));
    const int to_come =
        want - static_cast<int>(members.size()) - failed_in_group[group];
    if (to_come > 0) broken_groups_[group] = to_come;
    for (Held& m : members) {
      FailHeldForLeft(m);
      group_names_.erase(m.response.names(0));
      held_names_.insert(m.response.names(0));
      const bool first = held_size_ == 0;
      NewHeld() = std::move(m);
      if (first) held_since_ = now;
    }
    groups_.erase(group);
  }
  if (fast_) {
    // A left rank sends no exit: the others' exits end the fast path.
    bool all = true;
    for (int r = 0; r < options_.size; ++r) {
      all = all && (fast_exited_[r] != 0 || left_[r] != 0);
    }
    if (all) EndFastPath(out);
  }
  MaybeDispatch(out);
}

}  // namespace kolo::coordinator
