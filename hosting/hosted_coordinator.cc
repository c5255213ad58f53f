// HostCoordinator (worker_lib/runtime/hosted_coordinator.h): a
// CoordinatorServer (coordinator/server.h) started from a worker's config.
#include "worker_lib/runtime/hosted_coordinator.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "coordinator/autotune.h"
#include "coordinator/server.h"

namespace kolo::worker {
namespace {

class HostedServer final : public HostedCoordinator {
 public:
  explicit HostedServer(std::unique_ptr<coordinator::CoordinatorServer> server)
      : server_(std::move(server)) {}

  int port() const override { return server_->port(); }
  absl::Status WaitUntilEnded(absl::Time deadline) override {
    return server_->WaitUntilEnded(deadline);
  }
  void Shutdown(bool failure, const std::string& reason) override {
    server_->Shutdown(failure, reason);
  }

 private:
  const std::unique_ptr<coordinator::CoordinatorServer> server_;
};

absl::StatusOr<coordinator::ServerOptions> HostingOptions(
    const WorkerConfig& c) {
  coordinator::ServerOptions so = coordinator::ServerOptionsFromKnobs(c.knobs);
  so.listen.bind_host =
      net::IsIpLiteral(c.coordinator.host) ? c.coordinator.host : "0.0.0.0";
  so.listen.port = c.coordinator.port;
  so.core.expected_size = c.size;
  so.core.job_id = c.job_id;
  so.core.secret = c.secret;
  if (c.tls != nullptr) so.listen.tls = *c.tls;
  // The port came from a variable, not a flag: name it.
  so.listen.port_hint =
      c.coordinator_source == "MASTER_ADDR:MASTER_PORT"
          ? "choose a free port in MASTER_PORT on every worker; under "
            "torchrun, MASTER_PORT is taken by torchrun's own rendezvous "
            "store: set KOLO_COORDINATOR=<rank 0 host>:<free port> on every "
            "worker"
          : absl::StrCat("choose a free port in ", c.coordinator_source,
                         "=<rank 0 host>:<port> on every worker, or set "
                         "KOLO_HOST_COORDINATOR=0 if a kolo-coordinator "
                         "already runs there");
  // KOLO_AUTOTUNE here as kolo-coordinator --autotune would.
  absl::StatusOr<std::shared_ptr<coordinator::Autotuner>> autotuner =
      coordinator::MakeAutotuner(c.autotune, so.core.negotiator);
  if (!autotuner.ok()) return autotuner.status();
  so.core.autotuner = *std::move(autotuner);
  return so;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostedCoordinator>> HostCoordinator(
    const WorkerConfig& c) {
  absl::StatusOr<coordinator::ServerOptions> options = HostingOptions(c);
  absl::StatusOr<std::unique_ptr<coordinator::CoordinatorServer>> server =
      options.ok() ? coordinator::CoordinatorServer::Start(*std::move(options))
                   : options.status();
  if (server.ok()) return std::make_unique<HostedServer>(*std::move(server));
  return absl::Status(
      server.status().code(),
      absl::StrCat("rank 0 (worker ", c.worker_id,
                   ") could not host the coordinator at ",
                   c.coordinator.ToString(), " (from ", c.coordinator_source,
                   "): ", server.status().message(),
                   "; the other workers stop when they find no coordinator "
                   "there"));
}

}  // namespace kolo::worker
