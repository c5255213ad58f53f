// Tests of the coordinator's Recovery (coordinator/recovery.h: the record
// and summary of the epoch that ends a recovery, DescribeLost) and
// JobHistory (coordinator/job_history.h: resets and the reset limit, losses,
// epochs, the Status fields). CoordinatorCore's use of them is tested in
// coordinator_core_test.
#include <string>
#include <vector>

#include "coordinator/job_history.h"
#include "coordinator/recovery.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;

proto::LostWorker Lost(const std::string& id, int rank) {
  proto::LostWorker l;
  l.set_worker_id(id);
  l.set_rank(rank);
  l.set_host_name("h" + std::to_string(rank));
  l.set_cause("disconnected");
  return l;
}

TEST(RecoveryTest, NextRecordNamesEveryCauseInOrder) {
  Recovery r;
  r.lost.push_back(Lost("w1", 1));
  r.left.push_back("w2");
  const proto::EpochRecord rec = r.NextRecord({"w7"});
  EXPECT_EQ(rec.cause(), "lost+left+joined");
  ASSERT_EQ(rec.lost_size(), 1);
  EXPECT_EQ(rec.lost(0).worker_id(), "w1");
  EXPECT_THAT(rec.left(), ElementsAre("w2"));
  EXPECT_THAT(rec.joined(), ElementsAre("w7"));
  EXPECT_EQ(rec.epoch(), 0u);  // FormEpoch's to set
  EXPECT_EQ(rec.members_size(), 0);
}

TEST(RecoveryTest, NothingChangedIsAReform) {
  EXPECT_EQ(Recovery{}.NextRecord({}).cause(), "reformed");
  Recovery joined_only;
  EXPECT_EQ(joined_only.NextRecord({"w3"}).cause(), "joined");
}

TEST(RecoveryTest, SummaryAndDescribeLost) {
  Recovery r;
  EXPECT_EQ(r.Summary({}), "lost: none; left: none; joined: none");
  r.lost.push_back(Lost("w1", 1));
  r.lost.push_back(Lost("w3", 3));
  r.left = {"w0", "w2"};
  EXPECT_EQ(DescribeLost(r.lost),
            "w1 (rank 1, host h1) disconnected; w3 (rank 3, host h3) "
            "disconnected");
  EXPECT_EQ(r.Summary({"w9"}),
            "lost: " + DescribeLost(r.lost) + "; left: w0, w2; joined: w9");
  EXPECT_EQ(DescribeLost({}), "none");
}

TEST(JobHistoryTest, ResetLimit) {
  JobHistory h;
  EXPECT_FALSE(h.PastResetLimit(0));
  h.CountReset();
  EXPECT_EQ(h.resets(), 1);
  EXPECT_TRUE(h.PastResetLimit(0));
  EXPECT_FALSE(h.PastResetLimit(1));
  EXPECT_FALSE(h.PastResetLimit(-1));  // no limit
}

TEST(JobHistoryTest, RecordsLossesAndEpochsOldestFirst) {
  JobHistory h;
  EXPECT_EQ(h.last_lost_worker(), "");
  h.RecordLoss(Lost("w1", 1));
  h.RecordLoss(Lost("w2", 2));
  EXPECT_EQ(h.last_lost_worker(), "w2");
  proto::EpochRecord e1, e2;
  e1.set_epoch(1);
  e2.set_epoch(2);
  h.RecordEpoch(e1);
  h.RecordEpoch(e2);
  h.CountReset();
  ASSERT_EQ(h.epochs().size(), 2u);
  EXPECT_EQ(h.epochs()[1].epoch(), 2u);

  proto::StatusReply reply;
  h.AddTo(reply);
  EXPECT_EQ(reply.resets(), 1u);
  ASSERT_EQ(reply.history_size(), 2);
  EXPECT_EQ(reply.history(0).epoch(), 1u);
  ASSERT_EQ(reply.lost_size(), 2);
  EXPECT_EQ(reply.lost(0).worker_id(), "w1");
  EXPECT_EQ(reply.lost(1).worker_id(), "w2");
}

}  // namespace
}  // namespace kolo::coordinator
