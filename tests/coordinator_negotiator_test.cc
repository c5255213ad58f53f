// Tests of the Negotiator (coordinator/negotiator.h): readiness, the global
// order, agreement checks and their messages, dispatch vs batching, Done,
// the stall inspector and Pending(). Times are fake: absl::Time values
// passed in.
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

// ---- Fusion, settings, response cache, ready ticks (issue 5) -------------

// The names of each response of `plan`, one list per response.
std::vector<std::vector<std::string>> Groups(const proto::Plan& plan) {
  std::vector<std::vector<std::string>> out;
  for (const proto::Response& r : plan.responses()) {
    out.emplace_back(r.names().begin(), r.names().end());
  }
  return out;
}

proto::Settings Set(uint64_t threshold, uint32_t capacity,
                    uint64_t direct = uint64_t{1} << 20,
                    bool timeline = false) {
  proto::Settings s;
  s.set_fusion_threshold(threshold);
  s.set_cache_capacity(capacity);
  s.set_fusion_direct_bytes(direct);
  s.set_timeline(timeline);
  return s;
}

proto::Request Typed(const std::string& name, DataType dtype,
                     std::vector<int64_t> shape = {4}) {
  proto::Request r = Req(name, std::move(shape));
  r.set_dtype(static_cast<int>(dtype));
  return r;
}

// Compatible responses of one plan fuse, with look-ahead past a mismatch.
TEST(NegotiatorTest, FusesCompatibleResponsesWithLookAhead) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(
        r,
        AnnReq({Req("a"), Typed("b", DataType::kInt32), Req("c"),
                Req("d", {2}, proto::BROADCAST), Typed("e", DataType::kInt32)}),
        kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  using V = std::vector<std::string>;
  EXPECT_THAT(Groups(out.plans[0]),
              ElementsAre(V{"a", "c"}, V{"b", "e"}, V{"d"}));
}

// The smallest threshold over the ranks counts; 16-byte tensors sit 64
// bytes apart, so a 64-byte threshold holds one and 80 holds two.
TEST(NegotiatorTest, FusionThresholdIsTheSmallestOverRanks) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Announce a0 = Ann({"a", "b", "c"}), a1 = Ann({"a", "b", "c"});
  *a0.mutable_settings() = Set(80, 0);
  *a1.mutable_settings() = Set(1 << 20, 0);
  n.Announce(0, a0, kT0, out);
  n.Announce(1, a1, kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  using V = std::vector<std::string>;
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"a", "b"}, V{"c"}));
  // Threshold 0 on one rank: no fusion at all.
  proto::Announce b0 = Ann({"x", "y"});
  *b0.mutable_settings() = Set(0, 0);
  n.Done(0, 1, kT0, out);
  n.Done(1, 1, kT0, out);
  n.Announce(0, b0, kT0, out);
  n.Announce(1, Ann({"x", "y"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Groups(out.plans[1]), ElementsAre(V{"x"}, V{"y"}));
}

// A tensor of at least the direct size runs alone (in place).
TEST(NegotiatorTest, TensorsOfTheDirectSizeNeverFuse) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = AnnReq({Req("small"), Req("big", {256}), Req("s2")});
    *a.mutable_settings() = Set(1 << 20, 0, /*direct=*/1024);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  using V = std::vector<std::string>;
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"small", "s2"}, V{"big"}));
}

// Fused allgathers carry every member's per-rank rows, name major.
TEST(NegotiatorTest, FusedAllgatherCarriesEveryMembersSizes) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0,
             AnnReq({Req("g1", {1, 3}, proto::ALLGATHER),
                     Req("g2", {2}, proto::ALLGATHER)}),
             kT0, out);
  n.Announce(1,
             AnnReq({Req("g1", {4, 3}, proto::ALLGATHER),
                     Req("g2", {5}, proto::ALLGATHER)}),
             kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_THAT(r.names(), ElementsAre("g1", "g2"));
  EXPECT_THAT(r.sizes(), ElementsAre(1, 4, 2, 5));
}

// A dispatched name gets a bit; announced by that bit on every rank, it is
// a hit (the cached response, the same bit); a rank's metadata change is
// checked again (here a mismatch: an error, and the bit is evicted).
TEST(NegotiatorTest, ResponseCacheHitThenInvalidation) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"t"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses(0).cache_bits_size(), 1);
  const int32_t bit = out.plans[0].responses(0).cache_bits(0);
  EXPECT_EQ(bit, 0);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);

  proto::Announce by_bit;
  by_bit.add_cached(static_cast<uint32_t>(bit));
  for (int r = 0; r < 2; ++r) n.Announce(r, by_bit, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  // A hit on every rank goes by bit: no names on the wire.
  EXPECT_TRUE(out.plans[1].responses(0).by_bit());
  EXPECT_THAT(Names(out.plans[1]), IsEmpty());
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(bit));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
  for (int r = 0; r < 2; ++r) n.Done(r, 2, kT0, out);

  // Rank 1 changes the shape; rank 0 still announces the bit.
  n.Announce(0, by_bit, kT0, out);
  n.Announce(1, AnnReq({Req("t", {8})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  const proto::Response& r = out.plans[2].responses(0);
  EXPECT_EQ(r.error_code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(r.error(), HasSubstr("shape [4] on rank 0 but [8] on rank 1"));
  EXPECT_THAT(r.cache_bits(), ElementsAre(-1));
  EXPECT_THAT(out.plans[2].cache_evicted(), ElementsAre(bit));
}

// A metadata change every rank agrees on keeps the name's bit.
TEST(NegotiatorTest, ResponseCacheAgreedChangeKeepsTheBit) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"t"}), kT0, out);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Req("t", {9})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(0));
}

// Capacity 0 (the smallest over the ranks): no bits at all.
TEST(NegotiatorTest, ResponseCacheCapacityZeroGivesNoBits) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Announce a0 = Ann({"t"}), a1 = Ann({"t"});
  *a0.mutable_settings() = Set(1 << 20, 0);
  *a1.mutable_settings() = Set(1 << 20, 1024);
  n.Announce(0, a0, kT0, out);
  n.Announce(1, a1, kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_EQ(out.plans[0].responses(0).cache_bits_size(), 0);
}

// Shrinking the capacity evicts the least recently used entries in the
// next plan.
TEST(NegotiatorTest, ResponseCacheShrinkEvictsInTheNextPlan) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"a", "b", "c"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"d"});
    *a.mutable_settings() = Set(1 << 20, 2);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 2u);
  // a, b, c held bits 0, 1, 2; capacity 2 keeps the two most recent after
  // d: c and d.
  EXPECT_THAT(out.plans[1].cache_evicted(),
              ::testing::UnorderedElementsAre(0u, 1u));
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(Not(-1)));
}

// A bit no tensor holds is ignored (and logged): nothing becomes ready.
TEST(NegotiatorTest, UnknownCacheBitIsIgnored) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Announce a;
  a.add_cached(7);
  n.Announce(0, a, kT0, out);
  n.Announce(1, a, kT0, out);
  EXPECT_TRUE(out.plans.empty());
  EXPECT_TRUE(n.Pending(kT0).empty());
}

// With a timeline asked for, responses carry each rank's ready tick.
TEST(NegotiatorTest, ReadyTicksWithATimeline) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  proto::Announce a = Ann({"t"});
  *a.mutable_settings() = Set(1 << 20, 0, 1 << 20, /*timeline=*/true);
  n.Announce(2, a, kT0, out);
  proto::Announce b = Ann({"t"});
  *b.mutable_settings() = Set(1 << 20, 0);
  n.Announce(0, b, At(absl::Microseconds(30)), out);
  n.Announce(1, b, At(absl::Microseconds(75)), out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(out.plans[0].responses(0).ready_us(), ElementsAre(30, 75, 0));
}

// A plan that gives a bit out and evicts it again (more new names than the
// capacity): that name holds no bit after the plan.
TEST(NegotiatorTest, BitGivenAndEvictedInOnePlanIsNotKept) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"b", "c"});
    *a.mutable_settings() = Set(1 << 20, 1);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);  // fused
  EXPECT_THAT(out.plans[0].responses(0).cache_bits(), ElementsAre(-1, 1));
  EXPECT_THAT(out.plans[0].cache_evicted(), ElementsAre(0u));
}

// A cache bit some ranks announced is a pending tensor like any other: it
// is listed by name and stall warnings name it.
TEST(NegotiatorTest, PartiallyAnnouncedBitsArePendingByName) {
  NegotiatorOptions o = Opts(2);
  o.stall_check = absl::Seconds(60);
  Negotiator n(o);
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"grad/w"}), kT0, out);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  proto::Announce by_bit;
  by_bit.add_cached(0);
  n.Announce(1, by_bit, kT0, out);
  const std::vector<proto::PendingTensor> pending =
      n.Pending(At(absl::Seconds(2)));
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].name(), "grad/w");
  EXPECT_THAT(pending[0].ranks(), ElementsAre(1));
  EXPECT_EQ(pending[0].seconds(), 2.0);
  EXPECT_EQ(n.NextWake(), At(absl::Seconds(60)));
  n.Tick(At(absl::Seconds(61)), out);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_THAT(out.warnings[0],
              HasSubstr("'grad/w' waits for rank 0 (submitted by rank 1)"));
  n.Announce(0, by_bit, At(absl::Seconds(62)), out);  // resolves it
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_TRUE(out.plans[1].responses(0).by_bit());
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(),
              ElementsAre(by_bit.cached(0)));
  EXPECT_TRUE(n.Pending(At(absl::Seconds(63))).empty());
}

// A capacity change that evicts a bit some ranks announced: the tensor
// still completes (from the evicted entry's request), and holds no bit.
TEST(NegotiatorTest, EvictionOfAPartiallyAnnouncedBitKeepsIt) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"t"});
    *a.mutable_settings() = Set(1 << 20, 4);
    n.Announce(r, a, kT0, out);
  }
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  proto::Announce by_bit;
  by_bit.add_cached(0);
  n.Announce(0, by_bit, kT0, out);
  proto::Announce full = Ann({"t"});
  *full.mutable_settings() = Set(1 << 20, 0);  // evicts bit 0 first
  n.Announce(1, full, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("t"));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[1].cache_evicted(), ElementsAre(0u));
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(-1));
}

// Runs plan 1 for `names` announced in full on 2 ranks and retires it; the
// bit of each name.
std::map<std::string, uint32_t> CacheAll(Negotiator& n,
                                         const std::vector<std::string>& names,
                                         NegotiatorOutput& out) {
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann(names), kT0, out);
  std::map<std::string, uint32_t> bits;
  for (const proto::Response& r : out.plans.back().responses()) {
    for (int i = 0; i < r.names_size(); ++i) {
      bits[r.names(i)] = static_cast<uint32_t>(r.cache_bits(i));
    }
  }
  for (int r = 0; r < 2; ++r) n.Done(r, out.plans.back().seq(), kT0, out);
  return bits;
}

// The steady state: every tensor a hit on every rank. They fuse into one
// response that lists them by bit, in the order the names went before.
TEST(NegotiatorTest, FusedHitsGoByBitInOneResponse) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  std::map<std::string, uint32_t> bits = CacheAll(n, {"c", "a", "b"}, out);
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Response& first = out.plans[0].responses(0);
  ASSERT_EQ(first.names_size(), 3);
  EXPECT_FALSE(first.by_bit());
  proto::Announce hits;
  for (const char* name : {"c", "a", "b"}) hits.add_cached(bits.at(name));
  for (int r = 0; r < 2; ++r) n.Announce(r, hits, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ASSERT_EQ(out.plans[1].responses_size(), 1);
  const proto::Response& r = out.plans[1].responses(0);
  EXPECT_TRUE(r.by_bit());
  EXPECT_THAT(r.names(), IsEmpty());
  EXPECT_EQ(r.op(), proto::ALLREDUCE);
  EXPECT_EQ(r.error_code(), 0);
  std::vector<int32_t> want;
  for (const std::string& name : first.names()) {
    want.push_back(static_cast<int32_t>(bits.at(name)));
  }
  EXPECT_THAT(r.cache_bits(), ElementsAreArray(want));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
}

// A hit fused with a new name: the response names everything (the hit's
// name comes from the cache), not by bit.
TEST(NegotiatorTest, HitFusedWithANewNameGoesByName) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  std::map<std::string, uint32_t> bits = CacheAll(n, {"a"}, out);
  for (int r = 0; r < 2; ++r) {
    proto::Announce mixed = Ann({"new"});
    mixed.add_cached(bits.at("a"));
    n.Announce(r, mixed, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 2u);
  ASSERT_EQ(out.plans[1].responses_size(), 1);
  const proto::Response& r = out.plans[1].responses(0);
  EXPECT_FALSE(r.by_bit());
  EXPECT_THAT(r.names(), UnorderedElementsAre("a", "new"));
  ASSERT_EQ(r.cache_bits_size(), 2);
  for (int i = 0; i < 2; ++i) {
    if (r.names(i) == "a") {
      EXPECT_EQ(r.cache_bits(i), static_cast<int32_t>(bits.at("a")));
    } else {
      EXPECT_GE(r.cache_bits(i), 0);
      EXPECT_NE(r.cache_bits(i), static_cast<int32_t>(bits.at("a")));
    }
  }
}

// A hit completed by a joined rank goes by name: the joined rank may never
// have held the bit.
TEST(NegotiatorTest, HitWithAJoinedRankGoesByName) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  std::map<std::string, uint32_t> bits = CacheAll(n, {"t"}, out);
  proto::Request join = Req("join", {}, proto::JOIN);
  n.Announce(1, AnnReq({join}), kT0, out);
  proto::Announce hit;
  hit.add_cached(bits.at("t"));
  n.Announce(0, hit, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  const proto::Response& r = out.plans[1].responses(0);
  EXPECT_FALSE(r.by_bit());
  EXPECT_THAT(r.names(), ElementsAre("t"));
  EXPECT_THAT(r.joined(), ElementsAre(1));
}

// The fast path (negotiator_fast.cc): the hits the ranks ran among
// themselves come back in the exits (Done.fast_used), and the cache's LRU
// order follows them: a full cache then evicts the entry not used on the
// fast path, not the one that was.
TEST(NegotiatorTest, FastPathHitsKeepTheirEntriesRecentlyUsed) {
  NegotiatorOptions o = Opts(2);
  o.cache_capacity = 2;
  Negotiator n(o);
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a = Ann({"a", "b"});
    a.mutable_settings()->set_fast_path(true);
    a.mutable_settings()->set_cache_capacity(2);
    a.mutable_settings()->set_fusion_threshold(0);
    a.mutable_settings()->set_fusion_direct_bytes(uint64_t{1} << 20);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Plan& first = out.plans[0];
  ASSERT_TRUE(first.has_fast_path());
  ASSERT_EQ(first.responses_size(), 2);
  const int32_t bit_a = first.responses(0).cache_bits(0);
  const int32_t bit_b = first.responses(1).cache_bits(0);
  ASSERT_GE(bit_a, 0);
  ASSERT_GE(bit_b, 0);
  EXPECT_TRUE(n.on_fast_path());
  // Fast plans 2 and 3 ran 'a' only; every rank says so when it leaves.
  const std::vector<uint32_t> used = {static_cast<uint32_t>(bit_a)};
  n.FastExit(0, 3, used, kT0, out);
  n.FastExit(1, 3, used, kT0, out);
  EXPECT_FALSE(n.on_fast_path());
  n.Announce(0, Ann({"c"}), kT0, out);
  n.Announce(1, Ann({"c"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_EQ(out.plans[1].seq(), 4u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("c"));
  EXPECT_THAT(out.plans[1].cache_evicted(),
              ElementsAre(static_cast<uint32_t>(bit_b)));
}

}  // namespace
}  // namespace kolo::coordinator
