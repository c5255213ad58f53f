// kolo-coordinator: the coordinator as a standalone process.
//
//   kolo-coordinator --port P --np N [--bind HOST] [--secret-file F]
//       [--job-id ID] [--port-file F] [--heartbeat-timeout-seconds S]
//       [--heartbeat-interval-seconds S] [--cycle-time-ms X]
//       [--stall-check-time-seconds S] [--stall-shutdown-time-seconds S]
//       [--log-level L] [--min-np A] [--max-np M] [--elastic-timeout S]
//       [--reset-limit N]
//
// coordinator/flags.h parses the command line (CLI11) and says where each
// default comes from.
//
// Prints "kolo-coordinator: listening on HOST:PORT (...)" once bound. Exits 0
// when every member left in order, 1 when the job ended in failure or on
// SIGINT/SIGTERM (which are taken synchronously with sigtimedwait, so no work
// happens in a signal handler), 2 on a usage error.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/fd_limit.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tls.h"
#include "coordinator/autotune.h"
#include "coordinator/event_log.h"
#include "coordinator/flags.h"
#include "coordinator/metrics_http.h"
#include "coordinator/server.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "kolo-coordinator: " << message << "\n";
  return 2;
}

// Writes the port to `path` atomically (tmp file + rename).
absl::Status WritePortFile(const std::string& path, int port) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot write the port file '", tmp, "': ", std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  // Block the signals before any thread starts, so every thread inherits the
  // mask and the main thread alone takes them with sigtimedwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  kolo::SetLogIdentity("coordinator");
  using kolo::coordinator::FlagsOutcome;
  FlagsOutcome parsed =
      kolo::coordinator::ParseCoordinatorFlags(argc, argv, kolo::GetProcessEnv);
  if (parsed.kind == FlagsOutcome::Kind::kHelp) {
    std::cout << parsed.text;
    return 0;
  }
  if (parsed.kind == FlagsOutcome::Kind::kError) {
    return Fail(
        absl::StrCat(parsed.text, "\n", kolo::coordinator::CoordinatorUsage()));
  }
  const kolo::coordinator::CoordinatorFlags& flags = parsed.flags;

  // --log-level, else KOLO_LOG_LEVEL, else HOROVOD_LOG_LEVEL, else warn
  // (ParseCoordinatorFlags checked it).
  if (absl::Status st = kolo::SetLogLevel(flags.knobs.log_level); !st.ok()) {
    return Fail(std::string(st.message()));
  }
  kolo::RaiseOpenFileLimitAndLog("coordinator");

  std::string secret_file = flags.secret_file;
  if (secret_file.empty()) {
    const char* env = std::getenv("KOLO_SECRET_FILE");
    if (env != nullptr) secret_file = env;
  }
  if (secret_file.empty()) {
    return Fail(
        "no job secret: give one with --secret-file F or KOLO_SECRET_FILE=F, "
        "e.g. `openssl rand -hex 32 > F` (give every worker the same file)");
  }
  absl::StatusOr<std::string> secret = kolo::auth::LoadSecretFile(secret_file);
  if (!secret.ok()) return Fail(std::string(secret.status().message()));

  // The flags are parsed into the server's options; the secret is added here.
  kolo::coordinator::ServerOptions options = flags.server;
  options.core.secret = *secret;
  if (flags.tls_files.enabled()) {
    absl::StatusOr<kolo::tls::TlsMaterial> tls =
        kolo::tls::LoadTlsMaterial(flags.tls_files);
    if (!tls.ok()) return Fail(std::string(tls.status().message()));
    options.listen.tls = *std::move(tls);
  }
  if (!flags.events_file.empty()) {
    auto events = kolo::coordinator::EventLog::Open(flags.events_file);
    if (!events.ok()) return Fail(std::string(events.status().message()));
    options.core.events = *events;
  }
  auto autotuner =
      kolo::coordinator::MakeAutotuner(flags.autotune, options.core.negotiator);
  if (!autotuner.ok()) return Fail(std::string(autotuner.status().message()));
  options.core.autotuner = *std::move(autotuner);
  auto server = kolo::coordinator::CoordinatorServer::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  // Declared after the server, so it stops first.
  std::unique_ptr<kolo::coordinator::MetricsHttpServer> metrics;
  if (flags.metrics_port >= 0) {
    kolo::coordinator::CoordinatorServer* s = server->get();
    auto started = kolo::coordinator::MetricsHttpServer::Start(
        flags.metrics_address, flags.metrics_port,
        [s] { return s->Metrics(); });
    if (!started.ok()) {
      (*server)->Shutdown(true, "the coordinator could not start");
      return Fail(std::string(started.status().message()));
    }
    metrics = std::move(*started);
  }

  if (!flags.port_file.empty()) {
    if (absl::Status st = WritePortFile(flags.port_file, (*server)->port());
        !st.ok()) {
      (*server)->Shutdown(true, "the coordinator could not start");
      return Fail(std::string(st.message()));
    }
  }
  std::cout << absl::StrFormat(
                   "kolo-coordinator: listening on %s:%d (job %s, expecting "
                   "%d workers, incarnation %016x)",
                   options.listen.bind_host, (*server)->port(),
                   options.core.job_id, options.core.expected_size,
                   (*server)->incarnation())
            << std::endl;

  const timespec poll = {0, 100 * 1000 * 1000};  // 100 ms
  while (true) {
    siginfo_t info;
    int sig = sigtimedwait(&signals, &info, &poll);
    if (sig == SIGINT || sig == SIGTERM) {
      std::string reason =
          absl::StrCat("kolo-coordinator received ",
                       sig == SIGINT ? "SIGINT" : "SIGTERM", "; job cancelled");
      kolo::GetLogger("coordinator")->warn("{}", reason);
      (*server)->Shutdown(true, reason);
      return 1;
    }
    absl::Status st = (*server)->WaitUntilEnded(absl::Now());
    if (absl::IsDeadlineExceeded(st)) continue;
    if (st.ok()) {
      (*server)->Shutdown(false, "every worker left");
      return 0;
    }
    std::cerr << "kolo-coordinator: the job failed: " << st.message() << "\n";
    (*server)->Shutdown(true, std::string(st.message()));
    return 1;
  }
}
