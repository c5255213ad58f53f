// StreamLink: a CoordinatorLink (coordinator_link.h) over the Session's gRPC
// stream, for a worker without a negotiation link (KOLO_NEGOTIATION_LINK=0,
// or a link that could not connect). Each announcement and each Done is a
// message of the stream of its own (no coalescing); plans come through the
// Session's plan sink, not through Receive, which only waits for Wake().
//
// Thread-safety: every method may be called from any thread.
// Invariant: after a failed SendAll, Receive returns that error (the stream
// is the Session's: its verdict follows).
#ifndef KOLO_WORKER_LIB_SESSION_STREAM_LINK_H_
#define KOLO_WORKER_LIB_SESSION_STREAM_LINK_H_

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "proto/kolo.pb.h"
#include "worker_lib/session/coordinator_link.h"
#include "worker_lib/session/session_client.h"

namespace kolo::worker {

class StreamLink final : public CoordinatorLink {
 public:
  explicit StreamLink(std::shared_ptr<SessionClient> session)
      : session_(std::move(session)) {}

  absl::Status SendAll(absl::Span<proto::WorkerMessage> msgs) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<proto::CoordinatorMessage>> Receive(
      absl::Duration timeout) override ABSL_LOCKS_EXCLUDED(mu_);
  void Wake() override ABSL_LOCKS_EXCLUDED(mu_);

  bool coalesces_writes() const override { return false; }
  bool carries_plans() const override { return false; }

 private:
  const std::shared_ptr<SessionClient> session_;
  Mutex mu_;
  CondVar cv_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_SESSION_STREAM_LINK_H_
