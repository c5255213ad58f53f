// SlotTable (launcher/slots.h) with a fake clock: worker ids and
// incarnations, the blacklist's exponential cooldown (capped, never
// forever, retried after it), a host with live workers not blacklisted as a
// whole, moving a want to a free slot, hosts that come and go, --max-np.
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "launcher/slots.h"

namespace kolo::launcher {
namespace {

class SlotTableTest : public ::testing::Test {
 protected:
  SlotTable Table(int max_workers = 0) {
    SlotPolicy p;
    p.cooldown_lo = absl::Seconds(2);
    p.cooldown_hi = absl::Seconds(10);
    p.healthy_run = absl::Seconds(30);
    p.max_workers = max_workers;
    return SlotTable(p, [this] { return now_; });
  }
  void Advance(absl::Duration d) { now_ += d; }

  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(SlotTableTest, WorkerIdsAreStablePerSlotAndIncarnationsCount) {
  SlotTable t = Table();
  t.SetHosts({{"a", 2}, {"b", 2}});
  EXPECT_EQ(t.Want(3), 3);
  EXPECT_EQ(t.Startable(), (std::vector<int>{0, 1, 2}));
  WorkerIdentity w0 = t.Start(0), w1 = t.Start(1), w2 = t.Start(2);
  EXPECT_EQ(w0.worker_id, "w0");
  EXPECT_EQ(w1.worker_id, "w1");
  EXPECT_EQ(w2.worker_id, "w2");
  EXPECT_EQ(w2.host, "b");
  EXPECT_EQ(w2.local_index, 0);
  EXPECT_EQ(w2.host_slots, 2);
  EXPECT_EQ(w1.incarnation, 0);
  EXPECT_TRUE(t.Startable().empty());

  Advance(absl::Seconds(1));
  EndDecision d = t.Ended(1, WorkerEnd::kFailed);
  EXPECT_TRUE(d.replace);
  EXPECT_EQ(d.replacement_slot, 1);
  EXPECT_EQ(d.cooldown, absl::ZeroDuration());
  EXPECT_NE(d.message.find("replacing it at once as w1 incarnation 1"),
            std::string::npos)
      << d.message;
  EXPECT_TRUE(t.Pending());
  ASSERT_EQ(t.Startable(), std::vector<int>{1});
  WorkerIdentity again = t.Start(1);
  EXPECT_EQ(again.worker_id, "w1");
  EXPECT_EQ(again.incarnation, 1);
  EXPECT_FALSE(t.Pending());

  // The idle slot b:1 gets the next number when it first starts.
  t.Want(1);
  EXPECT_EQ(t.Start(3).worker_id, "w3");
}

TEST_F(SlotTableTest, ExitZeroIsNotReplaced) {
  SlotTable t = Table();
  t.SetHosts({{"a", 1}});
  t.Want(1);
  t.Start(0);
  EndDecision d = t.Ended(0, WorkerEnd::kSucceeded);
  EXPECT_FALSE(d.replace);
  EXPECT_FALSE(t.Pending());
  EXPECT_TRUE(t.Startable().empty());
}

TEST_F(SlotTableTest, CooldownDoublesUpToTheCapAndIsRetriedAfterIt) {
  SlotTable t = Table();
  t.SetHosts({{"a", 1}});
  t.Want(1);
  // Failures 1..6 in quick succession: 0 (at once), 2, 4, 8, 10, 10 s.
  const absl::Duration expected[] = {absl::ZeroDuration(), absl::Seconds(2),
                                     absl::Seconds(4),     absl::Seconds(8),
                                     absl::Seconds(10),    absl::Seconds(10)};
  for (int k = 0; k < 6; ++k) {
    ASSERT_EQ(t.Startable(), std::vector<int>{0}) << "failure " << k;
    EXPECT_EQ(t.Start(0).incarnation, k);
    Advance(absl::Milliseconds(100));
    EndDecision d = t.Ended(0, WorkerEnd::kFailed);
    EXPECT_TRUE(d.replace);
    EXPECT_EQ(d.replacement_slot, 0);
    EXPECT_EQ(d.cooldown, expected[k]) << "failure " << k + 1;
    if (k >= 1) {
      EXPECT_NE(d.message.find("failed " + std::to_string(k + 1) +
                               " times in a row; cooling down"),
                std::string::npos)
          << d.message;
      EXPECT_TRUE(d.host_blacklisted);  // no live worker on a
      // Cooling: not startable until the cooldown ends, but pending.
      EXPECT_TRUE(t.Startable().empty());
      EXPECT_TRUE(t.Pending());
      EXPECT_EQ(t.NextCooldownEnd(), now_ + expected[k]);
      Advance(expected[k] - absl::Milliseconds(1));
      EXPECT_TRUE(t.Startable().empty());
      Advance(absl::Milliseconds(1));
    }
  }
  // A worker that runs long enough before it fails starts a new streak.
  ASSERT_EQ(t.Startable(), std::vector<int>{0});
  t.Start(0);
  Advance(absl::Seconds(31));
  EndDecision d = t.Ended(0, WorkerEnd::kFailed);
  EXPECT_EQ(d.cooldown, absl::ZeroDuration());
  EXPECT_EQ(t.Startable(), std::vector<int>{0});
}

TEST_F(SlotTableTest, AHostWithLiveWorkersIsNotBlacklisted) {
  SlotTable t = Table();
  t.SetHosts({{"a", 2}});
  t.Want(2);
  t.Start(0);
  t.Start(1);
  t.Ended(0, WorkerEnd::kFailed);  // at once
  t.Start(0);
  EndDecision d = t.Ended(0, WorkerEnd::kFailed);  // cools down
  EXPECT_EQ(d.cooldown, absl::Seconds(2));
  EXPECT_FALSE(d.host_blacklisted);  // w1 still runs on a
  EXPECT_EQ(t.HostBlacklistedUntil("a"), absl::InfinitePast());
  // Once a has no live worker, its cooling slot blacklists it.
  t.Ended(1, WorkerEnd::kSucceeded);
  EXPECT_EQ(t.HostBlacklistedUntil("a"), now_ + absl::Seconds(2));
}

TEST_F(SlotTableTest, ACoolingSlotHandsItsWantToAFreeSlot) {
  SlotTable t = Table();
  t.SetHosts({{"a", 1}, {"b", 1}});
  t.Want(1);
  t.Start(0);
  t.Ended(0, WorkerEnd::kFailed);
  t.Start(0);
  EndDecision d = t.Ended(0, WorkerEnd::kFailed);
  EXPECT_TRUE(d.replace);
  EXPECT_EQ(d.replacement_slot, 1);
  EXPECT_NE(d.message.find("its replacement starts on free slot b:0"),
            std::string::npos)
      << d.message;
  EXPECT_EQ(t.Startable(), std::vector<int>{1});
  EXPECT_EQ(t.Start(1).worker_id, "w1");
  // The cooled-down slot is free, not wanted: no second worker.
  Advance(absl::Seconds(3));
  EXPECT_TRUE(t.Startable().empty());
  EXPECT_FALSE(t.Pending());
}

TEST_F(SlotTableTest, HostsComeAndGo) {
  SlotTable t = Table();
  HostChange c = t.SetHosts({{"a", 1}});
  EXPECT_EQ(c.added_hosts, std::vector<std::string>{"a"});
  t.Want(1);
  t.Start(0);
  c = t.SetHosts({{"a", 1}, {"b", 2}});
  EXPECT_EQ(c.added_hosts, std::vector<std::string>{"b"});
  EXPECT_EQ(c.added_slots, (std::vector<int>{1, 2}));
  EXPECT_EQ(t.Want(c.added_slots, 2), 2);
  EXPECT_EQ(t.Start(1).worker_id, "w1");
  EXPECT_EQ(t.Start(2).worker_id, "w2");

  c = t.SetHosts({{"a", 1}});
  EXPECT_EQ(c.removed_hosts, std::vector<std::string>{"b"});
  EXPECT_EQ(c.to_stop, (std::vector<int>{1, 2}));
  // Their ends are leaves: nothing is replaced.
  EXPECT_FALSE(t.Ended(1, WorkerEnd::kStopped).replace);
  EXPECT_FALSE(t.Ended(2, WorkerEnd::kFailed).replace);
  EXPECT_FALSE(t.Pending());

  // b comes back: its slots keep their worker ids, as new incarnations.
  c = t.SetHosts({{"a", 1}, {"b", 2}});
  EXPECT_EQ(c.added_slots, (std::vector<int>{1, 2}));
  t.Want(c.added_slots, 2);
  WorkerIdentity w = t.Start(1);
  EXPECT_EQ(w.worker_id, "w1");
  EXPECT_EQ(w.incarnation, 1);

  // A host listed twice has the sum of its slots.
  c = t.SetHosts({{"a", 1}, {"b", 2}, {"a", 1}});
  EXPECT_EQ(c.added_slots, std::vector<int>{3});
  EXPECT_EQ(t.slots()[3].Name(), "a:1");
}

TEST_F(SlotTableTest, MaxWorkersCapsWhatIsWanted) {
  SlotTable t = Table(/*max_workers=*/3);
  HostChange c = t.SetHosts({{"a", 2}});
  EXPECT_EQ(t.Want(5), 2);
  t.Start(0);
  t.Start(1);
  c = t.SetHosts({{"a", 2}, {"b", 2}});
  EXPECT_EQ(t.Want(c.added_slots, 2), 1);  // 3 at most
  EXPECT_EQ(t.Startable(), std::vector<int>{2});
  t.Start(2);
  EXPECT_EQ(t.WantedOrRunning(), 3);
  // A failure moves nothing beyond the cap: b:1 stays idle.
  t.Ended(2, WorkerEnd::kFailed);
  EXPECT_EQ(t.Startable(), std::vector<int>{2});
}

TEST_F(SlotTableTest, UnwantAllStopsReplacements) {
  SlotTable t = Table();
  t.SetHosts({{"a", 1}});
  t.Want(1);
  t.Start(0);
  t.UnwantAll();
  EndDecision d = t.Ended(0, WorkerEnd::kFailed);
  EXPECT_FALSE(d.replace);
  EXPECT_FALSE(t.Pending());
  EXPECT_TRUE(t.Startable().empty());
}

}  // namespace
}  // namespace kolo::launcher
