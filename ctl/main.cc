// kolo-ctl: a read-only command-line view of a running kolo job, over the
// coordinator's Status RPC. See ctl/options.h for the command line and
// ctl/run.h for what it prints; this file only wires them to the process
// (environment, secret, gRPC, signals).
//
// Exit status: 0 shown (or a watch interrupted), 1 the coordinator could not
// be asked or refused, 2 bad usage (flags, no secret).
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "common/knobs.h"
#include "common/tls.h"
#include "ctl/options.h"
#include "ctl/run.h"
#include "ctl/secret.h"
#include "ctl/status_client.h"

int main(int argc, char** argv) {
  using kolo::ctl::ParseOutcome;
  ParseOutcome parsed =
      kolo::ctl::ParseCtlArgs(argc, argv, kolo::GetProcessEnv);
  if (parsed.kind == ParseOutcome::Kind::kHelp) {
    std::cout << parsed.text;
    return 0;
  }
  if (parsed.kind == ParseOutcome::Kind::kError) {
    std::cerr << parsed.text << "\n";
    return 2;
  }
  const kolo::ctl::CtlOptions& options = parsed.options;
  absl::StatusOr<std::string> secret =
      kolo::ctl::LoadSecret(options, kolo::GetProcessEnv);
  if (!secret.ok()) {
    std::cerr << "kolo-ctl: " << secret.status().message() << "\n";
    return 2;
  }

  // A watch ends on SIGINT/SIGTERM, taken synchronously between polls: the
  // signals are blocked before gRPC starts its threads, so that they all
  // inherit the mask and only sigtimedwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  if (options.watch) pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  // The job's certificates, when it runs with TLS (--tls-* or KOLO_TLS_*).
  std::optional<kolo::tls::TlsMaterial> tls;
  if (options.tls_files.enabled()) {
    absl::StatusOr<kolo::tls::TlsMaterial> loaded =
        kolo::tls::LoadTlsMaterial(options.tls_files);
    if (!loaded.ok()) {
      std::cerr << "kolo-ctl: " << loaded.status().message() << "\n";
      return 2;
    }
    tls = *std::move(loaded);
  }
  kolo::ctl::StatusClient client(options.coordinator, options.job_id, *secret,
                                 tls.has_value() ? &*tls : nullptr);
  if (options.command == kolo::ctl::CtlOptions::Command::kMetrics) {
    absl::StatusOr<kolo::proto::StatusReply> reply =
        client.Poll(kolo::ctl::kRpcDeadline, /*metrics=*/true);
    if (!reply.ok()) {
      std::cerr << "kolo-ctl: " << reply.status().message() << "\n";
      return 1;
    }
    std::cout << reply->metrics();
    return 0;
  }
  kolo::ctl::RunIo io;
  io.poll = [&client] { return client.Poll(); };
  io.out = &std::cout;
  io.err = &std::cerr;
  io.clock = [] { return absl::Now(); };
  io.wait = [&stop](absl::Duration d) {
    const timespec ts = absl::ToTimespec(d);
    siginfo_t info;
    return sigtimedwait(&stop, &info, &ts) < 0;  // a signal: stop
  };
  return kolo::ctl::RunStatus(options, io);
}
