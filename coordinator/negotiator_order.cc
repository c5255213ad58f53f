// Negotiator (negotiator.h), ordered streams: the ops of a torch.distributed
// process group are called by every member in one order, each with its
// call's slot (proto Request.order_stream, order_slot). Names alone cannot
// tell a mismatch from a wait: the backend names each op after its kind and
// shape (so that a training step's names repeat and the response cache
// serves them), so two ranks calling different collectives at one point
// announce different names, each waiting for the other forever. The slot
// settles it: once every member announced an op in a slot, the ops must be
// one; if not, every op announced there fails on every rank at once, with
// what each rank called, and the stream's next calls go on.
//
// A void (Request.order_void) is a rank's word that it refused its call in
// a slot (a bad argument its backend refused, or a submission its worker
// refused): a barrier that stands for the call in the slot, so the slot
// settles as soon as the others announced there, and every op announced
// there, the voids too, fails on every rank with the refusal's reason.
// Without it the others' calls would wait for one that never comes (the
// group's timeout). It is an op with a handle so that the refusing rank's
// call a lap later waits for the slot to settle, as after any call.
//
// A grouped call carries its slot on its first member only (the worker's
// SubmitGroup): the slot sees one op per rank, and when it fails that
// member, its group's error fails the other members (FailGroupLeftovers).
//
// Why "every member announced" is enough: a member announces a stream's
// calls in order and the backend never has two calls of one slot in flight
// (python/c10d/process_group_kolo.h), so an op that some members announced
// in a slot where others announced another can never complete.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "coordinator/negotiator.h"
#include "coordinator/negotiator_checks.h"

namespace kolo::coordinator {
namespace {

// The op a request is part of: its group, or its own name.
const std::string& OpOf(const proto::Request& r) {
  return r.group().empty() ? r.name() : r.group();
}

bool InSlot(const proto::Request& r, int32_t set, const std::string& stream,
            uint32_t slot) {
  return r.process_set() == set && r.order_slot() == slot &&
         r.order_stream() == stream;
}

}  // namespace

bool Negotiator::CheckOrder(int rank, const proto::Request& request,
                            absl::Time now) {
  OrderKey key{request.process_set(), request.order_stream(),
               request.order_slot()};
  auto [it, inserted] = order_slots_.try_emplace(std::move(key));
  OrderSlot& s = it->second;
  if (inserted) {
    s.ranks.assign(options_.size, 0);
    s.ops.resize(options_.size);
    s.voids.resize(options_.size);
  }
  const std::string& op = OpOf(request);
  if (s.ranks[rank] != 0) {
    // Its earlier op in this slot ended before the slot settled: over.
    std::fill(s.ranks.begin(), s.ranks.end(), uint8_t{0});
    for (std::string& v : s.voids) v.clear();
  }
  s.ranks[rank] = 1;
  s.ops[rank] = op;
  s.voids[rank] = request.order_void();
  if (!Complete(request.process_set(),
                [&](int r) { return s.ranks[r] != 0; })) {
    return true;
  }
  bool same = true;
  for (int r = 0; r < options_.size; ++r) {
    if (s.ranks[r] != 0 && (s.ops[r] != op || !s.voids[r].empty())) {
      same = false;
    }
  }
  if (!same) FailOrderSlot(it->first, s, now);
  order_slots_.erase(it);
  return same;
}

namespace {

// The error of the ops in a slot that `voids` (per rank: why it refused
// its call there; empty: it did not) voided. `calls`/`ranks`: what the
// others called there (maybe nothing).
std::string VoidError(const std::string& stream, int32_t set, uint32_t slot,
                      const std::vector<std::string>& voids,
                      const std::vector<std::string>& calls,
                      const std::vector<int>& ranks) {
  std::vector<int> refusing;
  for (int r = 0; r < static_cast<int>(voids.size()); ++r) {
    if (!voids[r].empty()) refusing.push_back(r);
  }
  std::string why;
  for (int r : refusing) {
    absl::string_view reason = voids[r];
    absl::ConsumeSuffix(&reason, ".");
    absl::StrAppend(&why, why.empty() ? "" : "; ",
                    refusing.size() > 1 ? absl::StrCat("rank ", r, ": ") : "",
                    reason);
  }
  return absl::StrCat(
      RankList(refusing), " refused the call at this point of ordered stream '",
      stream, "' (process set ", set, ", call slot ", slot,
      ") before it reached the coordinator: ", why,
      ". The call fails on every rank",
      calls.empty() ? ""
                    : absl::StrCat(" (", DescribeGroups(calls, ranks), ")"),
      "; the next calls go on.");
}

}  // namespace

void Negotiator::FailOrderSlot(const OrderKey& key, const OrderSlot& slot,
                               absl::Time now) {
  // Ops some ranks announced by cache bit continue by name first.
  for (uint32_t bit = 0; bit < bits_.size(); ++bit) {
    if (!bits_[bit].active) continue;
    for (int r = 0; r < options_.size; ++r) {
      const proto::Request* q = cache_.Lookup(bit, r);
      if (bits_[bit].ranks[r] != 0 && q != nullptr &&
          InSlot(*q, key.set, key.stream, key.slot)) {
        ToNamePartial(bit);
        break;
      }
    }
  }
  std::vector<std::string> names;
  for (const auto& [name, p] : partial_) {
    for (const std::optional<proto::Request>& q : p.by_rank) {
      if (q.has_value() && InSlot(*q, key.set, key.stream, key.slot)) {
        names.push_back(name);
        break;
      }
    }
  }
  std::sort(names.begin(), names.end());
  // What each rank called (for a group: the group).
  std::vector<std::string> calls(options_.size);
  for (const std::string& name : names) {
    const Partial& p = partial_.at(name);
    for (int r = 0; r < options_.size; ++r) {
      if (p.by_rank[r].has_value() && calls[r].empty()) {
        calls[r] = DescribeCall(*p.by_rank[r]);
      }
    }
  }
  std::vector<std::string> values;
  std::vector<int> ranks;
  bool voided = false;
  for (int r = 0; r < options_.size; ++r) {
    if (slot.ranks[r] == 0) continue;
    if (!slot.voids[r].empty()) {
      voided = true;
      continue;
    }
    values.push_back(calls[r].empty() ? slot.ops[r] : calls[r]);
    ranks.push_back(r);
  }
  const std::string error =
      voided
          ? VoidError(key.stream, key.set, key.slot, slot.voids, values, ranks)
          : absl::StrCat(
                "the ranks called different collectives at the same point "
                "of ordered stream '",
                key.stream, "' (process set ", key.set, ", call slot ",
                key.slot, "): ", DescribeGroups(values, ranks),
                ". Every member must call a process group's collectives "
                "in the same order; these calls fail on every rank, and "
                "the next ones go on.");
  for (const std::string& name : names) {
    auto it = partial_.find(name);
    Partial& p = it->second;
    Held held;
    held.set = p.set;
    for (std::optional<proto::Request>& q : p.by_rank) {
      if (q.has_value()) held.requests.push_back(std::move(*q));
    }
    const proto::Request& first = held.requests[0];
    held.group = first.group();
    held.group_size = first.group_size();
    held.response.add_names(name);
    held.response.set_op(first.op());
    held.response.set_process_set(p.set);
    held.response.set_error_code(
        static_cast<int>(absl::StatusCode::kFailedPrecondition));
    held.response.set_error(error);
    by_order_.Erase(p.order);
    partial_.erase(it);
    Hold(std::move(held), now);
  }
}

}  // namespace kolo::coordinator
