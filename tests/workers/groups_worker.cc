// kolo-groups-worker: grouped ops, join and process sets through the public
// API, with exact values, run under kolorun by
// tests/multiprocess_groups_test.cc, once per world size.
// Usage: kolo-groups-worker [--static-sets]
//
// Without a flag (the full run), in this order:
//   1. Grouped ops ("grp/..."): grouped allreduces (one per reduce op, mixed
//      dtypes and shapes, in place and not), a grouped allgather (a different
//      first dimension per rank), grouped reducescatters (default split) and
//      single allreduces, all in flight at once, odd ranks submitting them in
//      reverse order; then unnamed grouped ops (same order everywhere); then
//      the errors: a group whose inputs and outputs differ in number, an
//      empty group (both at once, locally), a member whose dtype differs on
//      the last rank (on every rank).
//   2. Process sets ("ps/...", world size >= 3): an add whose ranks differ
//      between ranks; {0,1}, {2,1}, {0,2} → ids 1, 2, 3; every collective on
//      every set this rank belongs to and on the global set, with the same
//      tensor names in every set, all in flight at once in a rank-dependent
//      order, plus unnamed ops per set; then local errors (a set this rank is
//      not in, an unknown set), negotiated errors (a duplicate set, the
//      global set, a rank out of range, a rank twice, removing an unknown
//      set or set 0, removing a set with an op pending, a dtype mismatch
//      inside a set), removal of set 3 and a new add (id 4). With two ranks:
//      the global set as an add fails, {1} works.
//   3. Join ("join/..."), twice: cycle 0 gives rank r r+1 batches, cycle 1
//      n-r; every batch allreduces int64 and float64 tensors with each reduce
//      op. After the first batch, the ranks that did not join yet run an
//      allgather, broadcast, alltoall and reducescatter (each must fail,
//      naming the joined rank), a barrier (must complete), grouped
//      allreduces with each op and an allreduce on every process set they
//      belong to (the joined member contributes the identity). join() must
//      return the rank that joins last; an allreduce after it must work on
//      every rank.
// With --static-sets (run with KOLO_DISABLE_GROUP_FUSION=1): init() gets the
// static sets {0,1} and {1,2}; step 1 runs, then "static/..." checks the
// sets (ids, ops on them, a duplicate add, a new add).
//
// Values are small integers, so every result is exact whatever the reduction
// order; average divides by the set size (integers truncate toward zero).
//
// Prints, per rank:
//   GRP_OK case=C rank=R                 a data case was right
//   GRP_FAIL case=C rank=R <why>         it was not (then exit code 4)
//   GRP_ERR case=C rank=R code=K next=0|1
//                                        an error case's status code, and
//                                        whether the good op after it worked
//   GRP_MSG case=C rank=R: <message>     that status's message
//   GRP_IDS rank=R ids=A,B,C             the ids add_process_set returned
//   GRP_JOIN rank=R cycle=C last=L       what join() returned
//   GRP_DONE rank=R size=N fails=F
// Every wait is bounded; nothing here can hang a test run.
//
// The program is split by feature: groups_worker.h says which file holds
// what.
#include "tests/workers/groups_worker.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace groups_worker {
namespace {

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const bool static_sets = argc > 1 && std::string(argv[1]) == "--static-sets";
  kolo::InitOptions options;
  if (static_sets) options.process_sets = {{0, 1}, {2, 1}};
  if (absl::Status s = kolo::init(options); !s.ok()) {
    std::printf("GRP_FAIL case=init rank=-1 %s\n", s.ToString().c_str());
    return 4;
  }
  g_rank = kolo::rank();
  g_size = kolo::size();
  Grouped();
  if (static_sets) {
    StaticSets();
  } else {
    ProcessSets();
    std::vector<ProcessSet> sets = kolo::process_sets();
    sets.erase(sets.begin());  // not the global set
    Join(sets);
  }
  std::printf("GRP_DONE rank=%d size=%d fails=%d\n", g_rank, g_size, g_fails);
  std::fflush(stdout);
  if (absl::Status s = kolo::shutdown(); !s.ok()) {
    std::printf("GRP_FAIL case=shutdown rank=%d %s\n", g_rank,
                s.ToString().c_str());
    return 4;
  }
  return g_fails == 0 ? 0 : 4;
}

}  // namespace
}  // namespace groups_worker

int main(int argc, char** argv) { return groups_worker::Main(argc, argv); }
