#include "coordinator/flags.h"

#include <climits>
#include <exception>
#include <iterator>
#include <optional>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/tls.h"
#include "common/tls_flags.h"
#include "common/version.h"

namespace kolo::coordinator {
namespace {

// The defaults in <--flag> are filled in from common/knobs.h (Usage).
constexpr char kUsage[] =
    "usage: kolo-coordinator --port P --np N [--bind HOST] [--secret-file F]\n"
    "         [--tls-cert F --tls-key F --tls-ca F]\n"
    "         [--job-id ID] [--port-file F] [--metrics-port P]\n"
    "         [--metrics-address A] [--events F] [--heartbeat-timeout-seconds "
    "S]\n"
    "         [--heartbeat-interval-seconds S] [--cycle-time-ms X]\n"
    "         [--stall-check-time-seconds S]\n"
    "         [--stall-shutdown-time-seconds S] [--log-level L]\n"
    "         [--min-np A [--max-np M] [--elastic-timeout S]\n"
    "          [--reset-limit N]] [--autotune ...] | --help | --version\n"
    "  --port P         TCP port to listen on (0: the kernel picks one)\n"
    "  --np N           number of workers that form the job\n"
    "  --bind HOST      address to bind (default 0.0.0.0)\n"
    "  --secret-file F  the job secret (default: $KOLO_SECRET_FILE)\n"
    "  --tls-cert F --tls-key F --tls-ca F\n"
    "                   TLS with mutual authentication: this coordinator's\n"
    "                   certificate, its key and the job's CA, PEM (default:\n"
    "                   $KOLO_TLS_CERT, $KOLO_TLS_KEY, $KOLO_TLS_CA; none:\n"
    "                   plaintext)\n"
    "  --job-id ID      job id every worker must present (default "
    "\"default\")\n"
    "  --port-file F    write the bound port to F\n"
    "  --metrics-port P serve Prometheus metrics on http://A:P/metrics\n"
    "                   (0: a free port; default: off)\n"
    "  --metrics-address A\n"
    "                   the address of the metrics page (default 127.0.0.1)\n"
    "  --events F       write the event log (one JSON object a line) to F\n"
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
    "  --max-np M       elastic job: the most workers an epoch may have\n"
    "                   (at least --np; 0 = no cap, the default; --max-np\n"
    "                   alone: A = 1)\n"
    "  --elastic-timeout S\n"
    "                   how long an elastic job below A waits before it ends\n"
    "                   (default: $KOLO_ELASTIC_TIMEOUT,\n"
    "                   $HOROVOD_ELASTIC_TIMEOUT or <--elastic-timeout>)\n"
    "  --reset-limit N  end an elastic job after N membership changes\n"
    "                   (default: unlimited)\n"
    "  --autotune, --no-autotune\n"
    "                   tune the fusion threshold, cycle time and response\n"
    "                   cache during the first steps (default: "
    "$KOLO_AUTOTUNE,\n"
    "                   $HOROVOD_AUTOTUNE or off); docs/tensor-fusion.md\n"
    "  --autotune-log-file F           one CSV line per sample to F\n"
    "  --autotune-warmup-samples N     samples not scored (default 3)\n"
    "  --autotune-steps-per-sample N   steps per sample (default 10)\n"
    "  --autotune-bayes-opt-max-samples N\n"
    "                   scored samples before the choice (default 20)\n"
    "  --autotune-gaussian-process-noise X\n"
    "                   how noisy the scores are (default 0.8)\n";

// The knobs of common/knobs.h that kolo-coordinator takes as flags, and those
// of them whose variables give the flags' defaults.
constexpr const Knob* kFlagKnobs[] = {
    &knobs::kHeartbeatTimeout, &knobs::kHeartbeatInterval, &knobs::kCycleTime,
    &knobs::kStallCheck,       &knobs::kStallShutdown,     &knobs::kLogLevel,
    &knobs::kElasticTimeout};
constexpr const Knob* kEnvKnobs[] = {&knobs::kCycleTime, &knobs::kStallCheck,
                                     &knobs::kStallShutdown, &knobs::kLogLevel,
                                     &knobs::kElasticTimeout};

FlagsOutcome Error(std::string text) {
  FlagsOutcome out;
  out.kind = FlagsOutcome::Kind::kError;
  out.text = std::move(text);
  return out;
}

// A flag's value, when it was given (the last one wins).
struct Given {
  CLI::Option* option = nullptr;
  std::string text;
  std::optional<std::string> value() const {
    if (option == nullptr || option->count() == 0) return std::nullopt;
    return text;
  }
};

// Parses an integer flag value; "" on success, else the message.
std::string ParseInt(const char* flag, const Given& given, int min, int max,
                     const std::string& what, int& out) {
  std::optional<std::string> text = given.value();
  if (!text.has_value()) return "";
  int v = 0;
  if (!absl::SimpleAtoi(*text, &v) || v < min || v > max) {
    return absl::StrCat(flag, " must be ", what, ", got '", *text, "'");
  }
  out = v;
  return "";
}

// --help and --version win over every error, so that they always work:
// their outcome when argv has one of them.
std::optional<FlagsOutcome> HelpOrVersion(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--help" || a == "-h" || a == "--version") {
      FlagsOutcome help;
      help.kind = FlagsOutcome::Kind::kHelp;
      help.text = a == "--version"
                      ? absl::StrCat("kolo-coordinator (kolo) ", kVersionString,
                                     ", protocol ", kProtocolVersion, "\n")
                      : CoordinatorUsage();
      return help;
    }
  }
  return std::nullopt;
}

// Runs `app` over argv; "" on success, else the message (a flag without a
// value, an unknown argument).
std::string RunParser(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ArgumentMismatch& e) {
    // "--port: 1 required TEXT missing": a flag given last, without a value.
    std::string what = e.what();
    return absl::StrCat(what.substr(0, what.find(':')), " needs a value");
  } catch (const CLI::ParseError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
  if (std::vector<std::string> extras = app.remaining(); !extras.empty()) {
    const std::string& extra = extras.front();
    return absl::StrCat(
        "unknown argument '",
        extra.substr(0, absl::StartsWith(extra, "--") ? extra.find('=')
                                                      : std::string::npos),
        "'");
  }
  return "";
}

// Reads argv's flags into `f` (over the knobs' values from the
// environment); "" on success, else the first message.
std::string ReadFlags(int argc, const char* const* argv, CoordinatorFlags& f) {
  CLI::App app("kolo-coordinator", "kolo-coordinator");
  app.set_help_flag();  // the usage above is the help (kolo's own wording)
  app.allow_extras();   // reported as "unknown argument" by RunParser
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ListenOptions& listen = f.server.listen;
  CoreOptions& core = f.server.core;
  Given port, np, min_np, max_np, reset_limit, metrics_port;
  port.option = app.add_option("--port", port.text);
  np.option = app.add_option("--np", np.text);
  app.add_option("--bind", listen.bind_host);
  app.add_option("--secret-file", f.secret_file);
  tls::AddTlsFlags(app, f.tls_files);
  app.add_option("--job-id", core.job_id);
  app.add_option("--port-file", f.port_file);
  metrics_port.option = app.add_option("--metrics-port", metrics_port.text);
  app.add_option("--metrics-address", f.metrics_address);
  app.add_option("--events", f.events_file);
  min_np.option = app.add_option("--min-np", min_np.text);
  max_np.option = app.add_option("--max-np", max_np.text);
  reset_limit.option = app.add_option("--reset-limit", reset_limit.text);
  bool autotune_on = false, autotune_off = false;
  app.add_flag("--autotune", autotune_on)->disable_flag_override();
  app.add_flag("--no-autotune", autotune_off)->disable_flag_override();
  std::vector<Given> autotune_text(std::size(kAutotuneSettings));
  for (size_t i = 1; i < std::size(kAutotuneSettings); ++i) {
    autotune_text[i].option =
        app.add_option(kAutotuneSettings[i].flag, autotune_text[i].text);
  }
  std::vector<Given> knob_text(std::size(kFlagKnobs));
  for (size_t i = 0; i < std::size(kFlagKnobs); ++i) {
    knob_text[i].option =
        app.add_option(kFlagKnobs[i]->flag, knob_text[i].text);
  }
  if (std::string error = RunParser(app, argc, argv); !error.empty()) {
    return error;
  }

  for (size_t i = 0; i < std::size(kFlagKnobs); ++i) {
    std::optional<std::string> text = knob_text[i].value();
    if (!text.has_value()) continue;
    if (absl::Status st = SetKnobFromFlag(*kFlagKnobs[i], *text, f.knobs);
        !st.ok()) {
      return std::string(st.message());
    }
  }
  for (const std::string& error :
       {ParseInt("--port", port, 0, 65535, "0..65535", listen.port),
        ParseInt("--metrics-port", metrics_port, 0, 65535, "0..65535",
                 f.metrics_port),
        ParseInt("--np", np, 1, INT_MAX, "a positive integer",
                 core.expected_size),
        ParseInt("--min-np", min_np, 1, INT_MAX, "a positive integer",
                 core.min_size),
        ParseInt("--max-np", max_np, 0, INT_MAX,
                 "a number of workers (0: no cap)", core.max_size),
        ParseInt("--reset-limit", reset_limit, 0, INT_MAX,
                 "a number of membership changes (0 or more)",
                 core.reset_limit)}) {
    if (!error.empty()) return error;
  }
  if (autotune_on) f.autotune.enabled = true;
  if (autotune_off) f.autotune.enabled = false;
  for (size_t i = 1; i < std::size(kAutotuneSettings); ++i) {
    std::optional<std::string> text = autotune_text[i].value();
    if (!text.has_value()) continue;
    if (absl::Status st =
            SetAutotuneFlag(kAutotuneSettings[i].flag, *text, f.autotune);
        !st.ok()) {
      return std::string(st.message());
    }
  }
  // --min-np given: an elastic job.
  if (min_np.value().has_value()) core.elastic = true;
  return "";
}

// Makes the job elastic (with --min-np 1, core.min_size's default) when
// KOLO_ELASTIC=1 or --max-np alone asks for it.
void ImplyElastic(EnvLookup env, CoreOptions& core) {
  if (std::optional<std::string> e = env("KOLO_ELASTIC");
      e.has_value() && *e == "1") {
    core.elastic = true;
  }
  if (core.max_size > 0) core.elastic = true;
}

// Checks the required flags and that the sizes agree; "" when they do. (Not
// elastic, min_size is 1.)
std::string CheckSizes(const ServerOptions& o) {
  const int np = o.core.expected_size;
  const int min_np = o.core.min_size;
  const int max_np = o.core.max_size;
  if (o.listen.port < 0) {
    return "--port is required (0 lets the kernel pick one)";
  }
  if (np < 1) return "--np is required (the number of workers)";
  if (min_np > np) {
    return absl::StrCat("--min-np ", min_np, " is more than --np ", np);
  }
  if (max_np > 0 && max_np < min_np) {
    return absl::StrCat("--max-np ", max_np, " is less than --min-np ", min_np);
  }
  if (max_np > 0 && max_np < np) {
    return absl::StrCat("--max-np ", max_np, " is less than --np ", np,
                        " (the workers that form the first epoch)");
  }
  return "";
}

}  // namespace

ServerOptions ServerFlagDefaults() {
  ServerOptions o;
  o.listen.port = -1;
  o.listen.bind_host = "0.0.0.0";
  o.core.expected_size = 0;
  o.core.job_id = "default";
  return o;
}

std::string CoordinatorUsage() { return FillKnobDefaults(kUsage, kFlagKnobs); }

FlagsOutcome ParseCoordinatorFlags(int argc, const char* const* argv,
                                   EnvLookup env) {
  if (std::optional<FlagsOutcome> help = HelpOrVersion(argc, argv)) {
    return *std::move(help);
  }
  CoordinatorFlags f;
  // A bad variable is reported after the flags.
  absl::Status env_error = SetKnobsFromEnv(kEnvKnobs, env, f.knobs);
  if (absl::Status st = AutotuneFromEnv(env, f.autotune);
      env_error.ok() && !st.ok()) {
    env_error = st;
  }
  if (std::string error = ReadFlags(argc, argv, f); !error.empty()) {
    return Error(std::move(error));
  }
  ImplyElastic(env, f.server.core);
  if (!env_error.ok()) return Error(std::string(env_error.message()));
  // The --tls-* flags, else KOLO_TLS_*: all three or none of either.
  absl::StatusOr<tls::TlsFiles> tls_files =
      tls::TlsFilesFromFlagsOrEnvironment(f.tls_files, env);
  if (!tls_files.ok()) return Error(std::string(tls_files.status().message()));
  f.tls_files = *std::move(tls_files);
  if (std::string error = CheckSizes(f.server); !error.empty()) {
    return Error(std::move(error));
  }
  SetServerKnobs(f.knobs, f.server);

  FlagsOutcome out;
  out.kind = FlagsOutcome::Kind::kRun;
  out.flags = std::move(f);
  return out;
}

}  // namespace kolo::coordinator
