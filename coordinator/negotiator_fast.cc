// Negotiator (negotiator.h), the fast path: granting it in a plan, and the
// ranks' exits from it (docs/design.md "The fast path").
#include <algorithm>
#include <cstdint>

#include "common/check.h"
#include "common/log.h"
#include "coordinator/negotiator.h"

namespace kolo::coordinator {

void Negotiator::MaybeGrantFastPath(proto::Plan& plan) {
  // Nothing may be the coordinator's when the ranks go their own way: no
  // name or bit announced by some ranks, nothing held, no group waiting for
  // members, no join, no leave, no process set (a set's ops would wait for
  // ranks outside it), and a cache with bits to announce.
  if (!fast_wanted_ || fast_ || hold_fast_path_ || cache_.capacity() == 0 ||
      bits_end_ == 0 || !partial_.empty() || !by_order_.empty() ||
      held_size_ != 0 || !groups_.empty() || !broken_groups_.empty() ||
      joined_count_ != 0 || left_count_ != 0 || !sets_.empty()) {
    return;
  }
  proto::FastPath& grant = *plan.mutable_fast_path();
  grant.set_fusion_threshold(fusion_threshold_);
  grant.set_fusion_direct_bytes(fusion_direct_bytes_);
  grant.set_bits_end(bits_end_);
  for (uint64_t n : announces_) grant.add_announces(n);
  fast_ = true;
  fast_seq_ = plan.seq();
  fast_tally_counted_ = false;
  std::fill(fast_exited_.begin(), fast_exited_.end(), uint8_t{0});
}

void Negotiator::CountFastTally(const proto::FastPathTally& tally) {
  if (fast_tally_counted_ || options_.stats == nullptr) return;
  fast_tally_counted_ = true;
  NegotiationStats& stats = *options_.stats;
  stats.fast_path_plans += tally.plans();
  OpStats& op = stats.by_op[proto::ALLREDUCE];
  op.collectives += tally.collectives();
  op.tensors += tally.tensors();
  op.bytes += tally.bytes();
  stats.fused_buffers += tally.fused_buffers();
  stats.fused_tensors += tally.fused_tensors();
  stats.cache_hits += tally.tensors();
}

void Negotiator::FastExit(int rank, uint64_t seq,
                          absl::Span<const uint32_t> used,
                          const proto::FastPathTally& tally, absl::Time now,
                          NegotiatorOutput& out) {
  KOLO_CHECK(rank >= 0 && rank < options_.size)
      << "rank " << rank << " of " << options_.size;
  // A rank that shuts down leaves the fast path first (its Done may come
  // after its Leave, on the other stream): it counts as exited already.
  if (left_[rank] != 0) return;
  if (!fast_ || fast_exited_[rank] != 0) {
    GetLogger("coordinator")
        ->warn(
            "rank {} reported leaving the fast path after plan {}, which "
            "it was not on; ignored (a worker bug)",
            rank, seq);
    Done(rank, seq, now, out);
    return;
  }
  fast_exited_[rank] = 1;
  fast_seq_ = std::max(fast_seq_, seq);
  CountFastTally(tally);
  // The hits the coordinator did not see: the LRU order follows them (a bit
  // not live any more, which a worker cannot cause, is skipped).
  for (uint32_t bit : used) {
    if (cache_.Response(bit) != nullptr) {
      cache_.Touch(bit);
    } else {
      GetLogger("coordinator")
          ->warn(
              "rank {} ran cache bit {} on the fast path, which is not "
              "live; ignored (a worker bug)",
              rank, bit);
    }
  }
  done_[rank] = std::max(done_[rank], seq);
  for (int r = 0; r < options_.size; ++r) {
    if (fast_exited_[r] == 0 && left_[r] == 0) return;
  }
  EndFastPath(out);
}

void Negotiator::EndFastPath(NegotiatorOutput& out) {
  // Every rank ran the same fast plans (each round is collective), so their
  // exits name the same last plan; the highest is kept should one differ.
  for (int r = 0; r < options_.size; ++r) {
    if (left_[r] == 0 && done_[r] != fast_seq_) {
      GetLogger("coordinator")
          ->error(
              "rank {} left the fast path after plan {}, another after plan "
              "{}; the ranks ran different plans (a worker bug)",
              r, done_[r], fast_seq_);
    }
  }
  fast_ = false;
  last_seq_ = std::max(last_seq_, fast_seq_);
  uint64_t all_done = last_seq_;
  for (int r = 0; r < options_.size; ++r) {
    if (left_[r] == 0) all_done = std::min(all_done, done_[r]);
  }
  cache_.Retire(all_done);
  if (capacity_after_fast_.has_value()) {
    if (*capacity_after_fast_ != cache_.capacity()) {
      const size_t from = evicted_.size();
      cache_.SetCapacity(*capacity_after_fast_, last_seq_ + 1, &evicted_);
      DivertEvicted(from);
    }
    capacity_after_fast_.reset();
  }
  MaybeDispatch(out);
}

}  // namespace kolo::coordinator
