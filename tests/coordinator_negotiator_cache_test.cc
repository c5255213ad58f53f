// Tests of the Negotiator (coordinator/negotiator.h), part two: fusion of
// compatible responses, the ranks' settings (fusion threshold, direct size,
// cache capacity), the response cache (bits, hits, invalidation, eviction,
// partial announcements by bit) and ready ticks. Times are fake:
// absl::Time values passed in. Part one: coordinator_negotiator_test.cc.
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/negotiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/types.h"
#include "tests/testing/negotiator_messages.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// Req, Ann, AnnReq, Names, Opts, kT0, At.
using namespace ::kolo::testing;  // NOLINT(build/namespaces)

// ---- Fusion, settings, response cache, ready ticks (issue 5) -------------

// The names of each response of `plan`, one list per response.
std::vector<std::vector<std::string>> Groups(const proto::Plan& plan) {
  std::vector<std::vector<std::string>> out;
  for (const proto::Response& r : plan.responses()) {
    out.emplace_back(r.names().begin(), r.names().end());
  }
  return out;
}

proto::Settings Set(uint64_t threshold, uint32_t capacity,
                    uint64_t direct = uint64_t{1} << 20,
                    bool timeline = false) {
  proto::Settings s;
  s.set_fusion_threshold(threshold);
  s.set_cache_capacity(capacity);
  s.set_fusion_direct_bytes(direct);
  s.set_timeline(timeline);
  return s;
}

proto::Request Typed(const std::string& name, DataType dtype,
                     std::vector<int64_t> shape = {4}) {
  proto::Request r = Req(name, std::move(shape));
  r.set_dtype(static_cast<int>(dtype));
  return r;
}

// Compatible responses of one plan fuse, with look-ahead past a mismatch.
TEST(NegotiatorTest, FusesCompatibleResponsesWithLookAhead) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(
        r,
        AnnReq({Req("a"), Typed("b", DataType::kInt32), Req("c"),
                Req("d", {2}, proto::BROADCAST), Typed("e", DataType::kInt32)}),
        kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  using V = std::vector<std::string>;
  EXPECT_THAT(Groups(out.plans[0]),
              ElementsAre(V{"a", "c"}, V{"b", "e"}, V{"d"}));
}

// The smallest threshold over the ranks counts; 16-byte tensors sit 64
// bytes apart, so a 64-byte threshold holds one and 80 holds two.
TEST(NegotiatorTest, FusionThresholdIsTheSmallestOverRanks) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Announce a0 = Ann({"a", "b", "c"}), a1 = Ann({"a", "b", "c"});
  *a0.mutable_settings() = Set(80, 0);
  *a1.mutable_settings() = Set(1 << 20, 0);
  n.Announce(0, a0, kT0, out);
  n.Announce(1, a1, kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  using V = std::vector<std::string>;
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"a", "b"}, V{"c"}));
  // Threshold 0 on one rank: no fusion at all.
  proto::Announce b0 = Ann({"x", "y"});
  *b0.mutable_settings() = Set(0, 0);
  n.Done(0, 1, kT0, out);
  n.Done(1, 1, kT0, out);
  n.Announce(0, b0, kT0, out);
  n.Announce(1, Ann({"x", "y"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Groups(out.plans[1]), ElementsAre(V{"x"}, V{"y"}));
}

// A tensor of at least the direct size runs alone (in place).
TEST(NegotiatorTest, TensorsOfTheDirectSizeNeverFuse) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = AnnReq({Req("small"), Req("big", {256}), Req("s2")});
    *a.mutable_settings() = Set(1 << 20, 0, /*direct=*/1024);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  using V = std::vector<std::string>;
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"small", "s2"}, V{"big"}));
}

// Fused allgathers carry every member's per-rank rows, name major.
TEST(NegotiatorTest, FusedAllgatherCarriesEveryMembersSizes) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0,
             AnnReq({Req("g1", {1, 3}, proto::ALLGATHER),
                     Req("g2", {2}, proto::ALLGATHER)}),
             kT0, out);
  n.Announce(1,
             AnnReq({Req("g1", {4, 3}, proto::ALLGATHER),
                     Req("g2", {5}, proto::ALLGATHER)}),
             kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_THAT(r.names(), ElementsAre("g1", "g2"));
  EXPECT_THAT(r.sizes(), ElementsAre(1, 4, 2, 5));
}

// A dispatched name gets a bit; announced by that bit on every rank, it is
// a hit (the cached response, the same bit); a rank's metadata change is
// checked again (here a mismatch: an error, and the bit is evicted).
TEST(NegotiatorTest, ResponseCacheHitThenInvalidation) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"t"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses(0).cache_bits_size(), 1);
  const int32_t bit = out.plans[0].responses(0).cache_bits(0);
  EXPECT_EQ(bit, 0);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);

  proto::Announce by_bit;
  by_bit.add_cached(static_cast<uint32_t>(bit));
  for (int r = 0; r < 2; ++r) n.Announce(r, by_bit, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  // A hit on every rank goes by bit: no names on the wire.
  EXPECT_TRUE(out.plans[1].responses(0).by_bit());
  EXPECT_THAT(Names(out.plans[1]), IsEmpty());
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(bit));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
  for (int r = 0; r < 2; ++r) n.Done(r, 2, kT0, out);

  // Rank 1 changes the shape; rank 0 still announces the bit.
  n.Announce(0, by_bit, kT0, out);
  n.Announce(1, AnnReq({Req("t", {8})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  const proto::Response& r = out.plans[2].responses(0);
  EXPECT_EQ(r.error_code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(r.error(), HasSubstr("shape [4] on rank 0 but [8] on rank 1"));
  EXPECT_THAT(r.cache_bits(), ElementsAre(-1));
  EXPECT_THAT(out.plans[2].cache_evicted(), ElementsAre(bit));
}

// A metadata change every rank agrees on keeps the name's bit.
TEST(NegotiatorTest, ResponseCacheAgreedChangeKeepsTheBit) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"t"}), kT0, out);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Req("t", {9})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(0));
}

// Capacity 0 (the smallest over the ranks): no bits at all.
TEST(NegotiatorTest, ResponseCacheCapacityZeroGivesNoBits) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Announce a0 = Ann({"t"}), a1 = Ann({"t"});
  *a0.mutable_settings() = Set(1 << 20, 0);
  *a1.mutable_settings() = Set(1 << 20, 1024);
  n.Announce(0, a0, kT0, out);
  n.Announce(1, a1, kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_EQ(out.plans[0].responses(0).cache_bits_size(), 0);
}

// Shrinking the capacity evicts the least recently used entries in the
// next plan.
TEST(NegotiatorTest, ResponseCacheShrinkEvictsInTheNextPlan) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"a", "b", "c"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"d"});
    *a.mutable_settings() = Set(1 << 20, 2);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 2u);
  // a, b, c held bits 0, 1, 2; capacity 2 keeps the two most recent after
  // d: c and d.
  EXPECT_THAT(out.plans[1].cache_evicted(),
              ::testing::UnorderedElementsAre(0u, 1u));
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(Not(-1)));
}

// A bit no tensor holds is ignored (and logged): nothing becomes ready.
TEST(NegotiatorTest, UnknownCacheBitIsIgnored) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Announce a;
  a.add_cached(7);
  n.Announce(0, a, kT0, out);
  n.Announce(1, a, kT0, out);
  EXPECT_TRUE(out.plans.empty());
  EXPECT_TRUE(n.Pending(kT0).empty());
}

// With a timeline asked for, responses carry each rank's ready tick.
TEST(NegotiatorTest, ReadyTicksWithATimeline) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  proto::Announce a = Ann({"t"});
  *a.mutable_settings() = Set(1 << 20, 0, 1 << 20, /*timeline=*/true);
  n.Announce(2, a, kT0, out);
  proto::Announce b = Ann({"t"});
  *b.mutable_settings() = Set(1 << 20, 0);
  n.Announce(0, b, At(absl::Microseconds(30)), out);
  n.Announce(1, b, At(absl::Microseconds(75)), out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(out.plans[0].responses(0).ready_us(), ElementsAre(30, 75, 0));
}

// A plan that gives a bit out and evicts it again (more new names than the
// capacity): that name holds no bit after the plan.
TEST(NegotiatorTest, BitGivenAndEvictedInOnePlanIsNotKept) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"b", "c"});
    *a.mutable_settings() = Set(1 << 20, 1);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);  // fused
  EXPECT_THAT(out.plans[0].responses(0).cache_bits(), ElementsAre(-1, 1));
  EXPECT_THAT(out.plans[0].cache_evicted(), ElementsAre(0u));
}

// A cache bit some ranks announced is a pending tensor like any other: it
// is listed by name and stall warnings name it.
TEST(NegotiatorTest, PartiallyAnnouncedBitsArePendingByName) {
  NegotiatorOptions o = Opts(2);
  o.stall_check = absl::Seconds(60);
  Negotiator n(o);
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"grad/w"}), kT0, out);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  proto::Announce by_bit;
  by_bit.add_cached(0);
  n.Announce(1, by_bit, kT0, out);
  const std::vector<proto::PendingTensor> pending =
      n.Pending(At(absl::Seconds(2)));
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].name(), "grad/w");
  EXPECT_THAT(pending[0].ranks(), ElementsAre(1));
  EXPECT_EQ(pending[0].seconds(), 2.0);
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(60)));
  n.Tick(At(absl::Seconds(61)), out);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_THAT(out.warnings[0],
              HasSubstr("'grad/w' waits for rank 0 (submitted by rank 1)"));
  n.Announce(0, by_bit, At(absl::Seconds(62)), out);  // resolves it
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_TRUE(out.plans[1].responses(0).by_bit());
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(),
              ElementsAre(by_bit.cached(0)));
  EXPECT_TRUE(n.Pending(At(absl::Seconds(63))).empty());
}

// A capacity change that evicts a bit some ranks announced: the tensor
// still completes (from the evicted entry's request), and holds no bit.
TEST(NegotiatorTest, EvictionOfAPartiallyAnnouncedBitKeepsIt) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"t"});
    *a.mutable_settings() = Set(1 << 20, 4);
    n.Announce(r, a, kT0, out);
  }
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  proto::Announce by_bit;
  by_bit.add_cached(0);
  n.Announce(0, by_bit, kT0, out);
  proto::Announce full = Ann({"t"});
  *full.mutable_settings() = Set(1 << 20, 0);  // evicts bit 0 first
  n.Announce(1, full, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("t"));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[1].cache_evicted(), ElementsAre(0u));
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(-1));
}

// Runs plan 1 for `names` announced in full on 2 ranks and retires it; the
// bit of each name.
std::map<std::string, uint32_t> CacheAll(Negotiator& n,
                                         const std::vector<std::string>& names,
                                         NegotiatorOutput& out) {
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann(names), kT0, out);
  std::map<std::string, uint32_t> bits;
  for (const proto::Response& r : out.plans.back().responses()) {
    for (int i = 0; i < r.names_size(); ++i) {
      bits[r.names(i)] = static_cast<uint32_t>(r.cache_bits(i));
    }
  }
  for (int r = 0; r < 2; ++r) n.Done(r, out.plans.back().seq(), kT0, out);
  return bits;
}

// The steady state: every tensor a hit on every rank. They fuse into one
// response that lists them by bit, in the order the names went before.
TEST(NegotiatorTest, FusedHitsGoByBitInOneResponse) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  std::map<std::string, uint32_t> bits = CacheAll(n, {"c", "a", "b"}, out);
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Response& first = out.plans[0].responses(0);
  ASSERT_EQ(first.names_size(), 3);
  EXPECT_FALSE(first.by_bit());
  proto::Announce hits;
  for (const char* name : {"c", "a", "b"}) hits.add_cached(bits.at(name));
  for (int r = 0; r < 2; ++r) n.Announce(r, hits, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ASSERT_EQ(out.plans[1].responses_size(), 1);
  const proto::Response& r = out.plans[1].responses(0);
  EXPECT_TRUE(r.by_bit());
  EXPECT_THAT(r.names(), IsEmpty());
  EXPECT_EQ(r.op(), proto::ALLREDUCE);
  EXPECT_EQ(r.error_code(), 0);
  std::vector<int32_t> want;
  for (const std::string& name : first.names()) {
    want.push_back(static_cast<int32_t>(bits.at(name)));
  }
  EXPECT_THAT(r.cache_bits(), ElementsAreArray(want));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
}

// A hit fused with a new name: the response names everything (the hit's
// name comes from the cache), not by bit.
TEST(NegotiatorTest, HitFusedWithANewNameGoesByName) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  std::map<std::string, uint32_t> bits = CacheAll(n, {"a"}, out);
  for (int r = 0; r < 2; ++r) {
    proto::Announce mixed = Ann({"new"});
    mixed.add_cached(bits.at("a"));
    n.Announce(r, mixed, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 2u);
  ASSERT_EQ(out.plans[1].responses_size(), 1);
  const proto::Response& r = out.plans[1].responses(0);
  EXPECT_FALSE(r.by_bit());
  EXPECT_THAT(r.names(), UnorderedElementsAre("a", "new"));
  ASSERT_EQ(r.cache_bits_size(), 2);
  for (int i = 0; i < 2; ++i) {
    if (r.names(i) == "a") {
      EXPECT_EQ(r.cache_bits(i), static_cast<int32_t>(bits.at("a")));
    } else {
      EXPECT_GE(r.cache_bits(i), 0);
      EXPECT_NE(r.cache_bits(i), static_cast<int32_t>(bits.at("a")));
    }
  }
}

// A hit completed by a joined rank goes by name: the joined rank may never
// have held the bit.
TEST(NegotiatorTest, HitWithAJoinedRankGoesByName) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  std::map<std::string, uint32_t> bits = CacheAll(n, {"t"}, out);
  proto::Request join = Req("join", {}, proto::JOIN);
  n.Announce(1, AnnReq({join}), kT0, out);
  proto::Announce hit;
  hit.add_cached(bits.at("t"));
  n.Announce(0, hit, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  const proto::Response& r = out.plans[1].responses(0);
  EXPECT_FALSE(r.by_bit());
  EXPECT_THAT(r.names(), ElementsAre("t"));
  EXPECT_THAT(r.joined(), ElementsAre(1));
}

// The fast path (negotiator_fast.cc): the hits the ranks ran among
// themselves come back in the exits (Done.fast_used), and the cache's LRU
// order follows them: a full cache then evicts the entry not used on the
// fast path, not the one that was.
TEST(NegotiatorTest, FastPathHitsKeepTheirEntriesRecentlyUsed) {
  NegotiatorOptions o = Opts(2);
  o.cache_capacity = 2;
  NegotiationStats stats;
  o.stats = &stats;
  Negotiator n(o);
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"a", "b"});
    a.mutable_settings()->set_fast_path(true);
    a.mutable_settings()->set_cache_capacity(2);
    a.mutable_settings()->set_fusion_threshold(0);
    a.mutable_settings()->set_fusion_direct_bytes(uint64_t{1} << 20);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Plan& first = out.plans[0];
  ASSERT_TRUE(first.has_fast_path());
  ASSERT_EQ(first.responses_size(), 2);
  const int32_t bit_a = first.responses(0).cache_bits(0);
  const int32_t bit_b = first.responses(1).cache_bits(0);
  ASSERT_GE(bit_a, 0);
  ASSERT_GE(bit_b, 0);
  EXPECT_TRUE(n.on_fast_path());
  // Fast plans 2 and 3 ran 'a' only; every rank says so when it leaves,
  // with the same tally, which the stats count once.
  const std::vector<uint32_t> used = {static_cast<uint32_t>(bit_a)};
  proto::FastPathTally tally;
  tally.set_plans(2);
  tally.set_collectives(2);
  tally.set_tensors(2);
  tally.set_bytes(8);
  const uint64_t hits_before = stats.cache_hits;
  n.FastExit(0, 3, used, tally, kT0, out);
  n.FastExit(1, 3, used, tally, kT0, out);
  EXPECT_FALSE(n.on_fast_path());
  EXPECT_EQ(stats.fast_path_plans, 2u);
  EXPECT_EQ(stats.cache_hits, hits_before + 2);
  EXPECT_EQ(stats.by_op[proto::ALLREDUCE].tensors, 2u + 2u);  // + plan 1
  EXPECT_EQ(stats.by_op[proto::ALLREDUCE].collectives, 2u + 2u);
  EXPECT_EQ(stats.fused_buffers, 0u);
  n.Announce(0, Ann({"c"}), kT0, out);
  n.Announce(1, Ann({"c"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_EQ(out.plans[1].seq(), 4u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("c"));
  EXPECT_THAT(out.plans[1].cache_evicted(),
              ElementsAre(static_cast<uint32_t>(bit_b)));
}

}  // namespace
}  // namespace kolo::coordinator
