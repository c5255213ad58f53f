// Every collective and option through the negotiated API, with exact values
// (issue 6 point 1): one kolorun job of kolo-collectives-worker
// (tests/workers/collectives_worker.cc) per world size 2, 3, 4 and 5, whose
// tagged output every test below reads for every rank.
//   - allreduce: sum, average, min, max, product on int32, int64, float32,
//     float64, float16, bfloat16, in place and not; prescale / postscale
//     (integers truncating); scalar, empty, 3-d and large tensors;
//   - allgather with a different first dimension per rank, zero rows on some
//     or every rank, 1-d to 3-d; OpResult.splits = every rank's rows;
//   - broadcast from every root; alltoall with per-rank splits and without
//     splits; reducescatter with the default split of a first dimension that
//     does not divide by the ranks, and with explicit counts;
//   - barrier: every rank's marker file exists after it;
//   - each of these both with everything in flight at once (fused, out of
//     order on odd ranks) and one op at a time;
//   - errors: a scalar allgather, an alltoall without splits whose rows do
//     not divide, bad splits, broadcast roots that differ or are out of range,
//     reducescatter shape / output / counts problems, a bad allreduce output
//     or prescale, and blocking alltoall recv_splits / allgather counts that
//     contradict what the peers send: each fails on every rank with the code
//     and message checked here, and the next op works.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
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

// The job of world size n, launched once and shared by every test.
const JobRun& Job(int n) {
  static auto* runs = new std::map<int, JobRun>();
  if (auto it = runs->find(n); it != runs->end()) return it->second;
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "kolo_collectives_", getpid(), "_", n);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  JobRun run = RunJob({Bin("kolorun"), "-np", std::to_string(n),
                       Bin("kolo-collectives-worker"), dir});
  std::filesystem::remove_all(dir);
  return runs->emplace(n, std::move(run)).first->second;
}

// "rank 2" / "ranks 0,1,2" for ranks [from, to).
std::string Ranks(int from, int to) {
  std::vector<int> r;
  for (int i = from; i < to; ++i) r.push_back(i);
  return absl::StrCat(r.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(r, ","));
}

class Collectives : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
  const JobRun& run() const { return Job(n()); }

  // Every data case whose name starts with `prefix`: there are `cases` of
  // them, none failed, and each printed COLL_OK on every rank in each pass.
  void ExpectExact(const std::string& prefix, size_t cases,
                   const std::vector<std::string>& passes = {"all", "one"}) {
    const std::string& out = run().output;
    for (const std::string& line : Lines(out, "COLL_FAIL case=" + prefix)) {
      ADD_FAILURE() << line;
    }
    std::map<std::pair<std::string, std::string>, std::set<int>> ok;
    std::set<std::string> names;
    for (const Fields& f : ParseTagged(out, "COLL_OK")) {
      if (!absl::StartsWith(f.at("case"), prefix)) continue;
      names.insert(f.at("case"));
      std::set<int>& ranks = ok[std::make_pair(f.at("case"), f.at("pass"))];
      EXPECT_TRUE(ranks.insert(IntField(f, "rank")).second)
          << "twice: " << f.at("case") << " rank " << f.at("rank");
    }
    EXPECT_EQ(names.size(), cases) << absl::StrJoin(names, "\n") << "\n" << out;
    std::set<int> all;
    for (int r = 0; r < n(); ++r) all.insert(r);
    for (const std::string& name : names) {
      for (const std::string& pass : passes) {
        const std::set<int>& ranks = ok[std::make_pair(name, pass)];
        EXPECT_EQ(ranks, all)
            << name << " pass " << pass << ": not right on every rank";
      }
    }
  }

  void ExpectCase(const std::string& name) const {
    EXPECT_TRUE(absl::StrContains(run().output, "COLL_OK case=" + name + " "))
        << name << " did not run\n"
        << run().output;
  }

  // Error case `name` failed on every rank with `code`, each message
  // containing every string of `want`, and the good op after it worked.
  void ExpectError(const std::string& name, int code,
                   const std::vector<std::string>& want) const {
    const std::string& out = run().output;
    std::set<int> ranks;
    for (const Fields& f : ParseTagged(out, "COLL_ERR")) {
      if (f.at("case") != name) continue;
      ranks.insert(IntField(f, "rank"));
      EXPECT_EQ(IntField(f, "code"), code)
          << name << " on rank " << f.at("rank") << "\n"
          << Lines(out, "COLL_MSG " + name + ":").size() << " messages:\n"
          << absl::StrJoin(Lines(out, "COLL_MSG " + name + ":"), "\n");
      EXPECT_EQ(IntField(f, "next"), 1)
          << "the op after " << name << " failed on rank " << f.at("rank");
    }
    EXPECT_EQ(static_cast<int>(ranks.size()), n()) << name << "\n" << out;
    std::vector<std::string> messages = Lines(out, "COLL_MSG " + name + ":");
    EXPECT_EQ(static_cast<int>(messages.size()), n()) << name << "\n" << out;
    for (const std::string& m : messages) {
      for (const std::string& w : want) {
        EXPECT_TRUE(absl::StrContains(m, w))
            << "want: " << w << "\ngot:  " << m;
      }
    }
  }

  // "tensor 'NAME': "
  static std::string TensorPrefix(const std::string& name) {
    return absl::StrCat("tensor '", name, "': ");
  }
  std::string AllRanks() const { return Ranks(0, n()); }
  std::string Others() const { return Ranks(0, n() - 1); }
  std::string Last() const { return Ranks(n() - 1, n()); }
};

TEST_P(Collectives, JobEndsCleanlyOnEveryRank) {
  const JobRun& r = run();
  EXPECT_TRUE(r.exit.exited && r.exit.code == 0) << r.exit.ToString() << "\n"
                                                 << r.output;
  std::vector<Fields> done = ParseTagged(r.output, "COLL_DONE");
  ASSERT_EQ(static_cast<int>(done.size()), n()) << r.output;
  for (const Fields& f : done) {
    EXPECT_EQ(IntField(f, "size"), n());
    EXPECT_EQ(IntField(f, "fails"), 0) << r.output;
  }
  std::cout << "world size " << n() << ": job took " << r.seconds << " s\n";
}

TEST_P(Collectives, AllreduceEveryOpDtypeScaleAndPlacementIsExact) {
  // 4 dtypes x 5 ops x {in place, copy} + float16 and bfloat16 (5 ops in
  // place, sum copied) + 10 scaled + inexact average, large, 3-d, scalar,
  // empty.
  ExpectExact("ar/", 40 + 12 + 10 + 5);
  for (const char* c :
       {"ar/float16/sum/inplace", "ar/bfloat16/sum/copy",
        "ar/float32/sum/pre2/post0.5/copy",
        "ar/float64/sum/pre2/post0.5/inplace", "ar/float32/max/pre-1/copy",
        "ar/int32/sum/pre3/post0.5/copy", "ar/int64/average/inplace",
        "ar/int32/product/copy", "ar/float32/average/copy/inexact",
        "ar/int64/sum/inplace/scalar", "ar/float32/sum/copy/empty"}) {
    ExpectCase(c);
  }
}

TEST_P(Collectives, AllgatherOfDifferentRowsPerRankIsExactWithSplits) {
  ExpectExact("ag/", 8);
  ExpectCase("ag/int32/rows-r+1");
  ExpectCase("ag/int64/rank0-empty");
  ExpectCase("ag/int32/all-empty");
}

TEST_P(Collectives, BroadcastFromEveryRootIsExact) {
  ExpectExact("bc/", n() + 4);
  const char* dtypes[] = {"int32", "float64", "float16", "int64", "float32"};
  for (int root = 0; root < n(); ++root) {
    ExpectCase(absl::StrCat("bc/", dtypes[root % 5], "/root", root));
  }
}

TEST_P(Collectives, AlltoallWithAndWithoutSplitsIsExactWithSplits) {
  ExpectExact("a2a/", 8);
  ExpectCase("a2a/int32/splits");
  ExpectCase("a2a/float64/even");
}

TEST_P(Collectives, ReducescatterDefaultSplitAndCountsAreExact) {
  ExpectExact("rs/", 12);
  ExpectCase("rs/int64/sum/default");
  ExpectCase("rs/float32/average/default");
  ExpectCase("rs/float32/sum/counts");
}

TEST_P(Collectives, BarrierWaitsForEveryRank) {
  ExpectExact("barrier/", 3, {"one"});
}

TEST_P(Collectives, ScalarAllgatherFailsOnEveryRank) {
  const std::string reason =
      "allgather: the input is a scalar (0-d); it needs a first dimension to "
      "concatenate along";
  ExpectError("ag/scalar-all", kInvalid,
              {TensorPrefix("ag/scalar-all") + "invalid on " + AllRanks() +
               ": " + reason});
  ExpectError("ag/scalar-last", kInvalid,
              {TensorPrefix("ag/scalar-last") + "invalid on " + Last() + ": " +
               reason});
  ExpectError("ag/dtype", kMismatch,
              {TensorPrefix("ag/dtype") + "allgather dtype float32 on " +
               Others() + " but float64 on " + Last()});
}

TEST_P(Collectives, BadAlltoallFailsOnEveryRank) {
  const int k = n();
  const std::string indivisible =
      absl::StrCat("alltoall: without splits the first dimension (", k + 1,
                   ") must divide by the ", k, " ranks; pass splits");
  ExpectError("a2a/indivisible", kInvalid,
              {TensorPrefix("a2a/indivisible") + "invalid on " + AllRanks() +
               ": " + indivisible});
  ExpectError("a2a/indivisible-last", kInvalid,
              {TensorPrefix("a2a/indivisible-last") + "invalid on " + Last() +
               ": " + indivisible});
  ExpectError("a2a/splits-entries", kInvalid,
              {absl::StrCat(TensorPrefix("a2a/splits-entries"), "invalid on ",
                            Last(), ": alltoall: splits has ", k - 1,
                            " entries, but there are ", k,
                            " ranks (one entry per rank)")});
}

// kolo.h: the blocking collectives' bad arguments ("counts that do not match
// splits") fail with kInvalidArgument on every rank. Here the last rank's
// alltoall recv_splits contradict what the others send it (more elements in
// all, or as many from other ranks), and its allgather counts say that rank 0
// sends two elements instead of one.
TEST_P(Collectives, BlockingCountsThatContradictThePeersFailOnEveryRank) {
  const std::string last = Last();
  ExpectError("a2a/recv-splits-total", kInvalid, {"recv_splits", last});
  ExpectError("a2a/recv-splits-moved", kInvalid, {"recv_splits", last});
  ExpectError("ag/counts-peer", kInvalid, {"counts", last});
}

TEST_P(Collectives, BadBroadcastRootsFailOnEveryRank) {
  const int k = n();
  // "0 on rank 0 but 1 on rank 1, 2 on rank 2 and 3 on rank 3"
  std::string roots = "0 on rank 0";
  for (int r = 1; r < k; ++r) {
    absl::StrAppend(&roots,
                    r == 1       ? " but "
                    : r + 1 == k ? " and "
                                 : ", ",
                    r, " on rank ", r);
  }
  ExpectError("bc/roots-differ", kMismatch,
              {TensorPrefix("bc/roots-differ") + "broadcast root " + roots});
  const std::string range = absl::StrCat(" ranks (0..", k - 1, ")");
  ExpectError("bc/root-out-of-range", kInvalid,
              {absl::StrCat(TensorPrefix("bc/root-out-of-range"), "invalid on ",
                            AllRanks(), ": broadcast: root ", k,
                            " is out of range for ", k, range)});
  ExpectError("bc/root-negative-last", kInvalid,
              {absl::StrCat(
                  TensorPrefix("bc/root-negative-last"), "invalid on ", Last(),
                  ": broadcast: root -1 is out of range for ", k, range)});
  ExpectError("bc/shape", kMismatch,
              {TensorPrefix("bc/shape") + "broadcast shape [6] on " + Others() +
               " but [7] on " + Last()});
}

TEST_P(Collectives, BadReducescatterFailsOnEveryRank) {
  const int k = n();
  const int d0 = 2 * k + 1;
  ExpectError(
      "rs/shape", kMismatch,
      {absl::StrCat(TensorPrefix("rs/shape"), "reducescatter shape [", d0,
                    ",3] on ", Others(), " but [", d0, ",2] on ", Last())});
  ExpectError(
      "rs/shape-rows", kMismatch,
      {absl::StrCat(TensorPrefix("rs/shape-rows"), "reducescatter shape [", d0,
                    ",3] on ", Others(), " but [", d0 - 1, ",3] on ", Last())});
  // The last rank's part of 2n + 1 rows is 2 rows; it passed 3.
  ExpectError("rs/output-shape", kInvalid,
              {absl::StrCat(TensorPrefix("rs/output-shape"), "invalid on ",
                            Last(), ": reducescatter: rank ", k - 1,
                            "'s output (float32 [3,3]) must be float32 "
                            "[2,3]")});
  ExpectError(
      "rs/counts-sum", kInvalid,
      {absl::StrCat(TensorPrefix("rs/counts-sum"), "invalid on ", AllRanks(),
                    ": reducescatter: counts [",
                    absl::StrJoin(std::vector<int>(k, 1), ","), "] add up to ",
                    k, " rows, but the input's first dimension is ", k + 1)});
  ExpectError("rs/average-bool", kInvalid,
              {TensorPrefix("rs/average-bool") + "invalid on " + AllRanks() +
               ": reducescatter: average is not defined for bool tensors"});
}

TEST_P(Collectives, BadAllreduceFailsOnEveryRank) {
  ExpectError("ar/output-shape", kInvalid,
              {TensorPrefix("ar/output-shape") + "invalid on " + Last() +
               ": allreduce: the output (float32 [5]) must have the input's "
               "dtype and shape (float32 [6])"});
  ExpectError("ar/prescale-nan", kInvalid,
              {TensorPrefix("ar/prescale-nan") + "invalid on " + AllRanks() +
               ": allreduce: prescale factor is nan; it must be finite"});
}

INSTANTIATE_TEST_SUITE_P(Sizes, Collectives, ::testing::Values(2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat(p.param, "ranks");
                         });

}  // namespace
}  // namespace kolo::testing
