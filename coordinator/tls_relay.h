// TlsRelay: the bytes between the TLS connections the coordinator's gRPC
// gate accepted (coordinator/grpc_gate.h, under TLS) and gRPC's plaintext
// ends of socketpairs. The gate runs each TLS handshake itself (kolo's
// OpenSSL code, common/tls_stream.h: TLS 1.3 only, the job's CA on both
// sides); once it completed, the gate hands gRPC one end of a
// socketpair(AF_UNIX, SOCK_STREAM) as an insecure connection and the relay
// the TLS stream and the other end.
//
// Design: one thread polls every relayed connection (two sockets each) and
// a wake-up eventfd. One, because the gRPC port carries the control plane
// only (Session streams, Status calls: small messages, one connection per
// worker and per kolo-ctl call), so one core does it with room to spare,
// and a thread per connection would cost more than its bytes; apart from
// the gate's thread, so that TLS handshakes (a flood of them included) never
// stall the bytes of connections that already passed. poll(2) rebuilt each
// round: O(connections) a round, bounded by the gate's caps plus the job's
// workers.
//
// Per connection, two buffers of 16 KiB (a TLS record), one per direction;
// a full buffer stops reading its source until the destination took it, so
// memory is bounded and a slow reader slows its writer (no queue grows).
// Each wake-up moves at most kRoundsPerWake buffers per direction per
// connection (fairness; poll is level-triggered: the rest comes next round).
//
// Closures go both ways: the TLS peer's end (close_notify or FIN) becomes,
// once its bytes are delivered, a FIN on gRPC's end (shutdown SHUT_WR);
// gRPC's end (it closed its socket, or the gate shut it down for a missed
// deadline) becomes close_notify and a FIN to the TLS peer. The other
// direction may still flow for kLinger; then, or when both ended, or on any
// error (a reset, a TLS error, bytes that are not HTTP/2's preface), both
// sockets are closed. Every wait is bounded: poll wakes at least once a
// second and at the next linger deadline.
//
// The relay checks the first bytes from the TLS peer against HTTP/2's
// client preface (as the gate checks a plaintext connection's): other bytes
// are refused and logged, rate-limited, with the address (LogRefusal).
//
// Thread-safety: every public method may be called from any thread.
// Lifetime: Stop (or the destructor) joins the thread and closes every
// relayed connection (gRPC reads the end of its socket and closes it).
#ifndef KOLO_COORDINATOR_TLS_RELAY_H_
#define KOLO_COORDINATOR_TLS_RELAY_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/tls_stream.h"
#include "common/unique_fd.h"
#include "spdlog/spdlog.h"

namespace kolo::coordinator {

// What every HTTP/2 client sends first (RFC 9113, 3.4).
inline constexpr absl::string_view kHttp2Preface =
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class TlsRelay {
 public:
  // How long one direction may still flow after the other ended.
  static constexpr absl::Duration kLinger = absl::Seconds(5);

  // Starts the thread. `log` gets the refusals (and, at debug, why each
  // connection ended).
  static absl::StatusOr<std::unique_ptr<TlsRelay>> Start(
      std::shared_ptr<spdlog::logger> log);
  ~TlsRelay();
  TlsRelay(const TlsRelay&) = delete;
  TlsRelay& operator=(const TlsRelay&) = delete;

  // Relays between `tls` (over `tcp`, its handshake completed) and `plain`,
  // the relay's end of the socketpair whose other end gRPC has. `remote`
  // names the peer in logs ("ipv4:10.0.0.2:51234"). Both sockets must be
  // non-blocking. After Stop, closes them at once.
  void Add(net::UniqueFd tcp, std::unique_ptr<tls::TlsStream> tls,
           net::UniqueFd plain, std::string remote) ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the thread and closes every connection. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Connections relayed now (tests).
  size_t size() const { return size_.load(); }

 private:
  struct Pipe;
  TlsRelay(std::shared_ptr<spdlog::logger> log, net::UniqueFd wake);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Moves what it can in both directions; whether `p` is done (closed).
  bool Pump(Pipe& p, absl::Time now, bool broken);
  void PumpDown(Pipe& p, bool& progress);  // TLS peer -> gRPC
  void PumpUp(Pipe& p, bool& progress);    // gRPC -> TLS peer
  // Whether the first bytes from the TLS peer are HTTP/2's preface so far;
  // if not, logs the refusal and fails `p`.
  bool CheckPreface(Pipe& p, size_t n);

  const std::shared_ptr<spdlog::logger> log_;
  net::UniqueFd wake_;  // eventfd: Add, Stop
  std::thread thread_;
  std::atomic<size_t> size_{0};
  // The thread's own.
  std::vector<std::unique_ptr<Pipe>> pipes_;

  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Pipe>> added_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_TLS_RELAY_H_
