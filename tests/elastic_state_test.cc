// kolo::elastic::State and run (include/kolo/elastic.h) in one process:
// registration errors, commit / restore of tensors and blobs, reset
// callbacks in order; sync and run on a single worker (which hosts its own
// coordinator). The multi-process behaviour (a lost worker, the retry) is
// in multiprocess_elastic_test.cc.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "proto/membership_error.h"

namespace kolo::elastic {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(State, RegistrationErrorsSayWhat) {
  State state;
  std::vector<float> w(3);
  std::string blob;
  ASSERT_TRUE(state.add_tensor("w", w.data(), 3, DataType::kFloat32).ok());
  absl::Status dup = state.add_blob("w", &blob);
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dup.message(), HasSubstr("'w'"));
  EXPECT_THAT(dup.message(), HasSubstr("registered already"));
  EXPECT_EQ(state.add_tensor("n", nullptr, 2, DataType::kInt32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.add_tensor("neg", w.data(), -1, DataType::kFloat32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.add_blob("b", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(state.add_tensor("empty", nullptr, 0, DataType::kInt64).ok());
}

TEST(State, RestoreGoesBackToTheLastCommit) {
  State state;
  std::vector<int64_t> w = {1, 2, 3};
  std::string blob = "step 1";
  ASSERT_TRUE(state.add_tensor("w", w.data(), 3, DataType::kInt64).ok());
  ASSERT_TRUE(state.add_blob("b", &blob).ok());
  state.restore();  // nothing committed yet: unchanged
  EXPECT_THAT(w, ElementsAre(1, 2, 3));
  EXPECT_EQ(blob, "step 1");
  ASSERT_TRUE(state.commit().ok()) << "no job: no membership check";
  EXPECT_EQ(state.commits(), 1);
  w = {7, 8, 9};
  blob = "step 2, longer";
  state.restore();
  EXPECT_THAT(w, ElementsAre(1, 2, 3));
  EXPECT_EQ(blob, "step 1");
  w[0] = 5;
  blob = "";
  ASSERT_TRUE(state.commit().ok()) << "no job: no membership check";
  w[0] = 6;
  blob = "x";
  state.restore();
  EXPECT_THAT(w, ElementsAre(5, 2, 3));
  EXPECT_EQ(blob, "");
  EXPECT_EQ(state.commits(), 2);
}

TEST(State, ResetCallbacksRunInOrder) {
  State state;
  std::vector<int> calls;
  state.register_reset_callback([&] { calls.push_back(1); });
  state.register_reset_callback([&] { calls.push_back(2); });
  state.on_reset();
  state.on_reset();
  EXPECT_THAT(calls, ElementsAre(1, 2, 1, 2));
}

TEST(MembershipError, OnlyTheRetryableKindIsRetried) {
  proto::EpochAborted ab;
  ab.set_epoch(3);
  ab.set_reason("epoch 3 ended: worker w2 (rank 2, host h) killed");
  proto::LostWorker* lost = ab.add_lost();
  lost->set_worker_id("w2");
  lost->set_rank(2);
  absl::Status s = proto::MembershipError(ab, "allreduce 'x'");
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("allreduce 'x': epoch 3 ended"));
  EXPECT_TRUE(is_membership_error(s));
  EXPECT_FALSE(is_evicted_error(s));
  std::optional<proto::EpochAborted> back = proto::MembershipPayload(s);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->epoch(), 3u);
  EXPECT_EQ(back->lost(0).worker_id(), "w2");
  // kAborted without the payload (shutdown, the job's end) is not one.
  EXPECT_FALSE(is_membership_error(absl::AbortedError("the job ended")));
  EXPECT_FALSE(is_membership_error(absl::InvalidArgumentError("bad shape")));
  proto::Evicted ev;
  ev.set_epoch(3);
  ev.set_reason("worker w1 was evicted");
  absl::Status e = proto::EvictedError(ev, *lost);
  EXPECT_EQ(e.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(is_evicted_error(e));
  EXPECT_FALSE(is_membership_error(e)) << "an evicted worker must not retry";
}

// A single worker (no launcher variables: it hosts its own coordinator).
class SingleWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* k :
         {"KOLO_LAUNCHER", "KOLO_COORDINATOR", "KOLO_SECRET",
          "KOLO_SECRET_FILE", "KOLO_HOST_COORDINATOR", "KOLO_ELASTIC", "RANK",
          "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
          "OMPI_COMM_WORLD_RANK"}) {
      ::unsetenv(k);
    }
    ASSERT_TRUE(init().ok());
  }
  void TearDown() override { EXPECT_TRUE(shutdown().ok()); }
};

TEST_F(SingleWorker, SyncCommitsRankZerosState) {
  State state;
  std::vector<double> w = {1.5, 2.5};
  std::string blob = "rank 0's";
  ASSERT_TRUE(state.add_tensor("w", w.data(), 2, DataType::kFloat64).ok());
  ASSERT_TRUE(state.add_blob("b", &blob).ok());
  ASSERT_TRUE(state.sync().ok());
  EXPECT_EQ(state.commits(), 1);
  w = {0, 0};
  blob.clear();
  state.restore();
  EXPECT_THAT(w, ElementsAre(1.5, 2.5));
  EXPECT_EQ(blob, "rank 0's");
}

TEST_F(SingleWorker, RunReturnsOtherErrorsUnchanged) {
  State state;
  int calls = 0;
  absl::Status ok = run(state, [&] {
    ++calls;
    return absl::OkStatus();
  });
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(calls, 1);
  absl::Status bad = run(state, [&] {
    ++calls;
    return absl::InvalidArgumentError("a caller's mistake");
  });
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "a caller's mistake");
  EXPECT_EQ(calls, 2) << "never retried";
}

}  // namespace
}  // namespace kolo::elastic
