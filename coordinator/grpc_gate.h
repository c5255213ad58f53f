// GrpcGate: the coordinator's gRPC port, in front of the grpc::Server. It owns
// the listening socket, accepts every connection itself and hands it to
// gRPC (grpc::AddInsecureChannelFromFd, through `hand_over`) once it has sent
// the HTTP/2 client preface. Why: gRPC core holds a raw TCP connection with
// no deadline that kolo sees, no cap and no log line (issue 39); gRPC 1.51 has
// no per-address connection limit and no hook before a call exists. So:
//
// - Until a call on a connection proves the job secret (a Session's Proof, or
//   a verified Status call: the service reports it with Proven), the
//   connection is *unproven*. It must prove within `handshake_timeout` of
//   being accepted (the deadline of the negotiation link and the data port),
//   or it is closed: before the hand-over the gate closes its socket; after
//   it, the gate shuts the socket down (through a duplicate it keeps), and
//   gRPC closes its end.
// - At most `max_unproven_per_host` unproven connections per peer address
//   and `max_unproven` in all; a new one beyond makes room by closing the
//   oldest unproven one of its address (or of all), so that a recovery's
//   connections, the newest, go ahead of a flood's.
// - Bytes that are not the HTTP/2 preface, a connection closed or dropped
//   before it proved, and every closure above are logged at warn, once per
//   address per minute (LogRefusal, logger "coordinator").
// Proven connections are gRPC's alone: no deadline, no cap.
//
// Under TLS (`tls` set, issue 38) the gate terminates TLS itself, with
// kolo's own OpenSSL code (common/tls_stream.h): TLS 1.3 only, a client
// certificate from the job's CA required, ALPN "h2" for gRPC's clients
// (which keep gRPC's SSL channel credentials). The handshake runs on the
// gate's thread, within the same deadline and under the same caps as the
// rest of an unproven connection's life. A refused handshake (TLS 1.2 or
// older, plaintext, another job's certificate or CA, an expired one) is
// logged like the refusals above, naming the peer's address. Once the
// handshake completed, gRPC gets one end of a socketpair(AF_UNIX,
// SOCK_STREAM) as the plaintext connection (the same insecure hand-over) and
// a TlsRelay (coordinator/tls_relay.h: one thread for every connection)
// moves the bytes between it and the TLS stream, for the connection's whole
// life; the deadline, the caps and Proven apply to gRPC's end as they do to
// a plaintext connection's socket. gRPC sees no certificate (kolo's server
// side reads none: the job secret's proof is asked of every call, and a
// certificate of the job's CA was checked in the handshake).
//
// A connection handed over reads "fd:N" as its peer in gRPC 1.51 (the end
// of the socketpair too); PeerOf gives the TCP address it came from, for
// messages.
//
// Thread-safety: every public method may be called from any thread.
// Lifetime: StopAccepting closes the listener, joins the thread and closes
// what was not handed over; connections handed over stay gRPC's (under TLS
// the relay keeps moving their bytes). Stop (or the destructor) does that
// and, under TLS, stops the relay: every relayed connection is closed.
#ifndef KOLO_COORDINATOR_GRPC_GATE_H_
#define KOLO_COORDINATOR_GRPC_GATE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/auth.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "common/tls_stream.h"
#include "common/unique_fd.h"
#include "coordinator/tls_relay.h"

namespace kolo::coordinator {

struct GrpcGateOptions {
  std::string bind_host = "127.0.0.1";
  int port = 0;  // 0: the kernel picks
  absl::Duration handshake_timeout = auth::kHandshakeTimeout;
  size_t max_unproven_per_host = 128;  // REQUIRES: >= 1
  size_t max_unproven = 1024;          // REQUIRES: >= 1
  // The job's certificates: set, the port speaks only TLS (see above).
  std::optional<tls::TlsMaterial> tls;
};

class GrpcGate {
 public:
  // Takes ownership of a connected, non-blocking socket whose HTTP/2
  // preface waits unread.
  using HandOverFn = std::function<void(int fd)>;

  // Binds and listens (no thread yet). kUnavailable when the port is taken;
  // kInvalidArgument when `tls` does not load into OpenSSL.
  static absl::StatusOr<std::unique_ptr<GrpcGate>> Listen(
      GrpcGateOptions options);
  ~GrpcGate();
  GrpcGate(const GrpcGate&) = delete;
  GrpcGate& operator=(const GrpcGate&) = delete;

  int port() const { return port_; }
  // Starts accepting. REQUIRES: called once; `hand_over` valid until Stop.
  void Start(HandOverFn hand_over);
  // Closes the listener (connects are refused from now on), joins the thread
  // and closes the connections not handed over. Idempotent.
  void StopAccepting() ABSL_LOCKS_EXCLUDED(mu_);
  // StopAccepting, and under TLS closes every relayed connection (gRPC sees
  // each end). Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // A call on the connection gRPC calls `grpc_peer` proved the job secret.
  void Proven(absl::string_view grpc_peer) ABSL_LOCKS_EXCLUDED(mu_);
  // The address a call's connection came from ("ipv4:10.0.0.2:51234"), or
  // `grpc_peer` itself when the gate does not know it.
  std::string PeerOf(absl::string_view grpc_peer) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Unproven connections held now, before and after the hand-over (tests).
  size_t unproven() const ABSL_LOCKS_EXCLUDED(mu_);
  // Connections the TLS relay moves bytes for now; 0 without TLS (tests).
  size_t relayed() const { return relay_ != nullptr ? relay_->size() : 0; }

 private:
  struct Conn;
  GrpcGate(GrpcGateOptions options, net::UniqueFd listener, net::UniqueFd wake,
           int port, std::shared_ptr<const tls::TlsContext> tls,
           std::unique_ptr<TlsRelay> relay);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  void AcceptAll() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads the start of the preface of `c` (not handed over yet); hands it
  // over, refuses it, or leaves it waiting for more.
  void CheckPreface(Conn& c, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first bytes waiting on `c` (at most buf.size(), left unread);
  // nullopt when none came yet, or when it failed or closed before sending
  // any (then dropped; `before` says before what, for the log).
  std::optional<absl::string_view> PeekFirstBytes(Conn& c, absl::Span<char> buf,
                                                  absl::string_view before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under TLS, instead: drives the handshake of `c` (not handed over yet);
  // once it completed, hands gRPC a socketpair's end and the relay the rest.
  void DriveHandshake(Conn& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Looks at the first bytes of `c` (refuses what is not TLS) and starts its
  // TlsStream; leaves `c.tls` null while they are due or once refused.
  void StartTls(Conn& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `c`'s handshake completed: gRPC's end of a socketpair becomes its
  // descriptor (handed over by the caller), the relay takes the rest.
  void HandOverTls(Conn& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The descriptor number `fd` was just allocated: the connection gRPC had
  // under that number is closed (its record only serves PeerOf until then).
  void ForgetFdLocked(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes the oldest unproven connection of `host` ("" : of all).
  void MakeRoomLocked(const std::string& host)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes `c` (shuts a handed-over one down) and logs `why`; the caller
  // removes it.
  void DropLocked(Conn& c, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops what passed its deadline; returns the next deadline.
  absl::Time ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveDeadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Conn* FindLocked(absl::string_view grpc_peer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const GrpcGateOptions options_;
  net::UniqueFd listener_;  // closed by Stop
  net::UniqueFd wake_;      // eventfd: Stop
  const int port_;
  const std::shared_ptr<const tls::TlsContext> tls_;  // null: plaintext
  const std::unique_ptr<TlsRelay> relay_;             // under TLS
  HandOverFn hand_over_;
  std::thread thread_;
  // The thread's own: the listener rests until then (out of descriptors).
  absl::Time rest_until_ = absl::InfinitePast();

  mutable Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Every connection the gate tracks, in accept order: unproven ones, and
  // proven ones until their descriptor number is accepted again (kept for
  // PeerOf).
  std::vector<std::unique_ptr<Conn>> conns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_GRPC_GATE_H_
