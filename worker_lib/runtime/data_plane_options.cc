#include "worker_lib/runtime/data_plane_options.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"

namespace kolo::worker {

DataPlaneOptions DataPlaneOptionsFor(const WorkerConfig& config,
                                     const proto::Membership& membership,
                                     uint64_t epoch, uint64_t incarnation,
                                     tcp::Acceptor* acceptor, int abort_fd) {
  DataPlaneOptions options;
  TcpOptions& o = options.tcp;
  o.abort_fd = abort_fd;
  o.rank = membership.rank();
  o.size = membership.size();
  o.epoch = epoch;
  o.job_id = absl::StrFormat("%s/%016x", config.job_id, incarnation);
  for (const proto::Peer& p : membership.peers()) {
    o.worker_ids.push_back(p.worker_id());
    o.addresses.push_back(p.data_address());
    options.hosts.names.push_back(p.host_name());
  }
  o.secret = config.secret;
  o.encryption = config.data_encryption;
  o.acceptor = acceptor;
  o.timeout = config.knobs.data_timeout;
  // docs/design.md "Waiting policy": spin only when every local rank has a
  // core.
  const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.spin =
      membership.local_size() <= cores ? config.spin : absl::ZeroDuration();
  o.congestion_control = config.tcp_congestion;
  o.send_buffer_bytes = static_cast<int>(config.socket_sndbuf);
  o.recv_buffer_bytes = static_cast<int>(config.socket_rcvbuf);
  options.shm = config.shm;
  options.shm_bytes = config.shm_bytes;
  options.algorithms.small_bytes =
      config.small_allreduce_bytes >= 0
          ? static_cast<size_t>(config.small_allreduce_bytes)
          : DefaultSmallBytes(membership.size());
  options.algorithms.algorithm = config.allreduce_algorithm;
  options.algorithms.segment_bytes = static_cast<size_t>(config.segment_bytes);
  options.hosts.mode = config.hierarchical;
  options.hosts.small_bytes = config.small_allreduce_bytes;
  return options;
}

}  // namespace kolo::worker
