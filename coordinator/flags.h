// kolo-coordinator's command line (coordinator/main.cc), parsed with CLI11:
//
//   kolo-coordinator --port P --np N [--bind HOST] [--secret-file F]
//       [--tls-cert F --tls-key F --tls-ca F]
//       [--job-id ID] [--port-file F] [--metrics-port P]
//       [--metrics-address A] [--events F] [--heartbeat-timeout-seconds S]
//       [--heartbeat-interval-seconds S] [--cycle-time-ms X]
//       [--stall-check-time-seconds S] [--stall-shutdown-time-seconds S]
//       [--log-level L] [--min-np A] [--max-np M] [--elastic-timeout S]
//       [--reset-limit N] [--autotune] [--no-autotune]
//       [--autotune-log-file F] [--autotune-warmup-samples N]
//       [--autotune-steps-per-sample N] [--autotune-bayes-opt-max-samples N]
//       [--autotune-gaussian-process-noise X]
//
// The knob flags (heartbeat, cycle time, stall times, log level, elastic
// timeout) are the rows of common/knobs.h's table, parsed by its helpers as
// kolorun and the workers parse them. The negotiation flags, --log-level and
// --elastic-timeout default to their variables (KOLO_CYCLE_TIME_MS,
// KOLO_STALL_CHECK_TIME_SECONDS, KOLO_STALL_SHUTDOWN_TIME_SECONDS,
// KOLO_LOG_LEVEL, KOLO_ELASTIC_TIMEOUT, or Horovod's names), as in kolorun and
// in a worker that hosts the coordinator; the heartbeat flags do not read a
// variable. KOLO_ELASTIC=1 alone makes the job elastic with --min-np 1, and so
// does --max-np alone.
//
// Thread-safety: pure functions (the environment comes in as an EnvLookup).
#ifndef KOLO_COORDINATOR_FLAGS_H_
#define KOLO_COORDINATOR_FLAGS_H_

#include <string>

#include "common/autotune_config.h"
#include "common/knobs.h"
#include "common/tls.h"
#include "coordinator/server.h"

namespace kolo::coordinator {

// The server options before any flag: --port -1 and --np 0 (both required),
// --bind 0.0.0.0, --job-id "default"; the rest at ServerOptions' defaults.
ServerOptions ServerFlagDefaults();

struct CoordinatorFlags {
  // The flags that say where to listen and what job to run, parsed straight
  // into the options the server starts with: --port, --bind (listen), --np
  // (core.expected_size), --job-id, --min-np (core.min_size; given, or
  // implied by KOLO_ELASTIC=1 or --max-np, it sets core.elastic), --max-np
  // (core.max_size), --reset-limit; and the knobs' values
  // (SetServerKnobs). main.cc adds the secret.
  ServerOptions server = ServerFlagDefaults();
  std::string secret_file;  // empty: KOLO_SECRET_FILE (main.cc reads it)
  // --tls-cert, --tls-key, --tls-ca, else KOLO_TLS_* (all three or none);
  // main.cc loads them into server.listen.tls.
  tls::TlsFiles tls_files;
  std::string port_file;
  // --metrics-port (-1: no metrics page), --metrics-address, --events (""
  // none); main.cc starts the page and opens the log.
  int metrics_port = -1;
  std::string metrics_address = "127.0.0.1";
  std::string events_file;
  KnobValues knobs;  // the table's defaults, variables, then flags
  // --autotune and friends over KOLO_AUTOTUNE* (common/autotune_config.h);
  // main.cc makes the tuner (coordinator/autotune.h: MakeAutotuner).
  AutotuneConfig autotune;
};

struct FlagsOutcome {
  enum class Kind {
    kRun,    // run with `flags`
    kHelp,   // print `text` (the usage) to stdout, exit 0
    kError,  // print `text` (the message, then the usage) to stderr, exit 2
  };
  Kind kind = Kind::kError;
  CoordinatorFlags flags;
  std::string text;
};

// argv[0] is the program name. Error texts are the bare message ("--np is
// required (the number of workers)"); main.cc adds the program name and the
// usage.
FlagsOutcome ParseCoordinatorFlags(int argc, const char* const* argv,
                                   EnvLookup env);

// The --help text, with the knobs' defaults filled in.
std::string CoordinatorUsage();

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_FLAGS_H_
