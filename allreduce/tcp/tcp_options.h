// TcpOptions: everything a TcpTransport needs to join one epoch's full mesh.
//
// The caller (the worker's epoch set-up) fills it from the plan of the epoch
// and from the worker config; the transport parses no environment variable.
// Plain value; copyable.
#ifndef KOLO_ALLREDUCE_TCP_TCP_OPTIONS_H_
#define KOLO_ALLREDUCE_TCP_TCP_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/version.h"

namespace kolo {
namespace tcp {
class Acceptor;
}  // namespace tcp

// KOLO_DATA_ENCRYPTION: whether the data connections' frames are encrypted
// and authenticated (allreduce/tcp/record_cipher.h). Every rank of an epoch
// must agree: the handshake refuses a peer with another setting. Shared
// memory between the ranks of one host is never encrypted.
enum class DataEncryption : uint8_t { kNone = 0, kAes256Gcm = 1 };
// "none" / "aes-256-gcm", the values KOLO_DATA_ENCRYPTION takes.
inline absl::string_view DataEncryptionName(DataEncryption e) {
  return e == DataEncryption::kAes256Gcm ? "aes-256-gcm" : "none";
}

struct TcpOptions {
  // This rank and the world size of the epoch. REQUIRES: 0 <= rank < size.
  int rank = 0;
  int size = 1;
  // The epoch the connections belong to; frames and handshakes carry it.
  uint64_t epoch = 0;
  std::string job_id;
  // Both ends of a connection must speak the same protocol version.
  uint32_t protocol_version = kProtocolVersion;
  // Per rank: worker id and data-plane address ("ip:port" or "[v6]:port"),
  // as advertised to the coordinator. REQUIRES: both have `size` entries.
  std::vector<std::string> worker_ids;
  std::vector<std::string> addresses;
  // The job secret; proven (never sent) on every connection. REQUIRES:
  // non-empty.
  std::string secret;
  // KOLO_DATA_ENCRYPTION: kAes256Gcm encrypts every frame with keys derived
  // from the secret per epoch, connection and direction.
  DataEncryption encryption = DataEncryption::kNone;
  // Borrowed listening socket (bound and listening, e.g. DataListener::fd()).
  // The transport only accept()s from it and never closes it, so that later
  // epochs reuse it; it is switched to non-blocking mode if it is not.
  // REQUIRES: valid (or `acceptor` set) when some rank above this one
  // exists (rank < size - 1).
  int listen_fd = -1;
  // Optional, borrowed: the Acceptor that accepts from listen_fd all the
  // time (allreduce/tcp/acceptor.h; a worker's data port has one). The mesh
  // then takes its connections instead of accept()ing itself.
  tcp::Acceptor* acceptor = nullptr;
  // An accepted connection that has not proven the job secret this long
  // after it was accepted is closed (and the refusal logged).
  absl::Duration handshake_timeout = auth::kHandshakeTimeout;
  // Inactivity deadline of a Wait: it fails after this long without any byte
  // moving (KOLO_TIMEOUT_SECONDS). Not a bound on a large transfer.
  absl::Duration timeout = absl::Seconds(30);
  // How long a Wait polls without blocking before it sleeps in epoll
  // (KOLO_SPIN_US); zero never spins. 50 us covers a loopback round trip.
  // The waiting policy (docs/design.md "Waiting policy") is the caller's:
  // pass zero when the local ranks outnumber the cores.
  absl::Duration spin = absl::Microseconds(50);
  // TCP congestion control of the data connections: the first name the
  // kernel accepts (KOLO_TCP_CONGESTION); empty keeps the system default.
  // Pacing-based BBR (a common default) throttles the bursts of a
  // collective: on loopback, cubic/reno move 4-64 MiB allreduces ~1.3-1.5x
  // faster (docs/benchmarks.md).
  std::vector<std::string> congestion_control = {"cubic", "reno"};
  // SO_SNDBUF / SO_RCVBUF of the data connections (KOLO_SOCKET_SNDBUF,
  // KOLO_SOCKET_RCVBUF); 0 keeps the kernel's autotuning (up to 4 MiB sent,
  // 32 MiB received here). Smaller buffers keep the bytes in flight, and so
  // the kernel's copies, in cache: on loopback 256 KiB / 512 KiB made 2-rank
  // 1 MiB allreduces ~1.5x faster and nothing slower (docs/benchmarks.md).
  // The kernel doubles the value for its bookkeeping and caps it at
  // net.core.wmem_max / rmem_max.
  int send_buffer_bytes = 256 * 1024;
  int recv_buffer_bytes = 512 * 1024;
  // Bound on Create: connecting (with retries while peers start listening)
  // and authenticating every connection of the mesh.
  absl::Duration connect_timeout = absl::Seconds(30);
  // Borrowed, optional (-1: none): a descriptor that becomes readable when
  // the mesh must stop forming (an eventfd written by the worker when the
  // epoch ends meanwhile). Create then fails at once with kAborted.
  int abort_fd = -1;
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_TCP_TCP_OPTIONS_H_
