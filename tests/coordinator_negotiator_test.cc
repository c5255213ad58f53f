// Tests of the Negotiator (coordinator/negotiator.h): readiness, the global
// order, agreement checks and their messages, dispatch vs batching, Done,
// the stall inspector and Pending(). Times are fake: absl::Time values
// passed in. Fusion, settings, the response cache and ready ticks are in
// coordinator_negotiator_cache_test.cc (the same executable).
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/negotiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/types.h"
#include "tests/testing/negotiator_messages.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// Req, Ann, AnnReq, Names, Opts, kT0, At.
using namespace ::kolo::testing;  // NOLINT(build/namespaces)

std::vector<uint64_t> Seqs(const NegotiatorOutput& out) {
  std::vector<uint64_t> seqs;
  for (const proto::Plan& p : out.plans) seqs.push_back(p.seq());
  return seqs;
}

// Rank r announces per_rank[r] (in rank order); the single response of the
// single plan that results.
proto::Response Resolve(const std::vector<proto::Request>& per_rank) {
  Negotiator n(Opts(static_cast<int>(per_rank.size())));
  NegotiatorOutput out;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    n.Announce(static_cast<int>(r), AnnReq({per_rank[r]}), kT0, out);
  }
  EXPECT_EQ(out.plans.size(), 1u);
  if (out.plans.size() != 1 || out.plans[0].responses_size() != 1) return {};
  return out.plans[0].responses(0);
}

void ExpectError(const proto::Response& r, absl::StatusCode code,
                 const std::string& message) {
  EXPECT_EQ(r.error_code(), static_cast<int>(code));
  EXPECT_EQ(r.error(), message);
}

TEST(NegotiatorTest, ReadyOnlyWhenEveryRankAnnounced) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, Ann({"a"}), kT0, out);
  n.Announce(2, Ann({"a"}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(1, Ann({"a"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_EQ(out.plans[0].seq(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_THAT(r.names(), ElementsAre("a"));
  EXPECT_EQ(r.op(), proto::ALLREDUCE);
  EXPECT_EQ(r.error_code(), 0);
  EXPECT_THAT(r.sizes(), IsEmpty());
  EXPECT_EQ(n.plans_sent(), 1u);
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

TEST(NegotiatorTest, SizeOneEveryAnnounceIsReady) {
  Negotiator n(Opts(1));
  NegotiatorOutput out;
  n.Announce(0, Ann({"a"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("a"));
  n.Done(0, 1, kT0, out);
  n.Announce(0, Ann({"b"}), kT0, out);
  EXPECT_THAT(Seqs(out), ElementsAre(1, 2));
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("b"));
}

// Names become ready in the order of their last announcement, whatever
// order each rank announced them in; plan sequence numbers are consecutive.
TEST(NegotiatorTest, ReadyInOrderOfLastAnnouncement) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, Ann({"a", "b", "c"}), kT0, out);
  n.Announce(1, Ann({"c"}), kT0, out);
  n.Done(0, 1, kT0, out);
  n.Done(1, 1, kT0, out);
  n.Announce(1, Ann({"b", "a"}), kT0, out);  // both ready in one call
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Seqs(out), ElementsAre(1, 2));
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("c"));
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("b", "a"));
}

// Several names ready in one call while idle go out together in one plan.
TEST(NegotiatorTest, SeveralReadyInOneCallGoTogether) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, Ann({"a", "b", "c"}), kT0, out);
  n.Announce(1, Ann({"a", "b", "c"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_EQ(out.plans[0].seq(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("a", "b", "c"));
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
}

TEST(NegotiatorTest, OpMismatch) {
  ExpectError(Resolve({Req("x"), Req("x", {4}, proto::BROADCAST)}),
              absl::StatusCode::kFailedPrecondition,
              "tensor 'x': op allreduce on rank 0 but broadcast on rank 1");
}

TEST(NegotiatorTest, DtypeMismatch) {
  proto::Request i32 = Req("x");
  i32.set_dtype(static_cast<int>(DataType::kInt32));
  i32.add_shape(9);  // a shape mismatch too: dtype is checked first
  ExpectError(
      Resolve({Req("x"), Req("x"), i32}), absl::StatusCode::kFailedPrecondition,
      "tensor 'x': allreduce dtype float32 on ranks 0,1 but int32 on rank 2");
}

TEST(NegotiatorTest, DeviceMismatch) {
  proto::Request gpu = Req("x");
  gpu.set_device(1);
  ExpectError(Resolve({Req("x"), gpu}), absl::StatusCode::kFailedPrecondition,
              "tensor 'x': allreduce device kind cpu on rank 0 but cuda on "
              "rank 1");
}

// Ranks agree on the device kind, not the ordinal: each drives its own GPU.
TEST(NegotiatorTest, CudaOrdinalsMayDiffer) {
  proto::Request gpu0 = Req("x");
  gpu0.set_device(0);
  proto::Request gpu3 = Req("x");
  gpu3.set_device(3);
  const proto::Response ok = Resolve({gpu0, gpu3});
  EXPECT_EQ(ok.error_code(), 0) << ok.error();
}

// Every rank of the set gets the same error (one plan for all), the
// majority named first.
TEST(NegotiatorTest, DeviceKindMismatchNamesEveryGroup) {
  proto::Request gpu = Req("x");
  gpu.set_device(0);
  ExpectError(Resolve({gpu, Req("x"), gpu}),
              absl::StatusCode::kFailedPrecondition,
              "tensor 'x': allreduce device kind cuda on ranks 0,2 but cpu "
              "on rank 1");
}

TEST(NegotiatorTest, ShapeMismatch) {
  const std::string name = "grad/fc.weight";
  ExpectError(Resolve({Req(name, {1000, 2048}), Req(name, {1000, 2048}),
                       Req(name, {1000, 2047}), Req(name, {1000, 2048})}),
              absl::StatusCode::kFailedPrecondition,
              "tensor 'grad/fc.weight': allreduce shape [1000,2048] on ranks "
              "0,1,3 but [1000,2047] on rank 2");
}

TEST(NegotiatorTest, MoreThanTwoGroups) {
  ExpectError(
      Resolve({Req("x", {1}), Req("x", {1}), Req("x", {2}), Req("x", {3})}),
      absl::StatusCode::kFailedPrecondition,
      "tensor 'x': allreduce shape [1] on ranks 0,1 but [2] on rank 2 "
      "and [3] on rank 3");
  ExpectError(
      Resolve({Req("x", {1}), Req("x", {2}), Req("x", {3}), Req("x", {})}),
      absl::StatusCode::kFailedPrecondition,
      "tensor 'x': allreduce shape [1] on rank 0 but [2] on rank 1, "
      "[3] on rank 2 and [] on rank 3");
}

TEST(NegotiatorTest, GroupsOfEqualSizeByLowestRank) {
  ExpectError(
      Resolve({Req("x", {2}), Req("x", {1}), Req("x", {1}), Req("x", {2})}),
      absl::StatusCode::kFailedPrecondition,
      "tensor 'x': allreduce shape [2] on ranks 0,3 but [1] on ranks "
      "1,2");
}

TEST(NegotiatorTest, ReduceOpMismatch) {
  proto::Request max = Req("x");
  max.set_reduce_op(static_cast<int>(ReduceOp::kMax));
  ExpectError(
      Resolve({Req("x"), max}), absl::StatusCode::kFailedPrecondition,
      "tensor 'x': allreduce reduce op sum on rank 0 but max on rank 1");
}

TEST(NegotiatorTest, PrescaleMismatch) {
  proto::Request half = Req("x");
  half.set_prescale(0.5);
  ExpectError(
      Resolve({Req("x"), half, Req("x")}),
      absl::StatusCode::kFailedPrecondition,
      "tensor 'x': allreduce prescale 1 on ranks 0,2 but 0.5 on rank 1");
}

TEST(NegotiatorTest, PostscaleMismatch) {
  proto::Request a = Req("x", {4}, proto::REDUCESCATTER);
  proto::Request b = a;
  b.set_postscale(0.1);
  ExpectError(Resolve({a, b, b}), absl::StatusCode::kFailedPrecondition,
              "tensor 'x': reducescatter postscale 0.1 on ranks 1,2 but 1 on "
              "rank 0");
}

TEST(NegotiatorTest, ReducescatterSplitsMismatch) {
  proto::Request a = Req("x", {4}, proto::REDUCESCATTER);
  proto::Request b = a;
  a.add_splits(1);
  a.add_splits(3);
  b.add_splits(2);
  b.add_splits(2);
  ExpectError(Resolve({a, b}), absl::StatusCode::kFailedPrecondition,
              "tensor 'x': reducescatter splits [1,3] on rank 0 but [2,2] on "
              "rank 1");
  ExpectError(Resolve({Req("x", {4}, proto::REDUCESCATTER), b}),
              absl::StatusCode::kFailedPrecondition,
              "tensor 'x': reducescatter splits default on rank 0 but [2,2] "
              "on rank 1");
  EXPECT_EQ(Resolve({b, b}).error_code(), 0);
}

TEST(NegotiatorTest, BroadcastRootAndShape) {
  proto::Request root0 = Req("x", {4}, proto::BROADCAST);
  proto::Request root1 = root0;
  root1.set_root(1);
  ExpectError(Resolve({root0, root1}), absl::StatusCode::kFailedPrecondition,
              "tensor 'x': broadcast root 0 on rank 0 but 1 on rank 1");
  ExpectError(Resolve({root0, Req("x", {5}, proto::BROADCAST)}),
              absl::StatusCode::kFailedPrecondition,
              "tensor 'x': broadcast shape [4] on rank 0 but [5] on rank 1");
  // Scale factors and reduce ops mean nothing to a broadcast.
  proto::Request other = root0;
  other.set_prescale(3);
  other.set_reduce_op(static_cast<int>(ReduceOp::kMin));
  const proto::Response ok = Resolve({root0, other});
  EXPECT_EQ(ok.error_code(), 0);
  EXPECT_EQ(ok.op(), proto::BROADCAST);
}

TEST(NegotiatorTest, BroadcastRootOutOfRange) {
  proto::Request r = Req("x", {4}, proto::BROADCAST);
  r.set_root(2);
  ExpectError(Resolve({r, r}), absl::StatusCode::kInvalidArgument,
              "tensor 'x': broadcast root 2 is not one of its ranks 0,1");
}

TEST(NegotiatorTest, AllgatherTrailingDimensionsAndSizes) {
  ExpectError(
      Resolve({Req("x", {2, 3}, proto::ALLGATHER),
               Req("x", {2, 4}, proto::ALLGATHER)}),
      absl::StatusCode::kFailedPrecondition,
      "tensor 'x': allgather shape [*,3] on rank 0 but [*,4] on rank 1");
  const proto::Response ok = Resolve({Req("x", {2, 3}, proto::ALLGATHER),
                                      Req("x", {5, 3}, proto::ALLGATHER),
                                      Req("x", {0, 3}, proto::ALLGATHER)});
  EXPECT_EQ(ok.error_code(), 0);
  EXPECT_EQ(ok.op(), proto::ALLGATHER);
  EXPECT_THAT(ok.names(), ElementsAre("x"));
  EXPECT_THAT(ok.sizes(), ElementsAre(2, 5, 0));
}

TEST(NegotiatorTest, AllgatherOfAScalarIsRefused) {
  ExpectError(Resolve({Req("x", {2, 3}, proto::ALLGATHER),
                       Req("x", {}, proto::ALLGATHER)}),
              absl::StatusCode::kInvalidArgument,
              "tensor 'x': allgather of a scalar on rank 1: the tensor needs "
              "at least one dimension");
}

proto::Request Alltoall(std::vector<int64_t> shape,
                        std::vector<int64_t> splits) {
  proto::Request r = Req("x", std::move(shape), proto::ALLTOALL);
  for (int64_t s : splits) r.add_splits(s);
  return r;
}

TEST(NegotiatorTest, AlltoallTrailingDimensionsAndMatrix) {
  ExpectError(
      Resolve({Alltoall({4, 3, 4}, {2, 2}), Alltoall({4, 3, 5}, {2, 2})}),
      absl::StatusCode::kFailedPrecondition,
      "tensor 'x': alltoall shape [*,3,4] on rank 0 but [*,3,5] on rank 1");
  const proto::Response ok =
      Resolve({Alltoall({3, 2}, {1, 2}), Alltoall({4, 2}, {4, 0})});
  EXPECT_EQ(ok.error_code(), 0);
  EXPECT_EQ(ok.op(), proto::ALLTOALL);
  // Sender major: row r is what rank r sends to each rank.
  EXPECT_THAT(ok.sizes(), ElementsAre(1, 2, 4, 0));
}

TEST(NegotiatorTest, AlltoallSplitsNotOnePerRank) {
  ExpectError(
      Resolve({Alltoall({3}, {1, 2}), Alltoall({3}, {3})}),
      absl::StatusCode::kInvalidArgument,
      "tensor 'x': alltoall splits [3] on rank 1 are not 2 "
      "non-negative entries summing to the first dimension of shape [3]");
}

TEST(NegotiatorTest, BarrierChecksOnlyTheOp) {
  proto::Request a = Req("b", {}, proto::BARRIER);
  proto::Request b = a;
  b.set_dtype(static_cast<int>(DataType::kInt8));
  b.set_device(0);
  const proto::Response ok = Resolve({a, b});
  EXPECT_EQ(ok.error_code(), 0);
  EXPECT_EQ(ok.op(), proto::BARRIER);
}

// A request flagged invalid on one rank fails on every rank (one plan for
// all) with kInvalidArgument, before any agreement check; the next op works.
TEST(NegotiatorTest, FlaggedInvalidFailsOnEveryRank) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  proto::Request bad = Req("x", {7});
  bad.set_invalid("splits sum to 5, not to the first dimension 6");
  n.Announce(0, AnnReq({Req("x")}), kT0, out);
  n.Announce(1, AnnReq({bad}), kT0, out);
  n.Announce(2, AnnReq({Req("x", {4}, proto::BROADCAST)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  ExpectError(out.plans[0].responses(0), absl::StatusCode::kInvalidArgument,
              "tensor 'x': invalid on rank 1: splits sum to 5, not to the "
              "first dimension 6");
  for (int r = 0; r < 3; ++r) n.Done(r, 1, kT0, out);
  for (int r = 0; r < 3; ++r) n.Announce(r, Ann({"y"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_EQ(out.plans[1].seq(), 2u);
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("y"));
}

TEST(NegotiatorTest, FlaggedInvalidOnSeveralRanks) {
  proto::Request a = Req("x");
  a.set_invalid("reason A");
  proto::Request b = Req("x");
  b.set_invalid("reason B");
  ExpectError(Resolve({a, Req("x"), a}), absl::StatusCode::kInvalidArgument,
              "tensor 'x': invalid on ranks 0,2: reason A");
  ExpectError(
      Resolve({b, a, a}), absl::StatusCode::kInvalidArgument,
      "tensor 'x': invalid on ranks 1,2: reason A; on rank 0: reason B");
}

// After dispatch a name may be announced again: a new op.
TEST(NegotiatorTest, NameAnnouncedAgainAfterDispatchIsANewOp) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, Ann({"a"}), kT0, out);
  n.Announce(1, Ann({"a"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  n.Announce(0, Ann({"a"}), At(absl::Seconds(1)), out);
  ASSERT_EQ(n.Pending(At(absl::Seconds(2))).size(), 1u);
  EXPECT_THAT(n.Pending(At(absl::Seconds(2)))[0].ranks(), ElementsAre(0));
  n.Announce(1, Ann({"a"}), At(absl::Seconds(2)), out);  // held: busy
  EXPECT_EQ(out.plans.size(), 1u);
  n.Done(0, 1, kT0, out);
  n.Done(1, 1, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("a"));
}

// A second announcement of a name by the same rank before its dispatch
// (partial or held) is ignored.
TEST(NegotiatorTest, DuplicateBeforeDispatchIgnored) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Req("a", {4})}), kT0, out);
  n.Announce(0, AnnReq({Req("a", {5})}), kT0, out);  // ignored
  n.Announce(1, AnnReq({Req("a", {4})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_EQ(out.plans[0].responses(0).error_code(), 0);

  n.Announce(0, Ann({"b"}), kT0, out);
  n.Announce(1, Ann({"b"}), kT0, out);  // held
  n.Announce(1, Ann({"b"}), kT0, out);  // ignored: held, not dispatched
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  n.Done(0, 1, kT0, out);
  n.Done(1, 1, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("b"));
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// Idle: a ready name goes out at once. Busy: held until Done makes the data
// plane idle.
TEST(NegotiatorTest, BusyHoldsUntilDoneMakesIdle) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"a"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
  const absl::Time t1 = At(absl::Milliseconds(1));
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"b"}), t1, out);
  const absl::Time t2 = At(absl::Milliseconds(3));
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"c"}), t2, out);
  EXPECT_EQ(out.plans.size(), 1u);
  EXPECT_EQ(n.NextWake(), t1 + absl::Milliseconds(10));  // the oldest held
  n.Tick(At(absl::Microseconds(10'999)), out);  // before its cycle time
  n.Done(0, 1, t2, out);                        // rank 1 still busy
  EXPECT_EQ(out.plans.size(), 1u);
  n.Done(1, 1, t2, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_EQ(out.plans[1].seq(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("b", "c"));
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
  // Idle again with nothing held: Done sends nothing; the next ready name
  // goes out at once.
  n.Done(0, 2, t2, out);
  n.Done(1, 2, t2, out);
  EXPECT_EQ(out.plans.size(), 2u);
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"d"}), t2, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_THAT(Names(out.plans[2]), ElementsAre("d"));
}

// Busy: held responses go out once the oldest waited the cycle time, even
// though the data plane is still busy.
TEST(NegotiatorTest, TickFlushesAfterCycleTime) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"a"}), kT0, out);
  const absl::Time t1 = At(absl::Milliseconds(1));
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"b"}), t1, out);
  n.Tick(At(absl::Microseconds(10'999)), out);
  EXPECT_EQ(out.plans.size(), 1u);
  n.Tick(At(absl::Milliseconds(11)), out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_EQ(out.plans[1].seq(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("b"));
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
  // Plan 1 done everywhere, plan 2 not: still busy, so c is held.
  n.Done(0, 1, t1, out);
  n.Done(1, 1, t1, out);
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"c"}), t1, out);
  EXPECT_EQ(out.plans.size(), 2u);
  n.Done(0, 2, t1, out);
  n.Done(1, 2, t1, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_EQ(out.plans[2].seq(), 3u);
  EXPECT_THAT(Names(out.plans[2]), ElementsAre("c"));
}

TEST(NegotiatorTest, OlderOrFutureDoneIgnored) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"a"}), kT0, out);
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"b"}), kT0, out);
  n.Tick(At(absl::Milliseconds(10)), out);  // plan 2: b
  ASSERT_EQ(out.plans.size(), 2u);
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"c"}), kT0, out);  // held
  n.Done(0, 2, kT0, out);
  n.Done(0, 1, kT0, out);  // older: rank 0 stays at 2
  n.Done(1, 7, kT0, out);  // beyond the plans sent: ignored
  EXPECT_EQ(out.plans.size(), 2u);
  n.Done(1, 2, kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_THAT(Names(out.plans[2]), ElementsAre("c"));
}

TEST(NegotiatorTest, StallWarningTimingAndContent) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, Ann({"grad/b", "grad/c"}), kT0, out);
  n.Announce(2, Ann({"grad/b"}), At(absl::Seconds(1)), out);
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(60)));
  n.Tick(At(absl::Seconds(59.9)), out);
  EXPECT_THAT(out.warnings, IsEmpty());
  n.Tick(At(absl::Seconds(61)), out);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_EQ(out.warnings[0],
            "stall: 2 tensors submitted by some ranks but not others, the "
            "oldest for 61.0 s: 'grad/b' waits for rank 1 (submitted by ranks "
            "0,2), 'grad/c' waits for ranks 1,2 (submitted by rank 0); a rank "
            "may be stuck, or the ranks submit different tensors (warning "
            "every KOLO_STALL_CHECK_TIME_SECONDS=60)");
  EXPECT_FALSE(out.shutdown.has_value());
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(121)));
  n.Tick(At(absl::Seconds(100)), out);
  EXPECT_EQ(out.warnings.size(), 1u);
  n.Tick(At(absl::Seconds(121)), out);
  ASSERT_EQ(out.warnings.size(), 2u);
  EXPECT_THAT(out.warnings[1], HasSubstr("the oldest for 121.0 s: 'grad/b'"));

  // grad/b completes; grad/c still waits for rank 2.
  n.Announce(1, Ann({"grad/b", "grad/c"}), At(absl::Seconds(130)), out);
  ASSERT_EQ(out.plans.size(), 1u);
  n.Tick(At(absl::Seconds(181)), out);
  ASSERT_EQ(out.warnings.size(), 3u);
  EXPECT_EQ(out.warnings[2],
            "stall: 1 tensor submitted by some ranks but not others, the "
            "oldest for 181.0 s: 'grad/c' waits for rank 2 (submitted by ranks "
            "0,1); a rank may be stuck, or the ranks submit different tensors "
            "(warning every KOLO_STALL_CHECK_TIME_SECONDS=60)");
  // All done: nothing left to warn about.
  n.Announce(2, Ann({"grad/c"}), At(absl::Seconds(182)), out);
  n.Tick(At(absl::Seconds(1000)), out);  // flushes the held grad/c
  EXPECT_EQ(out.warnings.size(), 3u);
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
}

TEST(NegotiatorTest, StallWarningListsOnlyStalledAndAtMostFive) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int i = 0; i < 7; ++i) {
    n.Announce(0, Ann({"t" + std::to_string(i)}), At(absl::Seconds(i)), out);
  }
  n.Announce(0, Ann({"young"}), At(absl::Seconds(50)), out);
  n.Tick(At(absl::Seconds(70)), out);
  ASSERT_EQ(out.warnings.size(), 1u);
  const std::string& w = out.warnings[0];
  EXPECT_THAT(w, HasSubstr("stall: 7 tensors submitted by some ranks but not "
                           "others, the oldest for 70.0 s: 't0' waits for "
                           "rank 1 (submitted by rank 0), 't1' waits"));
  EXPECT_THAT(w, HasSubstr("'t4' waits for rank 1 (submitted by rank 0), and "
                           "2 more; a rank may be stuck"));
  EXPECT_THAT(w, Not(HasSubstr("'t5'")));
  EXPECT_THAT(w, Not(HasSubstr("young")));
}

TEST(NegotiatorTest, StallShutdownGivenOnce) {
  NegotiatorOptions o = Opts(3);
  o.stall_check = absl::ZeroDuration();
  o.stall_shutdown = absl::Seconds(5);
  Negotiator n(o);
  NegotiatorOutput out;
  n.Announce(0, Ann({"a"}), kT0, out);
  n.Announce(2, Ann({"a"}), At(absl::Seconds(1)), out);
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(5)));
  n.Tick(At(absl::Seconds(4.9)), out);
  EXPECT_FALSE(out.shutdown.has_value());
  n.Tick(At(absl::Seconds(5)), out);
  ASSERT_TRUE(out.shutdown.has_value());
  EXPECT_EQ(*out.shutdown,
            "stall shutdown: 'a' waited 5.0 s for rank 1 (submitted by ranks "
            "0,2); a rank may be stuck, or the ranks submit different tensors "
            "(KOLO_STALL_SHUTDOWN_TIME_SECONDS=5)");
  EXPECT_THAT(out.warnings, IsEmpty());
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
  NegotiatorOutput later;
  n.Tick(At(absl::Seconds(10)), later);
  EXPECT_FALSE(later.shutdown.has_value());
}

TEST(NegotiatorTest, StallShutdownNamesEveryPendingTensor) {
  NegotiatorOptions o = Opts(3);
  o.stall_check = absl::ZeroDuration();
  o.stall_shutdown = absl::Seconds(2);
  Negotiator n(o);
  NegotiatorOutput out;
  n.Announce(2, Ann({"old"}), kT0, out);
  n.Announce(0, Ann({"young"}), At(absl::Seconds(1.5)), out);
  n.Tick(At(absl::Seconds(2)), out);
  ASSERT_TRUE(out.shutdown.has_value());
  EXPECT_EQ(*out.shutdown,
            "stall shutdown: 'old' waited 2.0 s for ranks 0,1 (submitted by "
            "rank 2), 'young' waited 0.5 s for ranks 1,2 (submitted by rank "
            "0); a rank may be stuck, or the ranks submit different tensors "
            "(KOLO_STALL_SHUTDOWN_TIME_SECONDS=2)");
}

TEST(NegotiatorTest, StallShutdownAndWarningTogether) {
  NegotiatorOptions o = Opts(2);
  o.stall_check = absl::Seconds(2);
  o.stall_shutdown = absl::Seconds(3);
  Negotiator n(o);
  NegotiatorOutput out;
  n.Announce(1, Ann({"a"}), kT0, out);
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(2)));
  n.Tick(At(absl::Seconds(2)), out);
  EXPECT_EQ(out.warnings.size(), 1u);
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(3)));  // shutdown before warning
  n.Tick(At(absl::Seconds(3)), out);
  ASSERT_TRUE(out.shutdown.has_value());
  EXPECT_THAT(*out.shutdown, HasSubstr("'a' waited 3.0 s for rank 0 "
                                       "(submitted by rank 1)"));
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(4)));  // the next warning
}

TEST(NegotiatorTest, StallCheckZeroDisablesWarnings) {
  NegotiatorOptions o = Opts(2);
  o.stall_check = absl::ZeroDuration();
  Negotiator n(o);
  NegotiatorOutput out;
  n.Announce(0, Ann({"a"}), kT0, out);
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
  n.Tick(At(absl::Hours(10)), out);
  EXPECT_THAT(out.warnings, IsEmpty());
  EXPECT_FALSE(out.shutdown.has_value());
}

TEST(NegotiatorTest, PendingOldestFirstWithSortedRanks) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(1, Ann({"x"}), kT0, out);
  n.Announce(2, Ann({"y"}), At(absl::Seconds(2)), out);
  n.Announce(0, Ann({"y", "x"}), At(absl::Seconds(3)), out);
  const std::vector<proto::PendingTensor> p = n.Pending(At(absl::Seconds(5)));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name(), "x");
  EXPECT_THAT(p[0].ranks(), ElementsAre(0, 1));
  EXPECT_DOUBLE_EQ(p[0].seconds(), 5.0);
  EXPECT_EQ(p[1].name(), "y");
  EXPECT_THAT(p[1].ranks(), ElementsAre(0, 2));
  EXPECT_DOUBLE_EQ(p[1].seconds(), 3.0);
  EXPECT_THAT(out.plans, IsEmpty());
}

}  // namespace
}  // namespace kolo::coordinator
