// Tests of the Negotiator (coordinator/negotiator.h) for grouped ops:
// members waiting for each other, fusion domains, size and count
// mismatches, a name reused after an error, groups announced by cache
// bits, groups on a process set. Times are fake: absl::Time values passed
// in. Helpers: coordinator_negotiator_sets_helpers.h.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/negotiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/types.h"
#include "tests/coordinator_negotiator_sets_helpers.h"
#include "tests/testing/negotiator_messages.h"

namespace kolo::coordinator::sets_test {
namespace {

// The gmock matchers and ::kolo::testing's builders (Req, Ann, AnnReq,
// OnSet, Control, Names, Opts, kT0, At) come with the helpers' header.

// ---- Groups ----------------------------------------------------------------

TEST(NegotiatorSetsTest, GroupMembersWaitForEachOther) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  // Other ops go on meanwhile.
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"u"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("u"));
  DoneAll(n, 2, out);
  n.Tick(At(absl::Seconds(1)), out);
  EXPECT_EQ(out.plans.size(), 1u);
  n.Announce(0, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  EXPECT_EQ(out.plans.size(), 1u);
  n.Announce(1, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Groups(out.plans[1]), ElementsAre(V{"g.0", "g.1"}));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
}

// Without fusion the members still go out in one plan.
TEST(NegotiatorSetsTest, GroupMembersGoInOnePlanWithoutFusion) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a =
        AnnReq({Grouped(Req("g.0"), "g", 3),
                Grouped(Req("g.1", {2}, proto::BROADCAST), "g", 3)});
    *a.mutable_settings() = Set(0, 0);
    n.Announce(r, a, kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.2"), "g", 3)}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"g.0"}, V{"g.1"}, V{"g.2"}));
}

// Under disable_group_fusion (one rank enough) members fuse with each other
// only; without it they fuse with other compatible allreduces too.
TEST(NegotiatorSetsTest, DisableGroupFusionKeepsGroupsApart) {
  for (const bool disable : {true, false}) {
    SCOPED_TRACE(disable ? "disable_group_fusion" : "group fusion on");
    Negotiator n(Opts(2));
    NegotiatorOutput out;
    for (int r = 0; r < 2; ++r) {
      proto::Announce a = AnnReq(
          {Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2), Req("u")});
      *a.mutable_settings() = Set(1 << 20, 1024, disable && r == 1);
      n.Announce(r, a, kT0, out);
    }
    ASSERT_EQ(out.plans.size(), 1u);
    if (disable) {
      EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"g.0", "g.1"}, V{"u"}));
    } else {
      EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"g.0", "g.1", "u"}));
    }
  }
}

// Two groups under disable_group_fusion do not fuse with each other.
TEST(NegotiatorSetsTest, DisableGroupFusionKeepsTwoGroupsApart) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a =
        AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("h.0"), "h", 2),
                Grouped(Req("g.1"), "g", 2), Grouped(Req("h.1"), "h", 2)});
    *a.mutable_settings() = Set(1 << 20, 1024, r == 0);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Groups(out.plans[0]),
              ElementsAre(V{"g.0", "g.1"}, V{"h.0", "h.1"}));
}

// A group size the ranks disagree on: an error on every rank, and the
// group's members that were waiting are released (not stuck).
TEST(NegotiatorSetsTest, GroupSizeMismatchReleasesTheGroup) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(0, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.1"), "g", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Plan& p = out.plans[0];
  EXPECT_THAT(Names(p), ElementsAre("g.0", "g.1"));
  ASSERT_EQ(p.responses_size(), 2);
  EXPECT_EQ(p.responses(0).error_code(), 0);
  ExpectError(p.responses(1), absl::StatusCode::kFailedPrecondition,
              "tensor 'g.1': allreduce group size 2 on rank 0 but 3 on rank "
              "1");
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// A group size mismatch on its first member: released at once.
TEST(NegotiatorSetsTest, GroupSizeMismatchOnFirstMemberIsNotStuck) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.0"), "g", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ExpectError(out.plans[0].responses(0), absl::StatusCode::kFailedPrecondition,
              "tensor 'g.0': allreduce group size 2 on rank 0 but 3 on rank "
              "1");
  DoneAll(n, 2, out);
  n.Announce(0, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.1"), "g", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("g.1"));
  EXPECT_NE(out.plans[1].responses(0).error_code(), 0);
}

// Ranks whose groups have different member counts: every member on every
// rank ends with the error — also the members only some ranks announced
// (issue 16: those stayed pending forever), whichever rank has fewer.
TEST(NegotiatorSetsTest, GroupMemberCountMismatchFailsEveryMember) {
  for (const int smaller : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("the smaller group on rank ", smaller));
    Negotiator n(Opts(3));
    NegotiatorOutput out;
    for (int r = 0; r < 3; ++r) {
      if (r == smaller) {
        n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 1)}), kT0, out);
      } else {
        n.Announce(
            r,
            AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2)}),
            kT0, out);
      }
    }
    n.Tick(kT0 + absl::Seconds(1), out);
    ASSERT_EQ(out.plans.size(), 1u);
    const proto::Plan& p = out.plans[0];
    EXPECT_THAT(Names(p), UnorderedElementsAre("g.0", "g.1"));
    for (const proto::Response& r : p.responses()) {
      EXPECT_EQ(r.error_code(),
                static_cast<int>(absl::StatusCode::kFailedPrecondition))
          << r.names(0);
      EXPECT_THAT(r.error(), HasSubstr("group size")) << r.names(0);
    }
    const std::string others = smaller == 0 ? "1,2" : "0,1";
    for (const proto::Response& r : p.responses()) {
      if (r.names(0) != "g.1") continue;
      EXPECT_THAT(r.error(), HasSubstr(absl::StrCat(
                                 "tensor 'g.1' of group 'g' (announced by "
                                 "ranks ",
                                 others, ", never by ranks ", smaller, ")")));
    }
    EXPECT_THAT(n.Pending(kT0), IsEmpty());
    // The next use of the group, agreed by every rank, works.
    DoneAll(n, 3, out);
    for (int r = 0; r < 3; ++r) {
      n.Announce(
          r, AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2)}),
          kT0, out);
    }
    n.Tick(kT0 + absl::Seconds(2), out);
    ASSERT_EQ(out.plans.size(), 2u);
    for (const proto::Response& r : out.plans[1].responses()) {
      EXPECT_EQ(r.error_code(), 0) << r.error();
    }
    EXPECT_THAT(n.Pending(kT0), IsEmpty());
  }
}

// Group names are the caller's, repeated every step: once an error broke
// one instance of group "g", the next instance waits for its members again.
TEST(NegotiatorSetsTest, GroupNameReusedAfterAnErrorWaitsAgain) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  // Step 1: member g.1 fails (shape mismatch); both members go out.
  for (int r = 0; r < 2; ++r) {
    n.Announce(r,
               AnnReq({Grouped(Req("g.0"), "g", 2),
                       Grouped(Req("g.1", {r == 0 ? 4 : 5}), "g", 2)}),
               kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("g.0", "g.1"));
  DoneAll(n, 2, out);
  // Step 2: all agree; g.0 must wait for g.1.
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  }
  EXPECT_EQ(out.plans.size(), 1u) << "g.0 went out without g.1";
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  }
  ASSERT_GE(out.plans.size(), 2u);
  EXPECT_THAT(Groups(out.plans.back()), ElementsAre(V{"g.0", "g.1"}));
}

// Cache on: the second step's members, announced by their bits, still go
// out together.
TEST(NegotiatorSetsTest, GroupAnnouncedByCacheBitsStaysTogether) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(
        r, AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2)}),
        kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& first = out.plans[0].responses(0);
  EXPECT_THAT(first.names(), ElementsAre("g.0", "g.1"));
  ASSERT_EQ(first.cache_bits_size(), 2);
  const int32_t b0 = first.cache_bits(0), b1 = first.cache_bits(1);
  ASSERT_GE(b0, 0);
  ASSERT_GE(b1, 0);
  DoneAll(n, 2, out);

  // Step 2: g.0 by its bit on both ranks; it waits for g.1.
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, Bits({static_cast<uint32_t>(b0)}), kT0, out);
  }
  EXPECT_EQ(out.plans.size(), 1u);
  n.Tick(At(absl::Seconds(1)), out);
  EXPECT_EQ(out.plans.size(), 1u);
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, Bits({static_cast<uint32_t>(b1)}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 2u);
  ASSERT_EQ(out.plans[1].responses_size(), 1);
  const proto::Response& second = out.plans[1].responses(0);
  EXPECT_EQ(second.error_code(), 0) << second.error();
  EXPECT_THAT(second.names(), ElementsAre("g.0", "g.1"));
  EXPECT_THAT(second.cache_bits(), ElementsAre(b0, b1));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
  DoneAll(n, 2, out);

  // Step 3: the same, with the ranks mixing bits and full requests.
  n.Announce(0, Bits({static_cast<uint32_t>(b0)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  EXPECT_EQ(out.plans.size(), 2u);
  n.Announce(1, Bits({static_cast<uint32_t>(b1)}), kT0, out);
  n.Announce(0, Bits({static_cast<uint32_t>(b1)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_THAT(Groups(out.plans[2]), ElementsAre(V{"g.0", "g.1"}));
}

// A group on a process set waits for the set's members only.
TEST(NegotiatorSetsTest, GroupOnAProcessSet) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {1, 2}, out);
  const size_t before = out.plans.size();
  for (int r : {1, 2}) {
    n.Announce(r, AnnReq({OnSet(Grouped(Req("g.0"), "g", 2), id)}), kT0, out);
  }
  EXPECT_EQ(out.plans.size(), before);
  for (int r : {1, 2}) {
    n.Announce(r, AnnReq({OnSet(Grouped(Req("g.1"), "g", 2), id)}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), before + 1);
  EXPECT_THAT(Groups(out.plans.back()), ElementsAre(V{"g.0", "g.1"}));
  EXPECT_EQ(out.plans.back().responses(0).process_set(), id);
}

// A group still waiting on a set keeps the set from being removed.
TEST(NegotiatorSetsTest, RemoveWithAWaitingGroupMemberFails) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {1, 2}, out);
  for (int r : {1, 2}) {
    n.Announce(r, AnnReq({OnSet(Grouped(Req("g.0"), "g", 2), id)}), kT0, out);
  }
  ExpectError(Everyone(n, 3, RemoveSet(id), out),
              absl::StatusCode::kFailedPrecondition,
              "remove_process_set(1): ops on it are still pending ('g.0'); "
              "wait for them on every member first");
}

}  // namespace
}  // namespace kolo::coordinator::sets_test
