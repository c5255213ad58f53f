// FusionCandidateOf: what the fusion planner (fusion/fusion_planner.h) needs
// to know of a ready response — its op, dtype, reduce op, scale factors,
// device kind and bytes — from the response and rank 0's Request. The
// coordinator builds its plans with it (coordinator/negotiator_plans.cc) and
// the workers' fast path derives the same plans with it
// (worker_lib/runtime/fast_path_link.h), so that both fuse alike.
//
// Thread-safety: a pure function.
#ifndef KOLO_PROTO_FUSION_CANDIDATE_H_
#define KOLO_PROTO_FUSION_CANDIDATE_H_

#include <cstdint>

#include "fusion/fusion_planner.h"
#include "proto/kolo.pb.h"

namespace kolo::proto {

// The candidate of `response` (`first`: rank 0's Request, or any rank's when
// the ranks agree; null: kOther). Errors and ops other than allreduce and
// allgather are kOther, and so is a tensor of at least `direct_bytes` (it
// runs in place). The domain is left 0: the caller's partition.
fusion::Candidate FusionCandidateOf(const Response& response,
                                    const Request* first,
                                    uint64_t direct_bytes);

}  // namespace kolo::proto

#endif  // KOLO_PROTO_FUSION_CANDIDATE_H_
