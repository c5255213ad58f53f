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
// A connection handed over reads "fd:N" as its peer in gRPC 1.51; PeerOf
// gives the address it came from, for messages.
//
// Thread-safety: every public method may be called from any thread.
// Lifetime: Stop (or the destructor) closes the listener, joins the thread and
// closes what was not handed over; connections handed over stay gRPC's.
#ifndef KOLO_COORDINATOR_GRPC_GATE_H_
#define KOLO_COORDINATOR_GRPC_GATE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/mutex.h"
#include "common/unique_fd.h"

namespace kolo::coordinator {

struct GrpcGateOptions {
  std::string bind_host = "127.0.0.1";
  int port = 0;  // 0: the kernel picks
  absl::Duration handshake_timeout = auth::kHandshakeTimeout;
  size_t max_unproven_per_host = 128;  // REQUIRES: >= 1
  size_t max_unproven = 1024;          // REQUIRES: >= 1
};

class GrpcGate {
 public:
  // Takes ownership of a connected, non-blocking socket whose HTTP/2
  // preface waits unread.
  using HandOverFn = std::function<void(int fd)>;

  // Binds and listens (no thread yet). kUnavailable when the port is taken.
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
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // A call on the connection gRPC calls `grpc_peer` proved the job secret.
  void Proven(absl::string_view grpc_peer) ABSL_LOCKS_EXCLUDED(mu_);
  // The address a call's connection came from ("ipv4:10.0.0.2:51234"), or
  // `grpc_peer` itself when the gate does not know it.
  std::string PeerOf(absl::string_view grpc_peer) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Unproven connections held now, before and after the hand-over (tests).
  size_t unproven() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Conn;
  GrpcGate(GrpcGateOptions options, net::UniqueFd listener, net::UniqueFd wake,
           int port);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  void AcceptAll() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads the start of the preface of `c` (not handed over yet); hands it
  // over, refuses it, or leaves it waiting for more.
  void CheckPreface(Conn& c, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
