// NegotiationLink: the worker's end of the negotiation link — one plain TCP
// connection to the coordinator beside the Session stream, carrying the hot
// path (Announce and Done up, Plan down); a CoordinatorLink
// (coordinator_link.h) that coalesces writes and carries plans. Wire format and
// handshake: the header comment of proto/kolo.proto. Why it exists: a
// negotiated op needs one round trip to the coordinator, and a gRPC stream's
// costs several times a plain socket's: a 4-byte negotiated allreduce at 2
// ranks took ~240 µs over the link against ~780 µs on the stream
// (docs/design.md "Latency budget").
//
// The Session stays the authority for membership, heartbeats and the end of
// the job; a link that breaks is only reported to its reader (Receive).
//
// Thread-safety: Send and Wake may be called from any thread (sends are
// serialised by a mutex, and each message is written whole); Receive has one
// caller at a time (the runtime's background thread, or a caller waiting for
// its ops: OpRuntime hands the reading over under its lock). Close may be
// called from any thread: later calls fail, and a blocked Receive returns.
#ifndef KOLO_WORKER_LIB_SESSION_NEGOTIATION_LINK_H_
#define KOLO_WORKER_LIB_SESSION_NEGOTIATION_LINK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/framing.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "common/tls_stream.h"
#include "common/unique_fd.h"
#include "proto/kolo.pb.h"
#include "worker_lib/session/coordinator_link.h"

namespace kolo::worker {

struct LinkOptions {
  std::string host;  // the coordinator's host (as the Session reached it)
  int port = 0;      // Membership.link_port
  std::string secret, job_id, worker_id;
  uint64_t incarnation = 0, epoch = 0;         // the fence of every message
  absl::Duration timeout = absl::Seconds(10);  // connect + handshake
  // Writes: how long a send may wait for room in the socket.
  absl::Duration send_timeout = absl::Seconds(30);
  // The job's certificates: set, the link runs TLS 1.3 with mutual
  // authentication (common/tls_stream.h) before the secret's handshake, as
  // the coordinator's link server does under TLS.
  std::shared_ptr<const tls::TlsMaterial> tls;
};

class NegotiationLink final : public CoordinatorLink {
 public:
  // Connects and runs the handshake: the coordinator proves the secret
  // first; a Refusal comes back as its message (kPermissionDenied). To a
  // coordinator on a loopback address it tries the coordinator's local
  // socket first (net::LocalLinkName), then the port.
  static absl::StatusOr<std::unique_ptr<NegotiationLink>> Connect(
      const LinkOptions& options);
  ~NegotiationLink() override;
  NegotiationLink(const NegotiationLink&) = delete;
  NegotiationLink& operator=(const NegotiationLink&) = delete;

  // Stamps the fence and writes the message.
  absl::Status Send(proto::WorkerMessage msg) ABSL_LOCKS_EXCLUDED(send_mu_);
  // The same for several messages, in order, in one write (so that the
  // coordinator reads them together).
  absl::Status SendAll(absl::Span<proto::WorkerMessage> msgs) override
      ABSL_LOCKS_EXCLUDED(send_mu_);
  // The next message, waiting up to `timeout`; nullopt when the wait ended
  // without one (timeout, or Wake()). An error once the link is broken or
  // closed (it stays broken).
  absl::StatusOr<std::optional<proto::CoordinatorMessage>> Receive(
      absl::Duration timeout) override;
  // Makes a current or the next Receive return nullopt at once.
  void Wake() override;
  void Close();

  bool coalesces_writes() const override { return true; }
  bool carries_plans() const override { return true; }

  const std::string& peer() const { return peer_; }

 private:
  NegotiationLink(net::UniqueFd fd, net::UniqueFd wake, LinkOptions options,
                  std::string peer);
  // Connects (to the coordinator's local socket when `local`, else to its
  // TCP port) and runs the handshake.
  static absl::StatusOr<std::unique_ptr<NegotiationLink>> Open(
      const LinkOptions& options, bool local);
  // Writes `bytes` whole, waiting for room until `deadline`.
  absl::Status WriteAll(const std::string& bytes, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_);
  // Runs the TLS handshake over fd_ until `deadline`. REQUIRES: options_.tls.
  absl::Status StartTls(absl::Time deadline);
  // recv/send on the socket, through TLS when it runs: > 0, 0 (closed), or
  // -1 with errno (EAGAIN: wait; else `error` says why).
  ssize_t Recv(char* buf, size_t n, std::string& error)
      ABSL_LOCKS_EXCLUDED(tls_mu_);
  ssize_t Write(const char* buf, size_t n, std::string& error)
      ABSL_LOCKS_EXCLUDED(tls_mu_);
  // Reads until a message is decoded, the deadline passes or (when
  // `wakeable`) Wake() is called.
  absl::StatusOr<std::optional<proto::CoordinatorMessage>> ReadMessage(
      absl::Time deadline, bool wakeable);

  net::UniqueFd fd_;
  net::UniqueFd wake_;  // eventfd
  const LinkOptions options_;
  const std::string peer_;
  std::atomic<bool> closed_{false};
  Mutex send_mu_;
  // Under TLS: one SSL call at a time (the reader's and the writers'); after
  // send_mu_ in lock order, held only around a call, never while waiting.
  Mutex tls_mu_;
  std::unique_ptr<tls::TlsStream> tls_ ABSL_PT_GUARDED_BY(tls_mu_);
  // Reader state (one reader at a time, see above).
  FrameDecoder decoder_;
  absl::Status broken_;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_SESSION_NEGOTIATION_LINK_H_
