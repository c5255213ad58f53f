#include "launcher/embedded_coordinator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "coordinator/autotune.h"
#include "coordinator/event_log.h"

namespace kolo::launcher {

absl::StatusOr<std::unique_ptr<EmbeddedCoordinator>> EmbeddedCoordinator::Start(
    coordinator::ServerOptions options) {
  auto server = coordinator::CoordinatorServer::Start(options);
  if (!server.ok()) return server.status();
  options.listen.port = (*server)->port();
  return std::unique_ptr<EmbeddedCoordinator>(
      new EmbeddedCoordinator(std::move(options), *std::move(server)));
}

EmbeddedCoordinator::EmbeddedCoordinator(
    coordinator::ServerOptions options,
    std::unique_ptr<coordinator::CoordinatorServer> server)
    : options_(std::move(options)),
      port_(options_.listen.port),
      server_(std::move(server)) {}

bool EmbeddedCoordinator::down() const {
  MutexLock lock(&mu_);
  return down_;
}

int EmbeddedCoordinator::restarts() const {
  MutexLock lock(&mu_);
  return restarts_;
}

proto::StatusReply EmbeddedCoordinator::Status() const {
  MutexLock lock(&mu_);
  return server_ != nullptr ? server_->Status() : proto::StatusReply();
}

std::string EmbeddedCoordinator::Metrics() const {
  MutexLock lock(&mu_);
  return down_ ? std::string() : server_->Metrics();
}

absl::Status EmbeddedCoordinator::WaitUntilEnded(absl::Time deadline) {
  MutexLock lock(&mu_);
  if (down_) {
    return absl::DeadlineExceededError(
        "the coordinator is down, waiting to be started again");
  }
  return server_->WaitUntilEnded(deadline);
}

void EmbeddedCoordinator::EndJob(bool failure, const std::string& reason,
                                 const std::string& failed_worker) {
  MutexLock lock(&mu_);
  if (!down_) server_->EndJob(failure, reason, failed_worker);
}

void EmbeddedCoordinator::Kill() {
  MutexLock lock(&mu_);
  if (down_ || shut_down_ || server_ == nullptr) return;
  server_->Kill();
  down_ = true;
}

absl::Status EmbeddedCoordinator::Restart() {
  MutexLock lock(&mu_);
  if (shut_down_) {
    return absl::FailedPreconditionError(
        "the job has ended: the coordinator is not started again");
  }
  if (!down_) {
    return absl::FailedPreconditionError(
        "the coordinator is running: only a killed one is started again");
  }
  // The killed server lets go of its port only when it is destroyed.
  server_.reset();
  // A new coordinator counts its bytes from zero and measures another job:
  // an unfinished tuning starts over (a finished one keeps its choice).
  if (options_.core.autotuner != nullptr && !options_.core.autotuner->done()) {
    options_.core.autotuner->Restart();
  }
  // Workers that exited while it was down come back as fresh replacements:
  // the job forms again with whoever is there (CoreOptions::restarted).
  options_.core.restarted = true;
  auto started = coordinator::CoordinatorServer::Start(options_);
  if (!started.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the coordinator again at port ", port_, ": ",
                     started.status().message()));
  }
  server_ = *std::move(started);
  down_ = false;
  ++restarts_;
  if (options_.core.events != nullptr) {
    options_.core.events->Write(
        absl::Now(), "coordinator_restarted", 0,
        {{"port", port_},
         {"incarnation", absl::StrFormat("%016x", server_->incarnation())},
         {"restart", restarts_}});
  }
  GetLogger("kolorun")->warn(
      "the coordinator is back at port {} (incarnation {:016x}, restart {})",
      port_, server_->incarnation(), restarts_);
  return absl::OkStatus();
}

void EmbeddedCoordinator::Shutdown(bool failure, const std::string& reason) {
  MutexLock lock(&mu_);
  shut_down_ = true;
  if (server_ != nullptr && !down_) server_->Shutdown(failure, reason);
}

}  // namespace kolo::launcher
