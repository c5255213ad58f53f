// Tests of CoordinatorCore's elastic epoch transitions (coordinator/core.h,
// "Elastic jobs"), driven directly with events and a fake clock: a lost
// member ends its epoch, the survivors acknowledge and form the next one in
// their old order; eviction of a silent member; stale messages dropped; a
// second loss during recovery; the acknowledgement deadline; too few
// workers; the reset limit.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/core_harness.h"
#include "tests/testing/elastic_harness.h"

namespace kolo::coordinator {
namespace {

using core_harness::CloseOf;
using core_harness::CoreTest;
using core_harness::ElasticTest;
using core_harness::To;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(ElasticTest, KilledMemberEndsTheEpochAndSurvivorsFormTheNext) {
  FormElastic(4);
  // w2 (rank 2, session 3) crashes: its stream breaks.
  Actions a = core_->OnClosed(3, "the stream broke");
  EXPECT_FALSE(core_->ended());
  for (SessionId id : {1, 2, 4}) {
    proto::EpochAborted ab = AbortedTo(a, id);
    EXPECT_EQ(ab.epoch(), 1u);
    ASSERT_EQ(ab.lost_size(), 1);
    EXPECT_EQ(ab.lost(0).worker_id(), "w2");
    EXPECT_EQ(ab.lost(0).rank(), 2);
    EXPECT_EQ(ab.lost(0).host_name(), "h2");
    EXPECT_THAT(ab.lost(0).cause(), HasSubstr("disconnected without leaving"));
    EXPECT_THAT(ab.reason(), HasSubstr("epoch 1 ended: worker w2 (rank 2"));
    EXPECT_TRUE(Unbinds(a, id)) << "the links of epoch 1 close";
    EXPECT_EQ(To(a, id)[0].fence().epoch(), 1u);
  }
  EXPECT_TRUE(To(a, 3).empty());
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.phase(), "recovering");
  EXPECT_EQ(st.epoch(), 1u);
  EXPECT_EQ(st.resets(), 1u);
  ASSERT_EQ(st.lost_size(), 1);
  EXPECT_EQ(st.lost(0).worker_id(), "w2");

  // The next epoch forms once every survivor acknowledged.
  EXPECT_TRUE(Ack(1, 1).sends.empty());
  EXPECT_TRUE(Ack(2, 1).sends.empty());
  EXPECT_TRUE(Ack(2, 1).sends.empty()) << "a repeated ack is harmless";
  Actions formed = Ack(4, 1);
  const std::vector<std::pair<SessionId, int>> expect = {
      {1, 0}, {2, 1}, {4, 2}};
  for (const auto& [id, rank] : expect) {
    proto::Membership m = MembershipTo(formed, id, 2);
    EXPECT_EQ(m.rank(), rank);
    EXPECT_EQ(m.size(), 3);
    EXPECT_EQ(m.local_rank(), 0);
    EXPECT_EQ(m.local_size(), 1);
    EXPECT_EQ(m.cross_rank(), rank);
    EXPECT_EQ(m.cross_size(), 3);
    EXPECT_THAT(PeerIds(m), ElementsAre("w0", "w1", "w3"));
  }
  st = core_->Status();
  EXPECT_EQ(st.phase(), "running");
  EXPECT_EQ(st.epoch(), 2u);
  EXPECT_EQ(core_->epoch(), 2u);

  // Epoch 2 negotiates from scratch: plan 1, fenced with epoch 2.
  EXPECT_TRUE(Announce(1, "g", 2).sends.empty());
  EXPECT_TRUE(Announce(2, "g", 2).sends.empty());
  Actions plan = Announce(4, "g", 2);
  for (SessionId id : {1, 2, 4}) {
    std::vector<proto::CoordinatorMessage> got = To(plan, id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_plan());
    EXPECT_EQ(got[0].plan().seq(), 1u);
    EXPECT_EQ(got[0].fence().epoch(), 2u);
  }
  // The links bind for epoch 2 only.
  EXPECT_TRUE(core_->MemberSession("w3", 2).ok());
  EXPECT_FALSE(core_->MemberSession("w3", 1).ok());
  EXPECT_FALSE(core_->MemberSession("w2", 2).ok());
}

TEST_F(ElasticTest, LostRankZeroMakesTheOldestSurvivorRankZero) {
  FormElastic(3);
  Actions a = core_->OnClosed(1, "killed");
  EXPECT_EQ(AbortedTo(a, 2).lost(0).rank(), 0);
  (void)Ack(3, 1);
  Actions formed = Ack(2, 1);
  EXPECT_EQ(MembershipTo(formed, 2, 2).rank(), 0);
  EXPECT_EQ(MembershipTo(formed, 3, 2).rank(), 1);
  EXPECT_THAT(PeerIds(MembershipTo(formed, 3, 2)), ElementsAre("w1", "w2"));
}

TEST_F(ElasticTest, SilentMemberIsEvictedAndItsLaterMessagesIgnored) {
  FormElastic(3);
  // w1 (session 2) stops; the others keep beating.
  for (int i = 0; i < 11; ++i) {
    now_ += absl::Milliseconds(500);
    (void)Heartbeat(1, 1);
    (void)Heartbeat(3, 1);
  }
  Actions a = core_->OnTick(now_);
  // The silent worker is told it was evicted, and its stream closes.
  proto::CoordinatorMessage told =
      Of(a, 2, proto::CoordinatorMessage::kEvicted);
  ASSERT_TRUE(told.has_evicted());
  EXPECT_EQ(told.evicted().epoch(), 1u);
  EXPECT_THAT(
      told.evicted().reason(),
      HasSubstr("worker w1 (rank 1, host h1) was evicted from epoch 1"));
  EXPECT_THAT(told.evicted().reason(), HasSubstr("silent for 5.5 s"));
  const absl::Status* closed = CloseOf(a, 2);
  ASSERT_NE(closed, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(*closed)) << *closed;
  EXPECT_THAT(AbortedTo(a, 1).lost(0).cause(), HasSubstr("silent for 5.5 s"));
  (void)AbortedTo(a, 3);
  // It comes back (SIGCONT): whatever it sends is ignored.
  EXPECT_TRUE(Heartbeat(2, 1).empty());
  EXPECT_TRUE(Announce(2, "x", 1).empty());
  (void)Ack(1, 1);
  Actions formed = Ack(3, 1);
  EXPECT_EQ(MembershipTo(formed, 3, 2).size(), 2);
  EXPECT_TRUE(To(formed, 2).empty());
}

TEST_F(ElasticTest, MessagesOfAnEndedEpochAreDroppedQuietly) {
  FormElastic(3);
  (void)Announce(1, "half", 1);  // pending when the epoch ends
  (void)core_->OnClosed(3, "killed");
  // Sent before they learnt of the change: dropped, nobody refused.
  EXPECT_TRUE(Announce(2, "half", 1).empty());
  proto::WorkerMessage done = Fenced(1);
  done.mutable_done()->set_seq(1);
  EXPECT_TRUE(core_->OnMessage(2, done).empty());
  (void)Ack(1, 1);
  (void)Ack(2, 1);
  ASSERT_EQ(core_->epoch(), 2u);
  EXPECT_TRUE(Announce(1, "late", 1).empty());
  EXPECT_TRUE(Heartbeat(2, 1).empty());
  EXPECT_TRUE(Ack(2, 1).empty());
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.phase(), "running");
  EXPECT_EQ(st.pending_size(), 0) << "epoch 1's half-announced name is gone";
  for (const proto::WorkerStatus& w : st.workers()) {
    EXPECT_EQ(w.state(), proto::MEMBER_STATE_MEMBER) << w.worker_id();
  }
  // A fence from an epoch that has not formed is still refused.
  Actions future = Announce(1, "x", 3);
  std::vector<proto::CoordinatorMessage> got = To(future, 1);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(got[0].has_refusal());
}

TEST_F(ElasticTest, SecondLossDuringRecoveryJoinsTheSameChange) {
  FormElastic(4);
  (void)core_->OnClosed(2, "killed");  // w1
  (void)Ack(1, 1);
  now_ += absl::Milliseconds(200);
  Actions second = core_->OnClosed(4, "killed");  // w3, before its ack
  EXPECT_TRUE(To(second, 1).empty()) << "the survivors already left epoch 1";
  Actions formed = Ack(3, 1);
  EXPECT_EQ(MembershipTo(formed, 1, 2).size(), 2);
  EXPECT_THAT(PeerIds(MembershipTo(formed, 3, 2)), ElementsAre("w0", "w2"));
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.resets(), 1u);
  ASSERT_EQ(st.lost_size(), 2);
  EXPECT_EQ(st.lost(0).worker_id(), "w1");
  EXPECT_EQ(st.lost(1).worker_id(), "w3");
  // A loss in epoch 2 ends epoch 2: epoch 3 follows.
  Actions third = core_->OnClosed(3, "killed");
  EXPECT_EQ(AbortedTo(third, 1).epoch(), 2u);
  EXPECT_EQ(AbortedTo(third, 1).lost(0).rank(), 1);
  Actions last = Ack(1, 2);
  proto::Membership m = MembershipTo(last, 1, 3);
  EXPECT_EQ(m.size(), 1);
  EXPECT_EQ(core_->Status().resets(), 2u);
}

TEST_F(ElasticTest, SurvivorThatNeverAcknowledgesIsLostAtTheDeadline) {
  FormElastic(3);
  (void)core_->OnClosed(1, "killed");
  (void)Ack(2, 1);
  // w2 keeps beating but never acknowledges.
  for (int i = 0; i < 9; ++i) {
    now_ += absl::Milliseconds(500);
    (void)Heartbeat(2, 1);
    (void)Heartbeat(3, 1);
    (void)core_->OnTick(now_);
  }
  EXPECT_EQ(core_->epoch(), 1u);
  now_ += absl::Seconds(1);
  (void)Heartbeat(2, 1);
  (void)Heartbeat(3, 1);
  Actions a = core_->OnTick(now_);
  ASSERT_EQ(core_->epoch(), 2u);
  EXPECT_EQ(MembershipTo(a, 2, 2).size(), 1);
  proto::CoordinatorMessage evicted =
      Of(a, 3, proto::CoordinatorMessage::kEvicted);
  ASSERT_TRUE(evicted.has_evicted());
  EXPECT_THAT(evicted.evicted().reason(),
              HasSubstr("did not acknowledge the end of epoch 1"));
}

TEST_F(ElasticTest, TooFewSurvivorsWaitThenEndAtTheElasticTimeout) {
  FormElastic(3, /*min_size=*/3);
  (void)core_->OnClosed(3, "killed");
  (void)Ack(1, 1);
  Actions a = Ack(2, 1);
  EXPECT_TRUE(To(a, 1).empty()) << "no epoch of 2 below --min-np 3";
  EXPECT_EQ(core_->Status().phase(), "short");
  for (int i = 0; i < 38; ++i) {  // 19 s: still waiting
    now_ += absl::Milliseconds(500);
    (void)Heartbeat(1, 1);
    (void)Heartbeat(2, 1);
    (void)core_->OnTick(now_);
  }
  EXPECT_FALSE(core_->ended());
  now_ += absl::Seconds(2);
  (void)Heartbeat(1, 1);
  (void)Heartbeat(2, 1);
  Actions end = core_->OnTick(now_);
  ASSERT_TRUE(core_->ended_in_failure());
  EXPECT_THAT(core_->end_reason(),
              HasSubstr("only 2 workers remain, fewer than the minimum of 3 "
                        "(--min-np), and none joined within the elastic "
                        "timeout of 20.0 s (--elastic-timeout)"));
  EXPECT_THAT(core_->end_reason(), HasSubstr("w2 (rank 2, host h2)"));
  EXPECT_TRUE(Of(end, 1, proto::CoordinatorMessage::kJobEnd).has_job_end());
}

TEST_F(ElasticTest, ResetLimitEndsTheJob) {
  FormElastic(4, /*min_size=*/1, /*reset_limit=*/1);
  (void)core_->OnClosed(4, "killed");
  (void)Ack(1, 1);
  (void)Ack(2, 1);
  (void)Ack(3, 1);
  ASSERT_EQ(core_->epoch(), 2u);
  Actions a = core_->OnClosed(3, "killed");
  ASSERT_TRUE(core_->ended_in_failure());
  EXPECT_THAT(core_->end_reason(),
              HasSubstr("reached its reset limit (1 membership changes, "
                        "--reset-limit)"));
  EXPECT_EQ(core_->failed_worker(), "w2");
  EXPECT_TRUE(Of(a, 1, proto::CoordinatorMessage::kJobEnd).has_job_end());
}

TEST_F(ElasticTest, SurvivorsLeavingEndTheJobWell) {
  FormElastic(3);
  (void)core_->OnClosed(2, "killed");
  (void)Ack(1, 1);
  (void)Ack(3, 1);
  ASSERT_EQ(core_->epoch(), 2u);
  for (SessionId id : {1, 3}) {
    proto::WorkerMessage leave = Fenced(2);
    leave.mutable_leave()->set_built_epoch(2);
    (void)core_->OnMessage(id, leave);
  }
  ASSERT_TRUE(core_->ended());
  EXPECT_FALSE(core_->ended_in_failure());
  EXPECT_THAT(core_->end_reason(), HasSubstr("the 2 remaining workers left"));
}

// A replacement that started late waits for a commit that never comes:
// when the last member leaves, it is told that the job ended (not left to
// its lease, which would read as a lost coordinator).
TEST_F(ElasticTest, MembersLeavingTellAWaitingNewcomerThatTheJobEnded) {
  FormElastic(2);
  (void)Join(3, "w9", "h9");
  Actions last;
  for (SessionId id : {1, 2}) {
    proto::WorkerMessage leave = Fenced(1);
    leave.mutable_leave()->set_built_epoch(1);
    last = core_->OnMessage(id, leave);
  }
  ASSERT_TRUE(core_->ended());
  EXPECT_FALSE(core_->ended_in_failure());
  bool told = false;
  for (const proto::CoordinatorMessage& m : To(last, 3)) {
    if (!m.has_job_end()) continue;
    told = true;
    EXPECT_FALSE(m.job_end().failure());
    EXPECT_THAT(m.job_end().reason(),
                HasSubstr("the job ended before this worker was admitted"));
  }
  EXPECT_TRUE(told);
  bool closed = false;
  for (const Actions::Close& c : last.closes) closed |= c.session == 3;
  EXPECT_TRUE(closed);
}

TEST_F(ElasticTest, LeavingDuringRecoveryDoesNotBlockTheNextEpoch) {
  FormElastic(3);
  (void)core_->OnClosed(3, "killed");
  (void)Ack(1, 1);
  proto::WorkerMessage leave = Fenced(1);
  leave.mutable_leave();
  Actions a = core_->OnMessage(2, leave);
  EXPECT_EQ(core_->epoch(), 2u);
  EXPECT_EQ(MembershipTo(a, 1, 2).size(), 1);
}

// A member that leaves before it connected the running epoch's data plane
// (asked to leave as the epoch formed) would leave the others waiting for
// its connections until their deadline: the epoch ends (not planned), and
// the next one forms without it. A member that built the epoch leaves as
// before: the epoch goes on.
TEST_F(ElasticTest, LeavingBeforeBuildingTheEpochReformsItWithoutTheLeaver) {
  FormElastic(3);
  proto::WorkerMessage leave = Fenced(1);
  leave.mutable_leave()->set_built_epoch(0);
  Actions a = core_->OnMessage(3, leave);
  ASSERT_EQ(core_->Status().phase(), "recovering");
  for (SessionId id : {1, 2}) {
    proto::EpochAborted ab = AbortedTo(a, id);
    EXPECT_EQ(ab.epoch(), 1u);
    EXPECT_FALSE(ab.planned());
    EXPECT_THAT(ab.reason(),
                HasSubstr("left (kolo::shutdown) before it connected the "
                          "data plane of epoch 1"));
    EXPECT_THAT(ab.reason(), HasSubstr("without it"));
  }
  (void)Ack(1, 1);
  Actions formed = Ack(2, 1);
  EXPECT_THAT(PeerIds(MembershipTo(formed, 1, 2)), ElementsAre("w0", "w1"));
  EXPECT_TRUE(To(formed, 3).empty() || !To(formed, 3).front().has_membership());
  proto::StatusReply st = core_->Status();
  ASSERT_EQ(st.history_size(), 2);
  EXPECT_THAT(st.history(1).left(), ElementsAre("w2"));
  EXPECT_THAT(st.lost(), IsEmpty());

  // In epoch 2, a member that built it leaves without ending it.
  proto::WorkerMessage built = Fenced(2);
  built.mutable_leave()->set_built_epoch(2);
  (void)core_->OnMessage(2, built);
  EXPECT_EQ(core_->Status().phase(), "running");
  EXPECT_EQ(core_->epoch(), 2u);
}

// A member's Leave fenced with the epoch before the running one (sent as
// the running one formed, before the worker saw its Membership) is not
// dropped as stale: it is acknowledged, and the epoch the leaver never
// joined reforms without it.
TEST_F(ElasticTest, LeaveFencedWithThePreviousEpochCounts) {
  FormElastic(3);
  (void)core_->OnClosed(1, "killed");
  (void)Ack(2, 1);
  (void)Ack(3, 1);
  ASSERT_EQ(core_->epoch(), 2u);
  proto::WorkerMessage stale = Fenced(1);
  stale.mutable_leave()->set_built_epoch(1);
  Actions left = core_->OnMessage(3, stale);
  ASSERT_FALSE(To(left, 3).empty());
  EXPECT_TRUE(To(left, 3)[0].has_leave_ack());
  EXPECT_EQ(core_->Status().phase(), "recovering");
  EXPECT_THAT(AbortedTo(left, 2).reason(),
              HasSubstr("before it connected the data plane of epoch 2"));
}

// A restarted coordinator (its workers' Hellos say they reconnect) forms
// its first epoch with fewer than --np once kReconnectSettle passed without
// another reconnecting worker (at least --min-np); fresh Hellos still wait
// for all of --np.
TEST_F(ElasticTest, RestartedCoordinatorFormsWithTheWorkersThatReconnected) {
  tweak_ = [](CoreOptions& o) {
    o.elastic = true;
    o.min_size = 2;
    o.elastic_timeout = absl::Seconds(20);
  };
  Make(4);
  for (SessionId id : {1, 2, 3}) {
    proto::WorkerMessage hello =
        Hello(absl::StrCat("w", id - 1), absl::StrCat("h", id), "");
    hello.mutable_hello()->set_reconnecting(true);
    (void)JoinWith(id, hello);
  }
  EXPECT_EQ(core_->epoch(), 0u);
  now_ += kReconnectSettle / 2;
  (void)core_->OnTick(now_);
  EXPECT_EQ(core_->epoch(), 0u);
  now_ += kReconnectSettle;
  Actions formed = core_->OnTick(now_);
  EXPECT_EQ(core_->epoch(), 1u);
  EXPECT_THAT(PeerIds(MembershipTo(formed, 1, 1)),
              ElementsAre("w0", "w1", "w2"));

  // Fresh workers (a first start) wait for all four.
  Make(4);
  for (SessionId id : {1, 2, 3}) {
    (void)Join(id, absl::StrCat("w", id - 1), absl::StrCat("h", id));
  }
  now_ += 10 * kReconnectSettle;
  (void)core_->OnTick(now_);
  EXPECT_EQ(core_->epoch(), 0u);
}

// Broken data connections while every worker heartbeats: an elastic job
// does not end; the epoch ends (not planned: the members restore their
// last commit) and the next one forms with the same members in the same
// order.
TEST_F(ElasticTest, BrokenDataConnectionsReformTheEpochWithTheSameMembers) {
  FormElastic(3);
  proto::WorkerMessage report = Fenced(1);
  report.mutable_peer_fault()->add_peers(2);
  report.mutable_peer_fault()->set_error("connection reset by peer");
  EXPECT_TRUE(core_->OnMessage(1, report).sends.empty());
  Actions a;
  for (int i = 0; i < 40; ++i) {  // up to 20 s, everyone heartbeating
    now_ += absl::Milliseconds(500);
    for (SessionId id : {1, 2, 3}) (void)Heartbeat(id, 1);
    a = core_->OnTick(now_);
    if (core_->Status().phase() == "recovering") break;
  }
  ASSERT_EQ(core_->Status().phase(), "recovering");
  EXPECT_FALSE(core_->ended());
  for (SessionId id : {1, 2, 3}) {
    proto::EpochAborted ab = AbortedTo(a, id);
    EXPECT_EQ(ab.epoch(), 1u);
    EXPECT_EQ(ab.lost_size(), 0);
    EXPECT_FALSE(ab.planned());
    EXPECT_THAT(ab.reason(),
                HasSubstr("the data connections w0 (rank 0) - w2 (rank 2)"));
    EXPECT_THAT(ab.reason(), HasSubstr("every worker is alive"));
  }
  (void)Ack(1, 1);
  (void)Ack(2, 1);
  Actions formed = Ack(3, 1);
  for (SessionId id : {1, 2, 3}) {
    proto::Membership m = MembershipTo(formed, id, 2);
    EXPECT_EQ(m.rank(), static_cast<int>(id) - 1);
    EXPECT_EQ(m.size(), 3);
  }
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.resets(), 1u);
  ASSERT_GE(st.history_size(), 2);
  EXPECT_EQ(st.history(st.history_size() - 1).cause(), "reformed");
}

TEST_F(ElasticTest, NonElasticJobStillEndsOnALoss) {
  Form({"a", "b", "c"});
  (void)core_->OnClosed(2, "killed");
  ASSERT_TRUE(core_->ended_in_failure());
  EXPECT_EQ(core_->failed_worker(), "w1");
}

}  // namespace
}  // namespace kolo::coordinator
