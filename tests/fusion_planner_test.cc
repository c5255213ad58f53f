// Tests of the fusion planner (fusion/fusion_planner.h): exact groups and
// offsets for the rules one by one (compatibility, threshold edges, the
// look-ahead, alignment, zero-byte and oversized tensors, fusion off), then a
// property test over random candidate lists that checks the invariants of
// the header and the greedy rule (no compatible candidate left out that
// would have fit).
#include "fusion/fusion_planner.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/types.h"

namespace kolo::fusion {

// For readable failures (found by argument-dependent lookup, so outside the
// anonymous namespace).
void PrintTo(const Group& g, std::ostream* os) {
  *os << "{members [" << absl::StrJoin(g.members, ",") << "] offsets ["
      << absl::StrJoin(g.offsets, ",") << "] buffer_bytes " << g.buffer_bytes
      << "}";
}

namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

static_assert(AlignUp(0) == 0);
static_assert(AlignUp(1) == 64);
static_assert(AlignUp(64) == 64);
static_assert(AlignUp(65) == 128);

// A float32 sum allreduce on the host, scale 1.
Candidate Ar(size_t bytes, DataType dtype = DataType::kFloat32) {
  Candidate c;
  c.op = OpKind::kAllreduce;
  c.dtype = dtype;
  c.bytes = bytes;
  return c;
}

// A float32 allgather on the host.
Candidate Ag(size_t bytes, DataType dtype = DataType::kFloat32) {
  Candidate c = Ar(bytes, dtype);
  c.op = OpKind::kAllgather;
  return c;
}

Candidate Other(size_t bytes) {
  Candidate c = Ar(bytes);
  c.op = OpKind::kOther;
  return c;
}

Group G(std::vector<size_t> members, std::vector<size_t> offsets,
        size_t buffer_bytes) {
  return Group{std::move(members), std::move(offsets), buffer_bytes};
}

// Each candidate a group of its own.
std::vector<Group> Singletons(const std::vector<Candidate>& c) {
  std::vector<Group> groups;
  for (size_t i = 0; i < c.size(); ++i) {
    groups.push_back(G({i}, {0}, c[i].bytes));
  }
  return groups;
}

TEST(FusionPlannerTest, EmptyInputGivesNoGroups) {
  EXPECT_THAT(PlanFusion({}, 1024), IsEmpty());
  EXPECT_THAT(PlanFusion({}, 0), IsEmpty());
}

TEST(FusionPlannerTest, OneTensorIsOneGroup) {
  EXPECT_THAT(PlanFusion({Ar(10)}, 1024), ElementsAre(G({0}, {0}, 10)));
}

TEST(FusionPlannerTest, CompatibleTensorsThatFitShareOneAlignedBuffer) {
  EXPECT_THAT(PlanFusion({Ar(4), Ar(100), Ar(64)}, 1024),
              ElementsAre(G({0, 1, 2}, {0, 64, 192}, 256)));
}

TEST(FusionPlannerTest, ExactlyAtTheThresholdFits) {
  // 100 bytes, then 64 at offset 128: ends at 192.
  EXPECT_THAT(PlanFusion({Ar(100), Ar(64)}, 192),
              ElementsAre(G({0, 1}, {0, 128}, 192)));
}

TEST(FusionPlannerTest, OneByteOverTheThresholdGoesToTheNextGroup) {
  EXPECT_THAT(PlanFusion({Ar(100), Ar(64)}, 191),
              ElementsAre(G({0}, {0}, 100), G({1}, {0}, 64)));
  EXPECT_THAT(PlanFusion({Ar(100), Ar(65), Ar(10)}, 192),
              ElementsAre(G({0, 2}, {0, 128}, 138), G({1}, {0}, 65)));
}

TEST(FusionPlannerTest, PaddingCountsAgainstTheThreshold) {
  // 1 + 1 bytes would fit in 64, but the second member starts at 64.
  EXPECT_THAT(PlanFusion({Ar(1), Ar(1)}, 65),
              ElementsAre(G({0, 1}, {0, 64}, 65)));
  EXPECT_THAT(PlanFusion({Ar(1), Ar(1)}, 64),
              ElementsAre(G({0}, {0}, 1), G({1}, {0}, 1)));
}

TEST(FusionPlannerTest, TensorBiggerThanTheThresholdIsAlone) {
  EXPECT_THAT(PlanFusion({Ar(10), Ar(2000), Ar(20)}, 1024),
              ElementsAre(G({0, 2}, {0, 64}, 84), G({1}, {0}, 2000)));
  // As the first of the list, with a zero-byte tensor after it.
  EXPECT_THAT(PlanFusion({Ar(2000), Ar(0), Ar(10)}, 1024),
              ElementsAre(G({0}, {0}, 2000), G({1, 2}, {0, 0}, 10)));
}

TEST(FusionPlannerTest, LookAheadSkipsADifferentDtype) {
  // A f32, B i32, C f32 -> {A, C}, {B}.
  EXPECT_THAT(PlanFusion({Ar(40), Ar(40, DataType::kInt32), Ar(40)}, 1024),
              ElementsAre(G({0, 2}, {0, 64}, 104), G({1}, {0}, 40)));
}

TEST(FusionPlannerTest, LookAheadSkipsATensorThatDoesNotFit) {
  // 300 then 300 at 320 would pass 512; 100 at 320 does not; another 100
  // at 448 would pass it again, and goes with the second 300.
  EXPECT_THAT(PlanFusion({Ar(300), Ar(300), Ar(100), Ar(100)}, 512),
              ElementsAre(G({0, 2}, {0, 320}, 420), G({1, 3}, {0, 320}, 420)));
}

TEST(FusionPlannerTest, EachAllreduceFieldSplitsGroups) {
  struct Case {
    std::string what;
    std::function<void(Candidate&)> change;
  };
  const std::vector<Case> cases = {
      {"dtype", [](Candidate& c) { c.dtype = DataType::kFloat64; }},
      {"reduce op", [](Candidate& c) { c.reduce_op = ReduceOp::kMax; }},
      {"prescale", [](Candidate& c) { c.prescale = 0.5; }},
      {"postscale", [](Candidate& c) { c.postscale = 2.0; }},
      {"device", [](Candidate& c) { c.device = 0; }},
      {"op", [](Candidate& c) { c.op = OpKind::kAllgather; }},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.what);
    std::vector<Candidate> c = {Ar(8), Ar(8), Ar(8), Ar(8)};
    tc.change(c[1]);
    tc.change(c[3]);
    EXPECT_FALSE(Compatible(c[0], c[1]));
    EXPECT_THAT(PlanFusion(c, 1024),
                ElementsAre(G({0, 2}, {0, 64}, 72), G({1, 3}, {0, 64}, 72)));
  }
}

TEST(FusionPlannerTest, ScaleFactorsCompareBitwise) {
  std::vector<Candidate> c = {Ar(8), Ar(8)};
  c[0].prescale = 0.0;
  c[1].prescale = -0.0;
  EXPECT_THAT(PlanFusion(c, 1024), ElementsAre(G({0}, {0}, 8), G({1}, {0}, 8)));
  c[0].prescale = c[1].prescale = std::nan("");
  EXPECT_THAT(PlanFusion(c, 1024), ElementsAre(G({0, 1}, {0, 64}, 72)));
}

TEST(FusionPlannerTest, AllgatherFusesWithAllgatherOnly) {
  EXPECT_THAT(PlanFusion({Ag(8), Ar(8), Ag(8), Ar(8)}, 1024),
              ElementsAre(G({0, 2}, {0, 64}, 72), G({1, 3}, {0, 64}, 72)));
}

TEST(FusionPlannerTest, AllgatherIgnoresReduceOpAndScales) {
  std::vector<Candidate> c = {Ag(8), Ag(8), Ag(8)};
  c[1].reduce_op = ReduceOp::kProduct;
  c[1].prescale = 3.0;
  c[2].postscale = 0.25;
  EXPECT_THAT(PlanFusion(c, 1024),
              ElementsAre(G({0, 1, 2}, {0, 64, 128}, 136)));
}

TEST(FusionPlannerTest, AllgatherSplitsOnDtypeAndDevice) {
  std::vector<Candidate> c = {Ag(8), Ag(8, DataType::kInt64), Ag(8), Ag(8)};
  c[3].device = 1;
  EXPECT_THAT(PlanFusion(c, 1024), ElementsAre(G({0, 2}, {0, 64}, 72),
                                               G({1}, {0}, 8), G({3}, {0}, 8)));
}

TEST(FusionPlannerTest, OtherOpsNeverFuse) {
  EXPECT_FALSE(Compatible(Other(8), Other(8)));
  EXPECT_THAT(PlanFusion({Other(8), Other(8), Ar(8), Ar(8), Other(0)}, 1024),
              ElementsAre(G({0}, {0}, 8), G({1}, {0}, 8),
                          G({2, 3}, {0, 64}, 72), G({4}, {0}, 0)));
}

TEST(FusionPlannerTest, ThresholdZeroTurnsFusionOff) {
  const std::vector<Candidate> c = {Ar(0), Ar(0), Ar(8), Ag(8), Ag(8)};
  EXPECT_EQ(PlanFusion(c, 0), Singletons(c));
}

TEST(FusionPlannerTest, ZeroByteTensorsFitWhereTheirOffsetDoes) {
  // A zero-byte member after a zero-byte one shares its (empty) offset.
  EXPECT_THAT(PlanFusion({Ar(0), Ar(0), Ar(10), Ar(0)}, 1024),
              ElementsAre(G({0, 1, 2, 3}, {0, 0, 0, 64}, 64)));
  // At the threshold: offset 64 + 0 bytes fits in 64 ...
  EXPECT_THAT(PlanFusion({Ar(64), Ar(0)}, 64),
              ElementsAre(G({0, 1}, {0, 64}, 64)));
  // ... offset 128 does not fit in 100.
  EXPECT_THAT(PlanFusion({Ar(65), Ar(0)}, 100),
              ElementsAre(G({0}, {0}, 65), G({1}, {0}, 0)));
  // Below one alignment unit only zero-byte tensors after zero-byte ones fuse.
  EXPECT_THAT(PlanFusion({Ar(0), Ar(0), Ar(1), Ar(1)}, 32),
              ElementsAre(G({0, 1, 2}, {0, 0, 0}, 1), G({3}, {0}, 1)));
}

TEST(FusionPlannerTest, GroupsAreOrderedByTheirFirstMember) {
  const std::vector<Candidate> c = {Ar(8),
                                    Ag(8),
                                    Other(8),
                                    Ar(8, DataType::kInt32),
                                    Ar(8),
                                    Ag(8),
                                    Ar(8, DataType::kInt32)};
  EXPECT_THAT(PlanFusion(c, 1024),
              ElementsAre(G({0, 4}, {0, 64}, 72), G({1, 5}, {0, 64}, 72),
                          G({2}, {0}, 8), G({3, 6}, {0, 64}, 72)));
}

TEST(FusionPlannerTest, HugeSizesDoNotOverflow) {
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  EXPECT_THAT(PlanFusion({Ar(kMax), Ar(0)}, kMax),
              ElementsAre(G({0}, {0}, kMax), G({1}, {0}, 0)));
  EXPECT_THAT(PlanFusion({Ar(kMax), Ar(kMax)}, 1024),
              ElementsAre(G({0}, {0}, kMax), G({1}, {0}, kMax)));
  EXPECT_THAT(PlanFusion({Ar(10), Ar(kMax - 64)}, kMax),
              ElementsAre(G({0, 1}, {0, 64}, kMax)));
  EXPECT_THAT(PlanFusion({Ar(10), Ar(kMax - 63)}, kMax),
              ElementsAre(G({0}, {0}, 10), G({1}, {0}, kMax - 63)));
}

// ---- Property test ---------------------------------------------------------

Candidate RandomCandidate(std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  Candidate c;
  const size_t op = pick(10);
  c.op = op < 7 ? OpKind::kAllreduce
                : (op < 9 ? OpKind::kAllgather : OpKind::kOther);
  const DataType dtypes[] = {DataType::kFloat32, DataType::kFloat16,
                             DataType::kInt32};
  c.dtype = dtypes[pick(3)];
  c.reduce_op = pick(4) == 0 ? ReduceOp::kMax : ReduceOp::kSum;
  c.prescale = pick(4) == 0 ? 0.5 : 1.0;
  c.postscale = pick(4) == 0 ? 2.0 : 1.0;
  c.device = pick(4) == 0 ? 0 : -1;
  const size_t kind = pick(10);
  if (kind < 2) {
    c.bytes = 0;
  } else if (kind < 6) {
    c.bytes = 1 + pick(128);
  } else if (kind < 9) {
    c.bytes = 1 + pick(1000);
  } else {
    c.bytes = 1 + pick(5000);
  }
  return c;
}

// The compatibility rule of the header, written out independently of
// Compatible().
bool SpecCompatible(const Candidate& a, const Candidate& b) {
  const bool same_bits =
      std::memcmp(&a.prescale, &b.prescale, sizeof(double)) == 0 &&
      std::memcmp(&a.postscale, &b.postscale, sizeof(double)) == 0;
  if (a.op == OpKind::kAllreduce && b.op == OpKind::kAllreduce) {
    return a.dtype == b.dtype && a.device == b.device &&
           a.reduce_op == b.reduce_op && same_bits;
  }
  if (a.op == OpKind::kAllgather && b.op == OpKind::kAllgather) {
    return a.dtype == b.dtype && a.device == b.device;
  }
  return false;
}

// Checks the invariants of the header and the greedy rule; returns a
// description of the first violation, or "" when there is none.
std::string CheckPlan(const std::vector<Candidate>& c, size_t threshold,
                      const std::vector<Group>& groups) {
  if (threshold == 0) {
    return groups == Singletons(c) ? "" : "threshold 0 but not all singletons";
  }
  const size_t kNone = std::numeric_limits<size_t>::max();
  std::vector<size_t> group_of(c.size(), kNone);
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    const std::string where = "group " + std::to_string(g) + ": ";
    if (group.members.empty()) return where + "empty";
    if (group.members.size() != group.offsets.size()) {
      return where + "members and offsets differ in length";
    }
    if (g > 0 && groups[g - 1].members[0] >= group.members[0]) {
      return where + "not ordered by first member";
    }
    size_t end = 0;
    for (size_t k = 0; k < group.members.size(); ++k) {
      const size_t i = group.members[k];
      if (i >= c.size()) return where + "index out of range";
      if (group_of[i] != kNone) return where + "index in two groups";
      group_of[i] = g;
      if (k > 0 && group.members[k - 1] >= i) return where + "not ascending";
      if (k > 0 && !SpecCompatible(c[group.members[0]], c[i])) {
        return where + "incompatible member " + std::to_string(i);
      }
      if (group.offsets[k] % kAlignment != 0) return where + "unaligned";
      if (group.offsets[k] < end) return where + "overlap";
      // Tight packing: each member at the previous end, rounded up.
      const size_t expected = k == 0 ? 0 : AlignUp(end);
      if (group.offsets[k] != expected) return where + "not tightly packed";
      end = group.offsets[k] + c[i].bytes;
    }
    if (group.buffer_bytes != end) return where + "buffer_bytes is not the end";
    if (group.members.size() > 1 && end > threshold) {
      return where + "over the threshold";
    }
  }
  for (size_t i = 0; i < c.size(); ++i) {
    if (group_of[i] == kNone) return "index " + std::to_string(i) + " missing";
  }
  // Greedy: a candidate in a later group that is compatible with this group
  // would not have fit when the scan reached it.
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    const size_t first = group.members[0];
    for (size_t j = first + 1; j < c.size(); ++j) {
      if (group_of[j] <= g || !SpecCompatible(c[first], c[j])) continue;
      size_t end = 0;  // of the members before j
      for (size_t k = 0; k < group.members.size() && group.members[k] < j;
           ++k) {
        end = group.offsets[k] + c[group.members[k]].bytes;
      }
      if (AlignUp(end) + c[j].bytes <= threshold) {
        return "group " + std::to_string(g) + ": left out " +
               std::to_string(j) + ", which fits";
      }
    }
  }
  return "";
}

TEST(FusionPlannerTest, RandomListsKeepTheInvariants) {
  std::mt19937_64 rng(20240611);
  const size_t thresholds[] = {0, 1, 63, 64, 65, 128, 200, 1000, 4096, 65536};
  int fused_groups = 0;       // groups of more than one member
  int look_ahead_groups = 0;  // groups whose members are not contiguous
  for (int iteration = 0; iteration < 500; ++iteration) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 40)(rng);
    const size_t threshold =
        thresholds[std::uniform_int_distribution<size_t>(0, 9)(rng)];
    std::vector<Candidate> c;
    for (size_t i = 0; i < n; ++i) c.push_back(RandomCandidate(rng));
    for (size_t i = 0; i + 1 < n; ++i) {
      ASSERT_EQ(Compatible(c[i], c[i + 1]), SpecCompatible(c[i], c[i + 1]))
          << "iteration " << iteration << ", candidates " << i << ", " << i + 1;
    }
    const std::vector<Group> groups = PlanFusion(c, threshold);
    const std::string error = CheckPlan(c, threshold, groups);
    ASSERT_EQ(error, "") << "iteration " << iteration << ", " << n
                         << " candidates, threshold " << threshold;
    for (const Group& group : groups) {
      if (group.members.size() > 1) ++fused_groups;
      if (group.members.back() - group.members.front() + 1 !=
          group.members.size()) {
        ++look_ahead_groups;
      }
    }
  }
  // The lists exercised fusion and the look-ahead, not only singletons.
  EXPECT_GT(fused_groups, 100);
  EXPECT_GT(look_ahead_groups, 50);
}

}  // namespace
}  // namespace kolo::fusion
