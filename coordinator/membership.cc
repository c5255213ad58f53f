#include "coordinator/membership.h"

#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_map.h"

namespace kolo::coordinator {
namespace {

// True if the hints are exactly a permutation of 0..n-1.
bool RequestedRanksArePermutation(const std::vector<Arrival>& arrivals) {
  const int n = static_cast<int>(arrivals.size());
  std::vector<bool> seen(arrivals.size(), false);
  for (const Arrival& a : arrivals) {
    if (a.requested_rank < 0 || a.requested_rank >= n) return false;
    if (seen[a.requested_rank]) return false;
    seen[a.requested_rank] = true;
  }
  return true;
}

}  // namespace

Assignment AssignRanks(const std::vector<Arrival>& arrivals,
                       const std::string& job_id) {
  const int n = static_cast<int>(arrivals.size());
  Assignment out;
  out.rank_of.assign(arrivals.size(), -1);

  // order[r] = index into arrivals of the worker with rank r.
  std::vector<int> order(arrivals.size());
  if (n > 0 && RequestedRanksArePermutation(arrivals)) {
    out.used_requested_ranks = true;
    for (int i = 0; i < n; ++i) order[arrivals[i].requested_rank] = i;
  } else {
    absl::flat_hash_map<std::string, int> host_first_seen;
    for (int i = 0; i < n; ++i) {
      host_first_seen.try_emplace(arrivals[i].host_name, i);
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      int hx = host_first_seen.at(arrivals[x].host_name);
      int hy = host_first_seen.at(arrivals[y].host_name);
      if (hx != hy) return hx < hy;
      return x < y;
    });
  }
  for (int r = 0; r < n; ++r) out.rank_of[order[r]] = r;

  // local_rank: position among same-host workers, in rank order.
  std::vector<int> local_rank(n), local_size(n);
  absl::flat_hash_map<std::string, int> host_count;
  for (int r = 0; r < n; ++r) {
    local_rank[r] = host_count[arrivals[order[r]].host_name]++;
  }
  for (int r = 0; r < n; ++r) {
    local_size[r] = host_count[arrivals[order[r]].host_name];
  }
  // cross_rank: position among workers with the same local_rank, in rank order.
  std::vector<int> cross_rank(n), cross_size(n);
  absl::flat_hash_map<int, int> local_rank_count;
  for (int r = 0; r < n; ++r) cross_rank[r] = local_rank_count[local_rank[r]]++;
  for (int r = 0; r < n; ++r) cross_size[r] = local_rank_count[local_rank[r]];

  std::vector<proto::Peer> peers(n);
  for (int r = 0; r < n; ++r) {
    const Arrival& a = arrivals[order[r]];
    peers[r].set_rank(r);
    peers[r].set_worker_id(a.worker_id);
    peers[r].set_host_name(a.host_name);
    peers[r].set_data_address(a.data_address);
  }
  out.by_rank.resize(n);
  for (int r = 0; r < n; ++r) {
    proto::Membership& m = out.by_rank[r];
    m.set_rank(r);
    m.set_size(n);
    m.set_local_rank(local_rank[r]);
    m.set_local_size(local_size[r]);
    m.set_cross_rank(cross_rank[r]);
    m.set_cross_size(cross_size[r]);
    m.set_job_id(job_id);
    for (const proto::Peer& p : peers) *m.add_peers() = p;
  }
  return out;
}

}  // namespace kolo::coordinator
