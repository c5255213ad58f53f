// Cross-rank agreement checks of the Negotiator: given every rank's Request
// for one name, the Response every rank receives — the collective to run
// (with the allgather sizes or the alltoall matrix), or an error naming the
// tensor, the ranks and the values they disagree on.
//
// Checks, in order; the first failing one gives the error:
//   1. a request flagged invalid on some rank            kInvalidArgument
//   2. op type                                           kFailedPrecondition
//   3. dtype, then device kind (cpu or cuda: each rank may use its own
//      CUDA ordinal; not for a barrier: no tensor)    kFailedPrecondition,
//      then the group size (grouped ops)
//   4. allgather, alltoall: a scalar on some rank        kInvalidArgument
//   5. per op                                            kFailedPrecondition
//      allreduce, reducescatter: shape, reduce op, prescale, postscale, and
//      for reducescatter the splits; broadcast: shape, root; allgather,
//      alltoall: the dimensions after the first; barrier: nothing;
//      add_process_set: the ranks; remove_process_set: the set
//   6. what a correct worker flags invalid itself: alltoall splits that are
//      not `size` non-negative entries summing to the first dimension, the
//      same for explicit reducescatter splits, a broadcast root that is not
//      one of the ranks, an op kolo does not know         kInvalidArgument
//   7. the blocking allgather's counts / alltoall's recv_splits (Request.
//      expect) that contradict what the ranks send       kInvalidArgument
// A disagreement reads, groups of ranks by value, largest group first (ties:
// lowest rank first):
//   tensor 'grad/fc.weight': allreduce shape [1000,2048] on ranks 0,1,3 but
//   [1000,2047] on rank 2
//
// Thread-safety: pure functions.
#ifndef KOLO_COORDINATOR_NEGOTIATOR_CHECKS_H_
#define KOLO_COORDINATOR_NEGOTIATOR_CHECKS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

// The response for `name` given `requests[i]` = rank ranks[i]'s request
// (ranks empty: rank i's). The requests are every member of the op's
// process set (messages name global ranks; a broadcast root must be one of
// `ranks`, alltoall splits have one entry per request).
// REQUIRES: !requests.empty(); every request is for `name`; ranks is empty
// or as long as requests.
proto::Response CheckAgreement(
    absl::string_view name, const std::vector<const proto::Request*>& requests,
    const std::vector<int>& ranks = {});

// One rank's call, for messages: "allreduce 'grad/fc' (float32, shape
// [4,2])",
// "barrier 'b'", "grouped allreduce 'g' (3 tensors)".
std::string DescribeCall(const proto::Request& r);

// "rank 2" for one rank, "ranks 0,1,3" for several (in the given order).
std::string RankList(const std::vector<int>& ranks);

// values[i] is rank i's (or ranks[i]'s) value: "X on ranks 0,1 but Y on
// rank 2 and Z on rank 3" — groups by value, largest first, ties by lowest
// index.
std::string DescribeGroups(const std::vector<std::string>& values,
                           const std::vector<int>& ranks = {});

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_NEGOTIATOR_CHECKS_H_
