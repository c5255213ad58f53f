// ConnectMesh: opens and authenticates the connections of one rank to every
// other rank of the epoch (a full mesh), before the transport is used.
//
// Rule: a rank connects to every lower rank and accepts from every higher
// one, on the borrowed listening socket. Everything progresses at once in
// one poll loop: connects are retried (a peer may not listen yet) until the
// deadline, and a connection that sends garbage, stalls, or fails the
// handshake (handshake.h) is refused and logged (logger "transport", warn;
// a peer that has not proven the secret once per address per minute, see
// common/rate_limited_log.h) without delaying the others; the acceptor keeps
// waiting for the right peer. A connector that is refused by a genuine peer
// (wrong epoch, version, job or secret) fails at once with the acceptor's
// reason, as retrying cannot help.
//
// Thread-safety: a free function; the caller owns the listening socket and
// must not accept from it concurrently.
#ifndef KOLO_ALLREDUCE_TCP_MESH_H_
#define KOLO_ALLREDUCE_TCP_MESH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allreduce/tcp/tcp_options.h"
#include "common/unique_fd.h"

namespace kolo::tcp {

// One authenticated connection, and the handshake's nonces of its two ends
// (the salt of its encryption keys, record_cipher.h).
struct MeshLink {
  net::UniqueFd fd;
  std::string connector_nonce;
  std::string acceptor_nonce;
};

// Returns one connected, authenticated, non-blocking TCP_NODELAY socket per
// rank (the entry of this rank has an invalid fd). kDeadlineExceeded names the
// ranks still missing at `deadline`; other errors name the refusing peer.
// REQUIRES: options validated by TcpTransport::Create.
absl::StatusOr<std::vector<MeshLink>> ConnectMesh(const TcpOptions& options,
                                                  absl::Time deadline);

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_MESH_H_
