// kolo-ctl's command line, parsed with CLI11 into CtlOptions:
//
//   kolo-ctl status [--coordinator HOST:PORT] [--job-id ID]
//                   [--secret-file FILE] [--watch [--interval SECONDS]]
//                   [--json] [--stall-check-time-seconds S]
//                   [--tls-cert FILE --tls-key FILE --tls-ca FILE]
//   kolo-ctl metrics [--coordinator HOST:PORT] [--job-id ID]
//                    [--secret-file FILE]
//                    [--tls-cert FILE --tls-key FILE --tls-ca FILE]
//
// Defaults come from the environment: the coordinator from KOLO_COORDINATOR,
// the job id from KOLO_JOB_ID (else "default", kolo-coordinator's default),
// the stall threshold from KOLO_STALL_CHECK_TIME_SECONDS (or Horovod's name,
// else 60 s) as the coordinator reads it. The job secret is never a command
// line value (it would show in `ps`): --secret-file, else KOLO_SECRET, else
// KOLO_SECRET_FILE (ctl/secret.h reads it). The job's TLS certificates, for
// a coordinator that runs with TLS: the --tls-* flags, else KOLO_TLS_*, all
// three or none (common/tls.h: TlsFilesFromFlagsOrEnvironment, as kolorun
// and kolo-coordinator); main.cc reads and checks the files.
//
// Thread-safety: pure functions (the environment comes in as an EnvLookup).
#ifndef KOLO_CTL_OPTIONS_H_
#define KOLO_CTL_OPTIONS_H_

#include <string>

#include "absl/time/time.h"
#include "common/knobs.h"
#include "common/tls.h"

namespace kolo::ctl {

// The deadline of each Status call.
inline constexpr absl::Duration kRpcDeadline = absl::Seconds(2);
// --interval's default and bounds.
inline constexpr absl::Duration kDefaultInterval = absl::Seconds(1);
inline constexpr absl::Duration kMinInterval = absl::Milliseconds(100);
inline constexpr absl::Duration kMaxInterval = absl::Hours(24);

struct CtlOptions {
  // status: the job's state; metrics: its Prometheus page, printed once.
  enum class Command { kStatus, kMetrics };
  Command command = Command::kStatus;
  std::string coordinator;  // HOST:PORT; never empty once parsed
  std::string job_id = "default";
  std::string secret_file;  // empty: KOLO_SECRET, then KOLO_SECRET_FILE
  // --tls-cert, --tls-key, --tls-ca, else KOLO_TLS_*; none: plaintext.
  tls::TlsFiles tls_files;
  bool watch = false;
  absl::Duration interval = kDefaultInterval;
  bool json = false;
  // The knobs kolo-ctl reads (the stall check only), at the table's defaults
  // until the environment or a flag sets them.
  KnobValues knobs;
};

// What the command line asked for.
struct ParseOutcome {
  enum class Kind {
    kRun,    // run `options`
    kHelp,   // print `text` to stdout, exit 0
    kError,  // print `text` to stderr, exit 2
  };
  Kind kind = Kind::kError;
  CtlOptions options;
  std::string text;
};

// argv[0] is the program name.
ParseOutcome ParseCtlArgs(int argc, const char* const* argv, EnvLookup env);

}  // namespace kolo::ctl

#endif  // KOLO_CTL_OPTIONS_H_
