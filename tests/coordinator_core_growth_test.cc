// Tests of CoordinatorCore's elastic growth (coordinator/core.h, "Elastic
// growth"), driven directly with events and a fake clock: a newcomer waits
// and joins at a membership check (planned EpochAborted, no rollback); a
// check with no change is answered like a barrier; a member leaves at a
// check; max_size caps admission; a replacement incarnation supersedes the
// old process; a newcomer ends the wait below min_size; every worker
// leaving ends the job well; the history records every epoch.
#include <string>
#include <vector>

#include "coordinator/core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/core_harness.h"
#include "tests/testing/elastic_harness.h"

namespace kolo::coordinator {
namespace {

using core_harness::CloseOf;
using core_harness::ElasticTest;
using core_harness::To;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

proto::WorkerStatus StatusOf(const proto::StatusReply& st,
                             const std::string& worker) {
  for (const proto::WorkerStatus& w : st.workers()) {
    if (w.worker_id() == worker) return w;
  }
  ADD_FAILURE() << "no status for " << worker;
  return {};
}

TEST_F(ElasticTest, NewcomerWaitsThenJoinsAtTheMembershipCheck) {
  FormElastic(2);
  Actions joined = Join(3, "w2", "h2");
  EXPECT_TRUE(To(joined, 1).empty()) << "nobody hears of it before a check";
  for (const proto::CoordinatorMessage& m : To(joined, 3)) {
    EXPECT_FALSE(m.has_membership());
  }
  EXPECT_EQ(StatusOf(core_->Status(), "w2").state(),
            proto::MEMBER_STATE_WAITING);

  // Plans and collectives go on without it.
  (void)Announce(1, "g", 1);
  Actions plan = Announce(2, "g", 1);
  ASSERT_EQ(To(plan, 1).size(), 1u);
  EXPECT_TRUE(To(plan, 3).empty());
  (void)Done(1, 1, 1);
  (void)Done(2, 1, 1);

  EXPECT_TRUE(Check(1, 1).sends.empty());
  Actions a = Check(2, 1);
  for (SessionId id : {1, 2}) {
    for (const proto::CoordinatorMessage& m : To(a, id)) {
      EXPECT_FALSE(m.has_plan()) << "the check is not answered: the epoch ends";
    }
    proto::EpochAborted ab = AbortedTo(a, id);
    EXPECT_TRUE(ab.planned());
    EXPECT_EQ(ab.epoch(), 1u);
    EXPECT_THAT(ab.joining(), ElementsAre("w2"));
    EXPECT_THAT(ab.leaving(), IsEmpty());
    EXPECT_THAT(ab.lost(), IsEmpty());
    EXPECT_THAT(ab.reason(), HasSubstr("w2 joins"));
    EXPECT_TRUE(Unbinds(a, id));
  }
  EXPECT_EQ(core_->Status().phase(), "recovering");
  EXPECT_TRUE(Ack(1, 1).sends.empty());
  Actions formed = Ack(2, 1);
  const std::vector<std::pair<SessionId, int>> expect = {
      {1, 0}, {2, 1}, {3, 2}};
  for (const auto& [id, rank] : expect) {
    proto::Membership m = MembershipTo(formed, id, 2);
    EXPECT_EQ(m.rank(), rank);
    EXPECT_EQ(m.size(), 3);
    EXPECT_THAT(PeerIds(m), ElementsAre("w0", "w1", "w2"));
  }
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.phase(), "running");
  EXPECT_EQ(st.epoch(), 2u);
  EXPECT_EQ(st.resets(), 1u);
  EXPECT_TRUE(st.elastic());
  ASSERT_EQ(st.history_size(), 2);
  EXPECT_EQ(st.history(0).cause(), "start");
  EXPECT_THAT(st.history(0).members(), ElementsAre("w0", "w1"));
  EXPECT_EQ(st.history(1).epoch(), 2u);
  EXPECT_EQ(st.history(1).cause(), "joined");
  EXPECT_THAT(st.history(1).joined(), ElementsAre("w2"));
  EXPECT_THAT(st.history(1).members(), ElementsAre("w0", "w1", "w2"));

  // Epoch 2 negotiates with the newcomer.
  (void)Announce(1, "g", 2);
  (void)Announce(2, "g", 2);
  Actions plan2 = Announce(3, "g", 2);
  for (SessionId id : {1, 2, 3}) ASSERT_EQ(To(plan2, id).size(), 1u);
}

TEST_F(ElasticTest, CheckWithoutChangeIsAnsweredLikeABarrier) {
  FormElastic(2);
  EXPECT_TRUE(Check(1, 1).sends.empty());
  Actions a = Check(2, 1);
  for (SessionId id : {1, 2}) {
    std::vector<proto::CoordinatorMessage> got = To(a, id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_plan());
    ASSERT_EQ(got[0].plan().responses_size(), 1);
    const proto::Response& r = got[0].plan().responses(0);
    EXPECT_EQ(r.op(), proto::MEMBERSHIP_CHECK);
    EXPECT_EQ(r.error_code(), 0);
    EXPECT_THAT(r.sizes(), IsEmpty());
  }
  // And again: the same name each commit, never cached.
  (void)Done(1, 1, 1);
  (void)Done(2, 1, 1);
  (void)Check(1, 1);
  Actions again = Check(2, 1);
  ASSERT_EQ(To(again, 1).size(), 1u);
  EXPECT_THAT(To(again, 1)[0].plan().responses(0).names(),
              ElementsAre("kolo.membership_check"));
  EXPECT_EQ(core_->Status().epoch(), 1u);
}

TEST_F(ElasticTest, MemberLeavesAtTheCheckAndTheOthersGoOn) {
  FormElastic(3);
  (void)Check(1, 1);
  (void)Check(2, 1, /*leave=*/true);
  Actions a = Check(3, 1);
  for (SessionId id : {1, 2, 3}) {
    proto::EpochAborted ab = AbortedTo(a, id);
    EXPECT_TRUE(ab.planned());
    EXPECT_THAT(ab.leaving(), ElementsAre("w1"));
    EXPECT_THAT(ab.reason(), HasSubstr("w1 leaves (SIGTERM)"));
  }
  (void)Ack(2, 1);  // the leaver's ack is harmless
  EXPECT_TRUE(Ack(1, 1).sends.empty());
  Actions formed = Ack(3, 1);
  EXPECT_THAT(PeerIds(MembershipTo(formed, 1, 2)), ElementsAre("w0", "w2"));
  EXPECT_EQ(MembershipTo(formed, 3, 2).rank(), 1);
  EXPECT_TRUE(To(formed, 2).empty());

  // The leaver's Leave, fenced with the epoch it left, is acknowledged.
  proto::WorkerMessage leave = Fenced(1);
  leave.mutable_leave()->set_reason("shutdown");
  Actions left = core_->OnMessage(2, leave);
  ASSERT_EQ(To(left, 2).size(), 1u);
  EXPECT_TRUE(To(left, 2)[0].has_leave_ack());
  EXPECT_EQ(To(left, 2)[0].fence().epoch(), 1u);
  // Its stream closing is no loss.
  Actions closed = core_->OnClosed(2, "ended");
  EXPECT_TRUE(closed.sends.empty());
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.phase(), "running");
  EXPECT_EQ(st.epoch(), 2u);
  EXPECT_THAT(st.lost(), IsEmpty());
  ASSERT_EQ(st.history_size(), 2);
  EXPECT_EQ(st.history(1).cause(), "left");
  EXPECT_THAT(st.history(1).left(), ElementsAre("w1"));
}

TEST_F(ElasticTest, MaxSizeCapsAdmissionAndTheRestWait) {
  FormElastic(2, /*min_size=*/1, /*reset_limit=*/-1, /*max_size=*/3);
  (void)Join(3, "w2", "h2");
  (void)Join(4, "w3", "h3");
  (void)Check(1, 1);
  Actions a = Check(2, 1);
  EXPECT_THAT(AbortedTo(a, 1).joining(), ElementsAre("w2"));
  (void)Ack(1, 1);
  Actions formed = Ack(2, 1);
  EXPECT_EQ(MembershipTo(formed, 3, 2).size(), 3);
  EXPECT_TRUE(To(formed, 4).empty());
  EXPECT_EQ(StatusOf(core_->Status(), "w3").state(),
            proto::MEMBER_STATE_WAITING);
  // Full: the next check changes nothing.
  (void)Check(1, 2);
  (void)Check(2, 2);
  Actions b = Check(3, 2);
  ASSERT_EQ(To(b, 1).size(), 1u);
  EXPECT_TRUE(To(b, 1)[0].has_plan());
  for (SessionId id : {1, 2, 3}) (void)Done(id, 1, 2);
  // A member leaves: the waiting worker takes its place at that check.
  (void)Check(1, 2);
  (void)Check(2, 2, /*leave=*/true);
  Actions c = Check(3, 2);
  proto::EpochAborted ab = AbortedTo(c, 1);
  EXPECT_THAT(ab.leaving(), ElementsAre("w1"));
  EXPECT_THAT(ab.joining(), ElementsAre("w3"));
  (void)Ack(1, 2);
  Actions formed3 = Ack(3, 2);
  EXPECT_THAT(PeerIds(MembershipTo(formed3, 4, 3)),
              ElementsAre("w0", "w2", "w3"));
}

TEST_F(ElasticTest, ReplacementIncarnationSupersedesTheOldProcess) {
  FormElastic(3);
  proto::WorkerMessage hello = Hello("w1", "h1", "");
  hello.mutable_hello()->set_worker_incarnation(1);
  Actions a = JoinWith(4, hello);
  // The old w1 (session 2) is lost and told so; the others recover.
  ASSERT_NE(CloseOf(a, 2), nullptr);
  for (SessionId id : {1, 3}) {
    proto::EpochAborted ab = AbortedTo(a, id);
    EXPECT_FALSE(ab.planned());
    ASSERT_EQ(ab.lost_size(), 1);
    EXPECT_EQ(ab.lost(0).worker_id(), "w1");
    EXPECT_THAT(ab.lost(0).cause(), HasSubstr("replaced by incarnation 1"));
  }
  (void)Ack(1, 1);
  Actions formed = Ack(3, 1);
  // The replacement joins the next epoch, appended.
  proto::Membership m = MembershipTo(formed, 4, 2);
  EXPECT_EQ(m.rank(), 2);
  EXPECT_THAT(PeerIds(m), ElementsAre("w0", "w2", "w1"));
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(StatusOf(st, "w1").incarnation(), 1u);
  EXPECT_EQ(st.history(1).cause(), "lost+joined");

  // The same incarnation again is a duplicate.
  proto::WorkerMessage dup = Hello("w1", "h9", "");
  dup.mutable_hello()->set_worker_incarnation(1);
  Actions refused = JoinWith(5, dup);
  ExpectRefusal(refused, 5, proto::Refusal::DUPLICATE_WORKER);
}

TEST_F(ElasticTest, NewcomerEndsTheWaitBelowTheMinimum) {
  FormElastic(3, /*min_size=*/3);
  (void)core_->OnClosed(3, "killed");
  (void)Ack(1, 1);
  (void)Ack(2, 1);
  EXPECT_EQ(core_->Status().phase(), "short");
  Actions a = Join(4, "w2", "h2");  // a replacement, incarnation 0 is fine
  proto::Membership m = MembershipTo(a, 4, 2);
  EXPECT_EQ(m.size(), 3);
  EXPECT_EQ(m.rank(), 2);
  EXPECT_EQ(MembershipTo(a, 1, 2).rank(), 0);
  EXPECT_EQ(core_->Status().phase(), "running");
}

TEST_F(ElasticTest, EveryMemberLeavingAtACheckEndsTheJobWell) {
  FormElastic(2);
  (void)Join(3, "w2", "h2");  // waiting: it cannot go on without state
  (void)Check(1, 1, /*leave=*/true);
  Actions a = Check(2, 1, /*leave=*/true);
  EXPECT_TRUE(core_->ended());
  EXPECT_FALSE(core_->ended_in_failure()) << core_->end_reason();
  EXPECT_THAT(core_->end_reason(), HasSubstr("every worker left"));
  for (SessionId id : {1, 2, 3}) {
    bool job_end = false;
    for (const proto::CoordinatorMessage& m : To(a, id)) {
      if (m.has_job_end()) {
        job_end = true;
        EXPECT_FALSE(m.job_end().failure());
      }
    }
    EXPECT_TRUE(job_end) << "session " << id;
  }
}

TEST_F(ElasticTest, NonElasticJobStillRefusesLateWorkers) {
  Form({"a", "b"});
  Actions a = Join(3, "w9", "c");
  ExpectRefusal(a, 3, proto::Refusal::JOB_FULL);
}

}  // namespace
}  // namespace kolo::coordinator
