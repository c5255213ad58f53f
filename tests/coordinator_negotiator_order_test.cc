// Tests of the Negotiator's ordered streams (coordinator/negotiator.h,
// negotiator_order.cc; proto Request.order_stream): ops every member calls
// in one order, each with its call's slot. Matching calls run as any op;
// different calls in one slot fail on every rank once every member
// announced there, by name or by cache bit, grouped or not; the stream's
// next calls go on. A void (a rank refused its call in a slot) fails the
// others' calls there as soon as they are all in, with the reason.
// Part of the coordinator_negotiator_test executable.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/negotiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/negotiator_messages.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Req, AnnReq, Names, Opts, kT0.
using namespace ::kolo::testing;  // NOLINT(build/namespaces)

// Request `name` (an allreduce unless `op`) at `slot` of stream "s".
proto::Request Call(const std::string& name, uint32_t slot,
                    proto::OpType op = proto::ALLREDUCE) {
  proto::Request r = Req(name, {4}, op);
  r.set_order_stream("s");
  r.set_order_slot(slot);
  return r;
}

// Member `index` of grouped allreduce `group` (of `size` members) at
// `slot`: as the worker makes them, only the first carries the slot.
proto::Request Member(const std::string& group, int32_t index, int32_t size,
                      uint32_t slot) {
  proto::Request r = Call(group + "." + std::to_string(index), slot);
  if (index > 0) {
    r.clear_order_stream();
    r.clear_order_slot();
  }
  r.set_group(group);
  r.set_group_size(size);
  return r;
}

// A void, as the worker makes it: the call `name` at `slot` of stream "s",
// refused because `why`.
proto::Request Void(const std::string& name, uint32_t slot,
                    const std::string& why) {
  proto::Request r = Req(name + " (void)", {}, proto::BARRIER);
  r.set_order_stream("s");
  r.set_order_slot(slot);
  r.set_order_void(why);
  return r;
}

constexpr auto kMismatch =
    static_cast<int>(absl::StatusCode::kFailedPrecondition);

// Every response of `plan` has error code `code` (0: none).
void ExpectCodes(const proto::Plan& plan, int code) {
  for (const proto::Response& r : plan.responses()) {
    EXPECT_EQ(r.error_code(), code) << r.names(0);
  }
}

void DoneAll(Negotiator& n, int size, uint64_t seq, NegotiatorOutput& out) {
  for (int r = 0; r < size; ++r) n.Done(r, seq, kT0, out);
}

TEST(NegotiatorOrderTest, MatchingCallsRunAsUsual) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Call("x", 0)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("x"));
  EXPECT_EQ(out.plans[0].responses(0).error_code(), 0);
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// Rank 0 calls an allreduce where rank 1 calls a broadcast: both fail on
// every rank, with what each called; the next slot's calls run.
TEST(NegotiatorOrderTest, DifferentCallsInASlotFailOnEveryRank) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Call("s.0.allreduce", 0)}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(1, AnnReq({Call("s.0.broadcast", 0, proto::BROADCAST)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]),
              UnorderedElementsAre("s.0.allreduce", "s.0.broadcast"));
  ExpectCodes(out.plans[0], kMismatch);
  EXPECT_EQ(
      out.plans[0].responses(0).error(),
      "the ranks called different collectives at the same point of "
      "ordered stream 's' (process set 0, call slot 0): allreduce "
      "'s.0.allreduce' (float32, shape [4]) on rank 0 but broadcast "
      "'s.0.broadcast' (float32, shape [4]) on rank 1. Every member must call "
      "a process group's collectives in the same order; these calls "
      "fail on every rank, and the next ones go on.");
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  DoneAll(n, 2, 1, out);

  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Call("s.1.allreduce", 1)}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("s.1.allreduce"));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
}

// The slot settles only once every member announced there: two ranks
// agreeing is no verdict while a third has not called yet.
TEST(NegotiatorOrderTest, SettlesWhenEveryMemberAnnounced) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Call("a", 4)}), kT0, out);
  n.Announce(2, AnnReq({Call("a", 4)}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(1, AnnReq({Call("b", 4)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), UnorderedElementsAre("a", "b"));
  ExpectCodes(out.plans[0], kMismatch);
  EXPECT_THAT(out.plans[0].responses(0).error(),
              HasSubstr("allreduce 'a' (float32, shape [4]) on ranks 0,2 but "
                        "allreduce 'b' (float32, shape [4]) on rank 1"));
}

// Ops without a stream keep today's rule: different names wait.
TEST(NegotiatorOrderTest, UnorderedNamesStillWait) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Req("a")}), kT0, out);
  n.Announce(1, AnnReq({Req("b")}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  EXPECT_EQ(n.Pending(kT0).size(), 2u);
}

// The steady state: a call cached in an earlier lap of the slots is
// announced by its bit; a rank that calls something else there makes both
// fail (the bit's op continues by name), and the stream goes on.
TEST(NegotiatorOrderTest, MismatchWithACachedCallFails) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Call("x", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses(0).cache_bits_size(), 1);
  const auto bit =
      static_cast<uint32_t>(out.plans[0].responses(0).cache_bits(0));
  DoneAll(n, 2, 1, out);

  proto::Announce by_bit;
  by_bit.add_cached(bit);
  n.Announce(0, by_bit, kT0, out);
  n.Announce(1, AnnReq({Call("y", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), UnorderedElementsAre("x", "y"));
  ExpectCodes(out.plans[1], kMismatch);
  DoneAll(n, 2, 2, out);

  // The error evicted x's bit: both call x in full again, and it runs.
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Call("x", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_EQ(out.plans[2].responses(0).error_code(), 0);
}

// A grouped call is one op of its slot, whatever its member count; a group
// on one rank against a single op on the other fails every member.
TEST(NegotiatorOrderTest, GroupsAreOneCall) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Member("g", 0, 2, 0), Member("g", 1, 2, 0)}), kT0,
               out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("g.0", "g.1"));
  EXPECT_EQ(out.plans[0].responses(0).error_code(), 0);
  DoneAll(n, 2, 1, out);
  // The slot's next lap: another call, the same on both ranks, runs (the
  // group's second member left nothing behind in the slot).
  n.Announce(1, AnnReq({Call("y", 0)}), kT0, out);
  n.Announce(0, AnnReq({Call("y", 0)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("y"));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
  DoneAll(n, 2, 2, out);

  n.Announce(0, AnnReq({Member("h", 0, 2, 1), Member("h", 1, 2, 1)}), kT0, out);
  n.Announce(1, AnnReq({Call("z", 1)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_THAT(Names(out.plans[2]), UnorderedElementsAre("h.0", "h.1", "z"));
  ExpectCodes(out.plans[2], kMismatch);
  EXPECT_THAT(out.plans[2].responses(0).error(),
              HasSubstr("grouped allreduce 'h' (2 tensors) on rank 0 but "
                        "allreduce 'z' (float32, shape [4]) on rank 1"));
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// Rank 0 refused its call in slot 2 (its void comes first): rank 1's call
// there fails on every rank as soon as it comes, with the reason, and so
// does the void; the next slot's calls run.
TEST(NegotiatorOrderTest, AVoidFailsTheCallsInItsSlot) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Void("s.2.allreduce", 2, "allreduce: a sparse.")}), kT0,
             out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(1, AnnReq({Call("s.2.allreduce.Int.2", 2)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), UnorderedElementsAre("s.2.allreduce (void)",
                                                        "s.2.allreduce.Int.2"));
  ExpectCodes(out.plans[0], kMismatch);
  for (const proto::Response& r : out.plans[0].responses()) {
    EXPECT_EQ(r.error(),
              "rank 0 refused the call at this point of ordered stream 's' "
              "(process set 0, call slot 2) before it reached the "
              "coordinator: allreduce: a sparse. The call fails on every "
              "rank (allreduce 's.2.allreduce.Int.2' (float32, shape [4]) on "
              "rank 1); the next calls go on.");
  }
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  DoneAll(n, 2, 1, out);

  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Call("x", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("x"));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
}

// The others announced first (their call waits for rank 1's): rank 1's
// void settles the slot and fails their call at once.
TEST(NegotiatorOrderTest, AVoidAfterTheCallsFailsThemAtOnce) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Call("a", 5)}), kT0, out);
  n.Announce(2, AnnReq({Call("a", 5)}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(1, AnnReq({Void("a", 5, "no")}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), UnorderedElementsAre("a", "a (void)"));
  ExpectCodes(out.plans[0], kMismatch);
  EXPECT_EQ(out.plans[0].responses(0).error(),
            "rank 1 refused the call at this point of ordered stream 's' "
            "(process set 0, call slot 5) before it reached the coordinator: "
            "no. The call fails on every rank (allreduce 'a' (float32, shape "
            "[4]) on ranks 0,2); the next calls go on.");
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// Every rank refused the call (each for its reason): the voids fail, and
// nothing else; the slot's next lap is a fresh one.
TEST(NegotiatorOrderTest, EveryRankVoidingASlotRunsNothing) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Void("s.0.allreduce", 0, "bad op")}), kT0, out);
  n.Announce(1, AnnReq({Void("s.0.allreduce", 0, "bad tensor")}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("s.0.allreduce (void)"));
  ExpectCodes(out.plans[0], kMismatch);
  EXPECT_EQ(out.plans[0].responses(0).error(),
            "ranks 0,1 refused the call at this point of ordered stream 's' "
            "(process set 0, call slot 0) before it reached the coordinator: "
            "rank 0: bad op; rank 1: bad tensor. The call fails on every "
            "rank; the next calls go on.");
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  DoneAll(n, 2, 1, out);
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Call("x", 0)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("x"));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
}

// The steady state: the other rank announces its call by cache bit; a void
// there fails it (it continues by name), and the call runs again after.
TEST(NegotiatorOrderTest, AVoidFailsACachedCall) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Call("x", 1)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses(0).cache_bits_size(), 1);
  const auto bit =
      static_cast<uint32_t>(out.plans[0].responses(0).cache_bits(0));
  DoneAll(n, 2, 1, out);

  proto::Announce by_bit;
  by_bit.add_cached(bit);
  n.Announce(1, by_bit, kT0, out);
  EXPECT_EQ(out.plans.size(), 1u);
  n.Announce(0, AnnReq({Void("x", 1, "refused")}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), UnorderedElementsAre("x", "x (void)"));
  ExpectCodes(out.plans[1], kMismatch);
  EXPECT_THAT(out.plans[1].responses(0).error(),
              HasSubstr("rank 0 refused the call"));
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  DoneAll(n, 2, 2, out);

  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({Call("x", 1)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_EQ(out.plans[2].responses(0).error_code(), 0);
}

// Streams and process sets keep their slots apart.
TEST(NegotiatorOrderTest, StreamsAreIndependent) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Request other = Call("u", 0);
  other.set_order_stream("t");
  n.Announce(0, AnnReq({Call("x", 0), other}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(1, AnnReq({other, Call("x", 0)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), UnorderedElementsAre("x", "u"));
  ExpectCodes(out.plans[0], 0);
}

}  // namespace
}  // namespace kolo::coordinator
