// HierarchicalCollectives: allreduce, allgather, broadcast and reducescatter
// for a job that spans several hosts, run in two levels — among the ranks of
// each host (over the epoch transport's local connections: shared memory
// when the hybrid transport has it) and across hosts among one rank per host
// (TCP) — instead of one flat ring or tree over every rank, whose steps
// cross hosts many times. The levels are SubsetTransports of the epoch's
// transport, so the algorithms of allreduce/collectives.h run on them
// unchanged; the grouping is a Hierarchy (allreduce/hierarchy.h).
//
// Allreduce, large buffers on hosts with equal rank counts ("sliced"): the
// ranks of each host reduce-scatter the buffer among themselves (local rank
// j ends with chunk j of the host's sum), local rank j of every host
// allreduces chunk j across hosts (one column per local rank, so every rank
// and every connection of the host carries cross-host traffic, each 1/L of
// it), then each host allgathers its chunks. This is the ring allreduce with
// a cross-host allreduce between its two halves.
// Allreduce, small buffers on uniform hosts whose ranks line up ("columns":
// every column lists the hosts in the same order, as when each host's ranks
// are consecutive): allreduce within each host (every local rank gets the
// host's sum), then within each column across hosts: two latency-bound
// phases, and no broadcast.
// Allreduce, otherwise ("leader"): reduce within each host to its leader
// (allreduce/reduce.h: a binomial tree for small buffers, reduce-scatter and
// gather for large), allreduce among the leaders (the flat algorithm: direct
// exchange / recursive doubling for small buffers, the ring for large), and
// broadcast from the leader within each host.
// Allgather: each host's ranks send their blocks to the leader, the leaders
// allgather the host blocks (ring), each leader broadcasts the whole output
// within its host. (Ranks not numbered host by host are gathered in host
// order into scratch and put in rank order by the leader.)
// Broadcast: the root and the leaders of the other hosts broadcast across
// hosts, then each of them within its host.
// Reducescatter: reduce within each host to the leader, reducescatter the
// host blocks among the leaders, and each leader sends its ranks their
// blocks.
// Alltoall and barrier stay flat: every pair exchanges its own data, and a
// hierarchy only adds hops.
//
// Fixed order, bitwise identical results: every element of a result is
// computed once, on one rank (a leader, or the owner of a chunk), by
// reductions in an order that depends only on the hierarchy, the count and
// the options, then copied to the others (the cross-host allreduce itself
// gives bitwise-equal results on its members, allreduce/collectives.h). The
// order differs from the flat algorithms', so floats may differ from a flat
// run in the last bits (exact inputs give equal results). Average is a sum
// divided by the full world size; prescale applies to each rank's input,
// postscale to the result, as in the flat collectives.
//
// Calling convention, checks and errors as allreduce/collectives.h: every
// rank calls the same collective with consistent arguments after one
// BeginOperation on the epoch's transport (the phases share its sequence;
// messages of one pair stay in order). Arguments are checked on the whole
// world before any byte moves; a transport error in a phase aborts the
// epoch's transport, and the returned error names the phase and this
// rank in the epoch's numbering.
//
// Thread-safety: as the transport's — one thread calls the collectives.
// Lifetime: the transport must outlive this object.
#ifndef KOLO_ALLREDUCE_HIERARCHICAL_H_
#define KOLO_ALLREDUCE_HIERARCHICAL_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "allreduce/collectives.h"
#include "allreduce/hierarchy.h"
#include "allreduce/subset_transport.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo {

// Algorithm choices per level: `local` within a host, `cross` across
// hosts (where small_bytes should suit the number of hosts). A forced
// algorithm (kRing / kSmall in `cross`) picks the allreduce's shape too:
// kSmall the leader form with trees, kRing the sliced form where hosts are
// uniform.
struct HierarchicalOptions {
  AlgorithmOptions local;
  AlgorithmOptions cross;
};

class HierarchicalCollectives {
 public:
  // REQUIRES: hierarchy.size() == transport->size().
  HierarchicalCollectives(Transport* transport, Hierarchy hierarchy);

  const Hierarchy& hierarchy() const { return hierarchy_; }

  // As the functions of the same name in allreduce/collectives.h.
  absl::Status Allreduce(DataType type, const void* input, void* output,
                         int64_t count, const ReduceOptions& reduce,
                         const HierarchicalOptions& options);
  absl::Status Allgather(DataType type, const void* input, int64_t input_count,
                         absl::Span<const int64_t> counts, void* output,
                         const HierarchicalOptions& options);
  absl::Status Broadcast(DataType type, void* data, int64_t count, int root,
                         const HierarchicalOptions& options);
  absl::Status Reducescatter(DataType type, const void* input,
                             int64_t input_count,
                             absl::Span<const int64_t> counts, void* output,
                             const ReduceOptions& reduce,
                             const HierarchicalOptions& options);

 private:
  absl::Status SlicedAllreduce(DataType type, const char* in, char* out,
                               int64_t count, ReduceOp op,
                               const ReduceOptions& reduce,
                               const HierarchicalOptions& options);
  absl::Status ColumnsAllreduce(DataType type, const char* in, char* out,
                                int64_t count, ReduceOp op,
                                const ReduceOptions& reduce,
                                const HierarchicalOptions& options);
  absl::Status LeaderAllreduce(DataType type, const char* in, char* out,
                               int64_t count, ReduceOp op,
                               const ReduceOptions& reduce,
                               const HierarchicalOptions& options);
  // Divides an average by the world size and applies postscale.
  absl::Status Finish(DataType type, const ReduceOptions& reduce, void* data,
                      int64_t count) const;
  // `status` prefixed with the collective, `phase` and this rank.
  absl::Status InPhase(absl::string_view collective, absl::string_view phase,
                       const absl::Status& status) const;
  bool leader() const { return hierarchy_.local_of[rank_] == 0; }

  Transport* const transport_;
  const Hierarchy hierarchy_;
  const int rank_;
  const int host_;
  SubsetTransport local_;                     // this rank's host
  std::unique_ptr<SubsetTransport> leaders_;  // on leaders only
  std::unique_ptr<SubsetTransport> column_;   // uniform hosts only
  const bool columns_in_host_order_;
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_HIERARCHICAL_H_
