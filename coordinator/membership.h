// Rank assignment for one epoch: a pure function from the workers that are in
// (in arrival order) to each rank's proto::Membership.
//
// Rules:
// - Ranks: if the requested ranks form exactly a permutation of 0..N-1 (the
//   launcher gave every worker a distinct hint), they are used as given.
//   Otherwise ranks follow (order in which each launcher host name first
//   appears among the arrivals, then arrival order), so workers of one host
//   get consecutive ranks.
// - local_rank / local_size: among workers with the same launcher host name
//   (not the kernel's host name), ordered by rank.
// - cross_rank / cross_size (Horovod's definition): among workers with the
//   same local_rank, ordered by rank. With hosts a:2, b:3, local_rank 2
//   exists only on b, so that worker has cross_size 1.
//
// Thread-safety: a pure function; safe from any thread.
#ifndef KOLO_COORDINATOR_MEMBERSHIP_H_
#define KOLO_COORDINATOR_MEMBERSHIP_H_

#include <string>
#include <vector>

#include "proto/kolo.pb.h"

namespace kolo::coordinator {

// One authenticated worker, as it arrived.
struct Arrival {
  std::string worker_id;
  std::string host_name;     // launcher host name
  std::string data_address;  // "ip:port"
  int requested_rank = -1;   // the launcher's hint; -1 for none
};

struct Assignment {
  // rank_of[i]: the rank given to arrivals[i].
  std::vector<int> rank_of;
  // by_rank[r]: the Membership sent to rank r (peers indexed by rank).
  std::vector<proto::Membership> by_rank;
  // True when the requested ranks were used as given.
  bool used_requested_ranks = false;
};

// REQUIRES: worker ids are distinct (the coordinator refuses duplicates).
Assignment AssignRanks(const std::vector<Arrival>& arrivals,
                       const std::string& job_id);

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_MEMBERSHIP_H_
