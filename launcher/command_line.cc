#include "launcher/command_line.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace kolo::launcher {
namespace {

// Reads the secret from stdin and execs the worker command; $1 is the working
// directory (a missing one is not fatal: remote hosts may lack it).
constexpr const char* kRemoteScript =
    "cd \"$1\" 2>/dev/null; shift; IFS= read -r KOLO_SECRET; export "
    "KOLO_SECRET; exec \"$@\"";

bool SafeShellChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || absl::StrContains("_@%+=:,./-", c);
}

// The knobs kolorun runs the coordinator with and passes to every worker.
bool KolorunKnobVariable(absl::string_view name) {
  for (const Knob* knob :
       {&knobs::kStartTimeout, &knobs::kCycleTime, &knobs::kStallCheck,
        &knobs::kStallShutdown, &knobs::kElasticTimeout}) {
    if (knob->variable != nullptr && name == knob->variable) return true;
  }
  return false;
}

}  // namespace

bool NotForwarded(absl::string_view name) {
  static constexpr absl::string_view kDenied[] = {"KOLO_SECRET",
                                                  "CUDA_VISIBLE_DEVICES",
                                                  "HOSTNAME",
                                                  "PWD",
                                                  "OLDPWD",
                                                  "SHLVL",
                                                  "_",
                                                  "HOME",
                                                  "USER",
                                                  "LOGNAME",
                                                  "SHELL",
                                                  "MAIL",
                                                  "SSH_CLIENT",
                                                  "SSH_CONNECTION",
                                                  "SSH_TTY",
                                                  "SSH_AUTH_SOCK",
                                                  "SSH_AGENT_PID"};
  if (name.empty() || absl::StartsWith(name, "BASH_FUNC_")) return true;
  return std::find(std::begin(kDenied), std::end(kDenied), name) !=
         std::end(kDenied);
}

bool OwnedByKolorun(absl::string_view name) {
  static constexpr absl::string_view kOwned[] = {
      "KOLO_SECRET",        "KOLO_LAUNCHER",      "KOLO_COORDINATOR",
      "KOLO_JOB_ID",        "KOLO_WORKER_ID",     "KOLO_HOSTNAME",
      "KOLO_RANK",          "KOLO_SIZE",          "KOLO_LOCAL_RANK",
      "KOLO_LOCAL_SIZE",    "KOLO_ELASTIC",       "KOLO_WORKER_INCARNATION",
      "KOLO_IFACE",         "HOROVOD_RANK",       "HOROVOD_SIZE",
      "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
      "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME"};
  return KolorunKnobVariable(name) ||
         std::find(std::begin(kOwned), std::end(kOwned), name) !=
             std::end(kOwned);
}

absl::Status CheckUserVariables(const LaunchOptions& options) {
  for (const auto& [list, what] :
       {std::pair<const std::vector<std::pair<std::string, std::string>>*,
                  const char*>{&options.extra_env, "-x"},
        {&options.worker_vars, "a flag"}}) {
    for (const auto& kv : *list) {
      const std::string& name = kv.first;
      if (!OwnedByKolorun(name)) continue;
      const char* hint = "";
      if (name == "KOLO_IFACE") {
        hint = " (use --network-interface)";
      } else if (KolorunKnobVariable(name)) {
        hint =
            " (use kolorun's flag for it, or set it in kolorun's "
            "environment)";
      }
      return absl::InvalidArgumentError(
          absl::StrCat(what, " sets ", name,
                       ", which kolorun sets for each worker itself", hint));
    }
  }
  return absl::OkStatus();
}

void OverlayEnv(EnvList& base, const EnvList& over) {
  for (const auto& [k, v] : over) {
    base.erase(
        std::remove_if(base.begin(), base.end(),
                       [&k = k](const auto& kv) { return kv.first == k; }),
        base.end());
    base.emplace_back(k, v);
  }
}

EnvList UserEnv(const LaunchOptions& options) {
  EnvList env;
  OverlayEnv(env, options.worker_vars);
  OverlayEnv(env, options.extra_env);
  return env;
}

std::string SshCommand(const LaunchOptions& options) {
  std::string cmd = options.ssh_cmd;
  if (options.ssh_port > 0) absl::StrAppend(&cmd, " -p ", options.ssh_port);
  if (!options.ssh_identity_file.empty()) {
    absl::StrAppend(&cmd, " -i ", ShellQuote(options.ssh_identity_file));
  }
  return cmd;
}

EnvList WorkerEnv(const JobInfo& job, const WorkerPlan& worker) {
  // Elastic workers started after the first epoch (replacements, new slots)
  // may have a number, or a local index, past the size of the first epoch;
  // their ranks come from the coordinator, and these are hints that the
  // worker library requires below KOLO_SIZE.
  const int size = std::max(1, job.size);
  EnvList env = {
      {"KOLO_LAUNCHER", "kolorun"},
      {"KOLO_COORDINATOR", job.coordinator},
      {"KOLO_JOB_ID", job.job_id},
      {"KOLO_WORKER_ID", worker.worker_id},
      {"KOLO_HOSTNAME", worker.host},
      {"KOLO_RANK", absl::StrCat(worker.rank % size)},
      {"KOLO_SIZE", absl::StrCat(job.size)},
      {"KOLO_LOCAL_RANK", absl::StrCat(worker.local_rank % size)},
      {"KOLO_LOCAL_SIZE", absl::StrCat(worker.local_size)},
  };
  // horovodrun's variables, for scripts that read them before init().
  const int cross_size = std::max(1, worker.cross_size);
  for (const auto& [name, value] :
       {std::pair<const char*, std::string>{"HOROVOD_RANK",
                                            absl::StrCat(worker.rank % size)},
        {"HOROVOD_SIZE", absl::StrCat(job.size)},
        {"HOROVOD_LOCAL_RANK", absl::StrCat(worker.local_rank % size)},
        {"HOROVOD_LOCAL_SIZE", absl::StrCat(worker.local_size)},
        {"HOROVOD_CROSS_RANK", absl::StrCat(worker.cross_rank % cross_size)},
        {"HOROVOD_CROSS_SIZE", absl::StrCat(cross_size)},
        {"HOROVOD_HOSTNAME", worker.host}}) {
    env.emplace_back(name, value);
  }
  if (job.elastic) {
    env.emplace_back("KOLO_WORKER_INCARNATION",
                     absl::StrCat(worker.incarnation));
  }
  for (const auto& [knob, value] :
       {std::pair<const Knob*, absl::Duration>{&knobs::kStartTimeout,
                                               job.knobs.start_timeout},
        {&knobs::kCycleTime, job.knobs.cycle_time},
        {&knobs::kStallCheck, job.knobs.stall_check},
        {&knobs::kStallShutdown, job.knobs.stall_shutdown}}) {
    env.emplace_back(knob->variable, KnobVariableText(*knob, value));
  }
  if (job.log_level_given) {
    env.emplace_back(knobs::kLogLevel.variable, job.knobs.log_level);
  }
  if (!job.iface.empty()) env.emplace_back("KOLO_IFACE", job.iface);
  if (job.elastic) {
    env.emplace_back("KOLO_ELASTIC", "1");
    env.emplace_back(
        knobs::kElasticTimeout.variable,
        KnobVariableText(knobs::kElasticTimeout, job.knobs.elastic_timeout));
  }
  return env;
}

std::string ShellQuote(absl::string_view s) {
  if (s.empty()) return "''";
  bool safe = true;
  for (char c : s) safe = safe && SafeShellChar(c);
  if (safe) return std::string(s);
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

std::string RemoteCommand(const EnvList& env, const std::string& cwd,
                          const std::vector<std::string>& command) {
  std::vector<std::string> words = {"env"};
  for (const auto& [k, v] : env) {
    if (k == "KOLO_SECRET") continue;
    words.push_back(ShellQuote(absl::StrCat(k, "=", v)));
  }
  words.push_back("sh");
  words.push_back("-c");
  words.push_back(ShellQuote(kRemoteScript));
  words.push_back("kolo-worker");
  words.push_back(ShellQuote(cwd));
  for (const std::string& c : command) words.push_back(ShellQuote(c));
  return absl::StrJoin(words, " ");
}

std::string ExpandTemplate(absl::string_view tmpl, absl::string_view host) {
  return absl::StrReplaceAll(tmpl, {{"{host}", ShellQuote(host)}});
}

std::vector<std::string> LaunchArgv(const LaunchOptions& options,
                                    const WorkerPlan& worker,
                                    const EnvList& remote_env,
                                    const std::string& cwd) {
  switch (worker.mode) {
    case SpawnMode::kLocal:
      return options.command;
    case SpawnMode::kSsh:
      return {"/bin/sh", "-c",
              absl::StrCat(
                  SshCommand(options), " ", ShellQuote(worker.host), " ",
                  ShellQuote(RemoteCommand(remote_env, cwd, options.command)))};
    case SpawnMode::kTemplate:
      return {
          "/bin/sh", "-c",
          absl::StrCat(ExpandTemplate(options.launcher_cmd, worker.host), " ",
                       RemoteCommand(remote_env, cwd, options.command))};
  }
  return options.command;
}

EnvList ForwardedEnv(const std::vector<std::string>& environ_strings) {
  EnvList env;
  for (const std::string& kv : environ_strings) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    if (NotForwarded(key)) continue;
    env.emplace_back(key, kv.substr(eq + 1));
  }
  return env;
}

}  // namespace kolo::launcher
