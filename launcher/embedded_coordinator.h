// EmbeddedCoordinator: kolorun's coordinator, for the whole job, across the
// restarts of fault injection. `kolorun --fault kill-coordinator:for=DUR`
// kills it as a crash would (coordinator/server.h Kill) and, DUR later,
// starts a new one at the same port with the same job id and secret: a new
// incarnation that forms its first epoch from the workers that dial back
// (docs/elastic.md, "A coordinator that comes back"). Everything in kolorun
// that talks to its coordinator (the supervisor's probe and end of the job,
// the fault driver, the report, /metrics) goes through this holder, so none
// of it holds a server that a restart replaced.
//
// Thread-safety: every method may be called from any thread (the metrics
// server's thread reads Metrics while kolorun's main thread kills and
// restarts); one mutex guards the current server.
// A restart writes `coordinator_restarted` (port, incarnation) to the job's
// event log, when it has one: the epochs after it are the new incarnation's.
// Invariants: port() never changes; while down() (killed, not restarted)
// Status() is the killed server's last answer (an empty reply once a restart
// failed to bind), Metrics() is empty, and EndJob does nothing; after
// Shutdown nothing restarts. WaitUntilEnded holds the lock while it waits:
// give it short deadlines.
#ifndef KOLO_LAUNCHER_EMBEDDED_COORDINATOR_H_
#define KOLO_LAUNCHER_EMBEDDED_COORDINATOR_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "coordinator/server.h"
#include "proto/kolo.pb.h"

namespace kolo::launcher {

class EmbeddedCoordinator {
 public:
  // Starts the first incarnation (coordinator::CoordinatorServer::Start).
  static absl::StatusOr<std::unique_ptr<EmbeddedCoordinator>> Start(
      coordinator::ServerOptions options);

  // The port the workers dial, the same for every incarnation.
  int port() const { return port_; }
  // Whether it was killed and not (yet) started again.
  bool down() const;
  // How many times it was started again.
  int restarts() const;

  proto::StatusReply Status() const;
  std::string Metrics() const;
  // As CoordinatorServer::WaitUntilEnded; kDeadlineExceeded while down.
  absl::Status WaitUntilEnded(absl::Time deadline);
  void EndJob(bool failure, const std::string& reason,
              const std::string& failed_worker);
  // Kills the current incarnation (fault injection). Idempotent.
  void Kill();
  // Starts a new incarnation at port(), after a Kill. kFailedPrecondition
  // when it is not down or was shut down; the server's error when the port
  // cannot be bound again.
  absl::Status Restart();
  // Ends the job and stops serving for good (CoordinatorServer::Shutdown).
  void Shutdown(bool failure, const std::string& reason);

 private:
  EmbeddedCoordinator(coordinator::ServerOptions options,
                      std::unique_ptr<coordinator::CoordinatorServer> server);

  mutable Mutex mu_;
  // listen.port: the bound one; Restart() sets core.restarted.
  coordinator::ServerOptions options_ ABSL_GUARDED_BY(mu_);
  const int port_;
  std::unique_ptr<coordinator::CoordinatorServer> server_ ABSL_GUARDED_BY(mu_);
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_EMBEDDED_COORDINATOR_H_
