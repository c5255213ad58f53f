// Tests of the Negotiator (coordinator/negotiator.h) for process sets:
// PROCESS_SET_ADD / PROCESS_SET_REMOVE, and readiness, checks, stalls,
// caching and fusion over a set's members. Join and grouped ops are in
// coordinator_negotiator_join_test.cc and _groups_test.cc (the same
// executable); the helpers in coordinator_negotiator_sets_helpers.h. Times
// are fake: absl::Time values passed in.
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

// ---- Process sets: add and remove ----------------------------------------

TEST(NegotiatorSetsTest, AddProcessSetGivesIdsFromOne) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  for (int r = 0; r < 3; ++r) n.Announce(r, AnnReq({AddSet({0, 2})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& first = out.plans[0].responses(0);
  EXPECT_EQ(first.error_code(), 0) << first.error();
  EXPECT_EQ(first.op(), proto::PROCESS_SET_ADD);
  EXPECT_THAT(first.names(), ElementsAre("process_set.add.0"));
  EXPECT_THAT(first.sizes(), ElementsAre(1));
  EXPECT_EQ(first.process_set(), 0);
  DoneAll(n, 3, out);
  const proto::Response second =
      Everyone(n, 3, AddSet({1, 2}, "process_set.add.1"), out);
  EXPECT_EQ(second.error_code(), 0) << second.error();
  EXPECT_EQ(second.op(), proto::PROCESS_SET_ADD);
  EXPECT_THAT(second.sizes(), ElementsAre(2));
}

TEST(NegotiatorSetsTest, AddProcessSetRanksDisagree) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({AddSet({0, 1})}), kT0, out);
  n.Announce(1, AnnReq({AddSet({0, 2})}), kT0, out);
  n.Announce(2, AnnReq({AddSet({0, 1})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  ExpectError(r, absl::StatusCode::kFailedPrecondition,
              "process set registration 'process_set.add.0': add_process_set "
              "ranks [0,1] on "
              "ranks 0,2 but [0,2] on rank 1");
  EXPECT_THAT(r.sizes(), IsEmpty());
  // Nothing was registered: the next add gets id 1.
  DoneAll(n, 3, out);
  EXPECT_EQ(Register(n, 3, {0, 1}, out), 1);
}

TEST(NegotiatorSetsTest, AddExistingSetOrAllRanksIsInvalid) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  ASSERT_EQ(Register(n, 3, {0, 2}, out), 1);
  ExpectError(Everyone(n, 3, AddSet({0, 2}), out),
              absl::StatusCode::kInvalidArgument,
              "add_process_set([0,2]): these ranks already form process set "
              "1; use it, or remove it first");
  const proto::Response all = Everyone(n, 3, AddSet({0, 1, 2}), out);
  EXPECT_EQ(all.error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(all.error(), HasSubstr("global process set"));
  EXPECT_THAT(all.sizes(), IsEmpty());
  // The failures gave no id away.
  EXPECT_EQ(Register(n, 3, {1, 2}, out), 2);
}

TEST(NegotiatorSetsTest, AddInvalidRanksIsInvalid) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  ExpectError(Everyone(n, 3, AddSet({2, 0}), out),
              absl::StatusCode::kInvalidArgument,
              "add_process_set([2,0]): a process set is distinct ranks in "
              "0..2, in ascending order");
  ExpectError(Everyone(n, 3, AddSet({0, 3}), out),
              absl::StatusCode::kInvalidArgument,
              "add_process_set([0,3]): a process set is distinct ranks in "
              "0..2, in ascending order");
  EXPECT_EQ(Everyone(n, 3, AddSet({-1, 1}), out).error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Everyone(n, 3, AddSet({1, 1}), out).error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Everyone(n, 3, AddSet({}), out).error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Register(n, 3, {0, 1}, out), 1);
}

// ---- Process sets: ops on a set --------------------------------------------

TEST(NegotiatorSetsTest, AllreduceOnSetReadyWhenItsMembersAnnounced) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  ASSERT_EQ(id, 1);
  const size_t before = out.plans.size();
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);  // rank 1 never
  ASSERT_EQ(out.plans.size(), before + 1);
  ASSERT_EQ(out.plans.back().responses_size(), 1);
  const proto::Response& r = out.plans.back().responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::ALLREDUCE);
  EXPECT_THAT(r.names(), ElementsAre("x"));
  EXPECT_EQ(r.process_set(), id);
  EXPECT_THAT(r.joined(), IsEmpty());
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// Rank order of the announcements does not matter; rank 2 first.
TEST(NegotiatorSetsTest, AllgatherOnSetHasOneSizePerMember) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  const size_t before = out.plans.size();
  n.Announce(2, AnnReq({OnSet(Req("g", {5, 3}, proto::ALLGATHER), id)}), kT0,
             out);
  n.Announce(0, AnnReq({OnSet(Req("g", {2, 3}, proto::ALLGATHER), id)}), kT0,
             out);
  ASSERT_EQ(out.plans.size(), before + 1);
  const proto::Response& r = out.plans.back().responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::ALLGATHER);
  EXPECT_EQ(r.process_set(), id);
  EXPECT_THAT(r.sizes(), ElementsAre(2, 5));  // ranks 0, 2
}

TEST(NegotiatorSetsTest, BroadcastRootMustBeAMember) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  proto::Request root1 = OnSet(Req("b", {4}, proto::BROADCAST), id);
  root1.set_root(1);
  n.Announce(0, AnnReq({root1}), kT0, out);
  n.Announce(2, AnnReq({root1}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectError(out.plans[1].responses(0), absl::StatusCode::kInvalidArgument,
              "tensor 'b': broadcast root 1 is not one of its ranks 0,2");
  DoneAll(n, 3, out);
  // Root 2 (a global rank, a member) is fine.
  proto::Request root2 = root1;
  root2.set_root(2);
  n.Announce(0, AnnReq({root2}), kT0, out);
  n.Announce(2, AnnReq({root2}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_EQ(out.plans[2].responses(0).error_code(), 0)
      << out.plans[2].responses(0).error();
  EXPECT_EQ(out.plans[2].responses(0).process_set(), id);
}

TEST(NegotiatorSetsTest, AlltoallOnSetHasOneSplitPerMember) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  proto::Request a0 = OnSet(Req("t", {3}, proto::ALLTOALL), id);
  a0.add_splits(1);
  a0.add_splits(2);
  proto::Request a2 = OnSet(Req("t", {4}, proto::ALLTOALL), id);
  a2.add_splits(4);
  a2.add_splits(0);
  n.Announce(0, AnnReq({a0}), kT0, out);
  n.Announce(2, AnnReq({a2}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  const proto::Response& ok = out.plans[1].responses(0);
  EXPECT_EQ(ok.error_code(), 0) << ok.error();
  EXPECT_EQ(ok.op(), proto::ALLTOALL);
  EXPECT_THAT(ok.sizes(), ElementsAre(1, 2, 4, 0));
  DoneAll(n, 3, out);
  // Three entries (one per global rank) on a set of two: refused.
  proto::Request three = OnSet(Req("u", {3}, proto::ALLTOALL), id);
  for (int64_t s : {1, 1, 1}) three.add_splits(s);
  n.Announce(0, AnnReq({three}), kT0, out);
  n.Announce(2, AnnReq({three}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  ExpectError(out.plans[2].responses(0), absl::StatusCode::kInvalidArgument,
              "tensor 'u': alltoall splits [1,1,1] on rank 0 are not 2 "
              "non-negative entries summing to the first dimension of shape "
              "[3]");
}

TEST(NegotiatorSetsTest, MismatchOnSetNamesGlobalRanks) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(0, AnnReq({OnSet(Req("x", {4}), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x", {5}), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectError(out.plans[1].responses(0), absl::StatusCode::kFailedPrecondition,
              "tensor 'x': allreduce shape [4] on rank 0 but [5] on rank 2");
}

TEST(NegotiatorSetsTest, AnnouncementFromNonMemberIsIgnored) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  const size_t before = out.plans.size();
  // Rank 1 is no member: ignored (a different shape would be an error).
  n.Announce(1, AnnReq({OnSet(Req("x", {9}), id)}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  EXPECT_EQ(out.plans.back().responses(0).error_code(), 0)
      << out.plans.back().responses(0).error();
  EXPECT_THAT(Names(out.plans.back()), ElementsAre("x"));
}

TEST(NegotiatorSetsTest, AnnouncementForUnknownSetIsIgnored) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({OnSet(Req("x"), 7)}), kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
  n.Tick(At(absl::Hours(1)), out);
  EXPECT_THAT(out.warnings, IsEmpty());
  // The negotiator still works.
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"y"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("y"));
}

// A stall on a set waits only for the set's members.
TEST(NegotiatorSetsTest, StallWarningOnSetNamesOnlyMembers) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Tick(At(absl::Seconds(61)), out);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_THAT(out.warnings[0],
              HasSubstr("'x' waits for rank 2 (submitted by rank 0)"));
}

TEST(NegotiatorSetsTest, OpsOnSetsAreNotCached) {
  Negotiator n(Opts(3));  // the cache is on (capacity 1024)
  NegotiatorOutput out;
  const proto::Response add = Everyone(n, 3, AddSet({0, 2}), out);
  EXPECT_THAT(add.cache_bits(), ElementsAre(-1));
  const int32_t id = 1;
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(-1));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
  DoneAll(n, 3, out);
  // A global op still gets a bit.
  const proto::Response global = Everyone(n, 3, Req("y"), out);
  ASSERT_EQ(global.cache_bits_size(), 1);
  EXPECT_GE(global.cache_bits(0), 0);
  // The remove is not cached either.
  const proto::Response remove = Everyone(n, 3, RemoveSet(id), out);
  EXPECT_EQ(remove.error_code(), 0) << remove.error();
  EXPECT_THAT(remove.cache_bits(), ElementsAre(-1));
}

// Compatible allreduces of different sets (and of set 0) stay apart; of
// one set they fuse, and the fused response is on that set.
TEST(NegotiatorSetsTest, FusionOnlyWithinOneSet) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t s01 = Register(n, 3, {0, 1}, out);
  const int32_t s02 = Register(n, 3, {0, 2}, out);
  ASSERT_EQ(s01, 1);
  ASSERT_EQ(s02, 2);
  const size_t before = out.plans.size();
  n.Announce(1, AnnReq({OnSet(Req("a"), s01), Req("c")}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("b"), s02), Req("c")}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  n.Announce(0, AnnReq({OnSet(Req("a"), s01), OnSet(Req("b"), s02), Req("c")}),
             kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  const proto::Plan& p = out.plans.back();
  EXPECT_THAT(Groups(p), ElementsAre(V{"a"}, V{"b"}, V{"c"}));
  ASSERT_EQ(p.responses_size(), 3);
  EXPECT_EQ(p.responses(0).process_set(), s01);
  EXPECT_EQ(p.responses(1).process_set(), s02);
  EXPECT_EQ(p.responses(2).process_set(), 0);
  DoneAll(n, 3, out);

  n.Announce(1, AnnReq({OnSet(Req("d"), s01), OnSet(Req("e"), s01)}), kT0, out);
  n.Announce(0, AnnReq({OnSet(Req("d"), s01), OnSet(Req("e"), s01)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 2);
  const proto::Plan& q = out.plans.back();
  EXPECT_THAT(Groups(q), ElementsAre(V{"d", "e"}));
  ASSERT_EQ(q.responses_size(), 1);
  EXPECT_EQ(q.responses(0).process_set(), s01);
  EXPECT_EQ(q.responses(0).error_code(), 0);
  EXPECT_THAT(q.responses(0).cache_bits(), ElementsAre(-1, -1));
}

TEST(NegotiatorSetsTest, RemoveProcessSet) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  ASSERT_EQ(id, 1);
  const proto::Response r = Everyone(n, 3, RemoveSet(id), out);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::PROCESS_SET_REMOVE);
  EXPECT_THAT(r.names(), ElementsAre("process_set.remove.0"));
  EXPECT_THAT(r.sizes(), ElementsAre(id));
  // The id is unknown now: announcements on it are ignored.
  const size_t before = out.plans.size();
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  // Removing it again fails.
  ExpectError(Everyone(n, 3, RemoveSet(id), out),
              absl::StatusCode::kInvalidArgument,
              "remove_process_set(1): there is no process set 1 (never added, "
              "or removed already)");
  // The same ranks again get a new id: ids are not reused.
  EXPECT_EQ(Register(n, 3, {0, 2}, out), 2);
}

TEST(NegotiatorSetsTest, RemoveUnknownOrGlobalSetIsInvalid) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  ExpectError(Everyone(n, 2, RemoveSet(3), out),
              absl::StatusCode::kInvalidArgument,
              "remove_process_set(3): there is no process set 3 (never added, "
              "or removed already)");
  ExpectError(Everyone(n, 2, RemoveSet(0), out),
              absl::StatusCode::kInvalidArgument,
              "remove_process_set(0): the global process set cannot be "
              "removed");
}

TEST(NegotiatorSetsTest, RemoveProcessSetRanksDisagree) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  ASSERT_EQ(Register(n, 3, {0, 1}, out), 1);
  ASSERT_EQ(Register(n, 3, {0, 2}, out), 2);
  const size_t before = out.plans.size();
  n.Announce(0, AnnReq({RemoveSet(1)}), kT0, out);
  n.Announce(1, AnnReq({RemoveSet(2)}), kT0, out);
  n.Announce(2, AnnReq({RemoveSet(1)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  ExpectError(out.plans.back().responses(0),
              absl::StatusCode::kFailedPrecondition,
              "process set registration 'process_set.remove.0': "
              "remove_process_set process set "
              "1 on ranks 0,2 but 2 on rank 1");
  DoneAll(n, 3, out);
  // Both sets still exist.
  EXPECT_EQ(Everyone(n, 3, RemoveSet(1), out).error_code(), 0);
  EXPECT_EQ(Everyone(n, 3, RemoveSet(2), out).error_code(), 0);
}

TEST(NegotiatorSetsTest, RemoveWithPendingOpsFails) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(0, AnnReq({OnSet(Req("grad/x"), id)}), kT0, out);
  ExpectError(Everyone(n, 3, RemoveSet(id), out),
              absl::StatusCode::kFailedPrecondition,
              "remove_process_set(1): ops on it are still pending ('grad/x'); "
              "wait for them on every member first");
  // The set still exists: the pending op completes, then the remove works.
  const size_t before = out.plans.size();
  n.Announce(2, AnnReq({OnSet(Req("grad/x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  EXPECT_EQ(out.plans.back().responses(0).error_code(), 0);
  EXPECT_EQ(out.plans.back().responses(0).process_set(), id);
  DoneAll(n, 3, out);
  const proto::Response r = Everyone(n, 3, RemoveSet(id), out);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.sizes(), ElementsAre(id));
}

// An op of the set held behind the remove in the same plan is pending too.
TEST(NegotiatorSetsTest, RemoveWithAnOpOfTheSetInTheSamePlanFails) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(1, AnnReq({RemoveSet(id)}), kT0, out);
  n.Announce(2, AnnReq({RemoveSet(id)}), kT0, out);
  const size_t before = out.plans.size();
  // Rank 0: the remove first, then x: both ready in one call, x behind.
  n.Announce(0, AnnReq({RemoveSet(id), OnSet(Req("x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  const proto::Plan& p = out.plans.back();
  ASSERT_EQ(p.responses_size(), 2);
  EXPECT_EQ(p.responses(0).op(), proto::PROCESS_SET_REMOVE);
  ExpectError(p.responses(0), absl::StatusCode::kFailedPrecondition,
              "remove_process_set(1): ops on it are still pending ('x'); wait "
              "for them on every member first");
  EXPECT_THAT(p.responses(1).names(), ElementsAre("x"));
  EXPECT_EQ(p.responses(1).error_code(), 0);
}

}  // namespace
}  // namespace kolo::coordinator::sets_test
