// ResponseCache: the coordinator's side of the response cache
// (docs/design.md "Negotiation and fusion"), as a plain class with no gRPC
// and no clock. The Negotiator owns one per epoch; tests drive it directly.
//
// Protocol (proto/kolo.proto: Announce.cached, Response.cache_bits,
// Plan.cache_evicted):
// - All cache state lives here; workers only mirror what plans tell them.
//   A name whose response was dispatched successfully gets a bit (a small
//   non-negative integer) when the capacity is non-zero (Put). The plan
//   that carries the response tells every rank the bit (cache_bits); from
//   then on a rank whose Request for that name is unchanged may announce
//   just the bit. The bit announced by rank r stands for requests[r] of the
//   entry: requests may differ per rank (allgather's first dimension,
//   alltoall's splits).
// - An entry holds the name, every rank's Request, and the resolved
//   Response (names = {name}) to reuse when every rank announced the bit.
// - Put of a name that has an entry replaces its requests and response and
//   keeps the bit: no rank can announce the name again before it processed
//   the plan that carries the new response, and with it the new meaning.
// - A response with a non-zero error_code is never cached: Put evicts an
//   existing entry for the name.
// - Eviction happens in the plan with sequence number `seq` that the caller
//   passes (the least recently used entry when a new name needs room and
//   the cache is full; SetCapacity below the live count, least recently used
//   first; an error; capacity 0 evicts all) and is reported in `*evicted`,
//   which the caller puts into that plan's cache_evicted. An evicted bit
//   becomes a tombstone: a rank that has not processed plan `seq` yet may
//   still announce it, so Lookup still answers with the old Request, and the
//   bit is not given out again until Retire(min_done) with min_done >= seq
//   (every rank finished that plan). Then the bit is free.
// - One plan may give out a bit (Put) or reuse it (Touch) and also evict
//   it, when more names than the capacity go out in that plan: a later Put
//   of the plan needed room. The eviction wins: the name holds no bit after
//   that plan. So the caller writes -1 as that name's cache bit (or workers
//   apply a plan's cache_bits before its cache_evicted). The reverse never
//   happens within one plan: an evicted bit is not given out again before
//   that plan is retired.
// - The least-recently-used order is a pure function of the sequence of
//   calls (Put and Touch use; no hash-map iteration order is involved), so
//   equal call sequences give equal bits and evictions.
//
// Thread-safety: none; the owner serialises calls (the negotiator's owner
// holds its mutex).
// Invariants: live() <= capacity(); a bit is live, a tombstone, or free,
// never two at once; BitOf(name), when set, is live; a new bit is the lowest
// bit that is neither live nor a tombstone, so it is < live() + tombstones()
// + 1 <= capacity() + tombstones() at the time it is given out.
#ifndef KOLO_COORDINATOR_RESPONSE_CACHE_H_
#define KOLO_COORDINATOR_RESPONSE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

class ResponseCache {
 public:
  // A cache for ranks 0..size-1 holding at most `capacity` live entries
  // (0 = the cache is off). REQUIRES: size >= 1.
  ResponseCache(int size, uint32_t capacity);
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  // The Request that `bit` stands for on `rank`, live or tombstone; nullptr
  // for a bit that is neither (a worker bug: the caller logs it). The
  // pointer is valid until the next non-const call.
  // REQUIRES: 0 <= rank < size.
  const proto::Request* Lookup(uint32_t bit, int rank) const;

  // The cached response of a live bit (to reuse when every rank announced
  // it), or nullptr. It is the response given to Put with cache_bits =
  // {bit} and no ready_us (timeline ticks belong to one occurrence). Valid
  // until the next non-const call.
  const proto::Response* Response(uint32_t bit) const;

  // The bit of a live entry for `name`.
  std::optional<uint32_t> BitOf(const std::string& name) const;

  // After `response` for `name` was resolved from `requests` (every rank's,
  // in rank order) and goes out in plan `seq`: caches it (see the protocol
  // above), marks it most recently used, and returns its bit; or evicts the
  // name's entry if response.error_code() != 0. Appends the bits this call
  // evicted to *evicted. Returns -1 when nothing was cached (an error, or
  // capacity 0).
  // REQUIRES: requests.size() == size, every request named `name`; for a
  // success, response.names() == {name}; seq > every min_done passed to
  // Retire.
  int32_t Put(const std::string& name, std::vector<proto::Request> requests,
              const proto::Response& response, uint64_t seq,
              std::vector<uint32_t>* evicted);

  // A full hit (every rank announced `bit`, the cached response is reused):
  // marks the entry most recently used. REQUIRES: `bit` is live.
  void Touch(uint32_t bit);

  // Changes the capacity in plan `seq`; a capacity below live() evicts the
  // least recently used entries until live() == capacity, appending their
  // bits to *evicted. REQUIRES: seq > every min_done passed to Retire.
  void SetCapacity(uint32_t capacity, uint64_t seq,
                   std::vector<uint32_t>* evicted);

  // Every rank finished every plan up to `min_done_seq`: tombstones evicted
  // in those plans become free bits. A smaller value than before is a no-op.
  void Retire(uint64_t min_done_seq);

  uint32_t capacity() const { return capacity_; }
  size_t live() const { return by_name_.size(); }
  size_t tombstones() const { return tombstones_.size(); }

 private:
  enum class State { kFree, kLive, kTombstone };
  struct Slot {
    State state = State::kFree;
    std::string name;
    std::vector<proto::Request> requests;  // size entries unless free
    proto::Response response;              // live only
    // Live: neighbours in the LRU list (kNone at its ends).
    uint32_t older = kNone, newer = kNone;
    uint64_t evicted_seq = 0;  // tombstone: key in tombstones_
  };
  static constexpr uint32_t kNone = ~uint32_t{0};

  void CheckSeq(uint64_t seq) const;
  // Turns live `bit` into a tombstone of plan `seq`.
  void Evict(uint32_t bit, uint64_t seq, std::vector<uint32_t>* evicted);
  // Marks live `bit` most recently used.
  void Use(uint32_t bit);
  // Takes live `bit` out of the LRU list / appends it as the most recent.
  void Unlink(uint32_t bit);
  void Append(uint32_t bit);
  // The lowest bit that is neither live nor a tombstone (slots_ grows by one
  // when every existing bit is in use).
  uint32_t TakeFreeBit();

  const int size_;
  uint32_t capacity_;
  std::vector<Slot> slots_;  // indexed by bit
  // Live entries: name -> bit (lookups only, never iterated).
  absl::flat_hash_map<std::string, uint32_t> by_name_;
  // Live bits by last use, a list through Slot.older/newer: lru_oldest_ is
  // the least recently used (kNone when none is live).
  uint32_t lru_oldest_ = kNone, lru_newest_ = kNone;
  // Tombstones as (evicted_seq, bit), oldest plan first.
  std::set<std::pair<uint64_t, uint32_t>> tombstones_;
  std::set<uint32_t> free_;  // free bits below slots_.size()
  uint64_t retired_ = 0;     // the largest min_done given to Retire
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_RESPONSE_CACHE_H_
