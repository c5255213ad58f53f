// How kolorun turns a worker into something to exec: its environment, and
// for ssh and --launcher-cmd workers the shell command that carries that
// environment to the other side and reads the job secret from stdin.
//
// The secret is never part of anything built here: remote and templated
// workers run
//   env K=V... sh -c 'cd "$1"; shift; IFS= read -r KOLO_SECRET;
//                     export KOLO_SECRET; exec "$@"' kolo-worker CWD command...
// and kolorun writes the secret, one line, on their stdin.
//
// Pure functions; thread-safe.
#ifndef KOLO_LAUNCHER_COMMAND_LINE_H_
#define KOLO_LAUNCHER_COMMAND_LINE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/knobs.h"
#include "launcher/args.h"

namespace kolo::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// What every worker of the job is told (besides its own plan).
struct JobInfo {
  std::string job_id;
  std::string coordinator;  // "addr:port" workers dial
  int size = 0;
  // Knobs (common/knobs.h) passed on in their variables: the start timeout
  // (the workers' init() deadline) and the embedded coordinator's
  // negotiation knobs, so that workers see what the job runs with; the log
  // level when `log_level_given`; the elastic timeout (how long a newcomer
  // may wait to be admitted) when `elastic`.
  KnobValues knobs;
  bool log_level_given = false;
  // KOLO_ELASTIC=1 and KOLO_WORKER_INCARNATION (kolorun --min-np).
  bool elastic = false;
  // KOLO_IFACE: the interface whose IPv4 address workers advertise for the
  // data plane (the first of --network-interface); empty: not set.
  std::string iface{};
};

// The KOLO_* variables of one worker, in a fixed order, without the secret.
// KOLO_RANK and KOLO_LOCAL_RANK are the plan's modulo the job's size (an
// elastic worker started later may be numbered past it: its rank is the
// coordinator's to give). Also horovodrun's HOROVOD_RANK, _SIZE,
// _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE and _HOSTNAME, which
// scripts read before init() (the same hints).
EnvList WorkerEnv(const JobInfo& job, const WorkerPlan& worker);

// `s` quoted for a POSIX shell: unchanged when it has only safe characters
// ([A-Za-z0-9_@%+=:,./-]), else in single quotes ('\'' for a quote).
std::string ShellQuote(absl::string_view s);

// The command a remote (ssh) or templated worker runs; see the file comment.
// `env` is carried with `env K=V`; entries named KOLO_SECRET are dropped.
std::string RemoteCommand(const EnvList& env, const std::string& cwd,
                          const std::vector<std::string>& command);

// Replaces every "{host}" in `tmpl` with `host` (shell-quoted).
std::string ExpandTemplate(absl::string_view tmpl, absl::string_view host);

// The argv that starts `worker` (what its guard execs):
//   kLocal:    command
//   kSsh:      /bin/sh -c "<SshCommand> <host> '<remote command>'"
//   kTemplate: /bin/sh -c "<template expanded> <remote command>"
// `remote_env` is what RemoteCommand carries (ignored for kLocal).
std::vector<std::string> LaunchArgv(const LaunchOptions& options,
                                    const WorkerPlan& worker,
                                    const EnvList& remote_env,
                                    const std::string& cwd);

// True for the variables of kolorun's environment that are NOT forwarded to
// remote (ssh, --launcher-cmd) workers. They describe kolorun's own machine,
// shell or login session, which the remote side sets for itself, or they
// must not travel on a command line:
//   KOLO_SECRET           travels on the worker's stdin, never in `env`
//   BASH_FUNC_*           exported bash functions (bash's own encoding)
//   CUDA_VISIBLE_DEVICES  chosen per host
//   HOSTNAME              kolorun's host name, wrong on another host
//   PWD, OLDPWD           kolorun's shell's directories (workers `cd` to
//                         kolorun's working directory themselves)
//   SHLVL, _              kolorun's shell's nesting and last command
//   HOME, USER, LOGNAME,  the login the worker runs under, which ssh sets
//   SHELL, MAIL           (and which may be another account)
//   SSH_CLIENT, SSH_CONNECTION, SSH_TTY, SSH_AUTH_SOCK, SSH_AGENT_PID
//                         kolorun's own ssh session and agent
// Local workers inherit kolorun's whole environment, as before.
bool NotForwarded(absl::string_view name);

// kolorun's environment, from `environ`-style "K=V" strings, less the
// variables NotForwarded names: what remote workers get first.
EnvList ForwardedEnv(const std::vector<std::string>& environ_strings);

// True for the variables kolorun sets for each worker itself (WorkerEnv's
// identity, size and job variables, KOLO_IFACE, KOLO_SECRET, and the knobs
// kolorun runs the coordinator with); -x cannot set them.
bool OwnedByKolorun(absl::string_view name);

// An error naming the first -x (extra_env) or worker variable (worker_vars)
// that sets a variable kolorun owns (OwnedByKolorun); OK otherwise.
absl::Status CheckUserVariables(const LaunchOptions& options);

// `over` applied on top of `base`: a name already in `base` is replaced
// (moved to the end, with the new value), so that every name appears once
// and the last setting wins.
void OverlayEnv(EnvList& base, const EnvList& over);

// What every worker gets from kolorun's flags, local or remote, after the
// forwarded environment and before its own variables: worker_vars (from
// horovodrun's flags), then every -x (extra_env) in order.
EnvList UserEnv(const LaunchOptions& options);

// The ssh command for a remote worker: options.ssh_cmd, then `-p PORT` with
// ssh_port > 0, then `-i FILE` (shell-quoted) with ssh_identity_file.
std::string SshCommand(const LaunchOptions& options);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_COMMAND_LINE_H_
