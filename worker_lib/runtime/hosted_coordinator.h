// HostedCoordinator: the coordinator that rank 0 runs inside its own process
// when workers start without kolorun (torchrun, Slurm, Open MPI;
// KOLO_HOST_COORDINATOR). The worker sees only this interface; the factory
// (HostCoordinator) is defined in hosting/ (target kolo_hosting), which links
// the coordinator, so that nothing under worker_lib/ includes coordinator/.
//
// Thread-safety: every method may be called from any thread.
// Invariants: a HostedCoordinator serves from HostCoordinator until Shutdown
// (or its destruction, which shuts it down).
#ifndef KOLO_WORKER_LIB_RUNTIME_HOSTED_COORDINATOR_H_
#define KOLO_WORKER_LIB_RUNTIME_HOSTED_COORDINATOR_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_lib/config.h"

namespace kolo::worker {

class HostedCoordinator {
 public:
  virtual ~HostedCoordinator() = default;

  // The bound port (the kernel's choice when the config's port was 0).
  virtual int port() const = 0;
  // Blocks until every member has left or the job ended (OK if every member
  // left in order), or the deadline passed (kDeadlineExceeded naming who is
  // still in).
  virtual absl::Status WaitUntilEnded(absl::Time deadline) = 0;
  // Ends the job (JobEnd{failure, reason} to every open Session) and stops
  // serving. Idempotent.
  virtual void Shutdown(bool failure, const std::string& reason) = 0;
};

// Starts the coordinator of `config`'s job at config.coordinator (its port;
// any address unless the host is an IP literal), for config.size workers.
// The error names the rank, the address and where it came from.
absl::StatusOr<std::unique_ptr<HostedCoordinator>> HostCoordinator(
    const WorkerConfig& config);

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_HOSTED_COORDINATOR_H_
