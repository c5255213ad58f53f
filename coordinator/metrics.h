// The coordinator's metrics: the counters its state machine keeps
// (CoreStats, with the Negotiator's NegotiationStats) and RenderMetrics,
// which writes them with the state of a Status reply as a Prometheus page
// (coordinator/metrics_text.h). The names, types and labels are listed in
// docs/observability.md "Metrics".
//
// Thread-safety: plain structs; CoordinatorCore holds its CoreStats under
// its mutex, and each epoch's Negotiator (called under that mutex) adds to
// the NegotiationStats in it through NegotiatorOptions::stats. RenderMetrics
// is a pure function.
// Invariants: counters only grow for the life of the coordinator.
#ifndef KOLO_COORDINATOR_METRICS_H_
#define KOLO_COORDINATOR_METRICS_H_

#include <cstdint>
#include <map>
#include <string>

#include "coordinator/metrics_text.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

// What the negotiators of every epoch dispatched, per op (proto::OpType).
struct OpStats {
  uint64_t collectives = 0;  // responses: a fused buffer counts once
  uint64_t tensors = 0;
  uint64_t bytes = 0;   // allreduce and allgather only (0 for other ops)
  uint64_t errors = 0;  // error responses
};

struct NegotiationStats {
  std::map<int, OpStats> by_op;
  uint64_t fused_buffers = 0;  // responses of more than one tensor
  uint64_t fused_tensors = 0;  // the tensors in them
  // A fused buffer's bytes over the fusion threshold.
  Histogram fusion_fill{{0.1, 0.25, 0.5, 0.75, 0.9, 1}};
  // Names ready by a live cache bit, and cacheable names that were not.
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  // Plans the ranks derived among themselves on the fast path (their
  // collectives, tensors, bytes, fusion and cache hits are counted above,
  // from the ranks' Done.fast_tally).
  uint64_t fast_path_plans = 0;
  // From a name's first announcement to its last (every rank in).
  Histogram wait_seconds{
      {0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60}};
};

struct CoreStats {
  NegotiationStats negotiation;
  uint64_t plans = 0;  // plans sent to the members, every epoch
  uint64_t stall_warnings = 0;
  uint64_t stall_shutdowns = 0;
  // Elastic: from the end of an epoch to the next one formed.
  Histogram recovery_seconds{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}};
  // Refused Sessions by proto::Refusal::Reason name.
  std::map<std::string, uint64_t> refusals;
};

// The page: the job's state from `status` (phase, epoch, members, workers,
// the membership history) and the counters of `stats`.
std::string RenderMetrics(const proto::StatusReply& status,
                          const CoreStats& stats);

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_METRICS_H_
