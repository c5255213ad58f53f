// kolo-coordinator's command line (coordinator/main.cc), parsed with CLI11:
//
//   kolo-coordinator --port P --np N [--bind HOST] [--secret-file F]
//       [--job-id ID] [--port-file F] [--heartbeat-timeout-seconds S]
//       [--heartbeat-interval-seconds S] [--cycle-time-ms X]
//       [--stall-check-time-seconds S] [--stall-shutdown-time-seconds S]
//       [--log-level L] [--min-np A] [--max-np M] [--elastic-timeout S]
//       [--reset-limit N]
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

#include "common/knobs.h"

namespace kolo::coordinator {

struct CoordinatorFlags {
  int port = -1;  // required; 0: the kernel picks one
  int np = 0;     // required
  std::string bind = "0.0.0.0";
  std::string secret_file;  // empty: KOLO_SECRET_FILE (main.cc reads it)
  std::string job_id = "default";
  std::string port_file;
  KnobValues knobs;      // the table's defaults, variables, then flags
  int min_np = 0;        // 0: not elastic
  int max_np = 0;        // 0: no cap (CoreOptions::max_size)
  int reset_limit = -1;  // -1: unlimited
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
