// kolo-coordinator: the coordinator as a standalone process.
//
//   kolo-coordinator --port P --np N [--bind HOST] [--secret-file F]
//       [--job-id ID] [--port-file F] [--heartbeat-timeout-seconds S]
//       [--heartbeat-interval-seconds S] [--cycle-time-ms X]
//       [--stall-check-time-seconds S] [--stall-shutdown-time-seconds S]
//       [--log-level L]
//
// The knob flags (heartbeat, cycle time, stall times, log level) are the
// rows of common/knobs.h's table, parsed by its helpers as kolorun and the
// workers parse them. The negotiation flags and --log-level default to their
// variables (KOLO_CYCLE_TIME_MS, KOLO_STALL_CHECK_TIME_SECONDS,
// KOLO_STALL_SHUTDOWN_TIME_SECONDS, KOLO_LOG_LEVEL, or Horovod's names), as in
// kolorun and in a worker that hosts the coordinator; the heartbeat flags do
// not read a variable.
//
// Prints "kolo-coordinator: listening on HOST:PORT (...)" once bound. Exits 0
// when every member left in order, 1 when the job ended in failure or on
// SIGINT/SIGTERM (which are taken synchronously with sigtimedwait, so no work
// happens in a signal handler).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "coordinator/server.h"

namespace {

// The defaults in <--flag> are filled in from common/knobs.h (Usage).
constexpr char kUsage[] =
    "usage: kolo-coordinator --port P --np N [--bind HOST] [--secret-file F]\n"
    "         [--job-id ID] [--port-file F] [--heartbeat-timeout-seconds S]\n"
    "         [--heartbeat-interval-seconds S] [--cycle-time-ms X]\n"
    "         [--stall-check-time-seconds S]\n"
    "         [--stall-shutdown-time-seconds S] [--log-level L]\n"
    "         [--min-np A [--elastic-timeout S] [--reset-limit N]]\n"
    "  --port P         TCP port to listen on (0: the kernel picks one)\n"
    "  --np N           number of workers that form the job\n"
    "  --bind HOST      address to bind (default 0.0.0.0)\n"
    "  --secret-file F  the job secret (default: $KOLO_SECRET_FILE)\n"
    "  --job-id ID      job id every worker must present (default "
    "\"default\")\n"
    "  --port-file F    write the bound port to F\n"
    "  --heartbeat-timeout-seconds S\n"
    "                   a worker silent this long has failed (default "
    "<--heartbeat-timeout-seconds>)\n"
    "  --heartbeat-interval-seconds S\n"
    "                   the coordinator's heartbeat period (default "
    "<--heartbeat-interval-seconds>)\n"
    "  --cycle-time-ms X\n"
    "                   milliseconds (fractions allowed) a ready tensor waits\n"
    "                   to batch with others while the data plane is busy\n"
    "                   (default: $KOLO_CYCLE_TIME_MS, $HOROVOD_CYCLE_TIME or "
    "<--cycle-time-ms>)\n"
    "  --stall-check-time-seconds S\n"
    "                   warn about tensors some ranks submitted and others\n"
    "                   not for S seconds; 0 = never (default:\n"
    "                   $KOLO_STALL_CHECK_TIME_SECONDS,\n"
    "                   $HOROVOD_STALL_CHECK_TIME_SECONDS or "
    "<--stall-check-time-seconds>)\n"
    "  --stall-shutdown-time-seconds S\n"
    "                   end the job after a stall of S seconds; 0 = never\n"
    "                   (default: $KOLO_STALL_SHUTDOWN_TIME_SECONDS,\n"
    "                   $HOROVOD_STALL_SHUTDOWN_TIME_SECONDS or "
    "<--stall-shutdown-time-seconds>)\n"
    "  --log-level L    trace, debug, info, warn, error, critical, off\n"
    "                   (default: $KOLO_LOG_LEVEL, $HOROVOD_LOG_LEVEL or "
    "<--log-level>)\n"
    "  --min-np A       elastic job: a lost worker ends its epoch, not the\n"
    "                   job, while at least A workers remain (KOLO_ELASTIC=1\n"
    "                   alone: A = 1); workers need KOLO_ELASTIC=1 too\n"
    "  --elastic-timeout S\n"
    "                   how long an elastic job below A waits before it ends\n"
    "                   (default: $KOLO_ELASTIC_TIMEOUT,\n"
    "                   $HOROVOD_ELASTIC_TIMEOUT or <--elastic-timeout>)\n"
    "  --reset-limit N  end an elastic job after N membership changes\n"
    "                   (default: unlimited)\n";

// The knobs of common/knobs.h that kolo-coordinator takes as flags, and those
// of them whose variables give the flags' defaults.
constexpr const kolo::Knob* kFlagKnobs[] = {
    &kolo::knobs::kHeartbeatTimeout, &kolo::knobs::kHeartbeatInterval,
    &kolo::knobs::kCycleTime,        &kolo::knobs::kStallCheck,
    &kolo::knobs::kStallShutdown,    &kolo::knobs::kLogLevel,
    &kolo::knobs::kElasticTimeout};
constexpr const kolo::Knob* kEnvKnobs[] = {
    &kolo::knobs::kCycleTime, &kolo::knobs::kStallCheck,
    &kolo::knobs::kStallShutdown, &kolo::knobs::kLogLevel,
    &kolo::knobs::kElasticTimeout};

std::string Usage() { return kolo::FillKnobDefaults(kUsage, kFlagKnobs); }

struct Flags {
  int port = -1;
  int np = 0;
  std::string bind = "0.0.0.0";
  std::string secret_file;
  std::string job_id = "default";
  std::string port_file;
  kolo::KnobValues knobs;  // the table's defaults, variables, then flags
  int min_np = 0;          // 0: not elastic
  int reset_limit = -1;    // -1: unlimited
};

int Fail(const std::string& message) {
  std::cerr << "kolo-coordinator: " << message << "\n";
  return 2;
}

// Returns an error message, or "" on success.
std::string ParseFlags(int argc, char** argv, Flags& f) {
  // A bad variable is reported after the flags, so that --help still works.
  const absl::Status env_error =
      kolo::SetKnobsFromEnv(kEnvKnobs, kolo::GetProcessEnv, f.knobs);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline = false;
    if (size_t eq = arg.find('=');
        arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline = true;
    }
    if (arg == "--help" || arg == "-h") return "help";
    auto next = [&](std::string& out) -> bool {
      if (has_inline) {
        out = value;
        return true;
      }
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (const kolo::Knob* knob = kolo::FindKnobByFlag(kFlagKnobs, arg);
        knob != nullptr) {
      if (!next(v)) return absl::StrCat(arg, " needs a value");
      if (absl::Status st = kolo::SetKnobFromFlag(*knob, v, f.knobs);
          !st.ok()) {
        return std::string(st.message());
      }
      continue;
    }
    if (arg == "--port" || arg == "--np" || arg == "--bind" ||
        arg == "--secret-file" || arg == "--job-id" || arg == "--port-file" ||
        arg == "--min-np" || arg == "--reset-limit") {
      if (!next(v)) return absl::StrCat(arg, " needs a value");
    } else {
      return absl::StrCat("unknown argument '", arg, "'");
    }
    if (arg == "--port") {
      if (!absl::SimpleAtoi(v, &f.port) || f.port < 0 || f.port > 65535) {
        return absl::StrCat("--port must be 0..65535, got '", v, "'");
      }
    } else if (arg == "--np") {
      if (!absl::SimpleAtoi(v, &f.np) || f.np < 1) {
        return absl::StrCat("--np must be a positive integer, got '", v, "'");
      }
    } else if (arg == "--bind") {
      f.bind = v;
    } else if (arg == "--secret-file") {
      f.secret_file = v;
    } else if (arg == "--job-id") {
      f.job_id = v;
    } else if (arg == "--port-file") {
      f.port_file = v;
    } else if (arg == "--min-np") {
      if (!absl::SimpleAtoi(v, &f.min_np) || f.min_np < 1) {
        return absl::StrCat("--min-np must be a positive integer, got '", v,
                            "'");
      }
    } else if (arg == "--reset-limit") {
      if (!absl::SimpleAtoi(v, &f.reset_limit) || f.reset_limit < 0) {
        return absl::StrCat(
            "--reset-limit must be a number of membership changes (0 or "
            "more), got '",
            v, "'");
      }
    }
  }
  if (const char* e = std::getenv("KOLO_ELASTIC");
      e != nullptr && std::string(e) == "1" && f.min_np == 0) {
    f.min_np = 1;
  }
  if (!env_error.ok()) return std::string(env_error.message());
  if (f.port < 0) return "--port is required (0 lets the kernel pick one)";
  if (f.np < 1) return "--np is required (the number of workers)";
  if (f.min_np > f.np) {
    return absl::StrCat("--min-np ", f.min_np, " is more than --np ", f.np);
  }
  return "";
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
  Flags flags;
  std::string error = ParseFlags(argc, argv, flags);
  if (error == "help") {
    std::cout << Usage();
    return 0;
  }
  if (!error.empty()) return Fail(absl::StrCat(error, "\n", Usage()));

  // --log-level, else KOLO_LOG_LEVEL, else HOROVOD_LOG_LEVEL, else warn
  // (ParseFlags checked it).
  if (absl::Status st = kolo::SetLogLevel(flags.knobs.log_level); !st.ok()) {
    return Fail(std::string(st.message()));
  }

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

  kolo::coordinator::ServerOptions options =
      kolo::coordinator::ServerOptionsFromKnobs(flags.knobs);
  options.bind_host = flags.bind;
  options.port = flags.port;
  options.expected_size = flags.np;
  options.job_id = flags.job_id;
  options.secret = *secret;
  options.elastic = flags.min_np > 0;
  options.min_size = std::max(1, flags.min_np);
  options.reset_limit = flags.reset_limit;
  auto server = kolo::coordinator::CoordinatorServer::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()));

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
                   flags.bind, (*server)->port(), flags.job_id, flags.np,
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
