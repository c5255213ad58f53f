#include "ctl/options.h"

#include <exception>
#include <optional>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/tls.h"
#include "common/tls_flags.h"
#include "common/version.h"

namespace kolo::ctl {
namespace {

constexpr char kFooter[] =
    "Environment: KOLO_COORDINATOR (HOST:PORT), KOLO_JOB_ID, KOLO_SECRET or "
    "KOLO_SECRET_FILE (the job secret; never on the command line), "
    "KOLO_TLS_CERT, KOLO_TLS_KEY and KOLO_TLS_CA (the job's TLS "
    "certificates, when it runs with TLS), KOLO_STALL_CHECK_TIME_SECONDS.\n"
    "Exit status: 0 shown, 1 the coordinator could not be asked (unreachable, "
    "refused, no answer in time), 2 bad usage or no secret.";

ParseOutcome Error(std::string text) {
  ParseOutcome out;
  out.kind = ParseOutcome::Kind::kError;
  out.text = std::move(text);
  return out;
}

// The value of `name`, or "" when unset or empty.
std::string Env(EnvLookup env, const char* name) {
  std::optional<std::string> v = env(name);
  return v.has_value() ? *v : std::string();
}

// "" when `address` looks like HOST:PORT (or a gRPC unix: target).
std::string CheckAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return "";
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::StrCat("the coordinator address '", address,
                        "' is not HOST:PORT (e.g. 10.0.0.1:29400, "
                        "[::1]:29400)");
  }
  return "";
}

// What the command line says before CLI11 reads it: a secret given on it
// (it shows in `ps` and in shell history: refused by name rather than as an
// unknown flag) or a misspelt command (CLI11 would call it "a subcommand is
// required"); nullopt when neither.
std::optional<ParseOutcome> RefuseEarly(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--secret" || absl::StartsWith(a, "--secret=")) {
      return Error(
          "kolo-ctl takes no secret on the command line (other users would "
          "see it in `ps`); put it in a file and pass --secret-file FILE, or "
          "set KOLO_SECRET or KOLO_SECRET_FILE");
    }
  }
  if (argc > 1 && argv[1][0] != '-' && absl::string_view(argv[1]) != "status" &&
      absl::string_view(argv[1]) != "metrics") {
    return Error(absl::StrCat("kolo-ctl: unknown command '", argv[1],
                              "'; the commands are `kolo-ctl status` and "
                              "`kolo-ctl metrics` (see kolo-ctl --help)"));
  }
  return std::nullopt;
}

// The values CLI11 reads as text, for checking after the parse.
struct StatusTexts {
  std::string interval;
  std::string stall_check;
};

// Adds the `status` command and its flags to `app`, reading into `o` and
// `texts`.
void AddStatusCommand(CLI::App& app, CtlOptions& o, StatusTexts& texts) {
  CLI::App* status = app.add_subcommand(
      "status",
      "Show the job (phase, epoch, elastic bounds), its workers, the tensors "
      "some ranks submitted and others not (with the ranks that did not), "
      "and the membership history");
  status
      ->add_option("--coordinator", o.coordinator,
                   "HOST:PORT of the job's coordinator (default: "
                   "$KOLO_COORDINATOR)")
      ->type_name("HOST:PORT");
  status
      ->add_option("--job-id", o.job_id,
                   "the job's id (default: $KOLO_JOB_ID, else \"default\")")
      ->type_name("ID");
  status
      ->add_option("--secret-file", o.secret_file,
                   "file holding the job secret (default: $KOLO_SECRET, "
                   "else $KOLO_SECRET_FILE)")
      ->type_name("FILE");
  tls::AddTlsFlags(*status, o.tls_files);
  CLI::Option* watch = status->add_flag(
      "--watch", o.watch,
      "poll until interrupted, redrawing the screen (with --json: one object "
      "per line); a failed poll is shown and the watch goes on");
  status
      ->add_option("--interval", texts.interval,
                   "seconds between polls of --watch (default 1)")
      ->type_name("SECONDS")
      ->needs(watch);
  status->add_flag("--json", o.json,
                   "print one JSON object per poll instead of text");
  status
      ->add_option(
          "--stall-check-time-seconds", texts.stall_check,
          absl::StrCat("show tensors pending this long as stalled; 0 = never "
                       "(default: $KOLO_STALL_CHECK_TIME_SECONDS, "
                       "$HOROVOD_STALL_CHECK_TIME_SECONDS or ",
                       KnobDefaultText(knobs::kStallCheck, KnobSpelling::kFlag),
                       ", as the coordinator)"))
      ->type_name("S");
}

// Adds the `metrics` command (the job's Prometheus page, once) and the
// flags that reach the job to `app`, reading into `o`.
void AddMetricsCommand(CLI::App& app, CtlOptions& o) {
  CLI::App* metrics = app.add_subcommand(
      "metrics",
      "Print the coordinator's metrics in Prometheus' text format (what its "
      "--metrics-port page serves), through the signed Status call");
  metrics
      ->add_option("--coordinator", o.coordinator,
                   "HOST:PORT of the job's coordinator (default: "
                   "$KOLO_COORDINATOR)")
      ->type_name("HOST:PORT");
  metrics
      ->add_option("--job-id", o.job_id,
                   "the job's id (default: $KOLO_JOB_ID, else "
                   "\"default\")")
      ->type_name("ID");
  metrics
      ->add_option("--secret-file", o.secret_file,
                   "file holding the job secret (default: $KOLO_SECRET, "
                   "else $KOLO_SECRET_FILE)")
      ->type_name("FILE");
  tls::AddTlsFlags(*metrics, o.tls_files);
  metrics->callback([&o] { o.command = CtlOptions::Command::kMetrics; });
}

// Runs `app` over argv: nullopt when it parsed, else the outcome (the help,
// the version or the error).
std::optional<ParseOutcome> RunParser(CLI::App& app, int argc,
                                      const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    int code = app.exit(e, out, err);
    if (code == 0) {
      ParseOutcome help;
      help.kind = ParseOutcome::Kind::kHelp;
      help.text = out.str();
      return help;
    }
    return Error(absl::StrCat("kolo-ctl: ", e.what(),
                              "\nRun with --help for more information."));
  } catch (const std::exception& e) {
    return Error(absl::StrCat("kolo-ctl: ", e.what()));
  }
  return std::nullopt;
}

// Sets `o`'s interval and stall threshold from `texts`; "" on success, else
// the message.
std::string ApplyTexts(const StatusTexts& texts, CtlOptions& o) {
  if (!texts.interval.empty()) {
    double s = 0;
    if (!absl::SimpleAtod(texts.interval, &s) ||
        !(absl::Seconds(s) >= kMinInterval) ||
        !(absl::Seconds(s) <= kMaxInterval)) {
      return absl::StrCat(
          "kolo-ctl: --interval must be a number of seconds from ",
          absl::ToDoubleSeconds(kMinInterval), " to ",
          absl::ToDoubleSeconds(kMaxInterval), ", got '", texts.interval, "'");
    }
    o.interval = absl::Seconds(s);
  }
  if (!texts.stall_check.empty()) {
    if (absl::Status st =
            SetKnobFromFlag(knobs::kStallCheck, texts.stall_check, o.knobs);
        !st.ok()) {
      return absl::StrCat("kolo-ctl: ", st.message());
    }
  }
  return "";
}

// "" when `o` names a coordinator and a job, else the message.
std::string CheckTarget(const CtlOptions& o) {
  if (o.coordinator.empty()) {
    return "kolo-ctl: which coordinator? give --coordinator HOST:PORT or set "
           "KOLO_COORDINATOR (kolorun and kolo-coordinator print the address "
           "they listen on)";
  }
  if (std::string bad = CheckAddress(o.coordinator); !bad.empty()) {
    return absl::StrCat("kolo-ctl: ", bad);
  }
  if (o.job_id.empty()) return "kolo-ctl: --job-id must not be empty";
  return "";
}

}  // namespace

ParseOutcome ParseCtlArgs(int argc, const char* const* argv, EnvLookup env) {
  if (std::optional<ParseOutcome> refused = RefuseEarly(argc, argv)) {
    return *std::move(refused);
  }

  CtlOptions o;
  o.coordinator = Env(env, "KOLO_COORDINATOR");
  if (std::string job = Env(env, "KOLO_JOB_ID"); !job.empty()) o.job_id = job;
  const Knob* const stall_knobs[] = {&knobs::kStallCheck};
  if (absl::Status st = SetKnobsFromEnv(stall_knobs, env, o.knobs); !st.ok()) {
    return Error(absl::StrCat("kolo-ctl: ", st.message()));
  }

  CLI::App app(
      "kolo-ctl: a read-only view of a running kolo job, from its "
      "coordinator's Status RPC",
      "kolo-ctl");
  app.set_version_flag("--version",
                       absl::StrCat("kolo-ctl (kolo) ", kVersionString,
                                    ", protocol ", kProtocolVersion));
  app.require_subcommand(1);
  app.footer(kFooter);
  StatusTexts texts;
  AddStatusCommand(app, o, texts);
  AddMetricsCommand(app, o);
  if (std::optional<ParseOutcome> done = RunParser(app, argc, argv)) {
    return *std::move(done);
  }
  for (const std::string& error : {ApplyTexts(texts, o), CheckTarget(o)}) {
    if (!error.empty()) return Error(error);
  }
  absl::StatusOr<tls::TlsFiles> tls_files =
      tls::TlsFilesFromFlagsOrEnvironment(o.tls_files, env);
  if (!tls_files.ok()) {
    return Error(absl::StrCat("kolo-ctl: ", tls_files.status().message()));
  }
  o.tls_files = *std::move(tls_files);

  ParseOutcome out;
  out.kind = ParseOutcome::Kind::kRun;
  out.options = std::move(o);
  return out;
}

}  // namespace kolo::ctl
