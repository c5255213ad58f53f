#include "worker_lib/runtime/data_plane.h"

#include <algorithm>
#include <string>
#include <thread>
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

namespace kolo::worker {
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

// The epoch's transport: `tcp` alone, or, when KOLO_SHM allows and other
// ranks share this rank's launcher host name, a HybridTransport that reaches
// them through shared memory. If the local ranks cannot share a segment
// (refused by the system, say), they all keep TCP and the log says why.
// `*all_local` is set to the shared-memory transport when it reaches every
// rank of the epoch and its segment has slots (ShmAllreduce can run on it).
absl::StatusOr<std::unique_ptr<Transport>> WithSharedMemory(
    const WorkerConfig& config, const proto::Membership& membership,
    uint64_t epoch, absl::Time deadline, const TcpOptions& o,
    std::unique_ptr<TcpTransport> tcp, ShmTransport** all_local) {
  *all_local = nullptr;
  const std::string& host = membership.peers(o.rank).host_name();
  std::vector<int> local;
  for (int r = 0; r < membership.peers_size(); ++r) {
    if (membership.peers(r).host_name() == host) local.push_back(r);
  }
  if (!config.shm || local.size() < 2) return tcp;
  ShmSetupOptions so;
  so.rank = o.rank;
  so.local = local;
  so.epoch = epoch;
  so.bytes = static_cast<size_t>(config.shm_bytes);
  so.deadline = deadline;
  absl::StatusOr<ShmJoin> join = JoinSegment(*tcp, so);
  if (!join.ok()) {
    return absl::Status(
        join.status().code(),
        absl::StrCat("rank ", o.rank, " (worker ", config.worker_id,
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
  so2.epoch = epoch;
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
          o.rank, local.size(), host, epoch,
          join->segment->ring_bytes() / 1024);
  auto shm = std::make_unique<ShmTransport>(std::move(join->segment), so2);
  if (static_cast<int>(local.size()) == membership.peers_size() &&
      shm->segment().slot_bytes() > 0) {
    *all_local = shm.get();
  }
  return std::make_unique<HybridTransport>(std::move(tcp), std::move(shm),
                                           local, o.timeout, o.spin);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataPlane>> DataPlane::Connect(
    const WorkerConfig& config, const proto::Membership& membership,
    uint64_t epoch, tcp::Acceptor* acceptor, absl::Time deadline,
    int abort_fd) {
  TcpOptions o;
  o.abort_fd = abort_fd;
  o.rank = membership.rank();
  o.size = membership.size();
  o.epoch = epoch;
  o.job_id = config.job_id;
  for (const proto::Peer& p : membership.peers()) {
    o.worker_ids.push_back(p.worker_id());
    o.addresses.push_back(p.data_address());
  }
  o.secret = config.secret;
  o.acceptor = acceptor;
  if (acceptor != nullptr) {
    o.handshake_timeout = acceptor->options().handshake_timeout;
  }
  o.timeout = config.knobs.data_timeout;
  // docs/design.md "Waiting policy": spin only when every local rank has a
  // core.
  const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.spin =
      membership.local_size() <= cores ? config.spin : absl::ZeroDuration();
  o.connect_timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  o.congestion_control = config.tcp_congestion;
  o.send_buffer_bytes = static_cast<int>(config.socket_sndbuf);
  o.recv_buffer_bytes = static_cast<int>(config.socket_rcvbuf);
  auto transport = TcpTransport::Create(o);
  if (!transport.ok()) {
    return absl::Status(
        transport.status().code(),
        absl::StrCat("rank ", o.rank, " (worker ", config.worker_id,
                     ") could not connect its data plane: ",
                     transport.status().message()));
  }
  ShmTransport* all_local = nullptr;
  absl::StatusOr<std::unique_ptr<Transport>> chosen =
      WithSharedMemory(config, membership, epoch, deadline, o,
                       *std::move(transport), &all_local);
  if (!chosen.ok()) return chosen.status();
  AlgorithmOptions algorithms;
  algorithms.small_bytes =
      config.small_allreduce_bytes >= 0
          ? static_cast<size_t>(config.small_allreduce_bytes)
          : DefaultSmallBytes(membership.size());
  algorithms.algorithm = config.allreduce_algorithm;
  algorithms.segment_bytes = static_cast<size_t>(config.segment_bytes);
  Hosts hosts;
  hosts.mode = config.hierarchical;
  for (const proto::Peer& p : membership.peers()) {
    hosts.names.push_back(p.host_name());
  }
  hosts.small_bytes = config.small_allreduce_bytes;
  auto plane = std::make_unique<DataPlane>(*std::move(chosen), algorithms,
                                           std::move(hosts));
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
            o.rank, std::string(HierarchicalModeName(config.hierarchical)),
            h->num_hosts(), h->hosts[host].size(),
            membership.peers(o.rank).host_name(), h->leader(host));
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
  levels_ = Levels(algorithms_, h, hosts_.small_bytes);
  hierarchical_ =
      std::make_unique<HierarchicalCollectives>(transport_.get(), std::move(h));
}

void DataPlane::Begin() { transport_->BeginOperation(next_seq_++); }

absl::Status DataPlane::Allreduce(DataType type, const void* input,
                                  void* output, int64_t count,
                                  const ReduceOptions& reduce) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    if (hierarchical_) {
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

absl::Status DataPlane::Allgather(DataType type, const void* input,
                                  int64_t count,
                                  absl::Span<const int64_t> counts,
                                  void* output) {
  absl::Status status;
  {
    MutexLock lock(&mu_);
    Begin();
    status = hierarchical_
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
    status = hierarchical_ ? hierarchical_->Broadcast(type, data, count, root,
                                                      NotForced(levels_))
                           : kolo::Broadcast(*transport_, type, data, count,
                                             root, NotForced(algorithms_));
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
        hierarchical_
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
  auto subset = std::make_unique<DataPlane>(
      std::make_unique<SubsetTransport>(transport_.get(), std::move(members)),
      algorithms_, std::move(hosts));
  subset->on_peer_fault_ = on_peer_fault_;  // the same handler, shared
  return subset;
}

}  // namespace kolo::worker
