// PartialOrder: the negotiator's partially announced tensors in the order
// they were first announced, oldest first — what the stall inspector walks
// and Pending() lists. A training step puts hundreds of entries through it
// per step, so it avoids an allocation per entry: entries sit in a sorted
// deque, an erase marks its entry dead (found by binary search), and dead
// entries leave from the front at once and from elsewhere in bulk once they
// outnumber the live ones.
//
// Thread-safety: none; the negotiator's owner serialises calls.
// Invariants: entries_ is sorted by order with no duplicates; live_ counts
// its live entries; the front entry, if any, is live.
#ifndef KOLO_COORDINATOR_PARTIAL_ORDER_H_
#define KOLO_COORDINATOR_PARTIAL_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace kolo::coordinator {

// A partial: a name announced in full by some ranks, or a response cache bit.
struct PartialKey {
  int64_t bit = -1;  // >= 0: a bit partial
  std::string name;  // else a name partial
};

class PartialOrder {
 public:
  // REQUIRES: `order` is larger than every order appended before.
  void Append(uint64_t order, PartialKey key);
  // Removes the live entry of `order`, if there is one.
  void Erase(uint64_t order);
  // The live entry of `order`, or nullptr.
  PartialKey* Find(uint64_t order);

  bool empty() const { return live_ == 0; }
  size_t size() const { return live_; }
  // REQUIRES: !empty().
  const PartialKey& oldest() const { return entries_.front().key; }

  // Calls f(key) for every live entry, oldest first. `f` must not change
  // this PartialOrder.
  template <typename F>
  void ForEach(F f) const {
    for (const Entry& e : entries_) {
      if (e.live) f(e.key);
    }
  }

 private:
  struct Entry {
    uint64_t order;
    PartialKey key;
    bool live;
  };
  Entry* Locate(uint64_t order);

  std::deque<Entry> entries_;
  size_t live_ = 0;
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_PARTIAL_ORDER_H_
