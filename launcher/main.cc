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
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/fd_limit.h"
#include "common/log.h"
#include "common/net.h"
#include "common/version.h"
#include "coordinator/event_log.h"
#include "coordinator/metrics_http.h"
#include "coordinator/server.h"
#include "launcher/args.h"
#include "launcher/check_build.h"
#include "launcher/command_line.h"
#include "launcher/ctl_access.h"
#include "launcher/discovery.h"
#include "launcher/embedded_coordinator.h"
#include "launcher/fault_driver.h"
#include "launcher/fault_report.h"
#include "launcher/guard.h"
#include "launcher/job_tls.h"
#include "launcher/line_prefixer.h"
#include "launcher/spawn.h"
#include "launcher/supervisor.h"
#include "worker_lib/config.h"

extern char** environ;

namespace kolo::launcher {
namespace {

// The address workers dial: --coordinator-addr; the IPv4 address of the
// first --network-interface (`iface_addr`, "" without one); 127.0.0.1 when
// every worker is local; else this machine's address toward the first remote
// host, or its host name when that host does not resolve (fake names under a
// template).
std::string CoordinatorHost(const LaunchOptions& options,
                            const std::vector<WorkerPlan>& plan,
                            const std::string& iface_addr) {
  if (!options.coordinator_addr.empty()) return options.coordinator_addr;
  if (!iface_addr.empty()) return iface_addr;
  if (AllLocal(plan)) return "127.0.0.1";
  for (const WorkerPlan& w : plan) {
    if (w.mode == SpawnMode::kLocal) continue;
    absl::StatusOr<std::string> addr = net::LocalAddressToward(w.host, 22);
    if (addr.ok()) return *addr;
    break;
  }
  return net::KernelHostName();
}

// What every worker's GuardSpec is built from.
struct SpawnContext {
  const LaunchOptions* options = nullptr;
  const std::map<std::string, std::string>* env = nullptr;  // kolorun's
  EnvList forwarded;  // to remote workers (ForwardedEnv)
  EnvList user;       // to every worker: UserEnv (flags' variables, -x)
  JobInfo job;
  std::string secret;
  EnvList tls_env;  // KOLO_TLS_* (launcher/job_tls.h); empty: no TLS
  std::string cwd;
  std::string kernel_hostname;
  const FaultDriver* faults = nullptr;  // null: no --fault
};

// The command and environment of `w` (its mode is worked out here). In
// order, later settings winning: kolorun's environment (local workers: all
// of it; remote ones: ForwardedEnv), then c.user (worker_vars, -x), then the
// worker's own variables (WorkerEnv, fault injection), then the secret.
GuardSpec BuildSpec(const SpawnContext& c, WorkerPlan w) {
  w.mode = ModeFor(*c.options, w.host, c.kernel_hostname);
  GuardSpec spec;
  EnvList worker_env = WorkerEnv(c.job, w);
  if (c.faults != nullptr) {
    for (auto& kv : c.faults->WorkerEnv()) worker_env.push_back(std::move(kv));
  }
  for (const auto& kv : c.tls_env) worker_env.push_back(kv);
  if (w.mode == SpawnMode::kLocal) {
    std::map<std::string, std::string> merged = *c.env;
    for (const auto& [k, v] : c.user) merged[k] = v;
    for (const auto& [k, v] : worker_env) merged[k] = v;
    merged["KOLO_SECRET"] = c.secret;
    for (const auto& [k, v] : merged)
      spec.env.push_back(absl::StrCat(k, "=", v));
    spec.argv = LaunchArgv(*c.options, w, {}, c.cwd);
  } else {
    // The launching shell sees kolorun's environment, minus the secret;
    // the worker gets its variables through `env` and the secret on stdin.
    for (const auto& [k, v] : *c.env) {
      if (k != "KOLO_SECRET") spec.env.push_back(absl::StrCat(k, "=", v));
    }
    EnvList remote_env = c.forwarded;
    OverlayEnv(remote_env, c.user);
    OverlayEnv(remote_env, worker_env);
    spec.argv = LaunchArgv(*c.options, w, remote_env, c.cwd);
    spec.stdin_line = c.secret;
    // Linux takes at most 128 KiB in one argument (MAX_ARG_STRLEN): past
    // it the shell cannot be started (status 127), here or on the host.
    constexpr size_t kMaxArgument = 128 * 1024;
    if (spec.argv.back().size() >= kMaxArgument) {
      GetLogger("kolorun")->warn(
          "the command that starts worker {} is {} bytes, over Linux's limit "
          "of {} for one argument: kolorun's environment, which remote "
          "workers get on that command, is too large (unset its biggest "
          "variables)",
          w.worker_id, spec.argv.back().size(), kMaxArgument);
    }
  }
  return spec;
}

// --host-discovery-script: its first answer decides the hosts and how many
// workers start (-np, else every slot; at most --max-np). A script that
// fails is fatal (kolorun exits 2); one that offers fewer slots than
// --min-np (none included) starts what it offers and the job waits for more
// (Supervisor: a short start).
absl::Status DiscoverHosts(LaunchOptions& options) {
  absl::StatusOr<std::vector<HostSlots>> hosts =
      RunDiscoveryScript(options.discovery_script, options.slots_per_host);
  if (!hosts.ok()) return hosts.status();
  int64_t slots = 0;
  for (const HostSlots& h : *hosts) slots += h.slots;
  int64_t start =
      options.np_given ? std::min<int64_t>(options.np, slots) : slots;
  if (options.max_np > 0) start = std::min<int64_t>(start, options.max_np);
  if (start < options.min_np) {
    GetLogger("kolorun")->warn(
        "the host discovery script '{}' offers {} slot(s), fewer than "
        "--min-np {}: starting {} and waiting up to {} for more hosts",
        options.discovery_script, slots, options.min_np, start,
        absl::FormatDuration(std::max(options.knobs.start_timeout,
                                      options.knobs.elastic_timeout)));
  } else if (options.np_given && start < options.np) {
    GetLogger("kolorun")->warn(
        "starting {} of the -np {} workers (the discovered slots); hosts that "
        "appear later get workers",
        start, options.np);
  }
  options.hosts = *std::move(hosts);
  options.np = static_cast<int>(start);
  return absl::OkStatus();
}

// The runtime side of horovodrun's flags, before any worker starts: -x and
// the flags' worker variables must not set what kolorun owns; every
// --network-interface must exist here with an IPv4 address (`iface_addr`
// gets the first one's); --output-filename's directory is created.
absl::Status CheckRuntimeOptions(const LaunchOptions& options,
                                 std::string& iface_addr) {
  if (absl::Status st = CheckUserVariables(options); !st.ok()) return st;
  for (const std::string& iface : options.network_interfaces) {
    absl::StatusOr<std::string> addr = net::InterfaceAddress(iface);
    if (!addr.ok()) {
      // net's message starts "KOLO_IFACE=<iface>: " (the worker's view).
      std::string why(addr.status().message());
      const std::string lead = absl::StrCat("KOLO_IFACE=", iface, ": ");
      if (absl::StartsWith(why, lead)) why.erase(0, lead.size());
      return absl::InvalidArgumentError(
          absl::StrCat("--network-interface ", iface, ": ", why));
    }
    if (iface_addr.empty()) iface_addr = *addr;
  }
  if (!options.output_dir.empty()) {
    if (absl::Status st = CreateOutputDir(options.output_dir); !st.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--output-filename: ", st.message()));
    }
  }
  return absl::OkStatus();
}

// The supervisor's view of the coordinator. While a killed one waits to be
// started again (kill-coordinator:for=), the job runs on: the workers wait
// for it.
CoordinatorView Probe(EmbeddedCoordinator& server) {
  CoordinatorView view;
  if (server.down()) {
    view.phase = CoordinatorView::Phase::kRunning;
    return view;
  }
  proto::StatusReply reply = server.Status();
  view.connected = reply.workers_size();
  for (const proto::WorkerStatus& w : reply.workers()) {
    if (w.state() != proto::MEMBER_STATE_AUTHENTICATING)
      view.joined.insert(w.worker_id());
  }
  for (const proto::LostWorker& lost : reply.lost()) {
    view.evicted.emplace(lost.worker_id(),
                         static_cast<int>(lost.incarnation()));
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

// kolorun's environment: by name, and as the "NAME=value" strings.
struct Environment {
  std::map<std::string, std::string> vars;
  std::vector<std::string> strings;
};

Environment ReadEnvironment() {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    env.strings.emplace_back(*e);
    const std::string& kv = env.strings.back();
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env.vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// --help, --version and --check-build: prints the answer and returns true.
bool AnswerInfoFlag(const LaunchOptions& options) {
  if (options.help) {
    std::fputs(UsageText().c_str(), stdout);
    return true;
  }
  if (options.version) {
    std::printf("kolorun (kolo) %s, protocol %u\n", kVersionString,
                kProtocolVersion);
    return true;
  }
  if (options.check_build) {
    PrintCheckBuild();
    return true;
  }
  return false;
}

// Everything before the coordinator starts: the notices, logging, the
// descriptor limit, a word on misspelt variables, then what the workers get
// from kolorun's flags (variables kolorun owns, the interfaces, the output
// directory) and the discovered hosts. An error means exit 2.
absl::Status Prepare(LaunchOptions& options,
                     const std::map<std::string, std::string>& env,
                     std::string& iface_addr) {
  // horovodrun flags and HOROVOD_* variables kolo accepts but does not need.
  for (const std::string& notice : options.notices) {
    std::fprintf(stderr, "kolorun: %s\n", notice.c_str());
  }
  SetLogIdentity("kolorun");
  // --log-level, else KOLO_LOG_LEVEL, else HOROVOD_LOG_LEVEL, else warn
  // (ParseArgs checked it).
  if (absl::Status st = SetLogLevel(options.knobs.log_level); !st.ok()) {
    return st;
  }
  // Before the coordinator and the workers' pipes: a flood of connections
  // must not starve the job of descriptors (issue 39).
  RaiseOpenFileLimitAndLog("kolorun");
  // kolorun reads a few of the variables the workers read and passes them
  // all on: a misspelt one is worth a word before the job starts.
  for (const std::string& w : worker::UnknownVariableWarnings(
           worker::EnvMap(env.begin(), env.end()))) {
    GetLogger("kolorun")->warn("{}", w);
  }
  if (absl::Status st = CheckRuntimeOptions(options, iface_addr); !st.ok()) {
    return st;
  }
  if (!options.discovery_script.empty()) return DiscoverHosts(options);
  return absl::OkStatus();
}

// The job's identity, fixed before the coordinator starts.
struct JobIdentity {
  std::string job_id;
  std::string secret;
  int first_size = 1;  // the first epoch's size
};

// Starts the embedded coordinator. With a discovery script, hosts that
// appear later may be remote: it listens on every address unless it is
// reached on loopback.
absl::StatusOr<std::unique_ptr<EmbeddedCoordinator>> StartCoordinator(
    const LaunchOptions& options, const std::vector<WorkerPlan>& plan,
    const std::string& iface_addr, const JobIdentity& id,
    std::shared_ptr<coordinator::EventLog> events, const JobTls* tls) {
  const bool loopback_only =
      AllLocal(plan) &&
      (iface_addr.empty() || absl::StartsWith(iface_addr, "127.")) &&
      (options.discovery_script.empty() || options.coordinator_addr.empty() ||
       options.coordinator_addr == "127.0.0.1" ||
       options.coordinator_addr == "localhost");
  coordinator::ServerOptions server_options =
      coordinator::ServerOptionsFromKnobs(options.knobs);
  server_options.listen.bind_host = loopback_only ? "127.0.0.1" : "0.0.0.0";
  server_options.listen.port = 0;
  server_options.core.expected_size = id.first_size;
  server_options.core.job_id = id.job_id;
  server_options.core.secret = id.secret;
  server_options.core.elastic = options.elastic();
  server_options.core.min_size = std::max(1, options.min_np);
  server_options.core.max_size = options.max_np;
  server_options.core.reset_limit = options.reset_limit;
  server_options.core.events = std::move(events);
  if (tls != nullptr) server_options.listen.tls = tls->material();
  absl::StatusOr<std::shared_ptr<coordinator::Autotuner>> autotuner =
      coordinator::MakeAutotuner(options.autotune,
                                 server_options.core.negotiator);
  if (!autotuner.ok()) return autotuner.status();
  server_options.core.autotuner = *std::move(autotuner);
  return EmbeddedCoordinator::Start(std::move(server_options));
}

// What every worker is told of the job.
JobInfo MakeJobInfo(const LaunchOptions& options, const JobIdentity& id,
                    const std::string& coordinator_address) {
  JobInfo job;
  job.job_id = id.job_id;
  job.coordinator = coordinator_address;
  job.size = id.first_size;
  job.knobs = options.knobs;
  job.log_level_given = options.log_level_given;
  job.elastic = options.elastic();
  if (!options.network_interfaces.empty()) {
    job.iface = options.network_interfaces.front();
  }
  return job;
}

// --events: the log the coordinator and the fault driver share. Under
// --fault it keeps its events for the fault report, in memory alone when no
// file is asked for; else it stays null when not asked for. False, after
// saying why, when it cannot be opened.
bool OpenEventLog(const LaunchOptions& options,
                  std::shared_ptr<coordinator::EventLog>& events) {
  const bool keep = !options.faults.empty();
  if (options.events.empty()) {
    if (keep) events = coordinator::EventLog::InMemory();
    return true;
  }
  auto opened = coordinator::EventLog::Open(options.events, keep);
  if (!opened.ok()) {
    std::fprintf(stderr, "kolorun: cannot start the coordinator: %s\n",
                 std::string(opened.status().message()).c_str());
    return false;
  }
  events = *std::move(opened);
  return true;
}

// The --events log's `fault` event of a fault kolorun fired or skipped.
std::function<void(const FaultRecord&)> FaultEventWriter(
    std::shared_ptr<coordinator::EventLog> events) {
  return [events = std::move(events)](const FaultRecord& r) {
    const bool fired = r.state == FaultRecord::State::kFired;
    events->Write(fired ? r.fired_at : absl::Now(), "fault", r.epoch,
                  {{"id", r.fault.id},
                   {"kind", std::string(FaultKindName(r.fault.spec.kind))},
                   {"spec", FaultSpecText(r.fault.spec)},
                   {"state", fired ? "fired" : "skipped"},
                   {"fired_by", "kolorun"},
                   {"worker_id", r.worker_id},
                   {"incarnation", r.incarnation},
                   {"rank", r.rank},
                   {"detail", r.detail}});
  };
}

// --fault: the driver fires kolorun's faults and gathers the report; its
// events go to a fresh directory (`fault_dir`). Null, after saying why, when
// that directory cannot be created.
std::unique_ptr<FaultDriver> StartFaultDriver(
    const LaunchOptions& options, EmbeddedCoordinator* coord,
    const std::shared_ptr<coordinator::EventLog>& events,
    std::string& fault_dir) {
  char dir_template[] = "/tmp/kolo-faults-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::fprintf(stderr,
                 "kolorun: cannot create a directory for the fault "
                 "events in /tmp: %s\n",
                 std::strerror(errno));
    return nullptr;
  }
  fault_dir = dir_template;
  FaultDriver::Options fo;
  fo.specs = options.faults;
  fo.seed = options.fault_seed;
  fo.events_path = fault_dir + "/events.jsonl";
  fo.origin = absl::Now();
  fo.job_view = [coord] {
    JobView view;
    proto::StatusReply reply = coord->Status();
    view.epoch = reply.epoch();
    for (const proto::WorkerStatus& w : reply.workers()) {
      if (w.state() == proto::MEMBER_STATE_MEMBER && w.rank() >= 0) {
        view.rank_of[w.worker_id()] = w.rank();
        ++view.size;
      }
    }
    return view;
  };
  fo.kill_coordinator = [coord] { coord->Kill(); };
  fo.restart_coordinator = [coord] { return coord->Restart(); };
  if (options.min_np > 0) fo.min_members = options.min_np;
  if (events != nullptr) fo.on_settled = FaultEventWriter(events);
  auto faults = std::make_unique<FaultDriver>(std::move(fo));
  for (const FaultRecord& r : faults->records()) {
    GetLogger("kolorun")->info("fault {}: {} (fired by {})", r.fault.id,
                               FaultSpecText(r.fault.spec),
                               r.by_worker ? "the worker" : "kolorun");
  }
  return faults;
}

// The supervisor of the job's workers: elastic (it spawns them as slots
// appear, through `spawn`, which must outlive it) or fixed (`plan`).
std::unique_ptr<Supervisor> MakeSupervisor(const LaunchOptions& options,
                                           const JobInfo& job,
                                           const std::vector<WorkerPlan>& plan,
                                           const SpawnContext& spawn,
                                           EmbeddedCoordinator& coord,
                                           FaultDriver* faults) {
  SupervisorOptions sup_options;
  sup_options.start_timeout = options.knobs.start_timeout;
  sup_options.coordinator_address = job.coordinator;
  sup_options.elastic = options.elastic();
  sup_options.output_dir = options.output_dir;
  sup_options.prefix_timestamp = options.prefix_timestamp;
  sup_options.end_job = [&coord](const std::string& reason,
                                 const std::string& failed_worker) {
    coord.EndJob(true, reason, failed_worker);
  };
  CoordinatorProbe probe = [&coord, faults] {
    if (faults != nullptr && faults->coordinator_gone()) {
      CoordinatorView view;
      view.phase = CoordinatorView::Phase::kEndedFailure;
      view.reason =
          "the coordinator was killed (fault injection: kill-coordinator)";
      return view;
    }
    return Probe(coord);
  };
  if (faults != nullptr) {
    sup_options.on_tick = [faults](absl::Time now,
                                   const std::vector<LiveWorker>& live) {
      faults->Tick(now, live);
    };
    sup_options.next_due = [faults] { return faults->NextDue(); };
    sup_options.on_worker_end = [faults](const LiveWorker& w,
                                         const std::string& what) {
      faults->OnWorkerEnded(w, what);
    };
  }
  if (options.elastic()) {
    ElasticSetup elastic;
    elastic.hosts = options.hosts;
    elastic.initial_workers = options.np;
    elastic.slots.cooldown_lo = options.cooldown_lo;
    elastic.slots.cooldown_hi = options.cooldown_hi;
    elastic.slots.max_workers = options.max_np;
    elastic.discovery_script = options.discovery_script;
    elastic.slots_per_host = options.slots_per_host;
    elastic.discovery_interval = options.discovery_interval;
    elastic.graceful_term = options.graceful_term;
    elastic.min_workers = options.min_np;
    elastic.start_wait = options.knobs.elastic_timeout;
    elastic.make_spec = [&spawn](const WorkerPlan& w) {
      return BuildSpec(spawn, w);
    };
    return std::make_unique<Supervisor>(sup_options, std::move(elastic), probe);
  }
  std::vector<WorkerLaunch> launches;
  for (const WorkerPlan& w : plan) {
    launches.push_back(WorkerLaunch{w, BuildSpec(spawn, w)});
  }
  return std::make_unique<Supervisor>(sup_options, std::move(launches), probe);
}

// After the job ended under --fault: the report (on stderr, and as JSON to
// --fault-report), then the events directory goes.
void ReportFaults(const LaunchOptions& options, FaultDriver& faults,
                  const Supervisor& supervisor, EmbeddedCoordinator& coord,
                  const coordinator::EventLog& events, int code,
                  const std::string& fault_dir) {
  faults.Finish(supervisor.Live());
  ReportInputs report_in;
  report_in.driver = &faults;
  report_in.status = coord.Status();
  report_in.coordinator_restarts = coord.restarts();
  report_in.coordinator_events = events.Kept();
  report_in.exit_code = code;
  report_in.failure_reason = code != 0 ? supervisor.failure_reason() : "";
  const nlohmann::json report = BuildFaultReport(report_in);
  std::fputs(FaultReportText(report).c_str(), stderr);
  if (!options.fault_report.empty()) {
    if (FILE* f = std::fopen(options.fault_report.c_str(), "w")) {
      const std::string text = report.dump(2) + "\n";
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    } else {
      std::fprintf(stderr, "kolorun: cannot write the fault report to %s: %s\n",
                   options.fault_report.c_str(), std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(fault_dir, ec);
}

int Main(int argc, char** argv) {
  sigset_t blocked;
  BlockSupervisorSignals(&blocked);  // before any thread exists

  const Environment env = ReadEnvironment();
  absl::StatusOr<LaunchOptions> parsed =
      ParseArgs(std::vector<std::string>(argv + 1, argv + argc), env.vars);
  if (!parsed.ok()) {
    std::fprintf(stderr, "kolorun: %s\nRun 'kolorun --help' for usage.\n",
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  LaunchOptions& options = *parsed;
  if (AnswerInfoFlag(options)) return 0;
  std::string iface_addr;
  if (absl::Status st = Prepare(options, env.vars, iface_addr); !st.ok()) {
    std::fprintf(stderr, "kolorun: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  auto log = GetLogger("kolorun");
  const std::string kernel_hostname = net::KernelHostName();
  std::vector<WorkerPlan> plan = PlanWorkers(options, kernel_hostname);
  JobIdentity id;
  id.secret = auth::RandomHex(32);
  id.job_id = absl::StrCat("kolo-", auth::RandomHex(4));
  // A short start (fewer slots than --min-np) forms its first epoch once
  // --min-np workers joined.
  id.first_size = std::max({1, options.np, options.min_np});
  // Before the coordinator, which serves with them; removed last.
  absl::StatusOr<std::unique_ptr<JobTls>> job_tls = JobTls::Prepare(
      options, env.vars, AllLocal(plan) && options.discovery_script.empty());
  if (!job_tls.ok()) {
    std::fprintf(stderr, "kolorun: %s\n",
                 std::string(job_tls.status().message()).c_str());
    return 2;
  }
  const JobTls* tls = job_tls->get();
  std::shared_ptr<coordinator::EventLog> events;
  if (!OpenEventLog(options, events)) return 1;
  absl::StatusOr<std::unique_ptr<EmbeddedCoordinator>> server =
      StartCoordinator(options, plan, iface_addr, id, events, tls);
  if (!server.ok()) {
    std::fprintf(stderr, "kolorun: cannot start the coordinator: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  EmbeddedCoordinator& coord = **server;
  // After the server, so it stops first.
  std::unique_ptr<coordinator::MetricsHttpServer> metrics;
  if (options.metrics_port >= 0) {
    auto started = coordinator::MetricsHttpServer::Start(
        options.metrics_address, options.metrics_port,
        [&coord] { return coord.Metrics(); });
    if (!started.ok()) {
      std::fprintf(stderr, "kolorun: %s\n",
                   std::string(started.status().message()).c_str());
      coord.Shutdown(true, "kolorun could not serve metrics");
      return 1;
    }
    metrics = std::move(*started);
  }
  const JobInfo job = MakeJobInfo(
      options, id,
      net::HostPort{CoordinatorHost(options, plan, iface_addr), coord.port()}
          .ToString());
  log->info("job {}: {} workers, coordinator at {}", id.job_id, options.np,
            job.coordinator);
  // kolo-ctl reads the job's state with its secret (read-only).
  // Under TLS it also needs the job's certificates (its --tls-* flags).
  CtlAccess ctl(id.secret, id.job_id, job.coordinator,
                tls != nullptr ? &tls->files() : nullptr);
  if (ctl.path().empty()) {
    log->info("kolo-ctl cannot reach this job: {}", ctl.error());
  } else {
    log->info("job state: {}", ctl.command());
  }

  std::unique_ptr<FaultDriver> faults;
  std::string fault_dir;
  if (!options.faults.empty()) {
    faults = StartFaultDriver(options, &coord, events, fault_dir);
    if (faults == nullptr) {
      coord.Shutdown(true, "kolorun could not set up fault injection");
      return 1;
    }
  }

  char cwd_buf[4096];
  SpawnContext spawn;
  spawn.options = &options;
  spawn.env = &env.vars;
  spawn.forwarded = ForwardedEnv(env.strings);
  spawn.user = UserEnv(options);
  spawn.job = job;
  spawn.secret = id.secret;
  if (tls != nullptr) spawn.tls_env = tls->WorkerEnv();
  spawn.cwd = ::getcwd(cwd_buf, sizeof(cwd_buf)) != nullptr ? cwd_buf : "/";
  spawn.kernel_hostname = kernel_hostname;
  spawn.faults = faults.get();
  std::unique_ptr<Supervisor> supervisor =
      MakeSupervisor(options, job, plan, spawn, coord, faults.get());
  int code = supervisor->Run();
  if (faults != nullptr) {
    ReportFaults(options, *faults, *supervisor, coord, *events, code,
                 fault_dir);
  }
  // Every worker is gone: end the coordinator's sessions and stop it.
  coord.Shutdown(code != 0, code != 0 ? supervisor->failure_reason()
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
