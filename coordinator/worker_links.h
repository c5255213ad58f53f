// WorkerLinks: the coordinator's fast downlink to its workers — the interface
// the gRPC adapter (service.h) and the server (server.cc) use for the
// negotiation links, whether or not they are on. LinkServer
// (coordinator/link_server.h) is the real one; NoWorkerLinks is the null
// object used when links are off (or their port could not be bound): it has
// no port, binds nothing, and every Plan goes on the Session stream.
//
// Thread-safety: as LinkServer's (Send, Unbind, port and Stop from any
// thread; the callbacks run on the link thread). NoWorkerLinks is stateless
// and safe from any thread.
// Invariant: Send returns false for a Session with no bound link, so the
// caller falls back to the stream; a null object never has one.
#ifndef KOLO_COORDINATOR_WORKER_LINKS_H_
#define KOLO_COORDINATOR_WORKER_LINKS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/core.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

class WorkerLinks {
 public:
  // Maps an authenticated worker id to its member Session; an error refuses
  // the link with its message.
  using BindFn = std::function<absl::StatusOr<SessionId>(
      const std::string& worker_id, uint64_t epoch)>;
  using MessageFn =
      std::function<void(SessionId, const proto::WorkerMessage& message)>;
  // Runs what is due at `now`; returns the next deadline (InfiniteFuture:
  // none).
  using TimerFn = std::function<absl::Time(absl::Time now)>;

  virtual ~WorkerLinks() = default;

  // The links' port, told to workers in the Welcome (0: no links).
  virtual int port() const = 0;
  // Starts serving links. REQUIRES: called once.
  virtual absl::Status Start(BindFn bind, MessageFn on_message,
                             TimerFn on_timer) = 0;
  // Whether the calling thread is the one the callbacks run on.
  virtual bool OnLinkThread() const = 0;
  // Writes `msg` on the link bound to `session`; false when none is bound.
  virtual bool Send(SessionId session,
                    const proto::CoordinatorMessage& msg) = 0;
  // Closes the link bound to `session`, if any.
  virtual void Unbind(SessionId session) = 0;
  // Closes every link and stops serving. Idempotent.
  virtual void Stop() = 0;
};

// The links when there are none: nothing binds, every Plan takes the stream.
class NoWorkerLinks final : public WorkerLinks {
 public:
  // The shared instance (stateless).
  static NoWorkerLinks& Get();

  int port() const override { return 0; }
  absl::Status Start(BindFn, MessageFn, TimerFn) override {
    return absl::OkStatus();
  }
  bool OnLinkThread() const override { return false; }
  bool Send(SessionId, const proto::CoordinatorMessage&) override {
    return false;
  }
  void Unbind(SessionId) override {}
  void Stop() override {}
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_WORKER_LINKS_H_
