// Tests of the ResponseCache (coordinator/response_cache.h): bits, hits,
// per-rank requests, metadata changes, least-recently-used eviction,
// tombstones until Retire, capacity changes, errors, determinism against a
// naive model, and the CHECKed preconditions.
#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/response_cache.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::Pointee;

MATCHER_P(EqualsProto, expected,
          absl::StrCat("equals ", expected.ShortDebugString())) {
  if (google::protobuf::util::MessageDifferencer::Equals(arg, expected)) {
    return true;
  }
  *result_listener << "which is " << arg.ShortDebugString();
  return false;
}

// The name of a looked-up request, or "<none>".
std::string NameOf(const proto::Request* request) {
  return request == nullptr ? "<none>" : request->name();
}

proto::Request Req(const std::string& name, std::vector<int64_t> shape = {4},
                   proto::OpType op = proto::ALLREDUCE) {
  proto::Request r;
  r.set_name(name);
  r.set_op(op);
  r.set_dtype(7);
  for (int64_t d : shape) r.add_shape(d);
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  r.set_device(-1);
  return r;
}

// The same request on each of `size` ranks.
std::vector<proto::Request> Same(int size, const std::string& name,
                                 std::vector<int64_t> shape = {4}) {
  return std::vector<proto::Request>(size, Req(name, std::move(shape)));
}

proto::Response Ok(const std::string& name, proto::OpType op = proto::ALLREDUCE,
                   std::vector<int64_t> sizes = {}) {
  proto::Response r;
  r.add_names(name);
  r.set_op(op);
  for (int64_t s : sizes) r.add_sizes(s);
  return r;
}

proto::Response Err(const std::string& name) {
  proto::Response r;
  r.add_names(name);
  r.set_op(proto::ALLREDUCE);
  r.set_error_code(3);  // kInvalidArgument
  r.set_error("shapes differ");
  return r;
}

TEST(ResponseCacheTest, AssignsLowestBitsAndAnswersEachRanksRequest) {
  ResponseCache cache(3, 4);
  // Allgather: each rank has its own first dimension.
  std::vector<proto::Request> gather = {Req("g", {2, 5}, proto::ALLGATHER),
                                        Req("g", {3, 5}, proto::ALLGATHER),
                                        Req("g", {1, 5}, proto::ALLGATHER)};
  proto::Response gathered = Ok("g", proto::ALLGATHER, {2, 3, 1});
  gathered.add_cache_bits(-1);  // the caller's, replaced
  gathered.add_ready_us(10);    // one occurrence's ticks, dropped
  gathered.add_ready_us(0);
  gathered.add_ready_us(5);
  std::vector<uint32_t> evicted;
  EXPECT_EQ(cache.Put("g", gather, gathered, 1, &evicted), 0);
  EXPECT_THAT(evicted, IsEmpty());

  // Alltoall: each rank has its own splits.
  std::vector<proto::Request> a2a = {Req("t", {3}, proto::ALLTOALL),
                                     Req("t", {3}, proto::ALLTOALL),
                                     Req("t", {3}, proto::ALLTOALL)};
  a2a[0].add_splits(1), a2a[0].add_splits(1), a2a[0].add_splits(1);
  a2a[1].add_splits(3), a2a[1].add_splits(0), a2a[1].add_splits(0);
  a2a[2].add_splits(0), a2a[2].add_splits(2), a2a[2].add_splits(1);
  const proto::Response swapped =
      Ok("t", proto::ALLTOALL, {1, 1, 1, 3, 0, 0, 0, 2, 1});
  EXPECT_EQ(cache.Put("t", a2a, swapped, 1, &evicted), 1);
  EXPECT_THAT(evicted, IsEmpty());

  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(cache.Lookup(0, r), Pointee(EqualsProto(gather[r])))
        << "rank " << r;
    EXPECT_THAT(cache.Lookup(1, r), Pointee(EqualsProto(a2a[r])))
        << "rank " << r;
  }
  proto::Response want_gathered = Ok("g", proto::ALLGATHER, {2, 3, 1});
  want_gathered.add_cache_bits(0);
  EXPECT_THAT(cache.Response(0), Pointee(EqualsProto(want_gathered)));
  proto::Response want_swapped = swapped;
  want_swapped.add_cache_bits(1);
  EXPECT_THAT(cache.Response(1), Pointee(EqualsProto(want_swapped)));

  EXPECT_THAT(cache.BitOf("g"), Optional(0u));
  EXPECT_THAT(cache.BitOf("t"), Optional(1u));
  EXPECT_EQ(cache.BitOf("x"), std::nullopt);
  // Unknown bits: never given out, or far out of range.
  EXPECT_EQ(cache.Lookup(2, 0), nullptr);
  EXPECT_EQ(cache.Lookup(4'000'000'000u, 0), nullptr);
  EXPECT_EQ(cache.Response(2), nullptr);
  EXPECT_EQ(cache.capacity(), 4u);
  EXPECT_EQ(cache.live(), 2u);
  EXPECT_EQ(cache.tombstones(), 0u);

  // A full hit changes nothing but the order.
  cache.Touch(0);
  EXPECT_THAT(cache.Response(0), Pointee(EqualsProto(want_gathered)));
  EXPECT_THAT(cache.Lookup(0, 1), Pointee(EqualsProto(gather[1])));
}

TEST(ResponseCacheTest, MetadataChangeKeepsTheBitAndReplacesRequests) {
  ResponseCache cache(2, 2);
  std::vector<uint32_t> evicted;
  EXPECT_EQ(cache.Put("a", Same(2, "a", {4}), Ok("a"), 1, &evicted), 0);
  EXPECT_EQ(cache.Put("b", Same(2, "b"), Ok("b"), 1, &evicted), 1);

  std::vector<proto::Request> changed = {Req("a", {8, 2}, proto::ALLGATHER),
                                         Req("a", {6, 2}, proto::ALLGATHER)};
  EXPECT_EQ(
      cache.Put("a", changed, Ok("a", proto::ALLGATHER, {8, 6}), 2, &evicted),
      0);
  EXPECT_THAT(evicted, IsEmpty());
  EXPECT_EQ(cache.live(), 2u);
  EXPECT_THAT(cache.Lookup(0, 0), Pointee(EqualsProto(changed[0])));
  EXPECT_THAT(cache.Lookup(0, 1), Pointee(EqualsProto(changed[1])));
  ASSERT_NE(cache.Response(0), nullptr);
  EXPECT_EQ(cache.Response(0)->op(), proto::ALLGATHER);
  EXPECT_THAT(cache.Response(0)->sizes(), ElementsAre(8, 6));
  EXPECT_THAT(cache.Response(0)->cache_bits(), ElementsAre(0));

  // The change used "a": "b" is now the least recently used.
  EXPECT_EQ(cache.Put("c", Same(2, "c"), Ok("c"), 3, &evicted), 2);
  EXPECT_THAT(evicted, ElementsAre(1u));
  EXPECT_THAT(cache.BitOf("a"), Optional(0u));
  EXPECT_EQ(cache.BitOf("b"), std::nullopt);
}

TEST(ResponseCacheTest, EvictsTheLeastRecentlyUsed) {
  ResponseCache cache(1, 3);
  std::vector<uint32_t> evicted;
  uint64_t seq = 0;
  for (const char* name : {"a", "b", "c"}) {
    ++seq;
    EXPECT_EQ(cache.Put(name, Same(1, name), Ok(name), seq, &evicted),
              static_cast<int32_t>(seq - 1));
  }
  EXPECT_THAT(evicted, IsEmpty());

  // Order a b c; touching a makes it b c a: b goes.
  cache.Touch(0);
  EXPECT_EQ(cache.Put("d", Same(1, "d"), Ok("d"), ++seq, &evicted), 3);
  EXPECT_THAT(evicted, ElementsAre(1u));
  EXPECT_EQ(cache.BitOf("b"), std::nullopt);

  // c a d: c goes.
  evicted.clear();
  EXPECT_EQ(cache.Put("e", Same(1, "e"), Ok("e"), ++seq, &evicted), 4);
  EXPECT_THAT(evicted, ElementsAre(2u));

  // a d e; Put(a) (a hit resolved anew) gives d e a, Touch(e) d a e: d
  // goes, then a.
  EXPECT_EQ(cache.Put("a", Same(1, "a"), Ok("a"), ++seq, &evicted), 0);
  cache.Touch(4);
  evicted.clear();
  EXPECT_EQ(cache.Put("f", Same(1, "f"), Ok("f"), ++seq, &evicted), 5);
  EXPECT_THAT(evicted, ElementsAre(3u));
  evicted.clear();
  EXPECT_EQ(cache.Put("g", Same(1, "g"), Ok("g"), ++seq, &evicted), 6);
  EXPECT_THAT(evicted, ElementsAre(0u));

  // e f g left; a touch of the oldest in each round moves the victim on.
  cache.Touch(4);  // f g e
  evicted.clear();
  EXPECT_EQ(cache.Put("h", Same(1, "h"), Ok("h"), ++seq, &evicted), 7);
  EXPECT_THAT(evicted, ElementsAre(5u));  // f
  EXPECT_THAT(cache.BitOf("e"), Optional(4u));
  EXPECT_THAT(cache.BitOf("g"), Optional(6u));
  EXPECT_THAT(cache.BitOf("h"), Optional(7u));
  EXPECT_EQ(cache.live(), 3u);
  EXPECT_EQ(cache.tombstones(), 5u);  // b c d a f: nothing retired
}

TEST(ResponseCacheTest, EvictedBitIsATombstoneUntilItsPlanIsRetired) {
  ResponseCache cache(2, 2);
  std::vector<uint32_t> evicted;
  const std::vector<proto::Request> a = {Req("a", {2}), Req("a", {5})};
  EXPECT_EQ(cache.Put("a", a, Ok("a"), 1, &evicted), 0);
  EXPECT_EQ(cache.Put("b", Same(2, "b"), Ok("b"), 1, &evicted), 1);

  // Plan 2 evicts a's bit 0.
  EXPECT_EQ(cache.Put("c", Same(2, "c"), Ok("c"), 2, &evicted), 2);
  EXPECT_THAT(evicted, ElementsAre(0u));
  EXPECT_EQ(cache.tombstones(), 1u);
  EXPECT_EQ(cache.BitOf("a"), std::nullopt);
  EXPECT_EQ(cache.Response(0), nullptr);
  // A rank that has not run plan 2 may still announce bit 0.
  EXPECT_THAT(cache.Lookup(0, 0), Pointee(EqualsProto(a[0])));
  EXPECT_THAT(cache.Lookup(0, 1), Pointee(EqualsProto(a[1])));

  // Every rank finished plan 1 only: bit 0 stays a tombstone, so plan 3's
  // new name gets bit 3 (and evicts b's bit 1).
  cache.Retire(1);
  EXPECT_EQ(cache.tombstones(), 1u);
  ASSERT_NE(cache.Lookup(0, 1), nullptr);
  evicted.clear();
  EXPECT_EQ(cache.Put("d", Same(2, "d"), Ok("d"), 3, &evicted), 3);
  EXPECT_THAT(evicted, ElementsAre(1u));
  EXPECT_EQ(cache.tombstones(), 2u);

  // Plan 2 retired: bit 0 is free (unknown), bit 1 (plan 3) still a
  // tombstone.
  cache.Retire(2);
  EXPECT_EQ(cache.tombstones(), 1u);
  EXPECT_EQ(cache.Lookup(0, 0), nullptr);
  EXPECT_EQ(cache.Lookup(0, 1), nullptr);
  ASSERT_NE(cache.Lookup(1, 1), nullptr);
  EXPECT_EQ(NameOf(cache.Lookup(1, 1)), "b");

  // The lowest free bit is reused: 0, while 1 is still a tombstone.
  evicted.clear();
  EXPECT_EQ(cache.Put("e", Same(2, "e"), Ok("e"), 4, &evicted), 0);
  EXPECT_THAT(evicted, ElementsAre(2u));  // c
  EXPECT_EQ(NameOf(cache.Lookup(0, 0)), "e");

  // Retire(4) frees 1 (plan 3) and 2 (plan 4); the lowest, 1, comes next.
  cache.Retire(4);
  EXPECT_EQ(cache.tombstones(), 0u);
  evicted.clear();
  EXPECT_EQ(cache.Put("f", Same(2, "f"), Ok("f"), 5, &evicted), 1);
  EXPECT_THAT(evicted, ElementsAre(3u));  // d
  // A smaller min_done later is a no-op.
  cache.Retire(3);
  EXPECT_EQ(cache.tombstones(), 1u);
  cache.Retire(5);
  evicted.clear();
  EXPECT_EQ(cache.Put("g", Same(2, "g"), Ok("g"), 6, &evicted), 2);
  EXPECT_THAT(evicted, ElementsAre(0u));  // e
}

// More names than the capacity in one plan: a bit given out, or reused by a
// hit, earlier in the plan is evicted by a later Put of the same plan (the
// caller must not leave the name holding it; see the header).
TEST(ResponseCacheTest, OnePlanCanGiveOutAndEvictTheSameBit) {
  ResponseCache cache(2, 1);
  std::vector<uint32_t> evicted;
  EXPECT_EQ(cache.Put("a", Same(2, "a"), Ok("a"), 1, &evicted), 0);
  EXPECT_EQ(cache.Put("b", Same(2, "b"), Ok("b"), 1, &evicted), 1);
  EXPECT_THAT(evicted, ElementsAre(0u));

  // Plan 2: a hit on b, then a new name.
  evicted.clear();
  cache.Touch(1);
  EXPECT_EQ(cache.Put("c", Same(2, "c"), Ok("c"), 2, &evicted), 2);
  EXPECT_THAT(evicted, ElementsAre(1u));
  EXPECT_EQ(cache.BitOf("b"), std::nullopt);
  EXPECT_EQ(NameOf(cache.Lookup(1, 0)), "b");  // a tombstone of plan 2
}

TEST(ResponseCacheTest, CapacityZeroStoresNothing) {
  ResponseCache cache(2, 0);
  std::vector<uint32_t> evicted;
  EXPECT_EQ(cache.Put("a", Same(2, "a"), Ok("a"), 1, &evicted), -1);
  EXPECT_EQ(cache.Put("a", Same(2, "a"), Err("a"), 2, &evicted), -1);
  EXPECT_THAT(evicted, IsEmpty());
  EXPECT_EQ(cache.live(), 0u);
  EXPECT_EQ(cache.tombstones(), 0u);
  EXPECT_EQ(cache.BitOf("a"), std::nullopt);
  EXPECT_EQ(cache.Lookup(0, 0), nullptr);
  EXPECT_EQ(cache.Response(0), nullptr);

  cache.SetCapacity(1, 3, &evicted);
  EXPECT_THAT(evicted, IsEmpty());
  EXPECT_EQ(cache.Put("a", Same(2, "a"), Ok("a"), 3, &evicted), 0);
}

TEST(ResponseCacheTest, ShrinkingEvictsTheLeastRecentlyUsedFirst) {
  ResponseCache cache(1, 4);
  std::vector<uint32_t> evicted;
  for (const char* name : {"a", "b", "c", "d"}) {
    cache.Put(name, Same(1, name), Ok(name), 1, &evicted);
  }
  cache.Touch(0);  // b c d a
  cache.Touch(2);  // b d a c
  cache.SetCapacity(8, 2, &evicted);
  EXPECT_THAT(evicted, IsEmpty());
  cache.SetCapacity(2, 2, &evicted);
  EXPECT_THAT(evicted, ElementsAre(1u, 3u));
  EXPECT_EQ(cache.capacity(), 2u);
  EXPECT_EQ(cache.live(), 2u);
  EXPECT_EQ(cache.tombstones(), 2u);
  EXPECT_THAT(cache.BitOf("a"), Optional(0u));
  EXPECT_THAT(cache.BitOf("c"), Optional(2u));

  // Full at 2: e evicts a and gets bit 4 (0..3 are live or tombstones).
  evicted.clear();
  EXPECT_EQ(cache.Put("e", Same(1, "e"), Ok("e"), 3, &evicted), 4);
  EXPECT_THAT(evicted, ElementsAre(0u));

  // Capacity 0 evicts everything, least recently used first.
  evicted.clear();
  cache.SetCapacity(0, 4, &evicted);
  EXPECT_THAT(evicted, ElementsAre(2u, 4u));
  EXPECT_EQ(cache.live(), 0u);
  EXPECT_EQ(cache.tombstones(), 5u);
  EXPECT_EQ(NameOf(cache.Lookup(4, 0)), "e");
  EXPECT_EQ(cache.Put("f", Same(1, "f"), Ok("f"), 5, &evicted), -1);

  cache.Retire(4);
  EXPECT_EQ(cache.tombstones(), 0u);
  cache.SetCapacity(3, 5, &evicted);
  EXPECT_EQ(cache.Put("f", Same(1, "f"), Ok("f"), 5, &evicted), 0);
}

TEST(ResponseCacheTest, ErrorEvictsTheEntryAndIsNotCached) {
  ResponseCache cache(2, 4);
  std::vector<uint32_t> evicted;
  const std::vector<proto::Request> a = Same(2, "a", {4});
  EXPECT_EQ(cache.Put("a", a, Ok("a"), 1, &evicted), 0);
  EXPECT_EQ(cache.Put("b", Same(2, "b"), Ok("b"), 1, &evicted), 1);

  std::vector<proto::Request> bad = {Req("a", {4}), Req("a", {5})};
  EXPECT_EQ(cache.Put("a", bad, Err("a"), 2, &evicted), -1);
  EXPECT_THAT(evicted, ElementsAre(0u));
  EXPECT_EQ(cache.BitOf("a"), std::nullopt);
  EXPECT_EQ(cache.Response(0), nullptr);
  EXPECT_EQ(cache.live(), 1u);
  EXPECT_EQ(cache.tombstones(), 1u);
  // The tombstone stands for what the bit meant, not the failed requests.
  EXPECT_THAT(cache.Lookup(0, 1), Pointee(EqualsProto(a[1])));

  // An error for a name with no entry changes nothing.
  evicted.clear();
  EXPECT_EQ(cache.Put("c", Same(2, "c"), Err("c"), 3, &evicted), -1);
  EXPECT_THAT(evicted, IsEmpty());
  EXPECT_EQ(cache.live(), 1u);
  EXPECT_EQ(cache.BitOf("c"), std::nullopt);

  // Fixed: a new bit, not the tombstone.
  EXPECT_EQ(cache.Put("a", a, Ok("a"), 3, &evicted), 2);
}

// A naive model of the protocol: the LRU order as a list of names, tombstones
// as a list, the lowest free bit by scanning.
class Model {
 public:
  explicit Model(uint32_t capacity) : capacity_(capacity) {}

  int32_t Put(const std::string& name, bool error, uint64_t seq,
              std::vector<uint32_t>* evicted) {
    auto it = bits_.find(name);
    if (error) {
      if (it != bits_.end()) Evict(name, seq, evicted);
      return -1;
    }
    if (capacity_ == 0) return -1;
    if (it != bits_.end()) {
      Use(name);
      return static_cast<int32_t>(it->second);
    }
    if (bits_.size() == capacity_) Evict(lru_.front(), seq, evicted);
    uint32_t bit = 0;
    while (Taken(bit)) ++bit;
    bits_[name] = bit;
    lru_.push_back(name);
    return static_cast<int32_t>(bit);
  }
  void Touch(const std::string& name) { Use(name); }
  void SetCapacity(uint32_t capacity, uint64_t seq,
                   std::vector<uint32_t>* evicted) {
    capacity_ = capacity;
    while (bits_.size() > capacity_) Evict(lru_.front(), seq, evicted);
  }
  void Retire(uint64_t min_done) {
    std::erase_if(tombstones_, [&](const std::pair<uint64_t, uint32_t>& t) {
      return t.first <= min_done;
    });
  }
  std::optional<uint32_t> BitOf(const std::string& name) const {
    auto it = bits_.find(name);
    if (it == bits_.end()) return std::nullopt;
    return it->second;
  }
  size_t tombstones() const { return tombstones_.size(); }

 private:
  bool Taken(uint32_t bit) const {
    for (const auto& [name, b] : bits_) {
      if (b == bit) return true;
    }
    for (const auto& [seq, b] : tombstones_) {
      if (b == bit) return true;
    }
    return false;
  }
  void Use(const std::string& name) {
    lru_.remove(name);
    lru_.push_back(name);
  }
  void Evict(const std::string& name, uint64_t seq,
             std::vector<uint32_t>* evicted) {
    const uint32_t bit = bits_.at(name);
    evicted->push_back(bit);
    tombstones_.emplace_back(seq, bit);
    bits_.erase(name);
    lru_.remove(name);
  }

  uint32_t capacity_;
  std::map<std::string, uint32_t> bits_;
  std::list<std::string> lru_;  // least recently used first
  std::vector<std::pair<uint64_t, uint32_t>> tombstones_;
};

// One pseudo-random but fixed workload (std::mt19937's raw output is the
// same everywhere), run on two caches and the model: the same bits and
// evictions, call for call, and the invariants after each call.
TEST(ResponseCacheTest, EqualCallSequencesGiveEqualBitsAndEvictions) {
  constexpr int kSize = 3;
  constexpr int kNames = 16;
  std::mt19937 rng(20240611);
  auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };

  ResponseCache one(kSize, 8), two(kSize, 8);
  Model model(8);
  uint64_t seq = 0, done = 0;
  int puts = 0, hits = 0, evictions = 0, retired = 0, reused = 0;
  std::vector<bool> ever_assigned;
  for (int step = 0; step < 5000; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    if (below(3) == 0) ++seq;  // several calls share a plan
    const uint32_t what = below(100);
    const std::string name = absl::StrCat("grad/", below(kNames));
    std::vector<uint32_t> e1, e2, em;
    if (what < 60) {  // a dispatch, now and then an error or new metadata
      const bool error = below(20) == 0;
      std::vector<proto::Request> requests;
      for (int r = 0; r < kSize; ++r) {
        requests.push_back(Req(name, {below(3) + 1, r + 1}, proto::ALLGATHER));
      }
      proto::Response response = error ? Err(name) : Ok(name, proto::ALLGATHER);
      for (const proto::Request& r : requests) response.add_sizes(r.shape(0));
      const bool fresh = !one.BitOf(name).has_value();
      const size_t taken = one.live() + one.tombstones();
      const int32_t b1 = one.Put(name, requests, response, seq + 1, &e1);
      const int32_t b2 = two.Put(name, requests, response, seq + 1, &e2);
      const int32_t bm = model.Put(name, error, seq + 1, &em);
      ASSERT_EQ(b1, b2);
      ASSERT_EQ(b1, bm);
      ++puts;
      if (b1 >= 0) {
        const uint32_t bit = static_cast<uint32_t>(b1);
        if (fresh) {
          // The lowest bit neither live nor a tombstone.
          ASSERT_LE(bit, taken);
          if (bit < ever_assigned.size() && ever_assigned[bit]) ++reused;
          if (bit >= ever_assigned.size()) ever_assigned.resize(bit + 1);
          ever_assigned[bit] = true;
        }
        for (int r = 0; r < kSize; ++r) {
          ASSERT_THAT(one.Lookup(bit, r), Pointee(EqualsProto(requests[r])));
        }
        ASSERT_NE(one.Response(bit), nullptr);
        ASSERT_THAT(one.Response(bit)->sizes(),
                    ElementsAre(requests[0].shape(0), requests[1].shape(0),
                                requests[2].shape(0)));
      }
    } else if (what < 85) {  // a full hit when the name is cached
      const std::optional<uint32_t> bit = one.BitOf(name);
      ASSERT_EQ(bit, two.BitOf(name));
      ASSERT_EQ(bit, model.BitOf(name));
      if (!bit.has_value()) continue;
      one.Touch(*bit);
      two.Touch(*bit);
      model.Touch(name);
      ++hits;
    } else if (what < 97) {  // every rank finished some plans
      done = std::max(done, seq - std::min<uint64_t>(seq, below(4)));
      one.Retire(done);
      two.Retire(done);
      model.Retire(done);
      ++retired;
    } else {  // a settings change
      const uint32_t capacity = below(12);
      one.SetCapacity(capacity, seq + 1, &e1);
      two.SetCapacity(capacity, seq + 1, &e2);
      model.SetCapacity(capacity, seq + 1, &em);
    }
    ASSERT_EQ(e1, e2);
    ASSERT_EQ(e1, em);
    evictions += static_cast<int>(e1.size());
    for (uint32_t bit : e1) {
      ASSERT_EQ(one.Response(bit), nullptr);
      ASSERT_NE(one.Lookup(bit, 0), nullptr);  // a tombstone
    }
    ASSERT_LE(one.live(), one.capacity());
    ASSERT_EQ(one.tombstones(), model.tombstones());
    for (int n = 0; n < kNames; ++n) {
      const std::string other = absl::StrCat("grad/", n);
      const std::optional<uint32_t> bit = one.BitOf(other);
      ASSERT_EQ(bit, model.BitOf(other));
      if (!bit.has_value()) continue;
      ASSERT_NE(one.Response(*bit), nullptr);
      ASSERT_THAT(one.Response(*bit)->names(), ElementsAre(other));
      ASSERT_THAT(one.Response(*bit)->cache_bits(), ElementsAre(*bit));
      ASSERT_EQ(NameOf(one.Lookup(*bit, kSize - 1)), other);
    }
  }
  // The workload exercised every path.
  // (This sequence: 3000 puts, 446 hits, 1806 evictions, 592 retires,
  // 1770 fresh bits that had been given out before.)
  EXPECT_GT(puts, 2500);
  EXPECT_GT(hits, 300);
  EXPECT_GT(evictions, 1000);
  EXPECT_GT(retired, 400);
  EXPECT_GT(reused, 1000);
}

class ResponseCacheDeathTest : public ::testing::Test {
 protected:
  ResponseCacheDeathTest() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  std::vector<uint32_t> evicted_;
};

TEST_F(ResponseCacheDeathTest, RequiresOneRequestPerRank) {
  ResponseCache cache(2, 4);
  EXPECT_DEATH(cache.Put("a", Same(1, "a"), Ok("a"), 1, &evicted_),
               "tensor 'a' has 1 requests for 2 ranks");
  EXPECT_DEATH(cache.Put("a", Same(3, "a"), Ok("a"), 1, &evicted_),
               "tensor 'a' has 3 requests for 2 ranks");
  // Errors too: the caller's bug either way.
  EXPECT_DEATH(cache.Put("a", {}, Err("a"), 1, &evicted_),
               "tensor 'a' has 0 requests for 2 ranks");
}

TEST_F(ResponseCacheDeathTest, RequiresMatchingNames) {
  ResponseCache cache(2, 4);
  std::vector<proto::Request> mixed = {Req("a"), Req("b")};
  EXPECT_DEATH(cache.Put("a", mixed, Ok("a"), 1, &evicted_),
               "rank 1's request for 'b'");
  proto::Response fused = Ok("a");
  fused.add_names("b");
  EXPECT_DEATH(cache.Put("a", Same(2, "a"), fused, 1, &evicted_),
               "covers 2 names");
  EXPECT_DEATH(cache.Put("a", Same(2, "a"), Ok("b"), 1, &evicted_),
               "the response for tensor 'a'");
}

TEST_F(ResponseCacheDeathTest, RequiresLiveBitsRanksAndUnretiredPlans) {
  ResponseCache cache(2, 1);
  EXPECT_EQ(cache.Put("a", Same(2, "a"), Ok("a"), 1, &evicted_), 0);
  EXPECT_DEATH(cache.Lookup(0, 2), "rank 2 of 2");
  EXPECT_DEATH(cache.Lookup(0, -1), "rank -1 of 2");
  EXPECT_DEATH(cache.Touch(1), "touch of bit 1");
  EXPECT_EQ(cache.Put("b", Same(2, "b"), Ok("b"), 2, &evicted_), 1);
  EXPECT_DEATH(cache.Touch(0), "touch of bit 0");  // a tombstone
  cache.Retire(2);
  EXPECT_DEATH(cache.Put("c", Same(2, "c"), Ok("c"), 2, &evicted_),
               "plan 2 cannot change the cache");
  EXPECT_DEATH(cache.SetCapacity(0, 1, &evicted_),
               "plan 1 cannot change the cache");
}

}  // namespace
}  // namespace kolo::coordinator
