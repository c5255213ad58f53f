// The autotuner through CoordinatorCore (coordinator/core_autotune.cc):
// every rank gets each switch in the same plan, the switches come at sample
// ends, a switch that turns the response cache off stops its bits, every
// switch carries the hierarchy on or off when every rank's Settings say it
// can switch (and none does when one rank cannot), and a membership change
// (elastic) restarts tuning, or keeps a choice made.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/autotune.h"
#include "coordinator/core.h"
#include "gtest/gtest.h"
#include "tests/testing/core_harness.h"
#include "tests/testing/elastic_harness.h"

namespace kolo::coordinator {
namespace {

using core_harness::CoreTest;
using core_harness::To;

class AutotuneCoreTest : public CoreTest {
 protected:
  void SetUp() override {
    AutotuneOptions o;
    o.enabled = true;
    o.warmup_samples = 1;
    o.steps_per_sample = 2;
    o.max_samples = 4;
    o.initial = {uint64_t{128} << 20, absl::Milliseconds(1)};
    absl::StatusOr<std::unique_ptr<Autotuner>> t = Autotuner::Create(o);
    ASSERT_TRUE(t.ok()) << t.status();
    tuner_ = std::shared_ptr<Autotuner>(*std::move(t));
    tweak_ = [this](CoreOptions& c) { c.autotuner = tuner_; };
  }

  // One training step of tensors a and b on every rank: each rank announces
  // each and reports every plan done. Records the plans each session got.
  void Step(int ranks) {
    for (const char* name : {"a", "b"}) {
      Actions last;
      for (int r = 1; r <= ranks; ++r) last = Announce(r, name);
      for (int r = 1; r <= ranks; ++r) {
        for (const proto::CoordinatorMessage& m : To(last, r)) {
          if (!m.has_plan()) continue;
          plans_[r].push_back(m.plan());
          proto::WorkerMessage done = Fenced(1);
          done.mutable_done()->set_seq(m.plan().seq());
          core_->OnMessage(r, done);
        }
      }
      now_ += absl::Milliseconds(100);
    }
  }

  // Every rank's Settings: its allreduce runs the message algorithms, and
  // its hierarchy is tunable (in force) unless it is the last rank and
  // `last_tunable` is false.
  void SendSettings(int ranks, bool last_tunable) {
    for (int r = 1; r <= ranks; ++r) {
      proto::WorkerMessage m = Fenced(1);
      proto::Settings& s = *m.mutable_announce()->mutable_settings();
      s.set_fusion_threshold(uint64_t{64} << 20);
      s.set_cache_capacity(1024);
      s.set_message_allreduce(true);
      s.set_small_allreduce_bytes(64 << 10);
      s.set_hierarchical_tunable(r < ranks || last_tunable);
      s.set_hierarchical(r < ranks || last_tunable);
      core_->OnMessage(r, m);
    }
  }

  // The seqs of the plans session `r` got that carry a switch.
  std::vector<uint64_t> Switches(int r) const {
    std::vector<uint64_t> seqs;
    for (const proto::Plan& p : plans_.at(r)) {
      if (p.has_autotune()) seqs.push_back(p.seq());
    }
    return seqs;
  }

  std::shared_ptr<Autotuner> tuner_;
  std::map<int, std::vector<proto::Plan>> plans_;
};

TEST_F(AutotuneCoreTest, EveryRankSwitchesAtTheSamePlan) {
  Form({"h0", "h1", "h2"});
  for (int step = 0; step < 40 && !tuner_->done(); ++step) Step(3);
  ASSERT_TRUE(tuner_->done());
  const std::vector<uint64_t> first = Switches(1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(Switches(2), first);
  EXPECT_EQ(Switches(3), first);
  // The same switch in each: the last one is the choice.
  for (int r = 2; r <= 3; ++r) {
    for (size_t i = 0; i < plans_[1].size(); ++i) {
      EXPECT_EQ(plans_[r][i].autotune().SerializeAsString(),
                plans_[1][i].autotune().SerializeAsString());
    }
  }
  const proto::Plan* last = nullptr;
  for (const proto::Plan& p : plans_[1]) {
    if (p.has_autotune()) last = &p;
  }
  ASSERT_NE(last, nullptr);
  EXPECT_TRUE(last->autotune().done());
  EXPECT_EQ(last->autotune().fusion_threshold(),
            tuner_->current().fusion_threshold);
  EXPECT_EQ(last->autotune().sample(), 4u);
  // A step is two plans here (a, then b), and a switch ends a sample: the
  // switches are a whole number of samples apart.
  for (size_t i = 1; i < first.size(); ++i) {
    EXPECT_EQ((first[i] - first[0]) % 4, 0u) << first[i];
  }
  // The plans after a switch that turned the response cache off give out no
  // bits until the next switch (the negotiator's capacity is 0).
  bool cache_on = true;
  int off_plans = 0;
  for (const proto::Plan& p : plans_[1]) {
    if (!cache_on) {
      ++off_plans;
      for (const proto::Response& r : p.responses()) {
        for (int32_t bit : r.cache_bits()) EXPECT_LT(bit, 0) << p.seq();
      }
    }
    if (p.has_autotune()) cache_on = p.autotune().cache_enabled();
  }
  // dlib's search (seeded alike every run) tries the cache off here.
  EXPECT_GT(off_plans, 0);
  // No switch after the choice.
  const size_t before = plans_[1].size();
  for (int step = 0; step < 5; ++step) Step(3);
  for (size_t i = before; i < plans_[1].size(); ++i) {
    EXPECT_FALSE(plans_[1][i].has_autotune());
  }
}

TEST_F(AutotuneCoreTest, EverySwitchCarriesTheHierarchyWhenEveryRankCanSwitch) {
  Form({"a", "a", "b"});
  SendSettings(3, /*last_tunable=*/true);
  for (int step = 0; step < 40 && !tuner_->done(); ++step) Step(3);
  ASSERT_TRUE(tuner_->done());
  EXPECT_TRUE(tuner_->tunes_hierarchical());
  ASSERT_FALSE(Switches(1).empty());
  EXPECT_EQ(Switches(2), Switches(1));
  EXPECT_EQ(Switches(3), Switches(1));
  bool first = true;
  for (size_t i = 0; i < plans_[1].size(); ++i) {
    const proto::Plan& p = plans_[1][i];
    if (!p.has_autotune()) continue;
    EXPECT_TRUE(p.autotune().data_plane()) << p.seq();
    EXPECT_TRUE(p.autotune().hierarchical_tuned()) << p.seq();
    if (first) {
      // The restart with the ranks' data plane: their value, two levels.
      EXPECT_TRUE(p.autotune().hierarchical()) << p.seq();
      first = false;
    }
    for (int r = 2; r <= 3; ++r) {
      EXPECT_EQ(plans_[r][i].autotune().SerializeAsString(),
                p.autotune().SerializeAsString());
    }
  }
}

TEST_F(AutotuneCoreTest, NoHierarchyWhenOneRankCannotSwitch) {
  Form({"a", "a", "b"});
  SendSettings(3, /*last_tunable=*/false);
  for (int step = 0; step < 40 && !tuner_->done(); ++step) Step(3);
  ASSERT_TRUE(tuner_->done());
  EXPECT_TRUE(tuner_->tunes_data_plane());
  EXPECT_FALSE(tuner_->tunes_hierarchical());
  ASSERT_FALSE(Switches(1).empty());
  for (const proto::Plan& p : plans_[1]) {
    if (!p.has_autotune()) continue;
    EXPECT_TRUE(p.autotune().data_plane()) << p.seq();
    EXPECT_FALSE(p.autotune().hierarchical_tuned()) << p.seq();
  }
}

// Elastic: epoch 1 of three workers loses w2; epoch 2 forms of the others.
class AutotuneElasticTest : public core_harness::ElasticTest {
 protected:
  void FormTuned(int max_samples) {
    AutotuneOptions o;
    o.enabled = true;
    o.warmup_samples = 0;
    o.steps_per_sample = 1;
    o.max_samples = max_samples;
    o.initial = {uint64_t{128} << 20, absl::Milliseconds(1)};
    absl::StatusOr<std::unique_ptr<Autotuner>> t = Autotuner::Create(o);
    ASSERT_TRUE(t.ok()) << t.status();
    tuner_ = std::shared_ptr<Autotuner>(*std::move(t));
    tweak_ = [this](CoreOptions& c) {
      c.elastic = true;
      c.min_size = 1;
      c.elastic_timeout = absl::Seconds(20);
      c.autotuner = tuner_;
    };
    Form({"h0", "h1", "h2"});
  }

  // One step of tensor t on `sessions` in `epoch`; every plan reported done.
  void Step(const std::vector<SessionId>& sessions, uint64_t epoch) {
    Actions last;
    for (SessionId id : sessions) last = Announce(id, "t", epoch);
    for (SessionId id : sessions) {
      for (const proto::CoordinatorMessage& m : To(last, id)) {
        if (m.has_plan()) Done(id, m.plan().seq(), epoch);
      }
    }
    now_ += absl::Milliseconds(100);
  }

  void LoseW2() {
    (void)core_->OnClosed(3, "killed");
    (void)Ack(1, 1);
    (void)Ack(2, 1);
    ASSERT_EQ(core_->epoch(), 2u);
  }

  std::shared_ptr<Autotuner> tuner_;
};

TEST_F(AutotuneElasticTest, AMembershipChangeWhileTuningRestartsIt) {
  FormTuned(/*max_samples=*/6);
  for (int i = 0; i < 4; ++i) Step({1, 2, 3}, 1);
  ASSERT_FALSE(tuner_->done());
  ASSERT_GT(tuner_->scored_samples(), 0);
  LoseW2();
  EXPECT_EQ(tuner_->scored_samples(), 0);
  EXPECT_EQ(tuner_->current().fusion_threshold, uint64_t{128} << 20);
  for (int i = 0; i < 20 && !tuner_->done(); ++i) Step({1, 2}, 2);
  EXPECT_TRUE(tuner_->done());
  EXPECT_EQ(tuner_->scored_samples(), 6);
}

TEST_F(AutotuneElasticTest, AChoiceMadeIsKeptAcrossAMembershipChange) {
  FormTuned(/*max_samples=*/3);
  for (int i = 0; i < 20 && !tuner_->done(); ++i) Step({1, 2, 3}, 1);
  ASSERT_TRUE(tuner_->done());
  const TunedSettings chosen = tuner_->current();
  LoseW2();
  EXPECT_TRUE(tuner_->done());
  EXPECT_EQ(tuner_->current(), chosen);
}

}  // namespace
}  // namespace kolo::coordinator
