// Grouped ops, join and process sets through kolorun and the public API, with
// exact values: one kolorun job of kolo-groups-worker
// (tests/workers/groups_worker.cc) per world size 2, 3, 4 and 5, plus one of
// three ranks with KOLO_DISABLE_GROUP_FUSION=1 and static process sets
// (InitOptions), whose tagged output every test below reads for every rank.
//   - grouped allreduce / allgather / reducescatter with mixed dtypes and
//     shapes, submitted with single ops in reverse order on odd ranks:
//     exact values, OpResult.members (shape, splits); unnamed groups; a
//     group whose inputs and outputs differ in number or that is empty fails
//     at once; a member mismatch fails the group on every rank;
//   - join with uneven batch counts, each reduce op, int64 and float64: the
//     joined ranks contribute the identity, average divides by the world
//     size; allgather / broadcast / alltoall / reducescatter fail naming the
//     joined rank, a barrier completes, set allreduces get the identity;
//     join() returns the last rank to join; twice;
//   - overlapping process sets {0,1}, {1,2}, {0,2} in flight at once with the
//     global set and the same names: exact values; every error of adding,
//     removing and using sets fails on every rank (or locally) and the next
//     op works; a removed set's id is not reused.
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"
#include "tests/testing/topology.h"

namespace kolo::testing {
namespace {

constexpr int kInvalid = 3;   // absl::StatusCode::kInvalidArgument
constexpr int kMismatch = 9;  // absl::StatusCode::kFailedPrecondition

const char* const kOps[] = {"sum", "average", "min", "max", "product"};

// The job of world size n (`static_sets`: the three-rank job with static
// sets and group fusion off), launched once and shared by every test.
const JobRun& Job(int n, bool static_sets = false) {
  static auto* runs = new std::map<std::pair<int, bool>, JobRun>();
  const auto key = std::make_pair(n, static_sets);
  if (auto it = runs->find(key); it != runs->end()) return it->second;
  std::vector<std::string> argv = {Bin("kolorun"), "-np", std::to_string(n),
                                   Bin("kolo-groups-worker")};
  std::map<std::string, std::optional<std::string>> env;
  if (static_sets) {
    argv.push_back("--static-sets");
    env["KOLO_DISABLE_GROUP_FUSION"] = "1";
  }
  JobRun run = RunJob(argv, env);
  return runs->emplace(key, std::move(run)).first->second;
}

std::set<int> Range(int from, int to) {
  std::set<int> s;
  for (int r = from; r < to; ++r) s.insert(r);
  return s;
}

std::string Text(const std::set<int>& s) {
  return absl::StrCat("{", absl::StrJoin(s, ","), "}");
}

// Checks on one job's output.
class Output {
 public:
  explicit Output(const JobRun& run) : out_(run.output) {}

  // Data case `name` printed GRP_OK on exactly `ranks` and failed nowhere.
  void ExpectOk(const std::string& name, const std::set<int>& ranks) const {
    for (const std::string& line : Lines(out_, "GRP_FAIL case=" + name + " ")) {
      ADD_FAILURE() << line;
    }
    std::set<int> ok;
    for (const Fields& f : ParseTagged(out_, "GRP_OK")) {
      if (f.at("case") != name) continue;
      EXPECT_TRUE(ok.insert(IntField(f, "rank")).second)
          << name << " twice on rank " << f.at("rank");
    }
    EXPECT_EQ(ok, ranks) << name << ": right on " << Text(ok) << ", want "
                         << Text(ranks);
  }

  // Error case `name` failed on exactly `ranks`, with one code (one of
  // `codes`) everywhere, each message containing every string of `want`,
  // and the good op after it worked.
  void ExpectError(const std::string& name, const std::set<int>& ranks,
                   const std::set<int>& codes,
                   const std::vector<std::string>& want) const {
    std::set<int> seen, seen_codes;
    for (const Fields& f : ParseTagged(out_, "GRP_ERR")) {
      if (f.at("case") != name) continue;
      seen.insert(IntField(f, "rank"));
      seen_codes.insert(IntField(f, "code"));
      EXPECT_TRUE(codes.count(IntField(f, "code")))
          << name << " on rank " << f.at("rank") << ": code " << f.at("code")
          << ", want one of " << Text(codes) << "\n"
          << absl::StrJoin(Messages(name), "\n");
      EXPECT_EQ(IntField(f, "next"), 1)
          << "the op after " << name << " failed on rank " << f.at("rank");
    }
    EXPECT_EQ(seen, ranks) << name;
    EXPECT_LE(seen_codes.size(), 1u)
        << name << ": codes differ between ranks: " << Text(seen_codes);
    const std::vector<std::string> messages = Messages(name);
    EXPECT_EQ(messages.size(), ranks.size()) << name;
    for (const std::string& m : messages) {
      for (const std::string& w : want) {
        EXPECT_TRUE(absl::StrContains(m, w))
            << name << ": want \"" << w << "\" in\n  " << m;
      }
    }
  }

  std::vector<std::string> Messages(const std::string& name) const {
    return Lines(out_, "GRP_MSG case=" + name + " rank=");
  }

  const std::string& text() const { return out_; }

 private:
  const std::string& out_;
};

// The job ended with exit code 0, every rank reported no failure.
void ExpectClean(const JobRun& r, int n) {
  EXPECT_TRUE(r.exit.exited && r.exit.code == 0) << r.exit.ToString() << "\n"
                                                 << r.output;
  std::vector<Fields> done = ParseTagged(r.output, "GRP_DONE");
  ASSERT_EQ(static_cast<int>(done.size()), n) << r.output;
  for (const Fields& f : done) {
    EXPECT_EQ(IntField(f, "size"), n);
    EXPECT_EQ(IntField(f, "fails"), 0);
  }
  for (const std::string& line : Lines(r.output, "GRP_FAIL")) {
    ADD_FAILURE() << line;
  }
}

// Step 1 of the worker, the same in every job.
void ExpectGrouped(const Output& o, int n) {
  const std::set<int> all = Range(0, n);
  for (const char* op : kOps) {
    o.ExpectOk(absl::StrCat("grp/ar/", op), all);
    o.ExpectOk(absl::StrCat("grp/single/", op), all);
  }
  for (const char* c :
       {"grp/ag", "grp/rs/sum", "grp/rs/average", "grp/rs/max",
        "grp/unnamed/ar", "grp/unnamed/single", "grp/unnamed/ag",
        "grp/unnamed/ar2", "grp/err/member-dtype/again"}) {
    o.ExpectOk(c, all);
  }
  o.ExpectError("grp/err/count/ar", all, {kInvalid},
                {"grouped_allreduce 'grp/err/count/ar'",
                 "2 inputs but 1 "
                 "outputs"});
  o.ExpectError("grp/err/count/ag", all, {kInvalid},
                {"grouped_allgather", "1 inputs but 0 outputs"});
  o.ExpectError("grp/err/count/rs", all, {kInvalid},
                {"grouped_reducescatter", "1 inputs but 2 outputs"});
  for (const char* c :
       {"grp/err/empty/ar", "grp/err/empty/ag", "grp/err/empty/unnamed"}) {
    o.ExpectError(c, all, {kInvalid}, {"at least one tensor"});
  }
  o.ExpectError("grp/err/member-dtype", all, {kMismatch},
                {"grp/err/member-dtype.1", "dtype float64", "float32",
                 absl::StrCat("rank ", n - 1)});
}

class Groups : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
  const JobRun& run() const { return Job(n()); }
  Output out() const { return Output(run()); }
};

TEST_P(Groups, JobEndsCleanlyOnEveryRank) {
  ExpectClean(run(), n());
  std::cout << "world size " << n() << ": job took " << run().seconds << " s\n";
}

TEST_P(Groups, GroupedOpsInAnyOrderAreExactAndBadGroupsFail) {
  ExpectGrouped(out(), n());
}

// The sets {0,1}, {1,2}, {0,2} (ids 1, 2, 3) and the global set: which
// ranks must have printed each case.
std::map<int, std::set<int>> SetMembers(int n) {
  return {{0, Range(0, n)}, {1, {0, 1}}, {2, {1, 2}}, {3, {0, 2}}};
}

const char* const kSetCases[] = {"x",           "avg",
                                 "avg-int",     "ag",
                                 "bc",          "a2a",
                                 "rs",          "grp",
                                 "grp-ag",      "grp-rs",
                                 "barrier",     "unnamed/single",
                                 "unnamed/grp", "unnamed/single2"};

TEST_P(Groups, OverlappingProcessSetsRunConcurrentlyAndExactly) {
  const Output o = out();
  const std::set<int> all = Range(0, n());
  if (n() < 3) {
    o.ExpectError("ps2/err/global", all, {kInvalid}, {"global process set"});
    o.ExpectOk("ps2/add-one", all);
    o.ExpectOk("ps2/set1/x", {1});
    o.ExpectOk("ps2/remove", all);
    return;
  }
  std::vector<Fields> ids = ParseTagged(o.text(), "GRP_IDS");
  EXPECT_EQ(static_cast<int>(ids.size()), n());
  for (const Fields& f : ids) {
    EXPECT_EQ(f.at("ids"), "1,2,3") << "rank " << f.at("rank");
  }
  o.ExpectOk("ps/ids", all);
  o.ExpectOk("ps/ranks", all);
  for (const auto& [set, members] : SetMembers(n())) {
    for (const char* c : kSetCases) {
      o.ExpectOk(absl::StrCat("ps/set", set, "/", c), members);
    }
  }
}

TEST_P(Groups, ProcessSetErrorsFailEverywhereAndTheNextOpWorks) {
  if (n() < 3) GTEST_SKIP() << "needs three ranks";
  const Output o = out();
  const int k = n();
  const std::set<int> all = Range(0, k);
  // Ranks that differ: an error on every rank (the same code everywhere).
  std::vector<int> others;
  for (int r = 1; r < k; ++r) others.push_back(r);
  o.ExpectError(
      "ps/err/add-differ", all, {kInvalid, kMismatch},
      {absl::StrCat("add_process_set ranks [0,2] on ranks ",
                    absl::StrJoin(others, ","), " but [0,1] on rank 0")});
  // Local errors.
  o.ExpectError("ps/err/not-member", all, {kInvalid},
                {"allreduce 'ps/not-member'", "not a member of process set"});
  // The message must name the group the caller gave (kolo.h: messages say
  // what failed).
  o.ExpectError("ps/err/not-member-grouped", all, {kInvalid},
                {"'ps/nm-grp", "not a member of process set"});
  o.ExpectError("ps/err/unknown-grouped", all, {kInvalid},
                {"'ps/unknown-grp", "process set 99", "does not exist"});
  o.ExpectError("ps/err/unknown", all, {kInvalid},
                {"process set 99", "does not exist"});
  o.ExpectError("ps/err/unknown-ranks", all, {kInvalid},
                {"process set 99 does not exist"});
  // Negotiated errors.
  o.ExpectError("ps/err/duplicate", all, {kInvalid},
                {"add_process_set([0,1])", "already form process set 1"});
  o.ExpectError("ps/err/global", all, {kInvalid}, {"global process set"});
  o.ExpectError(
      "ps/err/out-of-range", all, {kInvalid},
      {absl::StrCat("add_process_set: rank ", k, " is out of range for ", k,
                    " ranks (0..", k - 1, ")")});
  o.ExpectError("ps/err/rank-twice", all, {kInvalid},
                {"add_process_set: rank 1 is given twice"});
  o.ExpectError("ps/err/remove-unknown", all, {kInvalid},
                {"remove_process_set(99)", "no process set 99"});
  o.ExpectError("ps/err/remove-global", all, {kInvalid},
                {"remove_process_set(0)", "global process set"});
  o.ExpectError("ps/err/mismatch", {1, 2}, {kMismatch},
                {"ps/mismatch (process set 2)", "float64", "float32"});
  o.ExpectError(
      "ps/err/remove-pending", all, {kMismatch},
      {"remove_process_set(1)", "pending", "ps/pending (process set 1)"});
  o.ExpectOk("ps/pending", {0, 1});
  // Set 3 removed: gone, and its id is not given again.
  o.ExpectOk("ps/remove", all);
  o.ExpectError("ps/err/removed", all, {kInvalid},
                {"process set 3", "does not exist"});
  o.ExpectError("ps/err/removed-ranks", all, {kInvalid},
                {"process set 3 does not exist"});
  o.ExpectError("ps/err/remove-twice", all, {kInvalid},
                {"remove_process_set(3)", "no process set 3"});
  o.ExpectOk("ps/readd", all);
  o.ExpectOk("ps/set4/x", {0, 2});
}

TEST_P(Groups, JoinWithUnevenBatchesGivesIdentityForEveryOp) {
  const Output o = out();
  const int k = n();
  const std::set<int> all = Range(0, k);
  for (int cycle = 0; cycle < 2; ++cycle) {
    auto batches = [&](int r) { return cycle == 0 ? r + 1 : k - r; };
    for (int b = 0; b < k; ++b) {
      std::set<int> training;
      for (int r = 0; r < k; ++r) {
        if (batches(r) > b) training.insert(r);
      }
      for (const char* dtype : {"int64", "float64"}) {
        for (const char* op : kOps) {
          o.ExpectOk(
              absl::StrCat("join/c", cycle, "/", dtype, "/", op, "/b", b),
              training);
        }
      }
    }
  }
}

TEST_P(Groups, JoinReturnsTheLastRankAndResets) {
  const Output o = out();
  const int k = n();
  const std::set<int> all = Range(0, k);
  std::vector<Fields> joins = ParseTagged(o.text(), "GRP_JOIN");
  EXPECT_EQ(static_cast<int>(joins.size()), 2 * k);
  for (const Fields& f : joins) {
    const int cycle = IntField(f, "cycle");
    EXPECT_EQ(IntField(f, "last"), cycle == 0 ? k - 1 : 0)
        << "cycle " << cycle << " rank " << f.at("rank");
  }
  for (int cycle = 0; cycle < 2; ++cycle) {
    o.ExpectOk(absl::StrCat("join/c", cycle, "/join"), all);
    o.ExpectOk(absl::StrCat("join/c", cycle, "/after"), all);
  }
}

// The other collectives fail naming the joined rank; a barrier and grouped
// allreduces (the joined rank: the identity) run.
TEST_P(Groups, WhileARankHasJoinedOnlyAllreducesAndBarriersRun) {
  const Output o = out();
  const int k = n();
  for (int cycle = 0; cycle < 2; ++cycle) {
    const int joined = cycle == 0 ? 0 : k - 1;
    std::set<int> training = Range(0, k);
    training.erase(joined);
    const std::string p = absl::StrCat("join/c", cycle, "/");
    for (const char* op :
         {"allgather", "broadcast", "alltoall", "reducescatter"}) {
      o.ExpectError(p + op, training, {kMismatch},
                    {absl::StrCat(op, " '", p, op, "'"),
                     absl::StrCat("rank ", joined, " has joined")});
    }
    o.ExpectOk(p + "barrier", training);
    for (const char* op : kOps) o.ExpectOk(p + "grouped/" + op, training);
  }
}

TEST_P(Groups, SetAllreduceGetsTheIdentityOfAJoinedMember) {
  if (n() < 3) GTEST_SKIP() << "needs three ranks";
  const Output o = out();
  const int k = n();
  // Sets 1 {0,1}, 2 {1,2} and 4 {0,2} remain.
  const std::map<int, std::set<int>> sets = {
      {1, {0, 1}}, {2, {1, 2}}, {4, {0, 2}}};
  for (int cycle = 0; cycle < 2; ++cycle) {
    const int joined = cycle == 0 ? 0 : k - 1;
    for (const auto& [set, members] : sets) {
      std::set<int> training = members;
      training.erase(joined);
      for (const char* dtype : {"int64", "float64"}) {
        for (const char* op : {"sum", "average", "min", "product"}) {
          o.ExpectOk(
              absl::StrCat("join/c", cycle, "/set", set, "/", dtype, "/", op),
              training);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, Groups, ::testing::Values(2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat(p.param, "ranks");
                         });

// Three ranks, KOLO_DISABLE_GROUP_FUSION=1, InitOptions{{{0,1},{2,1}}}.
TEST(StaticSetsWithoutGroupFusion, GroupedOpsAndStaticSetsAreExact) {
  const JobRun& r = Job(3, /*static_sets=*/true);
  ExpectClean(r, 3);
  std::cout << "static sets, group fusion off: job took " << r.seconds
            << " s\n";
  const Output o(r);
  ExpectGrouped(o, 3);
  o.ExpectOk("static/ids", {0, 1, 2});
  const std::map<int, std::set<int>> sets = {
      {0, {0, 1, 2}}, {1, {0, 1}}, {2, {1, 2}}};
  for (const auto& [set, members] : sets) {
    for (const char* c : kSetCases) {
      o.ExpectOk(absl::StrCat("ps/set", set, "/", c), members);
    }
  }
  o.ExpectError("static/err/duplicate", {0, 1, 2}, {kInvalid},
                {"add_process_set([0,1])", "already form process set 1"});
  o.ExpectOk("static/add", {0, 1, 2});
  o.ExpectOk("static/set3/x", {0, 2});
}

}  // namespace
}  // namespace kolo::testing
