// Tests of the Negotiator (coordinator/negotiator.h) for JOIN: joined
// ranks in allreduces (Response.joined), the ops that fail while a rank has
// joined, the JOIN response, fusion of joined allreduces. Times are fake:
// absl::Time values passed in. Helpers: coordinator_negotiator_sets_helpers.h.
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

// ---- Join ------------------------------------------------------------------

TEST(NegotiatorSetsTest, JoinAllreduceDispatchesWithJoinedRanks) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  proto::Request a = Req("a", {3});
  a.set_postscale(0.5);
  n.Announce(0, AnnReq({a}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::ALLREDUCE);
  EXPECT_THAT(r.names(), ElementsAre("a"));
  EXPECT_THAT(r.joined(), ElementsAre(1));
  EXPECT_EQ(r.dtype(), static_cast<int>(DataType::kFloat32));
  EXPECT_EQ(r.reduce_op(), static_cast<int>(ReduceOp::kSum));
  EXPECT_EQ(r.postscale(), 0.5);
  EXPECT_THAT(r.counts(), ElementsAre(3));
  EXPECT_EQ(r.process_set(), 0);
  DoneAll(n, 2, out);

  // A barrier completes as usual.
  n.Announce(0, AnnReq({Barrier("bar")}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  const proto::Response& b = out.plans[1].responses(0);
  EXPECT_EQ(b.error_code(), 0) << b.error();
  EXPECT_EQ(b.op(), proto::BARRIER);
  EXPECT_THAT(b.joined(), IsEmpty());
  DoneAll(n, 2, out);

  // Then rank 0 joins: the JOIN response names it, the last to join.
  n.Announce(0, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  ASSERT_EQ(out.plans[2].responses_size(), 1);
  const proto::Response& j = out.plans[2].responses(0);
  EXPECT_EQ(j.error_code(), 0) << j.error();
  EXPECT_EQ(j.op(), proto::JOIN);
  EXPECT_THAT(j.names(), ElementsAre("join"));
  EXPECT_THAT(j.sizes(), ElementsAre(0));
  DoneAll(n, 2, out);

  // The join state reset: an allreduce needs both ranks again.
  n.Announce(0, Ann({"c"}), kT0, out);
  EXPECT_EQ(out.plans.size(), 3u);
  n.Announce(1, Ann({"c"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 4u);
  EXPECT_THAT(Names(out.plans[3]), ElementsAre("c"));
  EXPECT_THAT(out.plans[3].responses(0).joined(), IsEmpty());
  EXPECT_THAT(out.plans[3].responses(0).counts(), IsEmpty());
  DoneAll(n, 2, out);

  // And a second round of join works the same (rank 0 joins first now).
  n.Announce(0, AnnReq({JoinReq()}), kT0, out);
  n.Announce(1, Ann({"d"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 5u);
  EXPECT_THAT(out.plans[4].responses(0).joined(), ElementsAre(0));
  DoneAll(n, 2, out);
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 6u);
  EXPECT_EQ(out.plans[5].responses(0).op(), proto::JOIN);
  EXPECT_THAT(out.plans[5].responses(0).sizes(), ElementsAre(1));
}

// Rank 1 joined; rank 0 submits `request`: it fails (on every rank) naming
// the join.
void ExpectFailsWhileJoined(const proto::Request& request) {
  SCOPED_TRACE(request.DebugString());
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  n.Announce(0, AnnReq({request}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_THAT(r.names(), ElementsAre(request.name()));
  EXPECT_EQ(r.error_code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(r.error(), HasSubstr("joined"));
  EXPECT_THAT(r.error(), HasSubstr("rank 1"));
  EXPECT_THAT(r.joined(), IsEmpty());
  EXPECT_THAT(r.sizes(), IsEmpty());
}

TEST(NegotiatorSetsTest, JoinAllgatherFails) {
  ExpectFailsWhileJoined(Req("g", {2, 3}, proto::ALLGATHER));
}

TEST(NegotiatorSetsTest, JoinBroadcastFails) {
  ExpectFailsWhileJoined(Req("b", {4}, proto::BROADCAST));  // root 0
}

// Root on the joined rank: a valid root of a 2-rank world.
TEST(NegotiatorSetsTest, JoinBroadcastFromTheJoinedRankFails) {
  proto::Request r = Req("b", {4}, proto::BROADCAST);
  r.set_root(1);
  ExpectFailsWhileJoined(r);
}

// Splits with one entry per rank of the world (what a correct worker sends).
TEST(NegotiatorSetsTest, JoinAlltoallFails) {
  proto::Request r = Req("t", {3}, proto::ALLTOALL);
  r.add_splits(1);
  r.add_splits(2);
  ExpectFailsWhileJoined(r);
}

TEST(NegotiatorSetsTest, JoinReducescatterFails) {
  ExpectFailsWhileJoined(Req("rs", {4}, proto::REDUCESCATTER));
}

TEST(NegotiatorSetsTest, JoinReducescatterWithSplitsFails) {
  proto::Request r = Req("rs", {4}, proto::REDUCESCATTER);
  r.add_splits(2);
  r.add_splits(2);
  ExpectFailsWhileJoined(r);
}

TEST(NegotiatorSetsTest, JoinThenTheSameOpWorksAfterTheJoinRound) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  n.Announce(0, AnnReq({Req("g", {2, 3}, proto::ALLGATHER)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_NE(out.plans[0].responses(0).error_code(), 0);
  DoneAll(n, 2, out);
  n.Announce(0, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  DoneAll(n, 2, out);
  n.Announce(0, AnnReq({Req("g", {2, 3}, proto::ALLGATHER)}), kT0, out);
  n.Announce(1, AnnReq({Req("g", {1, 3}, proto::ALLGATHER)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_EQ(out.plans[2].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[2].responses(0).sizes(), ElementsAre(2, 1));
}

// A name the joining rank announced before it joined runs as usual.
TEST(NegotiatorSetsTest, NameAnnouncedBeforeJoiningCompletesNormally) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, Ann({"a"}), kT0, out);
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(0, Ann({"a"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.names(), ElementsAre("a"));
  EXPECT_THAT(r.joined(), IsEmpty());
  EXPECT_THAT(r.counts(), IsEmpty());
}

// Partials waiting only on the joining rank become ready as it joins.
TEST(NegotiatorSetsTest, PartialsBecomeReadyWhenTheMissingRankJoins) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Req("a", {3})}), kT0, out);
  n.Announce(1, AnnReq({Req("a", {3})}), kT0, out);
  n.Announce(0, Ann({"b"}), kT0, out);  // waits for ranks 1, 2
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(2, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.names(), ElementsAre("a"));
  EXPECT_THAT(r.joined(), ElementsAre(2));
  EXPECT_THAT(r.counts(), ElementsAre(3));
  ASSERT_EQ(n.Pending(kT0).size(), 1u);
  EXPECT_EQ(n.Pending(kT0)[0].name(), "b");
}

TEST(NegotiatorSetsTest, JoinedAllreducesFuseWithCountsForEach) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(2, AnnReq({JoinReq()}), kT0, out);
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Req("a", {3}), Req("b", {5})}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.names(), ElementsAre("a", "b"));
  EXPECT_THAT(r.counts(), ElementsAre(3, 5));
  EXPECT_THAT(r.joined(), ElementsAre(2));
  EXPECT_EQ(r.dtype(), static_cast<int>(DataType::kFloat32));
}

// An allreduce with joined ranks does not fuse with one every rank
// submitted (the joined ranks take part in only one of them).
TEST(NegotiatorSetsTest, JoinedAllreduceDoesNotFuseWithAFullOne) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, Ann({"full"}), kT0, out);
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  n.Announce(0, Ann({"full", "part"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"full"}, V{"part"}));
  EXPECT_THAT(out.plans[0].responses(0).joined(), IsEmpty());
  EXPECT_THAT(out.plans[0].responses(1).joined(), ElementsAre(1));
}

}  // namespace
}  // namespace kolo::coordinator::sets_test
