#include "coordinator/response_cache.h"

#include <limits>
#include <utility>

#include "common/check.h"

namespace kolo::coordinator {

ResponseCache::ResponseCache(int size, uint32_t capacity)
    : size_(size), capacity_(capacity) {
  KOLO_CHECK(size_ >= 1) << "response cache size " << size_;
}

const proto::Request* ResponseCache::Lookup(uint32_t bit, int rank) const {
  KOLO_CHECK(rank >= 0 && rank < size_) << "rank " << rank << " of " << size_;
  if (bit >= slots_.size() || slots_[bit].state == State::kFree) {
    return nullptr;
  }
  return &slots_[bit].requests[rank];
}

const proto::Response* ResponseCache::Response(uint32_t bit) const {
  if (bit >= slots_.size() || slots_[bit].state != State::kLive) {
    return nullptr;
  }
  return &slots_[bit].response;
}

std::optional<uint32_t> ResponseCache::BitOf(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

int32_t ResponseCache::Put(const std::string& name,
                           std::vector<proto::Request> requests,
                           const proto::Response& response, uint64_t seq,
                           std::vector<uint32_t>* evicted) {
  CheckSeq(seq);
  KOLO_CHECK(requests.size() == static_cast<size_t>(size_))
      << "response cache: tensor '" << name << "' has " << requests.size()
      << " requests for " << size_ << " ranks";
  for (size_t r = 0; r < requests.size(); ++r) {
    KOLO_CHECK(requests[r].name() == name)
        << "response cache: tensor '" << name << "' has rank " << r
        << "'s request for '" << requests[r].name() << "'";
  }
  auto existing = by_name_.find(name);
  if (response.error_code() != 0) {
    if (existing != by_name_.end()) Evict(existing->second, seq, evicted);
    return -1;
  }
  KOLO_CHECK(response.names_size() == 1 && response.names(0) == name)
      << "response cache: the response for tensor '" << name << "' covers "
      << response.names_size() << " names";
  if (capacity_ == 0) return -1;

  uint32_t bit;
  if (existing != by_name_.end()) {
    bit = existing->second;
    Use(bit);
  } else {
    // live() <= capacity(), so one eviction makes room.
    if (by_name_.size() >= capacity_) Evict(lru_oldest_, seq, evicted);
    bit = TakeFreeBit();
    Slot& slot = slots_[bit];
    slot.state = State::kLive;
    slot.name = name;
    by_name_.emplace(name, bit);
    Append(bit);
  }
  Slot& slot = slots_[bit];
  slot.requests = std::move(requests);
  slot.response = response;
  slot.response.clear_cache_bits();
  slot.response.add_cache_bits(static_cast<int32_t>(bit));
  slot.response.clear_ready_us();
  return static_cast<int32_t>(bit);
}

void ResponseCache::Touch(uint32_t bit) {
  KOLO_CHECK(bit < slots_.size() && slots_[bit].state == State::kLive)
      << "response cache: touch of bit " << bit << ", which is not live";
  Use(bit);
}

void ResponseCache::SetCapacity(uint32_t capacity, uint64_t seq,
                                std::vector<uint32_t>* evicted) {
  CheckSeq(seq);
  capacity_ = capacity;
  while (by_name_.size() > capacity_) {
    Evict(lru_oldest_, seq, evicted);
  }
}

void ResponseCache::Retire(uint64_t min_done_seq) {
  if (min_done_seq <= retired_) return;
  retired_ = min_done_seq;
  while (!tombstones_.empty() && tombstones_.begin()->first <= retired_) {
    const uint32_t bit = tombstones_.begin()->second;
    tombstones_.erase(tombstones_.begin());
    slots_[bit] = Slot();
    free_.insert(bit);
  }
}

void ResponseCache::CheckSeq(uint64_t seq) const {
  KOLO_CHECK(seq > retired_)
      << "response cache: plan " << seq
      << " cannot change the cache, every rank already finished plan "
      << retired_;
}

void ResponseCache::Evict(uint32_t bit, uint64_t seq,
                          std::vector<uint32_t>* evicted) {
  Slot& slot = slots_[bit];
  KOLO_CHECK(slot.state == State::kLive) << "evicting bit " << bit;
  by_name_.erase(slot.name);
  Unlink(bit);
  slot.state = State::kTombstone;
  slot.response.Clear();
  slot.evicted_seq = seq;
  tombstones_.emplace(seq, bit);
  evicted->push_back(bit);
}

void ResponseCache::Use(uint32_t bit) {
  if (bit == lru_newest_) return;
  Unlink(bit);
  Append(bit);
}

void ResponseCache::Unlink(uint32_t bit) {
  Slot& slot = slots_[bit];
  (slot.older == kNone ? lru_oldest_ : slots_[slot.older].newer) = slot.newer;
  (slot.newer == kNone ? lru_newest_ : slots_[slot.newer].older) = slot.older;
  slot.older = slot.newer = kNone;
}

void ResponseCache::Append(uint32_t bit) {
  Slot& slot = slots_[bit];
  slot.older = lru_newest_;
  slot.newer = kNone;
  (lru_newest_ == kNone ? lru_oldest_ : slots_[lru_newest_].newer) = bit;
  lru_newest_ = bit;
}

uint32_t ResponseCache::TakeFreeBit() {
  if (!free_.empty()) {
    const uint32_t bit = *free_.begin();
    free_.erase(free_.begin());
    return bit;
  }
  KOLO_CHECK(slots_.size() <
             static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      << "response cache: out of bits";
  slots_.emplace_back();
  return static_cast<uint32_t>(slots_.size() - 1);
}

}  // namespace kolo::coordinator
