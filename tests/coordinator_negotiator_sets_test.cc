// Tests of the Negotiator (coordinator/negotiator.h) for process sets, join
// and grouped ops: PROCESS_SET_ADD / PROCESS_SET_REMOVE, readiness and
// checks over a set's members, JOIN (Response.joined, errors, the JOIN
// response), and groups (waiting for each other, fusion domains, errors,
// the response cache). Times are fake: absl::Time values passed in.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/negotiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/types.h"
#include "tests/testing/negotiator_messages.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Req, Ann, AnnReq, OnSet, Control, Names, Opts, kT0, At.
using namespace ::kolo::testing;  // NOLINT(build/namespaces)

// `r` as a member of group `group` of `size` members.
proto::Request Grouped(proto::Request r, const std::string& group,
                       int32_t size) {
  r.set_group(group);
  r.set_group_size(size);
  return r;
}

proto::Request AddSet(const std::vector<int64_t>& ranks,
                      const std::string& name = "process_set.add.0") {
  proto::Request r = Control(name, proto::PROCESS_SET_ADD);
  for (int64_t rank : ranks) r.add_splits(rank);
  return r;
}

proto::Request RemoveSet(int32_t id,
                         const std::string& name = "process_set.remove.0") {
  proto::Request r = Control(name, proto::PROCESS_SET_REMOVE);
  r.set_root(id);
  return r;
}

proto::Request JoinReq() { return Control("join", proto::JOIN); }

proto::Request Barrier(const std::string& name) {
  return Control(name, proto::BARRIER);
}

proto::Announce Bits(std::vector<uint32_t> bits) {
  proto::Announce a;
  for (uint32_t b : bits) a.add_cached(b);
  return a;
}

// The names of each response of `plan`, one list per response.
std::vector<std::vector<std::string>> Groups(const proto::Plan& plan) {
  std::vector<std::vector<std::string>> out;
  for (const proto::Response& r : plan.responses()) {
    out.emplace_back(r.names().begin(), r.names().end());
  }
  return out;
}

using V = std::vector<std::string>;

proto::Settings Set(uint64_t threshold, uint32_t capacity,
                    bool disable_group_fusion = false) {
  proto::Settings s;
  s.set_fusion_threshold(threshold);
  s.set_cache_capacity(capacity);
  s.set_fusion_direct_bytes(uint64_t{1} << 20);
  s.set_disable_group_fusion(disable_group_fusion);
  return s;
}

void ExpectError(const proto::Response& r, absl::StatusCode code,
                 const std::string& message) {
  EXPECT_EQ(r.error_code(), static_cast<int>(code));
  EXPECT_EQ(r.error(), message);
}

// Every rank reports every plan sent so far done (the data plane idle).
void DoneAll(Negotiator& n, int size, NegotiatorOutput& out) {
  for (int r = 0; r < size; ++r) n.Done(r, n.plans_sent(), kT0, out);
}

// Every rank announces `request` (rank order); the single response of the
// one new plan (empty on failure). Leaves the data plane idle.
proto::Response Everyone(Negotiator& n, int size, const proto::Request& request,
                         NegotiatorOutput& out) {
  const size_t before = out.plans.size();
  for (int r = 0; r < size; ++r) n.Announce(r, AnnReq({request}), kT0, out);
  EXPECT_EQ(out.plans.size(), before + 1);
  DoneAll(n, size, out);
  if (out.plans.size() != before + 1 ||
      out.plans[before].responses_size() != 1) {
    ADD_FAILURE() << "expected one plan with one response";
    return {};
  }
  return out.plans[before].responses(0);
}

// Registers `ranks` as a set; its id (-1 on failure).
int32_t Register(Negotiator& n, int size, const std::vector<int64_t>& ranks,
                 NegotiatorOutput& out) {
  const proto::Response r = Everyone(n, size, AddSet(ranks), out);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::PROCESS_SET_ADD);
  if (r.sizes_size() != 1) return -1;
  return static_cast<int32_t>(r.sizes(0));
}

// ---- Process sets: add and remove ----------------------------------------

TEST(NegotiatorSetsTest, AddProcessSetGivesIdsFromOne) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  for (int r = 0; r < 3; ++r) n.Announce(r, AnnReq({AddSet({0, 2})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& first = out.plans[0].responses(0);
  EXPECT_EQ(first.error_code(), 0) << first.error();
  EXPECT_EQ(first.op(), proto::PROCESS_SET_ADD);
  EXPECT_THAT(first.names(), ElementsAre("process_set.add.0"));
  EXPECT_THAT(first.sizes(), ElementsAre(1));
  EXPECT_EQ(first.process_set(), 0);
  DoneAll(n, 3, out);
  const proto::Response second =
      Everyone(n, 3, AddSet({1, 2}, "process_set.add.1"), out);
  EXPECT_EQ(second.error_code(), 0) << second.error();
  EXPECT_EQ(second.op(), proto::PROCESS_SET_ADD);
  EXPECT_THAT(second.sizes(), ElementsAre(2));
}

TEST(NegotiatorSetsTest, AddProcessSetRanksDisagree) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({AddSet({0, 1})}), kT0, out);
  n.Announce(1, AnnReq({AddSet({0, 2})}), kT0, out);
  n.Announce(2, AnnReq({AddSet({0, 1})}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  ExpectError(r, absl::StatusCode::kFailedPrecondition,
              "process set registration 'process_set.add.0': add_process_set "
              "ranks [0,1] on "
              "ranks 0,2 but [0,2] on rank 1");
  EXPECT_THAT(r.sizes(), IsEmpty());
  // Nothing was registered: the next add gets id 1.
  DoneAll(n, 3, out);
  EXPECT_EQ(Register(n, 3, {0, 1}, out), 1);
}

TEST(NegotiatorSetsTest, AddExistingSetOrAllRanksIsInvalid) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  ASSERT_EQ(Register(n, 3, {0, 2}, out), 1);
  ExpectError(Everyone(n, 3, AddSet({0, 2}), out),
              absl::StatusCode::kInvalidArgument,
              "add_process_set([0,2]): these ranks already form process set "
              "1; use it, or remove it first");
  const proto::Response all = Everyone(n, 3, AddSet({0, 1, 2}), out);
  EXPECT_EQ(all.error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(all.error(), HasSubstr("global process set"));
  EXPECT_THAT(all.sizes(), IsEmpty());
  // The failures gave no id away.
  EXPECT_EQ(Register(n, 3, {1, 2}, out), 2);
}

TEST(NegotiatorSetsTest, AddInvalidRanksIsInvalid) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  ExpectError(Everyone(n, 3, AddSet({2, 0}), out),
              absl::StatusCode::kInvalidArgument,
              "add_process_set([2,0]): a process set is distinct ranks in "
              "0..2, in ascending order");
  ExpectError(Everyone(n, 3, AddSet({0, 3}), out),
              absl::StatusCode::kInvalidArgument,
              "add_process_set([0,3]): a process set is distinct ranks in "
              "0..2, in ascending order");
  EXPECT_EQ(Everyone(n, 3, AddSet({-1, 1}), out).error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Everyone(n, 3, AddSet({1, 1}), out).error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Everyone(n, 3, AddSet({}), out).error_code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Register(n, 3, {0, 1}, out), 1);
}

// ---- Process sets: ops on a set --------------------------------------------

TEST(NegotiatorSetsTest, AllreduceOnSetReadyWhenItsMembersAnnounced) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  ASSERT_EQ(id, 1);
  const size_t before = out.plans.size();
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);  // rank 1 never
  ASSERT_EQ(out.plans.size(), before + 1);
  ASSERT_EQ(out.plans.back().responses_size(), 1);
  const proto::Response& r = out.plans.back().responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::ALLREDUCE);
  EXPECT_THAT(r.names(), ElementsAre("x"));
  EXPECT_EQ(r.process_set(), id);
  EXPECT_THAT(r.joined(), IsEmpty());
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// Rank order of the announcements does not matter; rank 2 first.
TEST(NegotiatorSetsTest, AllgatherOnSetHasOneSizePerMember) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  const size_t before = out.plans.size();
  n.Announce(2, AnnReq({OnSet(Req("g", {5, 3}, proto::ALLGATHER), id)}), kT0,
             out);
  n.Announce(0, AnnReq({OnSet(Req("g", {2, 3}, proto::ALLGATHER), id)}), kT0,
             out);
  ASSERT_EQ(out.plans.size(), before + 1);
  const proto::Response& r = out.plans.back().responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::ALLGATHER);
  EXPECT_EQ(r.process_set(), id);
  EXPECT_THAT(r.sizes(), ElementsAre(2, 5));  // ranks 0, 2
}

TEST(NegotiatorSetsTest, BroadcastRootMustBeAMember) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  proto::Request root1 = OnSet(Req("b", {4}, proto::BROADCAST), id);
  root1.set_root(1);
  n.Announce(0, AnnReq({root1}), kT0, out);
  n.Announce(2, AnnReq({root1}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectError(out.plans[1].responses(0), absl::StatusCode::kInvalidArgument,
              "tensor 'b': broadcast root 1 is not one of its ranks 0,2");
  DoneAll(n, 3, out);
  // Root 2 (a global rank, a member) is fine.
  proto::Request root2 = root1;
  root2.set_root(2);
  n.Announce(0, AnnReq({root2}), kT0, out);
  n.Announce(2, AnnReq({root2}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_EQ(out.plans[2].responses(0).error_code(), 0)
      << out.plans[2].responses(0).error();
  EXPECT_EQ(out.plans[2].responses(0).process_set(), id);
}

TEST(NegotiatorSetsTest, AlltoallOnSetHasOneSplitPerMember) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  proto::Request a0 = OnSet(Req("t", {3}, proto::ALLTOALL), id);
  a0.add_splits(1);
  a0.add_splits(2);
  proto::Request a2 = OnSet(Req("t", {4}, proto::ALLTOALL), id);
  a2.add_splits(4);
  a2.add_splits(0);
  n.Announce(0, AnnReq({a0}), kT0, out);
  n.Announce(2, AnnReq({a2}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  const proto::Response& ok = out.plans[1].responses(0);
  EXPECT_EQ(ok.error_code(), 0) << ok.error();
  EXPECT_EQ(ok.op(), proto::ALLTOALL);
  EXPECT_THAT(ok.sizes(), ElementsAre(1, 2, 4, 0));
  DoneAll(n, 3, out);
  // Three entries (one per global rank) on a set of two: refused.
  proto::Request three = OnSet(Req("u", {3}, proto::ALLTOALL), id);
  for (int64_t s : {1, 1, 1}) three.add_splits(s);
  n.Announce(0, AnnReq({three}), kT0, out);
  n.Announce(2, AnnReq({three}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  ExpectError(out.plans[2].responses(0), absl::StatusCode::kInvalidArgument,
              "tensor 'u': alltoall splits [1,1,1] on rank 0 are not 2 "
              "non-negative entries summing to the first dimension of shape "
              "[3]");
}

TEST(NegotiatorSetsTest, MismatchOnSetNamesGlobalRanks) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(0, AnnReq({OnSet(Req("x", {4}), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x", {5}), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  ExpectError(out.plans[1].responses(0), absl::StatusCode::kFailedPrecondition,
              "tensor 'x': allreduce shape [4] on rank 0 but [5] on rank 2");
}

TEST(NegotiatorSetsTest, AnnouncementFromNonMemberIsIgnored) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  const size_t before = out.plans.size();
  // Rank 1 is no member: ignored (a different shape would be an error).
  n.Announce(1, AnnReq({OnSet(Req("x", {9}), id)}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  EXPECT_EQ(out.plans.back().responses(0).error_code(), 0)
      << out.plans.back().responses(0).error();
  EXPECT_THAT(Names(out.plans.back()), ElementsAre("x"));
}

TEST(NegotiatorSetsTest, AnnouncementForUnknownSetIsIgnored) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({OnSet(Req("x"), 7)}), kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  EXPECT_EQ(n.NextWake(), absl::InfiniteFuture());
  n.Tick(At(absl::Hours(1)), out);
  EXPECT_THAT(out.warnings, IsEmpty());
  // The negotiator still works.
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"y"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("y"));
}

// A stall on a set waits only for the set's members.
TEST(NegotiatorSetsTest, StallWarningOnSetNamesOnlyMembers) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Tick(At(absl::Seconds(61)), out);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_THAT(out.warnings[0],
              HasSubstr("'x' waits for rank 2 (submitted by rank 0)"));
}

TEST(NegotiatorSetsTest, OpsOnSetsAreNotCached) {
  Negotiator n(Opts(3));  // the cache is on (capacity 1024)
  NegotiatorOutput out;
  const proto::Response add = Everyone(n, 3, AddSet({0, 2}), out);
  EXPECT_THAT(add.cache_bits(), ElementsAre(-1));
  const int32_t id = 1;
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(out.plans[1].responses(0).cache_bits(), ElementsAre(-1));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
  DoneAll(n, 3, out);
  // A global op still gets a bit.
  const proto::Response global = Everyone(n, 3, Req("y"), out);
  ASSERT_EQ(global.cache_bits_size(), 1);
  EXPECT_GE(global.cache_bits(0), 0);
  // The remove is not cached either.
  const proto::Response remove = Everyone(n, 3, RemoveSet(id), out);
  EXPECT_EQ(remove.error_code(), 0) << remove.error();
  EXPECT_THAT(remove.cache_bits(), ElementsAre(-1));
}

// Compatible allreduces of different sets (and of set 0) stay apart; of
// one set they fuse, and the fused response is on that set.
TEST(NegotiatorSetsTest, FusionOnlyWithinOneSet) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t s01 = Register(n, 3, {0, 1}, out);
  const int32_t s02 = Register(n, 3, {0, 2}, out);
  ASSERT_EQ(s01, 1);
  ASSERT_EQ(s02, 2);
  const size_t before = out.plans.size();
  n.Announce(1, AnnReq({OnSet(Req("a"), s01), Req("c")}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("b"), s02), Req("c")}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  n.Announce(0, AnnReq({OnSet(Req("a"), s01), OnSet(Req("b"), s02), Req("c")}),
             kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  const proto::Plan& p = out.plans.back();
  EXPECT_THAT(Groups(p), ElementsAre(V{"a"}, V{"b"}, V{"c"}));
  ASSERT_EQ(p.responses_size(), 3);
  EXPECT_EQ(p.responses(0).process_set(), s01);
  EXPECT_EQ(p.responses(1).process_set(), s02);
  EXPECT_EQ(p.responses(2).process_set(), 0);
  DoneAll(n, 3, out);

  n.Announce(1, AnnReq({OnSet(Req("d"), s01), OnSet(Req("e"), s01)}), kT0, out);
  n.Announce(0, AnnReq({OnSet(Req("d"), s01), OnSet(Req("e"), s01)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 2);
  const proto::Plan& q = out.plans.back();
  EXPECT_THAT(Groups(q), ElementsAre(V{"d", "e"}));
  ASSERT_EQ(q.responses_size(), 1);
  EXPECT_EQ(q.responses(0).process_set(), s01);
  EXPECT_EQ(q.responses(0).error_code(), 0);
  EXPECT_THAT(q.responses(0).cache_bits(), ElementsAre(-1, -1));
}

TEST(NegotiatorSetsTest, RemoveProcessSet) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  ASSERT_EQ(id, 1);
  const proto::Response r = Everyone(n, 3, RemoveSet(id), out);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::PROCESS_SET_REMOVE);
  EXPECT_THAT(r.names(), ElementsAre("process_set.remove.0"));
  EXPECT_THAT(r.sizes(), ElementsAre(id));
  // The id is unknown now: announcements on it are ignored.
  const size_t before = out.plans.size();
  n.Announce(0, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  EXPECT_EQ(out.plans.size(), before);
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
  // Removing it again fails.
  ExpectError(Everyone(n, 3, RemoveSet(id), out),
              absl::StatusCode::kInvalidArgument,
              "remove_process_set(1): there is no process set 1 (never added, "
              "or removed already)");
  // The same ranks again get a new id: ids are not reused.
  EXPECT_EQ(Register(n, 3, {0, 2}, out), 2);
}

TEST(NegotiatorSetsTest, RemoveUnknownOrGlobalSetIsInvalid) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  ExpectError(Everyone(n, 2, RemoveSet(3), out),
              absl::StatusCode::kInvalidArgument,
              "remove_process_set(3): there is no process set 3 (never added, "
              "or removed already)");
  ExpectError(Everyone(n, 2, RemoveSet(0), out),
              absl::StatusCode::kInvalidArgument,
              "remove_process_set(0): the global process set cannot be "
              "removed");
}

TEST(NegotiatorSetsTest, RemoveProcessSetRanksDisagree) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  ASSERT_EQ(Register(n, 3, {0, 1}, out), 1);
  ASSERT_EQ(Register(n, 3, {0, 2}, out), 2);
  const size_t before = out.plans.size();
  n.Announce(0, AnnReq({RemoveSet(1)}), kT0, out);
  n.Announce(1, AnnReq({RemoveSet(2)}), kT0, out);
  n.Announce(2, AnnReq({RemoveSet(1)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  ExpectError(out.plans.back().responses(0),
              absl::StatusCode::kFailedPrecondition,
              "process set registration 'process_set.remove.0': "
              "remove_process_set process set "
              "1 on ranks 0,2 but 2 on rank 1");
  DoneAll(n, 3, out);
  // Both sets still exist.
  EXPECT_EQ(Everyone(n, 3, RemoveSet(1), out).error_code(), 0);
  EXPECT_EQ(Everyone(n, 3, RemoveSet(2), out).error_code(), 0);
}

TEST(NegotiatorSetsTest, RemoveWithPendingOpsFails) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(0, AnnReq({OnSet(Req("grad/x"), id)}), kT0, out);
  ExpectError(Everyone(n, 3, RemoveSet(id), out),
              absl::StatusCode::kFailedPrecondition,
              "remove_process_set(1): ops on it are still pending ('grad/x'); "
              "wait for them on every member first");
  // The set still exists: the pending op completes, then the remove works.
  const size_t before = out.plans.size();
  n.Announce(2, AnnReq({OnSet(Req("grad/x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  EXPECT_EQ(out.plans.back().responses(0).error_code(), 0);
  EXPECT_EQ(out.plans.back().responses(0).process_set(), id);
  DoneAll(n, 3, out);
  const proto::Response r = Everyone(n, 3, RemoveSet(id), out);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.sizes(), ElementsAre(id));
}

// An op of the set held behind the remove in the same plan is pending too.
TEST(NegotiatorSetsTest, RemoveWithAnOpOfTheSetInTheSamePlanFails) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {0, 2}, out);
  n.Announce(2, AnnReq({OnSet(Req("x"), id)}), kT0, out);
  n.Announce(1, AnnReq({RemoveSet(id)}), kT0, out);
  n.Announce(2, AnnReq({RemoveSet(id)}), kT0, out);
  const size_t before = out.plans.size();
  // Rank 0: the remove first, then x: both ready in one call, x behind.
  n.Announce(0, AnnReq({RemoveSet(id), OnSet(Req("x"), id)}), kT0, out);
  ASSERT_EQ(out.plans.size(), before + 1);
  const proto::Plan& p = out.plans.back();
  ASSERT_EQ(p.responses_size(), 2);
  EXPECT_EQ(p.responses(0).op(), proto::PROCESS_SET_REMOVE);
  ExpectError(p.responses(0), absl::StatusCode::kFailedPrecondition,
              "remove_process_set(1): ops on it are still pending ('x'); wait "
              "for them on every member first");
  EXPECT_THAT(p.responses(1).names(), ElementsAre("x"));
  EXPECT_EQ(p.responses(1).error_code(), 0);
}

// ---- Join ------------------------------------------------------------------

TEST(NegotiatorSetsTest, JoinAllreduceDispatchesWithJoinedRanks) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  proto::Request a = Req("a", {3});
  a.set_postscale(0.5);
  n.Announce(0, AnnReq({a}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::ALLREDUCE);
  EXPECT_THAT(r.names(), ElementsAre("a"));
  EXPECT_THAT(r.joined(), ElementsAre(1));
  EXPECT_EQ(r.dtype(), static_cast<int>(DataType::kFloat32));
  EXPECT_EQ(r.reduce_op(), static_cast<int>(ReduceOp::kSum));
  EXPECT_EQ(r.postscale(), 0.5);
  EXPECT_THAT(r.counts(), ElementsAre(3));
  EXPECT_EQ(r.process_set(), 0);
  DoneAll(n, 2, out);

  // A barrier completes as usual.
  n.Announce(0, AnnReq({Barrier("bar")}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  const proto::Response& b = out.plans[1].responses(0);
  EXPECT_EQ(b.error_code(), 0) << b.error();
  EXPECT_EQ(b.op(), proto::BARRIER);
  EXPECT_THAT(b.joined(), IsEmpty());
  DoneAll(n, 2, out);

  // Then rank 0 joins: the JOIN response names it, the last to join.
  n.Announce(0, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  ASSERT_EQ(out.plans[2].responses_size(), 1);
  const proto::Response& j = out.plans[2].responses(0);
  EXPECT_EQ(j.error_code(), 0) << j.error();
  EXPECT_EQ(j.op(), proto::JOIN);
  EXPECT_THAT(j.names(), ElementsAre("join"));
  EXPECT_THAT(j.sizes(), ElementsAre(0));
  DoneAll(n, 2, out);

  // The join state reset: an allreduce needs both ranks again.
  n.Announce(0, Ann({"c"}), kT0, out);
  EXPECT_EQ(out.plans.size(), 3u);
  n.Announce(1, Ann({"c"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 4u);
  EXPECT_THAT(Names(out.plans[3]), ElementsAre("c"));
  EXPECT_THAT(out.plans[3].responses(0).joined(), IsEmpty());
  EXPECT_THAT(out.plans[3].responses(0).counts(), IsEmpty());
  DoneAll(n, 2, out);

  // And a second round of join works the same (rank 0 joins first now).
  n.Announce(0, AnnReq({JoinReq()}), kT0, out);
  n.Announce(1, Ann({"d"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 5u);
  EXPECT_THAT(out.plans[4].responses(0).joined(), ElementsAre(0));
  DoneAll(n, 2, out);
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 6u);
  EXPECT_EQ(out.plans[5].responses(0).op(), proto::JOIN);
  EXPECT_THAT(out.plans[5].responses(0).sizes(), ElementsAre(1));
}

// Rank 1 joined; rank 0 submits `request`: it fails (on every rank) naming
// the join.
void ExpectFailsWhileJoined(const proto::Request& request) {
  SCOPED_TRACE(request.DebugString());
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  n.Announce(0, AnnReq({request}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_THAT(r.names(), ElementsAre(request.name()));
  EXPECT_EQ(r.error_code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(r.error(), HasSubstr("joined"));
  EXPECT_THAT(r.error(), HasSubstr("rank 1"));
  EXPECT_THAT(r.joined(), IsEmpty());
  EXPECT_THAT(r.sizes(), IsEmpty());
}

TEST(NegotiatorSetsTest, JoinAllgatherFails) {
  ExpectFailsWhileJoined(Req("g", {2, 3}, proto::ALLGATHER));
}

TEST(NegotiatorSetsTest, JoinBroadcastFails) {
  ExpectFailsWhileJoined(Req("b", {4}, proto::BROADCAST));  // root 0
}

// Root on the joined rank: a valid root of a 2-rank world.
TEST(NegotiatorSetsTest, JoinBroadcastFromTheJoinedRankFails) {
  proto::Request r = Req("b", {4}, proto::BROADCAST);
  r.set_root(1);
  ExpectFailsWhileJoined(r);
}

// Splits with one entry per rank of the world (what a correct worker sends).
TEST(NegotiatorSetsTest, JoinAlltoallFails) {
  proto::Request r = Req("t", {3}, proto::ALLTOALL);
  r.add_splits(1);
  r.add_splits(2);
  ExpectFailsWhileJoined(r);
}

TEST(NegotiatorSetsTest, JoinReducescatterFails) {
  ExpectFailsWhileJoined(Req("rs", {4}, proto::REDUCESCATTER));
}

TEST(NegotiatorSetsTest, JoinReducescatterWithSplitsFails) {
  proto::Request r = Req("rs", {4}, proto::REDUCESCATTER);
  r.add_splits(2);
  r.add_splits(2);
  ExpectFailsWhileJoined(r);
}

TEST(NegotiatorSetsTest, JoinThenTheSameOpWorksAfterTheJoinRound) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  n.Announce(0, AnnReq({Req("g", {2, 3}, proto::ALLGATHER)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_NE(out.plans[0].responses(0).error_code(), 0);
  DoneAll(n, 2, out);
  n.Announce(0, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  DoneAll(n, 2, out);
  n.Announce(0, AnnReq({Req("g", {2, 3}, proto::ALLGATHER)}), kT0, out);
  n.Announce(1, AnnReq({Req("g", {1, 3}, proto::ALLGATHER)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_EQ(out.plans[2].responses(0).error_code(), 0);
  EXPECT_THAT(out.plans[2].responses(0).sizes(), ElementsAre(2, 1));
}

// A name the joining rank announced before it joined runs as usual.
TEST(NegotiatorSetsTest, NameAnnouncedBeforeJoiningCompletesNormally) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, Ann({"a"}), kT0, out);
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(0, Ann({"a"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.names(), ElementsAre("a"));
  EXPECT_THAT(r.joined(), IsEmpty());
  EXPECT_THAT(r.counts(), IsEmpty());
}

// Partials waiting only on the joining rank become ready as it joins.
TEST(NegotiatorSetsTest, PartialsBecomeReadyWhenTheMissingRankJoins) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Req("a", {3})}), kT0, out);
  n.Announce(1, AnnReq({Req("a", {3})}), kT0, out);
  n.Announce(0, Ann({"b"}), kT0, out);  // waits for ranks 1, 2
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(2, AnnReq({JoinReq()}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.names(), ElementsAre("a"));
  EXPECT_THAT(r.joined(), ElementsAre(2));
  EXPECT_THAT(r.counts(), ElementsAre(3));
  ASSERT_EQ(n.Pending(kT0).size(), 1u);
  EXPECT_EQ(n.Pending(kT0)[0].name(), "b");
}

TEST(NegotiatorSetsTest, JoinedAllreducesFuseWithCountsForEach) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  n.Announce(2, AnnReq({JoinReq()}), kT0, out);
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Req("a", {3}), Req("b", {5})}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& r = out.plans[0].responses(0);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_THAT(r.names(), ElementsAre("a", "b"));
  EXPECT_THAT(r.counts(), ElementsAre(3, 5));
  EXPECT_THAT(r.joined(), ElementsAre(2));
  EXPECT_EQ(r.dtype(), static_cast<int>(DataType::kFloat32));
}

// An allreduce with joined ranks does not fuse with one every rank
// submitted (the joined ranks take part in only one of them).
TEST(NegotiatorSetsTest, JoinedAllreduceDoesNotFuseWithAFullOne) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(1, Ann({"full"}), kT0, out);
  n.Announce(1, AnnReq({JoinReq()}), kT0, out);
  n.Announce(0, Ann({"full", "part"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"full"}, V{"part"}));
  EXPECT_THAT(out.plans[0].responses(0).joined(), IsEmpty());
  EXPECT_THAT(out.plans[0].responses(1).joined(), ElementsAre(1));
}

// ---- Groups ----------------------------------------------------------------

TEST(NegotiatorSetsTest, GroupMembersWaitForEachOther) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  // Other ops go on meanwhile.
  for (int r = 0; r < 2; ++r) n.Announce(r, Ann({"u"}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("u"));
  DoneAll(n, 2, out);
  n.Tick(At(absl::Seconds(1)), out);
  EXPECT_EQ(out.plans.size(), 1u);
  n.Announce(0, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  EXPECT_EQ(out.plans.size(), 1u);
  n.Announce(1, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Groups(out.plans[1]), ElementsAre(V{"g.0", "g.1"}));
  EXPECT_EQ(out.plans[1].responses(0).error_code(), 0);
}

// Without fusion the members still go out in one plan.
TEST(NegotiatorSetsTest, GroupMembersGoInOnePlanWithoutFusion) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a =
        AnnReq({Grouped(Req("g.0"), "g", 3),
                Grouped(Req("g.1", {2}, proto::BROADCAST), "g", 3)});
    *a.mutable_settings() = Set(0, 0);
    n.Announce(r, a, kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.2"), "g", 3)}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"g.0"}, V{"g.1"}, V{"g.2"}));
}

// Under disable_group_fusion (one rank enough) members fuse with each other
// only; without it they fuse with other compatible allreduces too.
TEST(NegotiatorSetsTest, DisableGroupFusionKeepsGroupsApart) {
  for (const bool disable : {true, false}) {
    SCOPED_TRACE(disable ? "disable_group_fusion" : "group fusion on");
    Negotiator n(Opts(2));
    NegotiatorOutput out;
    for (int r = 0; r < 2; ++r) {
      proto::Announce a = AnnReq(
          {Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2), Req("u")});
      *a.mutable_settings() = Set(1 << 20, 1024, disable && r == 1);
      n.Announce(r, a, kT0, out);
    }
    ASSERT_EQ(out.plans.size(), 1u);
    if (disable) {
      EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"g.0", "g.1"}, V{"u"}));
    } else {
      EXPECT_THAT(Groups(out.plans[0]), ElementsAre(V{"g.0", "g.1", "u"}));
    }
  }
}

// Two groups under disable_group_fusion do not fuse with each other.
TEST(NegotiatorSetsTest, DisableGroupFusionKeepsTwoGroupsApart) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    proto::Announce a =
        AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("h.0"), "h", 2),
                Grouped(Req("g.1"), "g", 2), Grouped(Req("h.1"), "h", 2)});
    *a.mutable_settings() = Set(1 << 20, 1024, r == 0);
    n.Announce(r, a, kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Groups(out.plans[0]),
              ElementsAre(V{"g.0", "g.1"}, V{"h.0", "h.1"}));
}

// A group size the ranks disagree on: an error on every rank, and the
// group's members that were waiting are released (not stuck).
TEST(NegotiatorSetsTest, GroupSizeMismatchReleasesTheGroup) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  }
  EXPECT_THAT(out.plans, IsEmpty());
  n.Announce(0, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.1"), "g", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  const proto::Plan& p = out.plans[0];
  EXPECT_THAT(Names(p), ElementsAre("g.0", "g.1"));
  ASSERT_EQ(p.responses_size(), 2);
  EXPECT_EQ(p.responses(0).error_code(), 0);
  ExpectError(p.responses(1), absl::StatusCode::kFailedPrecondition,
              "tensor 'g.1': allreduce group size 2 on rank 0 but 3 on rank "
              "1");
  EXPECT_THAT(n.Pending(kT0), IsEmpty());
}

// A group size mismatch on its first member: released at once.
TEST(NegotiatorSetsTest, GroupSizeMismatchOnFirstMemberIsNotStuck) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  n.Announce(0, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.0"), "g", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 1u);
  ExpectError(out.plans[0].responses(0), absl::StatusCode::kFailedPrecondition,
              "tensor 'g.0': allreduce group size 2 on rank 0 but 3 on rank "
              "1");
  DoneAll(n, 2, out);
  n.Announce(0, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.1"), "g", 3)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 2u);
  EXPECT_THAT(Names(out.plans[1]), ElementsAre("g.1"));
  EXPECT_NE(out.plans[1].responses(0).error_code(), 0);
}

// Ranks whose groups have different member counts: every member on every
// rank ends with the error — also the members only some ranks announced
// (issue 16: those stayed pending forever), whichever rank has fewer.
TEST(NegotiatorSetsTest, GroupMemberCountMismatchFailsEveryMember) {
  for (const int smaller : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("the smaller group on rank ", smaller));
    Negotiator n(Opts(3));
    NegotiatorOutput out;
    for (int r = 0; r < 3; ++r) {
      if (r == smaller) {
        n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 1)}), kT0, out);
      } else {
        n.Announce(
            r,
            AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2)}),
            kT0, out);
      }
    }
    n.Tick(kT0 + absl::Seconds(1), out);
    ASSERT_EQ(out.plans.size(), 1u);
    const proto::Plan& p = out.plans[0];
    EXPECT_THAT(Names(p), UnorderedElementsAre("g.0", "g.1"));
    for (const proto::Response& r : p.responses()) {
      EXPECT_EQ(r.error_code(),
                static_cast<int>(absl::StatusCode::kFailedPrecondition))
          << r.names(0);
      EXPECT_THAT(r.error(), HasSubstr("group size")) << r.names(0);
    }
    const std::string others = smaller == 0 ? "1,2" : "0,1";
    for (const proto::Response& r : p.responses()) {
      if (r.names(0) != "g.1") continue;
      EXPECT_THAT(r.error(), HasSubstr(absl::StrCat(
                                 "tensor 'g.1' of group 'g' (announced by "
                                 "ranks ",
                                 others, ", never by ranks ", smaller, ")")));
    }
    EXPECT_THAT(n.Pending(kT0), IsEmpty());
    // The next use of the group, agreed by every rank, works.
    DoneAll(n, 3, out);
    for (int r = 0; r < 3; ++r) {
      n.Announce(
          r, AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2)}),
          kT0, out);
    }
    n.Tick(kT0 + absl::Seconds(2), out);
    ASSERT_EQ(out.plans.size(), 2u);
    for (const proto::Response& r : out.plans[1].responses()) {
      EXPECT_EQ(r.error_code(), 0) << r.error();
    }
    EXPECT_THAT(n.Pending(kT0), IsEmpty());
  }
}

// Group names are the caller's, repeated every step: once an error broke
// one instance of group "g", the next instance waits for its members again.
TEST(NegotiatorSetsTest, GroupNameReusedAfterAnErrorWaitsAgain) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  // Step 1: member g.1 fails (shape mismatch); both members go out.
  for (int r = 0; r < 2; ++r) {
    n.Announce(r,
               AnnReq({Grouped(Req("g.0"), "g", 2),
                       Grouped(Req("g.1", {r == 0 ? 4 : 5}), "g", 2)}),
               kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  EXPECT_THAT(Names(out.plans[0]), ElementsAre("g.0", "g.1"));
  DoneAll(n, 2, out);
  // Step 2: all agree; g.0 must wait for g.1.
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  }
  EXPECT_EQ(out.plans.size(), 1u) << "g.0 went out without g.1";
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, AnnReq({Grouped(Req("g.1"), "g", 2)}), kT0, out);
  }
  ASSERT_GE(out.plans.size(), 2u);
  EXPECT_THAT(Groups(out.plans.back()), ElementsAre(V{"g.0", "g.1"}));
}

// Cache on: the second step's members, announced by their bits, still go
// out together.
TEST(NegotiatorSetsTest, GroupAnnouncedByCacheBitsStaysTogether) {
  Negotiator n(Opts(2));
  NegotiatorOutput out;
  for (int r = 0; r < 2; ++r) {
    n.Announce(
        r, AnnReq({Grouped(Req("g.0"), "g", 2), Grouped(Req("g.1"), "g", 2)}),
        kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 1u);
  ASSERT_EQ(out.plans[0].responses_size(), 1);
  const proto::Response& first = out.plans[0].responses(0);
  EXPECT_THAT(first.names(), ElementsAre("g.0", "g.1"));
  ASSERT_EQ(first.cache_bits_size(), 2);
  const int32_t b0 = first.cache_bits(0), b1 = first.cache_bits(1);
  ASSERT_GE(b0, 0);
  ASSERT_GE(b1, 0);
  DoneAll(n, 2, out);

  // Step 2: g.0 by its bit on both ranks; it waits for g.1.
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, Bits({static_cast<uint32_t>(b0)}), kT0, out);
  }
  EXPECT_EQ(out.plans.size(), 1u);
  n.Tick(At(absl::Seconds(1)), out);
  EXPECT_EQ(out.plans.size(), 1u);
  for (int r = 0; r < 2; ++r) {
    n.Announce(r, Bits({static_cast<uint32_t>(b1)}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), 2u);
  ASSERT_EQ(out.plans[1].responses_size(), 1);
  const proto::Response& second = out.plans[1].responses(0);
  EXPECT_EQ(second.error_code(), 0) << second.error();
  EXPECT_THAT(second.names(), ElementsAre("g.0", "g.1"));
  EXPECT_THAT(second.cache_bits(), ElementsAre(b0, b1));
  EXPECT_EQ(out.plans[1].cache_evicted_size(), 0);
  DoneAll(n, 2, out);

  // Step 3: the same, with the ranks mixing bits and full requests.
  n.Announce(0, Bits({static_cast<uint32_t>(b0)}), kT0, out);
  n.Announce(1, AnnReq({Grouped(Req("g.0"), "g", 2)}), kT0, out);
  EXPECT_EQ(out.plans.size(), 2u);
  n.Announce(1, Bits({static_cast<uint32_t>(b1)}), kT0, out);
  n.Announce(0, Bits({static_cast<uint32_t>(b1)}), kT0, out);
  ASSERT_EQ(out.plans.size(), 3u);
  EXPECT_THAT(Groups(out.plans[2]), ElementsAre(V{"g.0", "g.1"}));
}

// A group on a process set waits for the set's members only.
TEST(NegotiatorSetsTest, GroupOnAProcessSet) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {1, 2}, out);
  const size_t before = out.plans.size();
  for (int r : {1, 2}) {
    n.Announce(r, AnnReq({OnSet(Grouped(Req("g.0"), "g", 2), id)}), kT0, out);
  }
  EXPECT_EQ(out.plans.size(), before);
  for (int r : {1, 2}) {
    n.Announce(r, AnnReq({OnSet(Grouped(Req("g.1"), "g", 2), id)}), kT0, out);
  }
  ASSERT_EQ(out.plans.size(), before + 1);
  EXPECT_THAT(Groups(out.plans.back()), ElementsAre(V{"g.0", "g.1"}));
  EXPECT_EQ(out.plans.back().responses(0).process_set(), id);
}

// A group still waiting on a set keeps the set from being removed.
TEST(NegotiatorSetsTest, RemoveWithAWaitingGroupMemberFails) {
  Negotiator n(Opts(3));
  NegotiatorOutput out;
  const int32_t id = Register(n, 3, {1, 2}, out);
  for (int r : {1, 2}) {
    n.Announce(r, AnnReq({OnSet(Grouped(Req("g.0"), "g", 2), id)}), kT0, out);
  }
  ExpectError(Everyone(n, 3, RemoveSet(id), out),
              absl::StatusCode::kFailedPrecondition,
              "remove_process_set(1): ops on it are still pending ('g.0'); "
              "wait for them on every member first");
}

}  // namespace
}  // namespace kolo::coordinator
