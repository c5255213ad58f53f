// CoordinatorServer: the kolo coordinator as an embeddable gRPC server.
// Used by `kolo-coordinator` (standalone), by kolorun (embedded, the default),
// and by rank 0 when workers start without kolorun (torchrun, Slurm, Open MPI).
//
// It hosts the Coordinator service (Session stream + Status) around a plain
// CoordinatorCore (coordinator/core.h) that holds all membership state.
//
// Thread-safety: all methods may be called from any thread.
// Lifetime: Shutdown() (or the destructor) ends every Session with a JobEnd,
// stops the gRPC server within a bounded time, and joins kolo's own threads.
#ifndef KOLO_COORDINATOR_SERVER_H_
#define KOLO_COORDINATOR_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

struct ServerOptions {
  std::string bind_host = "127.0.0.1";  // "0.0.0.0" to accept other hosts
  int port = 0;                         // 0: the kernel picks a free port
  int expected_size = 1;                // workers that form epoch 1
  std::string job_id;
  std::string secret;  // job secret (never logged)
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  // A worker silent this long (no heartbeat, stream still open) has failed.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // KOLO_CYCLE_TIME_MS (alias HOROVOD_CYCLE_TIME): the longest a ready
  // tensor waits for others to batch with while the data plane is busy.
  absl::Duration cycle_time = absl::Milliseconds(1);
  // KOLO_STALL_CHECK_TIME_SECONDS (alias HOROVOD_STALL_CHECK_TIME_SECONDS):
  // warn about tensors some ranks submitted and others not for this long;
  // zero disables the warning.
  absl::Duration stall_check = absl::Seconds(60);
  // KOLO_STALL_SHUTDOWN_TIME_SECONDS (alias
  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS): end the job after a stall this
  // long; zero = never.
  absl::Duration stall_shutdown = absl::ZeroDuration();
  // Listen for negotiation links (coordinator/link_server.h) on a
  // kernel-chosen port of bind_host, told to workers in their Membership.
  bool negotiation_links = true;
  // Elastic membership (coordinator/core.h, "Elastic jobs"; kolorun
  // --min-np / kolo-coordinator --min-np).
  bool elastic = false;
  int min_size = 1;
  absl::Duration elastic_timeout = absl::Seconds(600);
  int reset_limit = -1;  // -1: unlimited
};

class CoordinatorServer {
 public:
  // Binds and starts serving. Fails with a clear message if the port is taken.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const ServerOptions& options);
  virtual ~CoordinatorServer() = default;

  // The bound port (the real one when options.port was 0).
  virtual int port() const = 0;
  // Random per start; every message carries it.
  virtual uint64_t incarnation() const = 0;

  virtual proto::StatusReply Status() const = 0;

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
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_SERVER_H_
