// CoordinatorServer: the kolo coordinator as an embeddable gRPC server.
// Used by `kolo-coordinator` (standalone), by kolorun (embedded, the default),
// and by rank 0 when workers start without kolorun (torchrun, Slurm, Open MPI).
//
// It hosts the Coordinator service (Session stream + Status) around a plain
// CoordinatorCore (coordinator/core.h) that holds all membership state. Its
// port is a GrpcGate's (coordinator/grpc_gate.h), which hands connections to
// gRPC and closes those that do not prove the job secret in time.
//
// Under TLS (ListenOptions::tls, issue 38) the gate keeps the port: it runs
// each TLS handshake itself with kolo's OpenSSL code (TLS 1.3 only, a client
// certificate from the job's CA required, as on the negotiation links) and
// relays the plaintext to gRPC through a socketpair (grpc_gate.h,
// tls_relay.h). So the handshake deadline, the caps on unproven connections
// and the refusal log with the peer's address hold under TLS as without
// it; a refused handshake (TLS 1.2, plaintext, another job's certificate or
// CA, an expired one) is logged with the address. The secret's HMAC proof
// is still asked of every Session and Status call. The negotiation links
// run TLS too, with the same certificates (coordinator/link_server.h).
//
// Thread-safety: all methods may be called from any thread.
// Lifetime: Shutdown() (or the destructor) ends every Session with a JobEnd,
// stops the gRPC server within a bounded time, and joins kolo's own threads.
#ifndef KOLO_COORDINATOR_SERVER_H_
#define KOLO_COORDINATOR_SERVER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/knobs.h"
#include "common/tls.h"
#include "coordinator/core.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

// Where and how the server listens: its gRPC port, the negotiation links'
// port, and the guard against connections that never prove the secret.
struct ListenOptions {
  std::string bind_host = "127.0.0.1";  // "0.0.0.0" to accept other hosts
  int port = 0;                         // 0: the kernel picks a free port
  // Listen for negotiation links (coordinator/link_server.h) on a
  // kernel-chosen port of bind_host, told to workers in their Membership.
  bool negotiation_links = true;
  // Connections from outside (coordinator/grpc_gate.h): a connection to the
  // gRPC port or the negotiation-link port that has not proven the job
  // secret this long after it was accepted is closed; at most so many
  // unproven gRPC connections are held per peer address and in all.
  absl::Duration handshake_timeout = auth::kHandshakeTimeout;
  size_t max_unauthenticated_per_host = 128;
  size_t max_unauthenticated = 1024;
  // Said when `port` is taken: how to choose another (kolo-coordinator's
  // flag; rank 0 hosting names its variable instead).
  std::string port_hint =
      "pick another port with --port, or 0 to let the kernel choose";
  // The job's certificates (common/tls.h): set, the port and the
  // negotiation links speak only TLS with mutual authentication.
  std::optional<tls::TlsMaterial> tls;
};

// The server's options: where to listen, and the job its core runs
// (coordinator/core.h; the server sets the core's incarnation and link port
// itself when it starts).
struct ServerOptions {
  ListenOptions listen;
  CoreOptions core;
};

// Sets the coordinator's knobs in `options` from `knobs` (heartbeat interval
// and timeout, cycle time, stall check and shutdown, elastic timeout),
// leaving the rest as they are.
void SetServerKnobs(const KnobValues& knobs, ServerOptions& options);

// Options with the coordinator's knobs set from `knobs` (SetServerKnobs), the
// rest at their defaults for the caller to fill in (where to listen, the
// job). kolorun's embedded coordinator and a worker that hosts the
// coordinator start from here; kolo-coordinator parses its flags into
// ServerOptions (coordinator/flags.h).
ServerOptions ServerOptionsFromKnobs(const KnobValues& knobs);

class CoordinatorServer {
 public:
  // Binds and starts serving. Fails with a clear message if the port is taken.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const ServerOptions& options);
  virtual ~CoordinatorServer() = default;

  // The bound port (the real one when options.listen.port was 0).
  virtual int port() const = 0;
  // Random per start; every message carries it.
  virtual uint64_t incarnation() const = 0;

  virtual proto::StatusReply Status() const = 0;
  // The Prometheus page (coordinator/metrics.h), as /metrics serves it.
  virtual std::string Metrics() const = 0;

  // Blocks until epoch 1 has formed (OK), the job ended (kAborted, with the
  // reason) or the deadline passed (kDeadlineExceeded, naming the workers
  // that are not in yet).
  virtual absl::Status WaitForEpoch(absl::Time deadline) = 0;

  // Blocks until every member has left or the job ended (OK if every member
  // left in order, kAborted with the reason if it ended in failure), or the
  // deadline passed (kDeadlineExceeded naming who is still in).
  virtual absl::Status WaitUntilEnded(absl::Time deadline) = 0;

  // Ends the job without stopping the server (it returns at once): JobEnd
  // {failure, reason, failed_worker} to every open Session, and the verdict
  // the Status reports. The launcher calls it before it stops workers, so
  // that their disconnects are not taken for the cause. Idempotent, as is
  // every end: the first reason stays.
  virtual void EndJob(bool failure, const std::string& reason,
                      const std::string& failed_worker) = 0;

  // Ends the job: sends JobEnd{failure, reason} to every open Session, then
  // stops the server (bounded: in-flight RPCs are cancelled after ~1 s).
  // Idempotent.
  virtual void Shutdown(bool failure, const std::string& reason) = 0;

  // Fault injection (kolorun --fault kill-coordinator): stops serving at once,
  // as a crash would — no JobEnd, no more heartbeats; every Session stream
  // and negotiation link breaks. Status() still answers (from the state at
  // the kill); EndJob and Shutdown do nothing after it. Idempotent.
  virtual void Kill() = 0;
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_SERVER_H_
