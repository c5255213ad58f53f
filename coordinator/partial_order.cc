#include "coordinator/partial_order.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace kolo::coordinator {

void PartialOrder::Append(uint64_t order, PartialKey key) {
  KOLO_CHECK(entries_.empty() || entries_.back().order < order)
      << "partial order " << order << " appended after "
      << entries_.back().order;
  entries_.push_back(Entry{order, std::move(key), true});
  ++live_;
}

PartialOrder::Entry* PartialOrder::Locate(uint64_t order) {
  // The common case: partials complete in the order they began (every rank
  // announces a step's tensors in the same order).
  if (!entries_.empty() && entries_.front().order == order) {
    return entries_.front().live ? &entries_.front() : nullptr;
  }
  auto it =
      std::lower_bound(entries_.begin(), entries_.end(), order,
                       [](const Entry& e, uint64_t o) { return e.order < o; });
  if (it == entries_.end() || it->order != order || !it->live) return nullptr;
  return &*it;
}

PartialKey* PartialOrder::Find(uint64_t order) {
  Entry* e = Locate(order);
  return e == nullptr ? nullptr : &e->key;
}

void PartialOrder::Erase(uint64_t order) {
  Entry* e = Locate(order);
  if (e == nullptr) return;
  e->live = false;
  e->key.name.clear();
  --live_;
  while (!entries_.empty() && !entries_.front().live) entries_.pop_front();
  // Dead entries behind a live one (a tensor some rank has not announced
  // yet) go in bulk, so that they never outnumber the live ones by much.
  const size_t dead = entries_.size() - live_;
  if (dead > 64 && dead > live_) {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [](const Entry& x) { return !x.live; }),
                   entries_.end());
  }
}

}  // namespace kolo::coordinator
