// Negotiator (negotiator.h), plan building: dispatch when the data plane is
// idle, the held responses finished (process-set registration, join rules),
// their cache bits, and their fusion into one plan (Flush).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "coordinator/negotiator.h"
#include "coordinator/negotiator_checks.h"
#include "coordinator/negotiator_internal.h"
#include "fusion/fusion_planner.h"
#include "proto/fusion_candidate.h"
#include "proto/op_names.h"

namespace kolo::coordinator {

using negotiator_internal::ListSome;

bool Negotiator::DataPlaneIdle() const {
  if (fast_) return false;  // the ranks run their own plans until they exit
  for (int r = 0; r < options_.size; ++r) {
    if (done_[r] < last_seq_ && left_[r] == 0) return false;  // busy
  }
  return true;
}

void Negotiator::MaybeDispatch(NegotiatorOutput& out) {
  if (held_size_ > 0 && DataPlaneIdle()) Flush(out);
}

void Negotiator::FinishHeld(size_t index, const proto::Request& first) {
  Held& h = held_[index];
  proto::Response& r = h.response;
  r.set_process_set(h.set);
  const proto::OpType op = first.op();
  if (r.error_code() == 0 && h.absent.empty() &&
      (op == proto::PROCESS_SET_ADD || op == proto::PROCESS_SET_REMOVE)) {
    FinishProcessSetOp(index, first);
  }
  if (r.error_code() == 0 && h.absent.empty() &&
      op == proto::MEMBERSHIP_CHECK) {
    // The ranks that leave here (Request.root = 1), for the coordinator.
    r.clear_sizes();
    for (size_t rank = 0; rank < h.requests.size(); ++rank) {
      if (h.requests[rank].root() == 1) r.add_sizes(static_cast<int64_t>(rank));
    }
  }
  if (h.absent.empty() || op == proto::BARRIER) return;
  if (op == proto::ALLREDUCE) {  // the joined ranks contribute the identity
    if (r.error_code() != 0) return;
    for (int rank : h.absent) r.add_joined(rank);
    r.set_dtype(first.dtype());
    r.set_reduce_op(first.reduce_op());
    r.set_postscale(first.postscale());
    int64_t count = 1;
    for (int64_t d : first.shape()) count *= d;
    r.add_counts(count);
    return;
  }
  // Any other op: the joined ranks cannot take part. This error wins over
  // the agreement checks', which saw only the ranks that announced.
  r.clear_sizes();
  r.set_error_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
  r.set_error(absl::StrCat(
      proto::OpTypeName(op), " '", r.names(0), "' cannot run while ",
      RankList(h.absent), h.absent.size() == 1 ? " has" : " have",
      " joined (kolo::join): a joined rank takes part only in allreduces "
      "and barriers; submit it before join() on every rank, or on a process "
      "set without the joined ranks"));
}

void Negotiator::FinishProcessSetOp(size_t index, const proto::Request& first) {
  proto::Response& r = held_[index].response;
  auto fail = [&](absl::StatusCode code, const std::string& why) {
    r.set_error_code(static_cast<int>(code));
    r.set_error(why);
  };
  if (r.op() == proto::PROCESS_SET_ADD) {
    const std::vector<int> ranks(first.splits().begin(), first.splits().end());
    const std::string text =
        absl::StrCat("add_process_set([", absl::StrJoin(ranks, ","), "])");
    if (ranks.empty() || !std::is_sorted(ranks.begin(), ranks.end()) ||
        std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end() ||
        ranks.front() < 0 || ranks.back() >= options_.size) {
      fail(absl::StatusCode::kInvalidArgument,
           absl::StrCat(text, ": a process set is distinct ranks in 0..",
                        options_.size - 1, ", in ascending order"));
      return;
    }
    if (ranks == all_ranks_) {
      fail(absl::StatusCode::kInvalidArgument,
           absl::StrCat(text,
                        ": these ranks form the global process set (id 0); "
                        "use it instead"));
      return;
    }
    for (const auto& [id, members] : sets_) {
      if (members != ranks) continue;
      fail(absl::StatusCode::kInvalidArgument,
           absl::StrCat(text, ": these ranks already form process set ", id,
                        "; use it, or remove it first"));
      return;
    }
    const int32_t id = next_set_++;
    sets_[id] = ranks;
    r.add_sizes(id);
    return;
  }
  const int32_t id = first.root();
  const std::string text = absl::StrCat("remove_process_set(", id, ")");
  if (id == 0) {
    fail(absl::StatusCode::kInvalidArgument,
         absl::StrCat(text, ": the global process set cannot be removed"));
    return;
  }
  if (!sets_.contains(id)) {
    fail(absl::StatusCode::kInvalidArgument,
         absl::StrCat(text, ": there is no process set ", id,
                      " (never added, or removed already)"));
    return;
  }
  std::vector<std::string> pending;
  for (const auto& [name, p] : partial_) {
    if (p.set == id) pending.push_back(absl::StrCat("'", name, "'"));
  }
  for (const auto& [group, members] : groups_) {
    for (const Held& m : members) {
      if (m.set == id) {
        pending.push_back(absl::StrCat("'", m.response.names(0), "'"));
      }
    }
  }
  for (size_t i = index + 1; i < held_size_; ++i) {
    if (held_[i].set == id && held_[i].response.names_size() > 0) {
      pending.push_back(absl::StrCat("'", held_[i].response.names(0), "'"));
    }
  }
  if (!pending.empty()) {
    std::sort(pending.begin(), pending.end());
    fail(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat(text, ": ops on it are still pending (", ListSome(pending),
                     "); wait for them on every member first"));
    return;
  }
  sets_.erase(id);
  r.add_sizes(id);
}

void Negotiator::ClearHeld() {
  for (size_t i = 0; i < held_size_; ++i) {
    Held& h = held_[i];
    h.response.Clear();  // keeps its lists' storage for the next plan
    h.requests.clear();
    h.hit_bit = -1;
    h.ready_us.clear();
    h.absent.clear();
    h.set = 0;
    h.group.clear();
    h.group_size = 0;
    h.cacheable = false;
  }
  held_size_ = 0;
}

uint64_t Negotiator::DomainOf(
    const Held& h, absl::flat_hash_map<std::string, uint64_t>& domains) const {
  const bool by_group = disable_group_fusion_ && !h.group.empty();
  if (h.set == 0 && !by_group && h.response.joined().empty()) return 0;
  const std::string key = absl::StrCat(h.set, "|", by_group ? h.group : "", "|",
                                       absl::StrJoin(h.response.joined(), ","));
  return domains.try_emplace(key, domains.size() + 1).first->second;
}

void Negotiator::Flush(NegotiatorOutput& out) {
  proto::Plan& plan = out.plans.emplace_back();
  plan.set_seq(++last_seq_);
  const size_t evicted_before = evicted_.size();
  const bool cache_on = cache_.capacity() > 0 || cache_.live() > 0;
  candidates_.assign(held_size_, fusion::Candidate{});
  // Fast hits without joined ranks: they go by bit when their whole fused
  // response does (Response.by_bit), else they get their names below.
  std::vector<uint8_t> by_bit(held_size_, 0);
  // Fusion domains: responses fuse only within their process set, their
  // group under KOLO_DISABLE_GROUP_FUSION, and their joined ranks.
  absl::flat_hash_map<std::string, uint64_t> domains;
  TakeFastHits(by_bit, domains);
  CacheResolved(plan.seq(), cache_on, domains);
  const absl::Span<Held> held = absl::MakeSpan(held_.data(), held_size_);
  for (Held& h : held) {
    for (int64_t us : h.ready_us) h.response.add_ready_us(us);
  }
  DivertEvicted(evicted_before);
  ForgetEvictedBits(plan);
  EmitFused(by_bit, plan);
  ClearHeld();
  held_names_.clear();
  held_since_ = absl::InfiniteFuture();
  MaybeGrantFastPath(plan);
}

void Negotiator::TakeFastHits(
    std::vector<uint8_t>& by_bit,
    absl::flat_hash_map<std::string, uint64_t>& domains) {
  for (size_t i = 0; i < held_size_; ++i) {
    Held& h = held_[i];
    if (h.hit_bit < 0 || h.response.names_size() > 0) continue;
    const auto bit = static_cast<uint32_t>(h.hit_bit);
    bits_[bit].held = false;
    const proto::Response* cached = cache_.Response(bit);
    if (cached == nullptr) {
      // Evicted after it became ready (a capacity change): resolved again
      // from the tombstone's requests, and put below.
      std::vector<std::optional<proto::Request>> requests;
      for (int r = 0; r < options_.size; ++r) {
        requests.emplace_back(*cache_.Lookup(bit, r));
        h.requests.push_back(*cache_.Lookup(bit, r));
      }
      const std::string name = h.requests[0].name();
      h.response = Resolve(name, requests);
      h.hit_bit = -1;
      h.cacheable = true;
      continue;
    }
    cache_.Touch(bit);
    if (options_.stats != nullptr) ++options_.stats->cache_hits;
    by_bit[i] = h.absent.empty() ? 1 : 0;
    if (by_bit[i] == 0) h.response.add_names(cached->names(0));
    h.response.set_op(cached->op());
    *h.response.mutable_sizes() = cached->sizes();
    h.response.add_cache_bits(h.hit_bit);
    const proto::Request* first = cache_.Lookup(bit, 0);
    FinishHeld(i, *first);
    candidates_[i] =
        proto::FusionCandidateOf(h.response, first, fusion_direct_bytes_);
    candidates_[i].domain = DomainOf(h, domains);
  }
}

void Negotiator::CacheResolved(
    uint64_t seq, bool cache_on,
    absl::flat_hash_map<std::string, uint64_t>& domains) {
  for (size_t i = 0; i < held_size_; ++i) {
    Held& h = held_[i];
    if (h.response.cache_bits_size() > 0) continue;  // a fast hit, done
    const std::string& name = h.response.names(0);
    int32_t bit = -1;
    // A hit whose entry a capacity change evicted meanwhile is put again.
    const bool hit = h.hit_bit >= 0 && cache_.BitOf(name) == h.hit_bit;
    if (hit) {
      cache_.Touch(static_cast<uint32_t>(h.hit_bit));
      bit = static_cast<int32_t>(h.hit_bit);
    } else if (h.cacheable) {
      bit = cache_.Put(name, h.requests, h.response, seq, &evicted_);
      if (bit >= 0) {
        bits_end_ = std::max(bits_end_, static_cast<uint32_t>(bit) + 1);
      }
    }
    if (options_.stats != nullptr && cache_on) {
      if (hit) {
        ++options_.stats->cache_hits;
      } else if (h.cacheable) {
        ++options_.stats->cache_misses;
      }
    }
    if (cache_on || !evicted_.empty()) h.response.add_cache_bits(bit);
    const proto::Request* first = h.requests.empty() ? nullptr : &h.requests[0];
    if (first != nullptr) FinishHeld(i, *first);
    candidates_[i] =
        proto::FusionCandidateOf(h.response, first, fusion_direct_bytes_);
    candidates_[i].domain = DomainOf(h, domains);
  }
}

void Negotiator::ForgetEvictedBits(proto::Plan& plan) {
  // A bit given out (or hit) and then evicted by a later Put of this plan:
  // the name holds none after this plan.
  if (!evicted_.empty()) {
    const absl::flat_hash_set<uint32_t> gone(evicted_.begin(), evicted_.end());
    for (Held& h : absl::MakeSpan(held_.data(), held_size_)) {
      if (h.response.cache_bits_size() == 0) {
        h.response.add_cache_bits(-1);
      } else if (h.response.cache_bits(0) >= 0 &&
                 gone.contains(
                     static_cast<uint32_t>(h.response.cache_bits(0)))) {
        h.response.set_cache_bits(0, -1);
      }
    }
  }
  for (uint32_t bit : evicted_) plan.add_cache_evicted(bit);
  evicted_.clear();
}

void Negotiator::EmitFused(const std::vector<uint8_t>& by_bit,
                           proto::Plan& plan) {
  for (const fusion::Group& group :
       fusion::PlanFusion(candidates_, fusion_threshold_)) {
    // By bit when every member is a fast hit whose bit lives on (a later Put
    // of this plan may have evicted it: -1).
    const bool bits_only =
        std::all_of(group.members.begin(), group.members.end(), [&](size_t m) {
          return by_bit[m] != 0 && held_[m].response.cache_bits(0) >= 0;
        });
    if (!bits_only) {
      for (size_t m : group.members) {
        if (by_bit[m] == 0) continue;
        // Live or a tombstone of this plan: the bit still knows its name.
        held_[m].response.add_names(
            cache_.Lookup(static_cast<uint32_t>(held_[m].hit_bit), 0)->name());
      }
    }
    proto::Response& r = *plan.add_responses();
    r = std::move(held_[group.members[0]].response);
    r.set_by_bit(bits_only);
    for (size_t i = 1; i < group.members.size(); ++i) {
      proto::Response& m = held_[group.members[i]].response;
      if (!bits_only) r.add_names(std::move(*m.mutable_names(0)));
      r.mutable_sizes()->MergeFrom(m.sizes());
      r.mutable_cache_bits()->MergeFrom(m.cache_bits());
      r.mutable_ready_us()->MergeFrom(m.ready_us());
      r.mutable_counts()->MergeFrom(m.counts());
    }
    if (options_.stats != nullptr) Count(group, r, *options_.stats);
  }
}

void Negotiator::Count(const fusion::Group& group, const proto::Response& r,
                       NegotiationStats& stats) const {
  OpStats& op = stats.by_op[r.op()];
  ++op.collectives;
  const size_t tensors = group.members.size();
  op.tensors += tensors;
  if (r.error_code() != 0) ++op.errors;
  uint64_t bytes = 0;
  for (size_t m : group.members) bytes += candidates_[m].bytes;
  op.bytes += bytes;
  if (tensors > 1) {
    ++stats.fused_buffers;
    stats.fused_tensors += tensors;
    if (fusion_threshold_ > 0) {
      stats.fusion_fill.Observe(static_cast<double>(bytes) /
                                static_cast<double>(fusion_threshold_));
    }
  }
}

}  // namespace kolo::coordinator
