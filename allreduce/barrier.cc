// Barrier: the dissemination algorithm. In round j (distance d = 2^j) every
// rank sends a one-byte token to rank+d and waits for the token of rank-d.
// After ceil(log2 size) rounds every rank has heard, directly or through a
// chain, from every other rank's entry into the barrier. It needs no root,
// and every rank does the same work in every round.
#include <cstdint>

#include "allreduce/collective_checks.h"
#include "allreduce/collectives.h"

namespace kolo {

absl::Status Barrier(Transport& transport) {
  const int n = transport.size();
  const int rank = transport.rank();
  for (int d = 1; d < n; d <<= 1) {
    const uint8_t token = 1;
    uint8_t received = 0;
    absl::Status s = transport.SendRecv((rank + d) % n, &token, 1,
                                        (rank + n - d) % n, &received, 1);
    if (!s.ok()) return internal::Fail(transport, "barrier", s);
  }
  return absl::OkStatus();
}

}  // namespace kolo
