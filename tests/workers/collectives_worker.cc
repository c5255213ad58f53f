// kolo-collectives-worker: every collective and option through the
// negotiated asynchronous API, with exact values, run under kolorun by
// tests/multiprocess_collectives_test.cc (issue 6 point 1), once per world
// size. Usage: kolo-collectives-worker DIR (DIR: an empty directory shared by
// the ranks, for the barrier's marker files).
//
// What runs, in this order:
//   1. The data cases (allreduce "ar/...", allgather "ag/...", broadcast
//      "bc/...", alltoall "a2a/...", reducescatter "rs/..."), twice: pass
//      "all" submits every case at once (in a different order on odd ranks,
//      so that they fuse and negotiate out of order) and then synchronizes
//      each; pass "one" submits and synchronizes them one at a time. Every
//      output is compared bit for bit with a value computed here, as are
//      OpResult.shape and OpResult.splits, and out-of-place inputs must be
//      left untouched.
//   2. Barriers: before each, every rank writes a marker file into DIR (the
//      last rank after a pause); after it, every rank must see all markers.
//   3. The error cases: each must fail on every rank with a code and message
//      the test checks, and a good allreduce right after it must work.
//
// Values are small integers (halves after a postscale of 0.5), so every
// partial result is exact whatever the reduction order, in every dtype. The
// expectation follows the documented arithmetic (allreduce/kernels.h):
// prescale each input (in double for integers and float64, truncating
// integers toward zero; in float otherwise), reduce, divide an average by
// the world size (truncating for integers, float for float32 / float16 /
// bfloat16, double for float64), then postscale the same way as prescale.
// The float16 / bfloat16 encodings come from tests/testing/elements.h (exact
// values only), not from the kernels.
//
// Prints, per rank:
//   COLL_OK case=C pass=P rank=R            a data case or barrier was right
//   COLL_FAIL case=C pass=P rank=R <why>    it was not (then exit code 4)
//   COLL_ERR case=C rank=R code=K next=0|1  an error case's status code, and
//                                           whether the good op after it
//                                           worked
//   COLL_MSG C: <message>                   that status's message
//   COLL_DONE rank=R size=N cases=D errors=E fails=F
//
// The program is split by kind of collective: collectives_worker.h says
// which file holds what.
#include "tests/workers/collectives_worker.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace collectives_worker {
namespace {

std::vector<Case> DataCases() {
  std::vector<Case> cases;
  for (auto make : {AllreduceCases, AllgatherCases, BroadcastCases,
                    AlltoallCases, ReducescatterCases}) {
    for (Case& c : make()) cases.push_back(std::move(c));
  }
  return cases;
}

void Report(const Case& c, const char* pass, const absl::Status& s,
            const OpResult& result) {
  std::string why = c.bad;
  if (why.empty() && !s.ok()) why = absl::StrCat("status ", s.ToString());
  if (why.empty()) why = c.check(result);
  if (why.empty()) {
    std::printf("COLL_OK case=%s pass=%s rank=%d\n", c.name.c_str(), pass,
                g_rank);
  } else {
    ++g_fails;
    std::printf("COLL_FAIL case=%s pass=%s rank=%d %s\n", c.name.c_str(), pass,
                g_rank, why.c_str());
  }
}

// Pass "all": everything in flight at once, odd ranks submitting in reverse.
int RunAllAtOnce() {
  std::vector<Case> cases = DataCases();
  std::vector<size_t> order(cases.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (g_rank % 2 == 1) std::reverse(order.begin(), order.end());
  std::vector<absl::StatusOr<Handle>> handles(cases.size(), Handle{0});
  for (size_t i : order) handles[i] = cases[i].submit();
  for (size_t i = 0; i < cases.size(); ++i) {
    OpResult result;
    absl::Status s = handles[i].status();
    if (s.ok()) s = kolo::synchronize(*handles[i], kWait, &result);
    Report(cases[i], "all", s, result);
  }
  return static_cast<int>(cases.size());
}

// Pass "one": one op in flight at a time (the names repeat pass "all").
void RunOneByOne() {
  for (Case& c : DataCases()) {
    OpResult result;
    absl::StatusOr<Handle> h = c.submit();
    absl::Status s = h.status();
    if (s.ok()) s = kolo::synchronize(*h, kWait, &result);
    Report(c, "one", s, result);
  }
}

// ---- Barrier ----------------------------------------------------------------

void Barriers(const std::string& dir) {
  for (int round = 0; round < 3; ++round) {
    const std::string name = absl::StrCat("barrier/", round);
    if (g_rank == g_size - 1) absl::SleepFor(absl::Milliseconds(150));
    const std::string mine =
        absl::StrCat(dir, "/round", round, ".rank", g_rank);
    if (FILE* f = std::fopen(mine.c_str(), "w")) std::fclose(f);
    std::string why;
    absl::StatusOr<Handle> h = kolo::barrier_async(name);
    absl::Status s = h.status();
    OpResult result;
    if (s.ok()) s = kolo::synchronize(*h, kWait, &result);
    if (!s.ok()) why = absl::StrCat("status ", s.ToString());
    for (int r = 0; r < g_size && why.empty(); ++r) {
      const std::string theirs = absl::StrCat(dir, "/round", round, ".rank", r);
      if (access(theirs.c_str(), F_OK) != 0) {
        why = absl::StrCat("rank ", r, "'s marker ", theirs,
                           " is missing after the barrier");
      }
    }
    if (why.empty()) {
      std::printf("COLL_OK case=%s pass=one rank=%d\n", name.c_str(), g_rank);
    } else {
      ++g_fails;
      std::printf("COLL_FAIL case=%s pass=one rank=%d %s\n", name.c_str(),
                  g_rank, why.c_str());
    }
  }
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kolo-collectives-worker DIR\n");
    return 2;
  }
  if (absl::Status s = kolo::init(); !s.ok()) {
    std::printf("COLL_FAIL case=init pass=one rank=-1 %s\n",
                s.ToString().c_str());
    return 4;
  }
  g_rank = kolo::rank();
  g_size = kolo::size();
  const int data = RunAllAtOnce();
  RunOneByOne();
  Barriers(argv[1]);
  const int errors = RunErrorCases();
  std::printf("COLL_DONE rank=%d size=%d cases=%d errors=%d fails=%d\n", g_rank,
              g_size, data, errors, g_fails);
  std::fflush(stdout);
  if (absl::Status s = kolo::shutdown(); !s.ok()) {
    std::printf("COLL_FAIL case=shutdown pass=one rank=%d %s\n", g_rank,
                s.ToString().c_str());
    return 4;
  }
  return g_fails == 0 ? 0 : 4;
}

}  // namespace
}  // namespace collectives_worker

int main(int argc, char** argv) { return collectives_worker::Main(argc, argv); }
