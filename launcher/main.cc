// kolorun: starts a kolo job — an embedded coordinator plus N workers — and
// supervises it to its end. See launcher/args.cc (UsageText) for the flags and
// launcher/supervisor.h for what ends a job.
//
// Threads: the main thread does all of kolorun's own work (it spawns the
// worker guards, which must come from one long-lived thread, and runs the
// supervisor's poll loop); the embedded coordinator brings gRPC's threads and
// its tick thread.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/net.h"
#include "common/version.h"
#include "coordinator/server.h"
#include "launcher/args.h"
#include "launcher/command_line.h"
#include "launcher/guard.h"
#include "launcher/spawn.h"
#include "launcher/supervisor.h"
#include "worker_lib/config.h"

extern char** environ;

namespace kolo::launcher {
namespace {

// The address workers dial: --coordinator-addr; 127.0.0.1 when every worker
// is local; else this machine's address toward the first remote host, or its
// host name when that host does not resolve (fake names under a template).
std::string CoordinatorHost(const LaunchOptions& options,
                            const std::vector<WorkerPlan>& plan) {
  if (!options.coordinator_addr.empty()) return options.coordinator_addr;
  if (AllLocal(plan)) return "127.0.0.1";
  for (const WorkerPlan& w : plan) {
    if (w.mode == SpawnMode::kLocal) continue;
    absl::StatusOr<std::string> addr = net::LocalAddressToward(w.host, 22);
    if (addr.ok()) return *addr;
    break;
  }
  return net::KernelHostName();
}

CoordinatorView Probe(coordinator::CoordinatorServer& server) {
  CoordinatorView view;
  proto::StatusReply reply = server.Status();
  view.connected = reply.workers_size();
  for (const proto::WorkerStatus& w : reply.workers()) {
    if (w.state() != proto::MEMBER_STATE_AUTHENTICATING)
      view.joined.insert(w.worker_id());
  }
  if (reply.phase() == "forming") {
    view.phase = CoordinatorView::Phase::kForming;
  } else if (reply.phase() == "running" || reply.phase() == "recovering" ||
             reply.phase() == "short") {
    view.phase = CoordinatorView::Phase::kRunning;
  } else {
    absl::Status ended = server.WaitUntilEnded(absl::Now());
    if (ended.ok()) {
      view.phase = CoordinatorView::Phase::kEndedOk;
    } else if (absl::IsAborted(ended)) {
      view.phase = CoordinatorView::Phase::kEndedFailure;
      view.reason = std::string(ended.message());
      view.failed_worker = reply.failed_worker();
    } else {
      view.phase = CoordinatorView::Phase::kRunning;
    }
  }
  return view;
}

int Main(int argc, char** argv) {
  sigset_t blocked;
  BlockSupervisorSignals(&blocked);  // before any thread exists

  std::map<std::string, std::string> env;
  std::vector<std::string> environ_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    environ_strings.emplace_back(*e);
    const std::string& kv = environ_strings.back();
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  absl::StatusOr<LaunchOptions> parsed =
      ParseArgs(std::vector<std::string>(argv + 1, argv + argc), env);
  if (!parsed.ok()) {
    std::fprintf(stderr, "kolorun: %s\nRun 'kolorun --help' for usage.\n",
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  const LaunchOptions& options = *parsed;
  if (options.help) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (options.version) {
    std::printf("kolorun (kolo) %s, protocol %u\n", kVersionString,
                kProtocolVersion);
    return 0;
  }
  SetLogIdentity("kolorun");
  // --log-level, else KOLO_LOG_LEVEL, else HOROVOD_LOG_LEVEL, else warn
  // (ParseArgs checked it).
  if (absl::Status st = SetLogLevel(options.knobs.log_level); !st.ok()) {
    std::fprintf(stderr, "kolorun: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  auto log = GetLogger("kolorun");
  // kolorun reads a few of the variables the workers read and passes them
  // all on: a misspelt one is worth a word before the job starts.
  for (const std::string& w : worker::UnknownVariableWarnings(
           worker::EnvMap(env.begin(), env.end()))) {
    log->warn("{}", w);
  }

  std::vector<WorkerPlan> plan = PlanWorkers(options, net::KernelHostName());
  const std::string secret = auth::RandomHex(32);
  const std::string job_id = absl::StrCat("kolo-", auth::RandomHex(4));

  coordinator::ServerOptions server_options =
      coordinator::ServerOptionsFromKnobs(options.knobs);
  server_options.bind_host = AllLocal(plan) ? "127.0.0.1" : "0.0.0.0";
  server_options.port = 0;
  server_options.expected_size = options.np;
  server_options.job_id = job_id;
  server_options.secret = secret;
  server_options.elastic = options.elastic();
  server_options.min_size = std::max(1, options.min_np);
  server_options.max_size = options.max_np;
  server_options.reset_limit = options.reset_limit;
  absl::StatusOr<std::unique_ptr<coordinator::CoordinatorServer>> server =
      coordinator::CoordinatorServer::Start(server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "kolorun: cannot start the coordinator: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  JobInfo job;
  job.job_id = job_id;
  job.coordinator =
      net::HostPort{CoordinatorHost(options, plan), (*server)->port()}
          .ToString();
  job.size = options.np;
  job.start_timeout = options.knobs.start_timeout;
  if (options.log_level_given) job.log_level = options.knobs.log_level;
  job.cycle_time = options.knobs.cycle_time;
  job.stall_check = options.knobs.stall_check;
  job.stall_shutdown = options.knobs.stall_shutdown;
  job.elastic = options.elastic();
  log->info("job {}: {} workers, coordinator at {}", job_id, options.np,
            job.coordinator);

  char cwd_buf[4096];
  std::string cwd =
      ::getcwd(cwd_buf, sizeof(cwd_buf)) != nullptr ? cwd_buf : "/";
  EnvList forwarded = ForwardedEnv(environ_strings);
  std::vector<WorkerLaunch> launches;
  for (const WorkerPlan& w : plan) {
    WorkerLaunch l;
    l.plan = w;
    EnvList worker_env = WorkerEnv(job, w);
    if (w.mode == SpawnMode::kLocal) {
      std::map<std::string, std::string> merged = env;
      for (const auto& [k, v] : worker_env) merged[k] = v;
      merged["KOLO_SECRET"] = secret;
      for (const auto& [k, v] : merged)
        l.spec.env.push_back(absl::StrCat(k, "=", v));
      l.spec.argv = LaunchArgv(options, w, {}, cwd);
    } else {
      // The launching shell sees kolorun's environment, minus the secret;
      // the worker gets its variables through `env` and the secret on stdin.
      for (const auto& [k, v] : env) {
        if (k != "KOLO_SECRET") l.spec.env.push_back(absl::StrCat(k, "=", v));
      }
      EnvList remote_env = forwarded;
      remote_env.insert(remote_env.end(), worker_env.begin(), worker_env.end());
      l.spec.argv = LaunchArgv(options, w, remote_env, cwd);
      l.spec.stdin_line = secret;
    }
    launches.push_back(std::move(l));
  }

  SupervisorOptions sup_options;
  sup_options.start_timeout = options.knobs.start_timeout;
  sup_options.coordinator_address = job.coordinator;
  sup_options.elastic = options.elastic();
  coordinator::CoordinatorServer& coord = **server;
  sup_options.end_job = [&coord](const std::string& reason,
                                 const std::string& failed_worker) {
    coord.EndJob(true, reason, failed_worker);
  };
  Supervisor supervisor(sup_options, std::move(launches),
                        [&coord] { return Probe(coord); });
  int code = supervisor.Run();
  // Every worker is gone: end the coordinator's sessions and stop it.
  coord.Shutdown(code != 0, code != 0 ? supervisor.failure_reason()
                                      : "the job is complete");
  return code;
}

}  // namespace
}  // namespace kolo::launcher

int main(int argc, char** argv) {
  // Guard mode comes first: nothing else of kolorun runs in a guard.
  if (argc > 1 && std::strcmp(argv[1], kolo::launcher::kGuardFlag) == 0) {
    return kolo::launcher::RunGuard(argc, argv);
  }
  return kolo::launcher::Main(argc, argv);
}
