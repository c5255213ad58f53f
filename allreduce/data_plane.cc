#include "allreduce/data_plane.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/shm/hybrid_transport.h"
#include "allreduce/shm/shm_allreduce.h"
#include "allreduce/shm/shm_setup.h"
#include "allreduce/shm/shm_transport.h"
#include "allreduce/subset_transport.h"
#include "allreduce/tcp/tcp_transport.h"
#include "common/check.h"
#include "common/log.h"

namespace kolo {
namespace {

// KOLO_ALLREDUCE_ALGORITHM forces allreduce's algorithm only: the other
// collectives keep choosing theirs by size.
AlgorithmOptions NotForced(AlgorithmOptions options) {
  options.algorithm = Algorithm::kAuto;
  return options;
}
HierarchicalOptions NotForced(HierarchicalOptions options) {
  return {NotForced(options.local), NotForced(options.cross)};
}

// Each level's algorithm choices: allreduce's (forced or not), with the
// small-buffer threshold of the level's number of ranks unless
// KOLO_SMALL_ALLREDUCE_BYTES sets one for all.
HierarchicalOptions Levels(const AlgorithmOptions& flat,
                           const Hierarchy& hierarchy, int64_t small_bytes) {
  HierarchicalOptions levels{flat, flat};
  if (small_bytes < 0) {
    levels.local.small_bytes = DefaultSmallBytes(hierarchy.MaxLocalSize());
    levels.cross.small_bytes = DefaultSmallBytes(hierarchy.num_hosts());
  }
  return levels;
}

// The epoch's transport: `tcp` alone, or, when options.shm allows and other
// ranks share this rank's host name, a HybridTransport that reaches them
// through shared memory. If the local ranks cannot share a segment (refused
// by the system, say), they all keep TCP and the log says why.
// `*all_local` is set to the shared-memory transport when it reaches every
// rank of the epoch and its segment has slots (ShmAllreduce can run on it).
absl::StatusOr<std::unique_ptr<Transport>> WithSharedMemory(
    const DataPlaneOptions& options, absl::Time deadline, const TcpOptions& o,
    std::unique_ptr<TcpTransport> tcp, ShmTransport** all_local) {
  *all_local = nullptr;
  const std::vector<std::string>& hosts = options.hosts.names;
  const std::string& host = hosts[o.rank];
  std::vector<int> local;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    if (hosts[r] == host) local.push_back(r);
  }
  if (!options.shm || local.size() < 2) return tcp;
  ShmSetupOptions so;
  so.rank = o.rank;
  so.local = local;
  so.epoch = o.epoch;
  so.bytes = static_cast<size_t>(options.shm_bytes);
  so.deadline = deadline;
  absl::StatusOr<ShmJoin> join = JoinSegment(*tcp, so);
  if (!join.ok()) {
    return absl::Status(
        join.status().code(),
        absl::StrCat("rank ", o.rank, " (worker ", o.worker_ids[o.rank],
                     ") could not agree on shared memory with the ranks of "
                     "its host: ",
                     join.status().message()));
  }
  if (join->segment == nullptr) {
    GetLogger("transport")
        ->warn(
            "rank {}: no shared memory between the {} ranks of host {} "
            "({}); they use TCP (KOLO_SHM=0 silences this)",
            o.rank, local.size(), host, join->why);
    return tcp;
  }
  ShmOptions so2;
  so2.rank = join->local_rank;
  so2.epoch = o.epoch;
  for (int r : local) {
    so2.names.push_back(absl::StrCat("rank ", r, " (worker ", o.worker_ids[r],
                                     ", host ", host, ")"));
  }
  so2.epoch_ranks = local;
  so2.pids = join->pids;
  so2.timeout = o.timeout;
  so2.spin = o.spin;
  GetLogger("transport")
      ->info(
          "rank {}: shared memory with the {} ranks of host {} (epoch {}, "
          "{} KiB rings)",
          o.rank, local.size(), host, o.epoch,
          join->segment->ring_bytes() / 1024);
  auto shm = std::make_unique<ShmTransport>(std::move(join->segment), so2);
  if (local.size() == hosts.size() && shm->segment().slot_bytes() > 0) {
    *all_local = shm.get();
  }
  return std::make_unique<HybridTransport>(std::move(tcp), std::move(shm),
                                           local, o.timeout, o.spin);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataPlane>> DataPlane::Connect(
    const DataPlaneOptions& options, absl::Time deadline) {
  TcpOptions o = options.tcp;
  if (o.acceptor != nullptr) {
    o.handshake_timeout = o.acceptor->options().handshake_timeout;
  }
  o.connect_timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  auto transport = TcpTransport::Create(o);
  if (!transport.ok()) {
    return absl::Status(
        transport.status().code(),
        absl::StrCat("rank ", o.rank, " (worker ", o.worker_ids[o.rank],
                     ") could not connect its data plane: ",
                     transport.status().message()));
  }
  ShmTransport* all_local = nullptr;
  absl::StatusOr<std::unique_ptr<Transport>> chosen =
      WithSharedMemory(options, deadline, o, *std::move(transport), &all_local);
  if (!chosen.ok()) return chosen.status();
  const AlgorithmOptions& algorithms = options.algorithms;
  auto plane = std::make_unique<DataPlane>(*std::move(chosen), algorithms,
                                           options.hosts);
  // Every rank on this host: allreduce straight through the segment, unless
  // KOLO_ALLREDUCE_ALGORITHM forces a message algorithm.
  if (all_local != nullptr && algorithms.algorithm == Algorithm::kAuto &&
      plane->hierarchy() == nullptr) {
    plane->shm_allreduce_ =
        std::make_unique<ShmAllreduce>(all_local, plane->transport_.get());
  }
  if (const Hierarchy* h = plane->hierarchy(); h != nullptr) {
    const int host = h->host_of[o.rank];
    GetLogger("transport")
        ->info(
            "rank {}: hierarchical collectives (KOLO_HIERARCHICAL={}): {} "
            "hosts, {} ranks on host {}, leader rank {}",
            o.rank, std::string(HierarchicalModeName(options.hosts.mode)),
            h->num_hosts(), h->hosts[host].size(), options.hosts.names[o.rank],
            h->leader(host));
  }
  return plane;
}

DataPlane::DataPlane(std::unique_ptr<Transport> transport,
                     AlgorithmOptions algorithms, Hosts hosts)
    : transport_(std::move(transport)),
      algorithms_(algorithms),
      hosts_(std::move(hosts)) {
  if (hosts_.names.empty()) return;
  KOLO_CHECK(static_cast<int>(hosts_.names.size()) == transport_->size())
      << hosts_.names.size() << " host names for " << transport_->size()
      << " ranks";
  Hierarchy h = GroupByHost(hosts_.names);
  if (!UseHierarchy(hosts_.mode, h)) return;
  // Under auto the hierarchy is built only where it can pay: autotune may
  // then switch it off and on; a forced 0 or 1 is the user's choice.
  hierarchical_tunable_ = hosts_.mode == HierarchicalMode::kAuto;
  levels_ = Levels(algorithms_, h, hosts_.small_bytes);
  hierarchical_ =
      std::make_unique<HierarchicalCollectives>(transport_.get(), std::move(h));
  use_hierarchical_ = true;
}

void DataPlane::Begin() { transport_->BeginOperation(next_seq_++); }

DataPlane::Tunables DataPlane::tunables() {
  MutexLock lock(&mu_);
  return {
      .message_allreduce = shm_allreduce_ == nullptr && transport_->size() > 1,
      .small_allreduce_bytes = algorithms_.small_bytes,
      .segment_bytes = algorithms_.segment_bytes,
      .hierarchical_tunable = hierarchical_tunable_,
      .hierarchical = use_hierarchical_};
}

void DataPlane::Tune(size_t small_allreduce_bytes, size_t segment_bytes) {
  MutexLock lock(&mu_);
  algorithms_.small_bytes = small_allreduce_bytes;
  algorithms_.segment_bytes = segment_bytes;
  if (hierarchical_) {
    levels_ = Levels(algorithms_, hierarchical_->hierarchy(),
                     static_cast<int64_t>(small_allreduce_bytes));
  }
}

void DataPlane::SetHierarchical(bool on) {
  MutexLock lock(&mu_);
  tuned_hierarchical_ = on;
  if (hierarchical_tunable_) use_hierarchical_ = on;
}

absl::Status DataPlane::Allreduce(DataType type, const void* input,
                                  void* output, int64_t count,
                                  const ReduceOptions& reduce) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    if (use_hierarchical_) {
      status =
          hierarchical_->Allreduce(type, input, output, count, reduce, levels_);
    } else if (shm_allreduce_) {
      status = shm_allreduce_->Allreduce(type, input, output, count, reduce);
    } else {
      status = kolo::Allreduce(*transport_, type, input, output, count, reduce,
                               algorithms_);
    }
  }
  return Judged(std::move(status));
}

std::optional<absl::Status> DataPlane::AllreducePieces(
    DataType type, absl::Span<const AllreducePiece> pieces,
    const ReduceOptions& reduce) {
  size_t bytes = 0;
  for (const AllreducePiece& piece : pieces) {
    bytes += static_cast<size_t>(std::max<int64_t>(piece.count, 0));
  }
  bytes *= DataTypeSize(type);
  absl::Status status;
  {
    MutexLock lock(&mu_);
    if (use_hierarchical_ || shm_allreduce_ == nullptr ||
        !shm_allreduce_->Slices(bytes)) {
      return std::nullopt;
    }
    Begin();
    status = shm_allreduce_->AllreducePieces(type, pieces, reduce);
  }
  return Judged(std::move(status));
}

absl::Status DataPlane::Allgather(DataType type, const void* input,
                                  int64_t count,
                                  absl::Span<const int64_t> counts,
                                  void* output) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    status = use_hierarchical_
                 ? hierarchical_->Allgather(type, input, count, counts, output,
                                            NotForced(levels_))
                 : kolo::Allgather(*transport_, type, input, count, counts,
                                   output, NotForced(algorithms_));
  }
  return Judged(std::move(status));
}

absl::Status DataPlane::Broadcast(DataType type, void* data, int64_t count,
                                  int root) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    status = use_hierarchical_
                 ? hierarchical_->Broadcast(type, data, count, root,
                                            NotForced(levels_))
                 : kolo::Broadcast(*transport_, type, data, count, root,
                                   NotForced(algorithms_));
  }
  return Judged(std::move(status));
}

absl::Status DataPlane::Alltoall(DataType type, const void* input,
                                 absl::Span<const int64_t> send_splits,
                                 void* output,
                                 absl::Span<const int64_t> recv_splits) {
  int64_t count = 0;
  for (int64_t s : send_splits) count += s;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    status = kolo::Alltoall(*transport_, type, input, count, send_splits,
                            output, recv_splits);
  }
  return Judged(std::move(status));
}

absl::Status DataPlane::Reducescatter(DataType type, const void* input,
                                      int64_t count,
                                      absl::Span<const int64_t> counts,
                                      void* output,
                                      const ReduceOptions& reduce) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    status =
        use_hierarchical_
            ? hierarchical_->Reducescatter(type, input, count, counts, output,
                                           reduce, NotForced(levels_))
            : kolo::Reducescatter(*transport_, type, input, count, counts,
                                  output, reduce, NotForced(algorithms_));
  }
  return Judged(std::move(status));
}

absl::Status DataPlane::Barrier() {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    status = kolo::Barrier(*transport_);
  }
  return Judged(std::move(status));
}

void DataPlane::Abort(absl::Status why) { transport_->Abort(std::move(why)); }

void DataPlane::OnPeerFault(PeerFaultHandler handler) {
  *on_peer_fault_ = std::move(handler);
}

absl::Status DataPlane::Judged(absl::Status status) const {
  if (status.ok() || !*on_peer_fault_ || PeersOf(status).empty()) {
    return status;
  }
  return (*on_peer_fault_)(status);
}

void DataPlane::SetInactivityTimeout(absl::Duration timeout) {
  MutexLock lock(&mu_);
  transport_->SetInactivityTimeout(timeout);
}

void DataPlane::Stamp(uint64_t first) {
  MutexLock lock(&mu_);
  next_seq_ = first;
}

std::unique_ptr<DataPlane> DataPlane::Subset(std::vector<int> members) {
  // The set's own hierarchy, from its members' hosts.
  Hosts hosts;
  hosts.mode = hosts_.mode;
  hosts.small_bytes = hosts_.small_bytes;
  if (!hosts_.names.empty()) {
    for (int m : members) hosts.names.push_back(hosts_.names.at(m));
  }
  AlgorithmOptions algorithms;
  std::optional<bool> tuned_hierarchical;
  {
    MutexLock lock(&mu_);
    algorithms = algorithms_;
    tuned_hierarchical = tuned_hierarchical_;
  }
  auto subset = std::make_unique<DataPlane>(
      std::make_unique<SubsetTransport>(transport_.get(), std::move(members)),
      algorithms, std::move(hosts));
  subset->on_peer_fault_ = on_peer_fault_;  // the same handler, shared
  // Autotune's choice so far, where the set's own hierarchy is tunable.
  if (tuned_hierarchical.has_value()) {
    subset->SetHierarchical(*tuned_hierarchical);
  }
  return subset;
}

}  // namespace kolo
