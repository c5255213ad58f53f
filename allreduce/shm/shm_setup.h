// JoinSegment: how the ranks of one host come to share one epoch's Segment.
//
// The lowest local rank (the leader) creates the segment as a memfd, binds a
// Unix socket in the abstract namespace under a random name (nothing on a
// file system; gone with the socket) and tells each local peer, over the
// epoch's authenticated TCP connection (`control`), the name, a random nonce
// and every local rank's process id. Each peer connects; the leader hands
// the memfd (SCM_RIGHTS) only to a connection whose kernel-reported
// credentials (SO_PEERCRED) are this user and the process id that peer
// announced over its authenticated connection, and the peer accepts it only
// from the leader's process. The socket is closed once every peer got the
// descriptor; the peers map it and check its header (epoch, nonce). Finally
// every local rank reports over TCP whether it mapped the segment and the
// leader sends the verdict: all of them use shared memory, or none of them
// does (the caller then keeps TCP for everything and logs why).
//
// Thread-safety: a free function run by the thread that builds the epoch's
// data plane, on every local rank at once.
#ifndef KOLO_ALLREDUCE_SHM_SHM_SETUP_H_
#define KOLO_ALLREDUCE_SHM_SHM_SETUP_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allreduce/shm/segment.h"
#include "allreduce/transport.h"

namespace kolo {

struct ShmSetupOptions {
  // This rank and the ranks of its host, in `control`'s numbering.
  // REQUIRES: local ascending, includes rank, at least two entries.
  int rank = 0;
  std::vector<int> local;
  uint64_t epoch = 0;
  // KOLO_SHM_BYTES: the size of the segment.
  size_t bytes = 0;
  // Bound on the descriptor hand-over (the TCP exchanges have control's own
  // inactivity deadline).
  absl::Time deadline = absl::InfiniteFuture();
};

struct ShmJoin {
  // Null when the local ranks agreed to do without shared memory; `why` then
  // says what failed on which rank.
  std::unique_ptr<shm::Segment> segment;
  std::string why;
  // This rank's index among `local`, and the process id of each local rank.
  int local_rank = 0;
  std::vector<pid_t> pids;
};

// Errors only when `control` fails (a peer died, the epoch was aborted):
// the epoch's data plane is then broken anyway.
absl::StatusOr<ShmJoin> JoinSegment(Transport& control,
                                    const ShmSetupOptions& options);

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_SHM_SHM_SETUP_H_
