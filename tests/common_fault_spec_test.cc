// The fault spec grammar (common/fault_spec.h): every kind parses with its
// keys, canonical text reads back to the same spec, bad specs are refused
// with what is wrong and what is allowed, random's plan depends on the seed
// alone, and the worker's plan survives its encoding.
#include <string>
#include <vector>

#include "common/fault_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

FaultSpec Parse(const std::string& text) {
  absl::StatusOr<FaultSpec> s = ParseFaultSpec(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : FaultSpec{};
}

std::string Error(const std::string& text) {
  absl::StatusOr<FaultSpec> s = ParseFaultSpec(text);
  EXPECT_FALSE(s.ok()) << text << " was accepted";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.status().message());
}

TEST(FaultSpecTest, EveryKindOfTheIssue) {
  FaultSpec kill = Parse("kill:rank=2:after=3s");
  EXPECT_EQ(kill.kind, FaultKind::kKill);
  EXPECT_EQ(kill.target.kind, FaultTarget::Kind::kRank);
  EXPECT_EQ(kill.target.rank, 2);
  EXPECT_EQ(kill.after, absl::Seconds(3));
  EXPECT_EQ(kill.at_op, -1);
  EXPECT_FALSE(FiredByWorker(kill));

  FaultSpec stop = Parse("stop:rank=1:at-op=500:for=4s");
  EXPECT_EQ(stop.at_op, 500);
  EXPECT_EQ(stop.duration, absl::Seconds(4));
  EXPECT_TRUE(FiredByWorker(stop));

  FaultSpec term = Parse("term:worker=w3:after=10s");
  EXPECT_EQ(term.target.kind, FaultTarget::Kind::kWorker);
  EXPECT_EQ(term.target.name, "w3");

  FaultSpec delay = Parse("delay:rank=0:ms=20:for=5s");
  EXPECT_EQ(delay.delay_ms, 20);
  EXPECT_EQ(delay.after, absl::ZeroDuration());
  EXPECT_TRUE(FiredByWorker(delay));

  FaultSpec drop = Parse("drop:rank=1:peer=2:at-op=100");
  EXPECT_EQ(drop.peer, 2);
  EXPECT_EQ(drop.at_op, 100);

  FaultSpec slow = Parse("slow:rank=3:factor=2");
  EXPECT_EQ(slow.factor, 2);
  EXPECT_EQ(slow.duration, absl::InfiniteDuration());

  FaultSpec part = Parse("partition:host=b:for=5s");
  EXPECT_EQ(part.target.kind, FaultTarget::Kind::kHost);
  EXPECT_EQ(part.target.name, "b");

  FaultSpec coord = Parse("kill-coordinator:after=5s");
  EXPECT_EQ(coord.kind, FaultKind::kKillCoordinator);

  FaultSpec random = Parse("random:rate=6/min:kinds=kill,stop,delay:until=60s");
  EXPECT_EQ(random.rate_per_minute, 6);
  EXPECT_EQ(random.until, absl::Seconds(60));
  EXPECT_EQ(random.kinds.size(), 3u);
  EXPECT_EQ(Parse("random:rate=2/s:until=1m").rate_per_minute, 120);
}

TEST(FaultSpecTest, CanonicalTextReadsBack) {
  for (const char* text :
       {"kill:rank=2:after=3s", "stop:rank=1:at-op=500:for=4s",
        "term:worker=w3:after=10s", "delay:rank=0:ms=20:for=5s",
        "drop:rank=1:peer=2:at-op=100", "slow:rank=3:factor=2.5",
        "partition:host=b:after=1500ms:for=5s", "kill-coordinator:after=5s",
        "random:rate=6/min:kinds=kill,term:until=60s",
        "kill:pick=0.25:after=2s"}) {
    const FaultSpec a = Parse(text);
    const std::string canonical = FaultSpecText(a);
    const FaultSpec b = Parse(canonical);
    EXPECT_EQ(FaultSpecText(b), canonical) << text;
    EXPECT_EQ(a.after, b.after) << text;
    EXPECT_EQ(a.duration, b.duration) << text;
    EXPECT_EQ(a.at_op, b.at_op) << text;
    EXPECT_EQ(a.target.kind, b.target.kind) << text;
  }
}

TEST(FaultSpecTest, BadSpecsSayWhatIsWrongAndWhatIsAllowed) {
  EXPECT_THAT(Error("explode:rank=1"),
              HasSubstr("unknown fault kind 'explode'"));
  EXPECT_THAT(Error("explode:rank=1"), HasSubstr("kill, stop, term"));
  EXPECT_THAT(Error("kill:after=3s"), HasSubstr("no target"));
  EXPECT_THAT(Error("kill:after=3s"), HasSubstr("kill:(rank=N|worker=ID)"));
  EXPECT_THAT(Error("kill:rank=-1"), HasSubstr("not a rank"));
  EXPECT_THAT(Error("kill:rank=1:after=3"), HasSubstr("ms, s or m"));
  EXPECT_THAT(Error("kill:rank=1:after=3s:at-op=4"),
              HasSubstr("both after= and at-op="));
  EXPECT_THAT(Error("kill:rank=1:for=3s"), HasSubstr("'for' does not apply"));
  EXPECT_THAT(Error("kill:rank=1:worker=w2"),
              HasSubstr("more than one target"));
  EXPECT_THAT(Error("kill:rank=1:rank=2"), HasSubstr("given twice"));
  EXPECT_THAT(Error("kill:rank"), HasSubstr("not key=value"));
  EXPECT_THAT(Error("delay:rank=0"), HasSubstr("no ms="));
  EXPECT_THAT(Error("delay:rank=0:ms=0"), HasSubstr("1 <= N <= 60000"));
  EXPECT_THAT(Error("slow:rank=0:factor=1"), HasSubstr("1 < F <= 100"));
  EXPECT_THAT(Error("partition:for=5s"), HasSubstr("no host"));
  EXPECT_THAT(Error("partition:host=b:at-op=3"),
              HasSubstr("'at-op' does not apply"));
  EXPECT_THAT(Error("kill-coordinator:rank=1"),
              HasSubstr("'rank' does not apply"));
  EXPECT_THAT(Error("random:rate=6/h:until=1m"), HasSubstr("R/min or R/s"));
  EXPECT_THAT(Error("random:rate=6/min"), HasSubstr("no until="));
  EXPECT_THAT(Error("random:rate=6/min:until=1m:kinds=kill,partition"),
              HasSubstr("cannot be a random fault"));
  EXPECT_THAT(Error("stop:rank=1:for=0s"), HasSubstr("positive duration"));
  EXPECT_THAT(Error("kill:pick=1.5"), HasSubstr("not in [0, 1)"));
}

TEST(FaultSpecTest, ListsSkipEmptyEntriesAndStopAtTheFirstBadOne) {
  absl::StatusOr<std::vector<FaultSpec>> list =
      ParseFaultList("kill:rank=1:after=1s; ;delay:rank=0:ms=5;");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->size(), 2u);
  EXPECT_FALSE(ParseFaultList("kill:rank=1;bogus").ok());
}

TEST(FaultSpecTest, TargetsResolveAtFiringSize) {
  FaultTarget rank;
  rank.kind = FaultTarget::Kind::kRank;
  rank.rank = 3;
  EXPECT_EQ(rank.RankAmong(4), 3);
  EXPECT_EQ(rank.RankAmong(3), -1);  // no rank 3 in a job of 3
  FaultTarget pick;
  pick.kind = FaultTarget::Kind::kPick;
  pick.pick = 0.5;
  EXPECT_EQ(pick.RankAmong(4), 2);
  EXPECT_EQ(pick.RankAmong(3), 1);
}

TEST(FaultSpecTest, RandomPlanIsDeterministicInTheSeed) {
  std::vector<FaultSpec> specs = {
      Parse("kill:rank=0:after=1s"),
      Parse(
          "random:rate=30/min:kinds=kill,stop,delay,slow,drop,term:until=2m")};
  const std::vector<PlannedFault> a = PlanFaults(specs, 7);
  const std::vector<PlannedFault> b = PlanFaults(specs, 7);
  const std::vector<PlannedFault> c = PlanFaults(specs, 8);
  ASSERT_GT(a.size(), 30u);  // ~60 draws expected
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a[0].from_random, -1);
  EXPECT_EQ(a[1].spec.kind, FaultKind::kRandom);
  std::string ta, tb, tc;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, static_cast<int>(i));
    ta += FaultSpecText(a[i].spec) + ";";
    tb += FaultSpecText(b[i].spec) + ";";
    if (i >= 2) {
      EXPECT_EQ(a[i].from_random, 1);
      EXPECT_LE(a[i].spec.after, absl::Minutes(2));
      EXPECT_GE(a[i].spec.after, a[i - 1].spec.after);  // in time order
    }
  }
  for (const PlannedFault& f : c) tc += FaultSpecText(f.spec) + ";";
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(FaultSpecTest, WorkerPlanRoundTrips) {
  std::vector<PlannedFault> plan = {
      {3, -1, Parse("delay:rank=0:ms=20:for=5s")},
      {7, 2, Parse("drop:pick=0.5:after=1200ms")}};
  const std::string text = EncodeWorkerPlan(plan);
  absl::StatusOr<std::vector<PlannedFault>> back = DecodeWorkerPlan(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].id, 3);
  EXPECT_EQ((*back)[1].id, 7);
  EXPECT_EQ(EncodeWorkerPlan(*back), text);
  EXPECT_FALSE(DecodeWorkerPlan("x=kill:rank=1").ok());
  // An entry without '=' or with an empty spec is refused, not read past
  // (found by worker_config_fuzz: "KOLO_FAULT_PLAN=2").
  EXPECT_FALSE(DecodeWorkerPlan("2").ok());
  EXPECT_FALSE(DecodeWorkerPlan("2=").ok());
  EXPECT_FALSE(ParseFaultSpec("").ok());
  EXPECT_FALSE(ParseFaultSpec("  ").ok());
  EXPECT_TRUE(DecodeWorkerPlan("").ok());
}

}  // namespace
}  // namespace kolo
