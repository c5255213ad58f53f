// CoordinatorLink: the way a worker's op runtime talks to the coordinator on
// the hot path — announcements and Done up, plans down. Two kinds:
// NegotiationLink (a plain TCP connection beside the Session, the default)
// and StreamLink (the Session's gRPC stream itself, when there is no link).
//
// What differs between them is said by two properties, so that the runtime
// has one path for both:
// - coalesces_writes(): whether announcements wait in the runtime's outbox
//   for the announce window and a Done waits to ride with them (one write
//   for a step's burst). On the stream every message is a gRPC write of its
//   own, so each goes at once.
// - carries_plans(): whether plans are read from it (Receive). On the stream
//   they come through the Session's plan sink (OpRuntime::Deliver) instead;
//   Receive then only waits for Wake().
//
// Thread-safety: SendAll and Wake may be called from any thread; Receive has
// one caller at a time (the holder of the runtime's plan runner).
// Invariant: once Receive or SendAll failed, Receive keeps failing.
#ifndef KOLO_WORKER_LIB_SESSION_COORDINATOR_LINK_H_
#define KOLO_WORKER_LIB_SESSION_COORDINATOR_LINK_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/kolo.pb.h"

namespace kolo::worker {

class CoordinatorLink {
 public:
  virtual ~CoordinatorLink() = default;

  // Writes the messages (Announce, Done) in order; the coordinator reads
  // them together where the link allows.
  virtual absl::Status SendAll(absl::Span<proto::WorkerMessage> msgs) = 0;
  // The next message, waiting up to `timeout`; nullopt when the wait ended
  // without one (timeout, or Wake()). An error once the link is broken.
  virtual absl::StatusOr<std::optional<proto::CoordinatorMessage>> Receive(
      absl::Duration timeout) = 0;
  // Makes a current or the next Receive return at once.
  virtual void Wake() = 0;

  virtual bool coalesces_writes() const = 0;
  virtual bool carries_plans() const = 0;
  // Whether a Receive may now wait past its timeout (the fast path's rounds
  // wait for the peers: runtime/fast_path_link.h); a caller with a deadline
  // of its own then leaves the reading to the background thread.
  virtual bool may_overrun_timeout() const { return false; }
  // By when the link must next be read, at `now`: `now` (or earlier) when a
  // Receive has work to do or a message may come; a later time when until
  // then a Receive would only wait (the fast path with nothing kept here:
  // runtime/fast_path_link.h). The background thread then waits off the
  // link, which stays free for a caller that comes to wait for its ops.
  virtual absl::Time ReadBy(absl::Time now) const { return now; }
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_SESSION_COORDINATOR_LINK_H_
