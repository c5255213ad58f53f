// Tests of the Negotiator's members that left (coordinator/negotiator.h,
// "Members that left"; negotiator_leave.cc): every op that needs a rank
// that shut down fails on every rank at once, naming it — partial, held,
// cached, grouped, joined, and announced later — while ops on process sets
// without it go on, and its missing Done holds nothing back.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/negotiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/negotiator_messages.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Req, Ann, AnnReq, OnSet, Control, Names, Opts, kT0, At.
using namespace ::kolo::testing;  // NOLINT(build/namespaces)

constexpr int kFailedPrecondition =
    static_cast<int>(absl::StatusCode::kFailedPrecondition);
const char kWho[] = "worker w1 (rank 1, host h1)";

// Every response of every plan of `out`, in order.
std::vector<proto::Response> Responses(const NegotiatorOutput& out) {
  std::vector<proto::Response> all;
  for (const proto::Plan& p : out.plans) {
    for (const proto::Response& r : p.responses()) all.push_back(r);
  }
  return all;
}

void ExpectLeftError(const proto::Response& r, const std::string& name) {
  EXPECT_THAT(r.names(), ElementsAre(name));
  EXPECT_EQ(r.error_code(), kFailedPrecondition);
  EXPECT_THAT(r.error(),
              HasSubstr(absl::StrCat("'", name, "' cannot complete")));
  EXPECT_THAT(r.error(), HasSubstr(kWho));
  EXPECT_THAT(r.error(), HasSubstr("one or more ranks finished execution"));
}

// The case: rank 0 waits in allreduce 'x', rank 1 shuts down.
TEST(NegotiatorLeaveTest, PartialNameFailsWhenAMemberLeaves) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, Ann({"x"}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Leave(1, kWho, kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  ExpectLeftError(out.plans[0].responses(0), "x");
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// Announced after the leave: fails at once, on the first announcement, and
// the leaver's missing Done does not hold the plan back.
TEST(NegotiatorLeaveTest, LaterAnnouncementsFailAtOnce) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  for (int r = 0; r < 3; ++r) n.Announce(r, Ann({"a"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  n.Done(0, 1, kT0, out);
  n.Done(2, 1, kT0, out);
  n.Leave(1, kWho, kT0, out);  // left without reporting plan 1 done
  n.Announce(2, Ann({"b"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectLeftError(out.plans[1].responses(0), "b");
  n.Done(0, 2, kT0, out);
  n.Done(2, 2, kT0, out);
  // Rank 0 announces b later: it fails too (its own plan).
  n.Announce(0, Ann({"b"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  ExpectLeftError(out.plans[2].responses(0), "b");
}

// A steady-state step by cache bit: the bit goes the name path and fails.
TEST(NegotiatorLeaveTest, CachedBitsFail) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"t", "u"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  proto::Announce by_bit;
  by_bit.add_cached(0);
  n.Announce(0, by_bit, kT0, out);  // partial by bit
  n.Leave(1, kWho, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectLeftError(out.plans[1].responses(0), "t");
  n.Done(0, 2, kT0, out);
  proto::Announce other;
  other.add_cached(1);
  n.Announce(0, other, kT0, out);  // by bit after the leave
  ASSERT_EQ(out.plans.size(), 3u);
  ExpectLeftError(out.plans[2].responses(0), "u");
}

// Complete but held (the data plane busy) when it left: it announced them
// and will never run them.
TEST(NegotiatorLeaveTest, HeldResponsesFail) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"first"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);  // busy until both report it done
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"second"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);  // held
  n.Done(0, 1, kT0, out);
  n.Leave(1, kWho, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectLeftError(out.plans[1].responses(0), "second");
}

// A cached hit held when it left (names on the wire, no bits).
TEST(NegotiatorLeaveTest, HeldCacheHitFails) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"t"}), kT0, out);
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"busy"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);  // "t"; "busy" waits (held)
  for (int r = 0; r < 2; ++r) n.Done(r, 1, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);  // "busy" went
  proto::Announce by_bit;
  by_bit.add_cached(0);
  for (int r = 0; r < 2; ++r) n.Announce(r, by_bit, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);  // a complete hit, held: plan 2 runs
  n.Done(0, 2, kT0, out);
  n.Leave(1, kWho, kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  const proto::Response& r = out.plans[2].responses(0);
  EXPECT_FALSE(r.by_bit());
  ExpectLeftError(r, "t");
}

// Ops on a process set without the leaver go on; ops on one with it fail.
TEST(NegotiatorLeaveTest, SetsWithoutTheLeaverGoOn) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  proto::Request add = Control("process_set.add.0", proto::PROCESS_SET_ADD);
  add.add_splits(0);
  add.add_splits(2);
  for (int r = 0; r < 3; ++r) n.Announce(r, AnnReq({add}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses(0).error_code(), 0);
  const auto set = static_cast<int32_t>(out.plans[0].responses(0).sizes(0));
  for (int r = 0; r < 3; ++r) n.Done(r, 1, kT0, out);

  n.Announce(0, AnnReq({OnSet(Req("pair"), set)}), kT0, out);
  n.Announce(0, Ann({"all"}), kT0, out);
  n.Leave(1, kWho, kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectLeftError(out.plans[1].responses(0), "all");
  n.Done(0, 2, kT0, out);
  n.Done(2, 2, kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("pair"), set)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  const proto::Response& pair = out.plans[2].responses(0);
  EXPECT_THAT(pair.names(), ElementsAre("pair"));
  EXPECT_EQ(pair.error_code(), 0) << pair.error();
}

// A join can never be complete once a rank left.
TEST(NegotiatorLeaveTest, JoinFails) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Control("join", proto::JOIN)}), kT0, out);
  n.Leave(2, "worker w2 (rank 2, host h2)", kT0, out);
  n.Announce(1, AnnReq({Control("join", proto::JOIN)}), kT0, out);
  const std::vector<proto::Response> all = Responses(out);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().op(), proto::JOIN);
  EXPECT_EQ(all.back().error_code(), kFailedPrecondition);
  EXPECT_THAT(all.back().error(), HasSubstr("worker w2 (rank 2, host h2)"));
}

// Members of a group waiting for the rest are released as errors.
TEST(NegotiatorLeaveTest, WaitingGroupMembersFail) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  proto::Request a = Req("g.a"), b = Req("g.b");
  for (proto::Request* r : {&a, &b}) {
    r->set_group("g");
    r->set_group_size(2);
  }
  for (int r = 0; r < 2; ++r) n.Announce(r, AnnReq({a}), kT0, out);
  n.Announce(0, AnnReq({b}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Leave(1, kWho, kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  std::vector<std::string> names;
  for (const proto::Response& r : out.plans[0].responses()) {
    EXPECT_EQ(r.error_code(), kFailedPrecondition) << r.names(0);
    EXPECT_THAT(r.error(), HasSubstr(kWho));
    names.push_back(r.names(0));
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("g.a", "g.b"));
}

}  // namespace
}  // namespace kolo::coordinator
