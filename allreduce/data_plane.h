// DataPlane: one rank's side of the collectives for one epoch — the TCP
// transport to every peer of the epoch (shared memory to the peers with this
// rank's host name, unless DataPlaneOptions::shm is off:
// allreduce/shm/hybrid_transport.h), and the blocking collectives run on it,
// one at a time, in call order.
// When the ranks span several hosts (DataPlaneHosts::mode), allreduce,
// allgather, broadcast and reducescatter run in two levels, within each host
// and across hosts (allreduce/hierarchical.h); the grouping is derived from
// the ranks' host names, so each epoch (and each process set's subset) has
// its own. Where KOLO_HIERARCHICAL is auto and the hierarchy can pay (several
// hosts, some with several ranks), autotune may switch each later collective
// between flat and two levels (SetHierarchical); every rank switches after
// the same plan, so they all choose alike.
// It knows nothing of negotiation nor of the worker: the worker fills its
// options from its configuration and the epoch's membership
// (worker_lib/runtime/data_plane_options.h); the negotiated runtime runs it
// in plan order, which every rank shares; the raw calls (kolo::raw::*) run
// on it directly, so their callers must call the collectives in the same
// order on every rank, as with Gloo.
//
// Thread-safety: every method may be called from any thread; collectives are
// serialised by an internal mutex. Abort() never waits for that mutex.
// Lifetime: one per epoch: built once the epoch's membership is known;
// destroyed (closing every data connection) when the epoch ends or the
// worker shuts down. Connections are never reused across epochs.
#ifndef KOLO_ALLREDUCE_DATA_PLANE_H_
#define KOLO_ALLREDUCE_DATA_PLANE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "allreduce/collectives.h"
#include "allreduce/hierarchical.h"
#include "allreduce/hierarchy.h"
#include "allreduce/shm/shm_allreduce.h"
#include "allreduce/tcp/acceptor.h"
#include "allreduce/tcp/tcp_options.h"
#include "allreduce/transport.h"
#include "common/mutex.h"

namespace kolo {

// How a data plane's ranks group into hosts, for the hierarchical
// collectives (and, in Connect, for shared memory).
struct DataPlaneHosts {
  HierarchicalMode mode = HierarchicalMode::kOff;  // KOLO_HIERARCHICAL
  // The launcher host name of each rank of the transport; empty: no
  // hierarchy.
  std::vector<std::string> names;
  // KOLO_SMALL_ALLREDUCE_BYTES, -1 if unset: then each level chooses by its
  // own number of ranks (DefaultSmallBytes).
  int64_t small_bytes = -1;
};

// What Connect needs to form one epoch's data plane. Plain value; copyable.
struct DataPlaneOptions {
  // The epoch's mesh: this rank, the size, the epoch, the job, every rank's
  // worker id and address, the secret, the borrowed acceptor (the data
  // port's, which accepts all the time: allreduce/tcp/acceptor.h) and abort
  // descriptor, timeouts and socket settings. Connect sets connect_timeout
  // (from its deadline) and handshake_timeout (the acceptor's).
  TcpOptions tcp;
  // Every rank's host name (ranks with this rank's name share memory), and
  // the hierarchy's mode and threshold. REQUIRES: hosts.names has tcp.size
  // entries.
  DataPlaneHosts hosts;
  // Whether the ranks of this host reach each other through shared memory
  // (KOLO_SHM), and the segment's size (KOLO_SHM_BYTES).
  bool shm = true;
  int64_t shm_bytes = 0;
  // The flat collectives' algorithm choices (allreduce's).
  AlgorithmOptions algorithms;
};

class DataPlane {
 public:
  // Connects to every peer of `options.tcp` until `deadline`; fails at once
  // with kAborted when the borrowed `options.tcp.abort_fd` (if >= 0) becomes
  // readable (the epoch ended while its data plane formed).
  static absl::StatusOr<std::unique_ptr<DataPlane>> Connect(
      const DataPlaneOptions& options, absl::Time deadline);

  absl::Status Allreduce(DataType type, const void* input, void* output,
                         int64_t count, const ReduceOptions& reduce);
  // Allreduce of `pieces` laid end to end, bit for bit, without laying them
  // end to end (ShmAllreduce::AllreducePieces), when the ranks share one
  // host's memory (no hierarchy) and the size takes the sliced form of the
  // shared-memory allreduce: the same on every rank. Otherwise nullopt, and
  // nothing ran: lay them end to end and call Allreduce.
  std::optional<absl::Status> AllreducePieces(
      DataType type, absl::Span<const AllreducePiece> pieces,
      const ReduceOptions& reduce);
  absl::Status Allgather(DataType type, const void* input, int64_t count,
                         absl::Span<const int64_t> counts, void* output);
  absl::Status Broadcast(DataType type, void* data, int64_t count, int root);
  absl::Status Alltoall(DataType type, const void* input,
                        absl::Span<const int64_t> send_splits, void* output,
                        absl::Span<const int64_t> recv_splits);
  absl::Status Reducescatter(DataType type, const void* input, int64_t count,
                             absl::Span<const int64_t> counts, void* output,
                             const ReduceOptions& reduce);
  absl::Status Barrier();

  // Makes every current and later collective fail with `why` at once.
  void Abort(absl::Status why);

  // The inactivity timeout of the collectives that follow, on this data
  // plane's transport and its subsets (Transport::SetInactivityTimeout).
  void SetInactivityTimeout(absl::Duration timeout);

  // Fault injection: cuts the connection to `peer` (-1: every peer); see
  // Transport::CutForFault. REQUIRES: the thread that runs collectives.
  absl::Status CutForFault(int peer) { return transport_->CutForFault(peer); }

  // A collective that failed because of peers (its error names them:
  // allreduce/transport.h PeersOf) returns what `handler` makes of the
  // error instead: the API reports it to the coordinator and returns the
  // coordinator's verdict on who failed (docs/design.md "Elastic": only the
  // coordinator decides). Runs on the collective's thread, outside the data
  // plane's lock; may block (bounded). Set before the first collective; shared
  // with the Subset()s made later.
  using PeerFaultHandler = std::function<absl::Status(const absl::Status&)>;
  void OnPeerFault(PeerFaultHandler handler);

  // The collectives that follow are stamped with sequence numbers from
  // `first` on (the transport's frames carry them). The negotiated runtime
  // derives it from the plan, so that every member of a process set stamps
  // a collective alike even when other ranks skip the set's collectives.
  void Stamp(uint64_t first);

  // A data plane over the ranks `members` (ascending, this rank included)
  // of this one's transport: a process set's. It shares the connections
  // (SubsetTransport); this data plane must outlive it, and the two must
  // not run collectives at the same time (the runtime runs one at a time).
  std::unique_ptr<DataPlane> Subset(std::vector<int> members);

  using Hosts = DataPlaneHosts;

  DataPlane(std::unique_ptr<Transport> transport, AlgorithmOptions algorithms,
            Hosts hosts = {});

  // What autotune may change (Plan.autotune): whether allreduce runs the
  // message algorithms (not through one shared-memory segment), and the
  // small-message cut-off and segment size (0: automatic) in force; whether
  // the collectives may switch between flat and two levels (a hierarchy can
  // pay and KOLO_HIERARCHICAL is auto), and whether they run in two levels
  // now.
  struct Tunables {
    bool message_allreduce = false;
    size_t small_allreduce_bytes = 0;
    size_t segment_bytes = 0;
    bool hierarchical_tunable = false;
    bool hierarchical = false;
  };
  Tunables tunables();
  // From the next collective on: allreduce's small-message cut-off and the
  // pipelined algorithms' segment size (0: automatic), at every level of a
  // hierarchy. Subsets made before keep their own; later ones start from
  // these. Waits for a collective in flight.
  void Tune(size_t small_allreduce_bytes, size_t segment_bytes);
  // From the next collective on: allreduce, allgather, broadcast and
  // reducescatter run in two levels (`on`) or flat, where tunables() says
  // hierarchical_tunable; elsewhere KOLO_HIERARCHICAL's choice stays. Subsets
  // made before keep their own; later ones follow `on` where their own
  // hierarchy is tunable. Waits for a collective in flight. Every rank must
  // switch between the same two collectives (the runtime: after the same
  // plan).
  void SetHierarchical(bool on);

  // The hierarchy the collectives can run on (in two levels unless autotune
  // switched them flat: tunables().hierarchical), or null when they always
  // run flat.
  const Hierarchy* hierarchy() const {
    return hierarchical_ ? &hierarchical_->hierarchy() : nullptr;
  }

 private:
  // Stamps the next plan sequence number on the transport.
  void Begin() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `status`, or the peer-fault handler's verdict on it.
  absl::Status Judged(absl::Status status) const;

  const std::unique_ptr<Transport> transport_;  // Abort() is thread-safe
  Mutex mu_;
  AlgorithmOptions algorithms_ ABSL_GUARDED_BY(mu_);  // Tune() changes them
  const Hosts hosts_;
  // Null when the collectives always run flat; else on transport_, with the
  // algorithm choices of each level (allreduce's; the other collectives
  // never force one).
  std::unique_ptr<HierarchicalCollectives> hierarchical_;
  HierarchicalOptions levels_ ABSL_GUARDED_BY(mu_);
  // Whether SetHierarchical may switch (hierarchical_ is set, mode auto).
  bool hierarchical_tunable_ = false;
  // Whether the collectives run in two levels now. Invariant: implies
  // hierarchical_ != nullptr.
  bool use_hierarchical_ ABSL_GUARDED_BY(mu_) = false;
  // The last SetHierarchical's `on`, for subsets made later.
  std::optional<bool> tuned_hierarchical_ ABSL_GUARDED_BY(mu_);
  // Set by Connect when every rank shares this host: allreduce then runs
  // through the shared segment (borrowing transport_'s shared memory).
  std::unique_ptr<ShmAllreduce> shm_allreduce_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  // Set once before the collectives start, then only read.
  std::shared_ptr<PeerFaultHandler> on_peer_fault_ =
      std::make_shared<PeerFaultHandler>();
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_DATA_PLANE_H_
