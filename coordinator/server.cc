// CoordinatorServer::Start: the gRPC server around CoordinatorService, a tick
// thread for heartbeats and silence detection, and the waits of server.h.
#include "coordinator/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/socket_util.h"
#include "common/unique_fd.h"
#include "coordinator/grpc_gate.h"
#include "coordinator/link_server.h"
#include "coordinator/service.h"
#include "coordinator/worker_links.h"

namespace kolo::coordinator {
namespace {

uint64_t RandomIncarnation() {
  uint64_t v = 0;
  while (v == 0) {  // 0 means "no incarnation yet" on the wire
    std::string bytes = auth::RandomBytes(sizeof(v));
    std::memcpy(&v, bytes.data(), sizeof(v));
  }
  return v;
}

// Tries `address` before gRPC binds it (as gRPC does: SO_REUSEADDR), so
// that a taken port is said plainly, with `options.listen.port_hint`, rather
// than in gRPC's own error line on stderr. Other failures are left to gRPC.
absl::Status CheckPortFree(const std::string& address,
                           const std::string& hint) {
  absl::StatusOr<net::SockAddr> sa = net::ResolveAddress(address);
  if (!sa.ok()) return absl::OkStatus();
  net::UniqueFd fd(
      ::socket(sa->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::OkStatus();
  const int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa->storage),
             sa->len) == 0 ||
      errno != EADDRINUSE) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", address,
                   ": the port is taken (another program listens there)",
                   hint.empty() ? "" : "; ", hint));
}

// The job's core options, with the facts of this start: its incarnation and
// the negotiation link port (0: none).
CoreOptions MakeCoreOptions(const ServerOptions& options, uint64_t incarnation,
                            int link_port) {
  CoreOptions core = options.core;
  core.incarnation = incarnation;
  core.link_port = link_port;
  return core;
}

class ServerImpl final : public CoordinatorServer {
 public:
  ServerImpl(const ServerOptions& options, uint64_t incarnation,
             std::unique_ptr<WorkerLinks> links)
      : options_(options),
        incarnation_(incarnation),
        links_(std::move(links)),
        service_(MakeCoreOptions(options, incarnation, links_->port())) {}

  ~ServerImpl() override { Shutdown(true, "the coordinator was destroyed"); }

  absl::Status Listen() {
    std::string address =
        options_.listen.bind_host.find(':') != std::string::npos
            ? absl::StrCat("[", options_.listen.bind_host,
                           "]:", options_.listen.port)
            : absl::StrCat(options_.listen.bind_host, ":",
                           options_.listen.port);
    if (options_.listen.port != 0) {
      absl::Status free = CheckPortFree(address, options_.listen.port_hint);
      if (!free.ok()) return free;
    }
    auto fail = [&](absl::string_view why) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", address, ": ", why,
                       options_.listen.port_hint.empty() ? "" : "; ",
                       options_.listen.port_hint));
    };
    if (absl::Status st = ListenGated(); !st.ok()) return fail(st.message());
    service_.SetWakeHook([this] {
      // The link thread picks up a deadline its own message set.
      if (links_->OnLinkThread()) return;
      MutexLock lock(&mu_);
      wake_ = true;
      tick_cv_.SignalAll();
    });
    tick_thread_ = std::thread([this] { TickLoop(); });
    (void)links_->Start(
        [this](const std::string& worker_id, uint64_t epoch) {
          return service_.BindLink(worker_id, epoch);
        },
        [this](SessionId id, const proto::WorkerMessage& message) {
          service_.OnLinkMessage(id, message);
        },
        [this](absl::Time now) { return service_.TickIfDue(now); });
    service_.SetLinks(*links_);
    GetLogger("coordinator")
        ->info(
            "listening on {}:{}{} (job {}, expecting {} workers; "
            "negotiation links on port {})",
            options_.listen.bind_host, port_,
            options_.listen.tls.has_value() ? " with TLS" : "",
            options_.core.job_id, options_.core.expected_size, links_->port());
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  uint64_t incarnation() const override { return incarnation_; }
  proto::StatusReply Status() const override {
    return service_.core().Status();
  }
  std::string Metrics() const override { return service_.core().Metrics(); }

  absl::Status WaitForEpoch(absl::Time deadline) override {
    service_.WaitFor(
        [](const CoordinatorCore& c) { return c.epoch_formed() || c.ended(); },
        deadline);
    const CoordinatorCore& core = service_.core();
    if (core.epoch_formed()) return absl::OkStatus();
    if (core.ended()) {
      return absl::AbortedError(absl::StrCat(
          "the job ended before epoch 1 formed: ", core.end_reason()));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "epoch 1 did not form in time: ", core.DescribeMissing(),
        "; check that every worker was started and reaches this coordinator"));
  }

  absl::Status WaitUntilEnded(absl::Time deadline) override {
    service_.WaitFor(
        [](const CoordinatorCore& c) {
          return c.ended() || c.every_member_left();
        },
        deadline);
    const CoordinatorCore& core = service_.core();
    if (core.ended()) {
      if (core.ended_in_failure()) return absl::AbortedError(core.end_reason());
      return absl::OkStatus();
    }
    if (core.every_member_left()) return absl::OkStatus();
    if (!core.epoch_formed()) {
      return absl::DeadlineExceededError(
          absl::StrCat("the job has not ended: epoch 1 has not formed (",
                       core.DescribeMissing(), ")"));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "the job has not ended; still in: ", core.DescribeStillIn()));
  }

  void EndJob(bool failure, const std::string& reason,
              const std::string& failed_worker) override {
    if (killed_.load()) return;
    service_.EndJob(failure, reason, failed_worker);
  }

  void Kill() override {
    {
      MutexLock lock(&mu_);
      if (shut_down_) return;
      shut_down_ = true;
      tick_cv_.SignalAll();
    }
    killed_.store(true);
    service_.Silence();  // the streams it breaks are no losses
    GetLogger("coordinator")
        ->warn("killed (fault injection): every stream breaks, no JobEnd");
    if (tick_thread_.joinable()) tick_thread_.join();
    service_.DetachLinks();
    links_->Stop();
    if (gate_ != nullptr) gate_->Stop();  // connects are refused from now
    if (server_ != nullptr) {
      // A deadline of now cancels every call in flight: the streams break.
      server_->Shutdown(std::chrono::system_clock::now());
      server_->Wait();
    }
  }

  void Shutdown(bool failure, const std::string& reason) override {
    {
      MutexLock lock(&mu_);
      if (shut_down_) return;
      shut_down_ = true;
      tick_cv_.SignalAll();
    }
    if (tick_thread_.joinable()) tick_thread_.join();
    if (server_ == nullptr) {
      if (gate_ != nullptr) gate_->Stop();
      links_->Stop();
      return;
    }
    // JobEnd to everyone, then give the streams a moment to drain before the
    // server cancels what is left.
    service_.EndJob(failure, reason);
    service_.WaitForNoSessions(absl::Now() + absl::Milliseconds(500));
    // No new connection from here on; under TLS the relay still carries the
    // last bytes of those gRPC has until it is done with them.
    if (gate_ != nullptr) gate_->StopAccepting();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
    server_->Wait();
    if (gate_ != nullptr) gate_->Stop();
    if (!service_.WaitForNoSessions(absl::Now() + absl::Seconds(2))) {
      GetLogger("coordinator")
          ->error("Session streams still open 3 s after shutdown");
    }
    service_.DetachLinks();
    links_->Stop();
  }

 private:
  // The gate owns the port (no SO_REUSEPORT: a second coordinator fails
  // instead of sharing it) and hands proven-to-be-HTTP/2 connections over;
  // under TLS it runs the handshakes and relays the bytes (grpc_gate.h).
  absl::Status ListenGated() {
    GrpcGateOptions gate;
    gate.bind_host = options_.listen.bind_host;
    gate.port = options_.listen.port;
    gate.handshake_timeout = options_.listen.handshake_timeout;
    gate.max_unproven_per_host = options_.listen.max_unauthenticated_per_host;
    gate.max_unproven = options_.listen.max_unauthenticated;
    gate.tls = options_.listen.tls;
    absl::StatusOr<std::unique_ptr<GrpcGate>> listening =
        GrpcGate::Listen(gate);
    if (!listening.ok()) return listening.status();
    gate_ = *std::move(listening);
    port_ = gate_->port();
    service_.SetGate(gate_.get());
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) {
      return absl::UnavailableError("the gRPC server did not start");
    }
    gate_->Start([server = server_.get()](int fd) {
      grpc::AddInsecureChannelFromFd(server, fd);
    });
    return absl::OkStatus();
  }

  void TickLoop() {
    absl::Duration period =
        std::max(options_.core.heartbeat_interval / 2, absl::Milliseconds(10));
    absl::Time next_periodic = absl::Now() + period;
    while (true) {
      // The service's deadline is read before taking mu_ (lock order:
      // service, then this); a deadline set meanwhile raises wake_.
      absl::Time due = std::min(next_periodic, service_.NextWake());
      {
        MutexLock lock(&mu_);
        while (!shut_down_ && !wake_ && absl::Now() < due) {
          tick_cv_.WaitWithDeadline(&mu_, due);
        }
        if (shut_down_) break;
        if (wake_) {
          wake_ = false;
          continue;  // re-read the service's deadline
        }
      }
      absl::Time now = absl::Now();
      if (now >= next_periodic) next_periodic = now + period;
      service_.Tick(now);
    }
  }

  const ServerOptions options_;
  const uint64_t incarnation_;
  int port_ = 0;  // set once in Listen()
  // Before service_: the service's core is told the link port. Never null
  // (a NoWorkerLinks when the links are off).
  std::unique_ptr<WorkerLinks> links_;
  CoordinatorService service_;
  std::unique_ptr<grpc::Server> server_;
  // After server_: destroyed first (its thread hands connections to it).
  std::unique_ptr<GrpcGate> gate_;
  std::thread tick_thread_;
  std::atomic<bool> killed_{false};  // Kill() ran

  Mutex mu_;
  CondVar tick_cv_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // the service's deadline moved
};

}  // namespace

void SetServerKnobs(const KnobValues& knobs, ServerOptions& options) {
  CoreOptions& core = options.core;
  core.heartbeat_interval = knobs.heartbeat_interval;
  core.heartbeat_timeout = knobs.heartbeat_timeout;
  core.negotiator.cycle_time = knobs.cycle_time;
  core.negotiator.stall_check = knobs.stall_check;
  core.negotiator.stall_shutdown = knobs.stall_shutdown;
  core.elastic_timeout = knobs.elastic_timeout;
}

ServerOptions ServerOptionsFromKnobs(const KnobValues& knobs) {
  ServerOptions options;
  SetServerKnobs(knobs, options);
  return options;
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const ServerOptions& options) {
  if (options.core.expected_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the coordinator needs at least 1 expected worker, got ",
                     options.core.expected_size));
  }
  if (options.core.secret.empty()) {
    return absl::InvalidArgumentError(
        "the coordinator needs a job secret; give one with KOLO_SECRET_FILE");
  }
  const uint64_t incarnation = RandomIncarnation();
  std::unique_ptr<WorkerLinks> links = std::make_unique<NoWorkerLinks>();
  if (options.listen.negotiation_links) {
    LinkServerOptions lo;
    lo.bind_host = options.listen.bind_host;
    lo.job_id = options.core.job_id;
    lo.secret = options.core.secret;
    lo.incarnation = incarnation;
    lo.handshake_timeout = options.listen.handshake_timeout;
    lo.tls = options.listen.tls;  // the links run TLS too
    absl::StatusOr<std::unique_ptr<LinkServer>> listening =
        LinkServer::Listen(lo);
    if (!listening.ok()) {
      // The stream still carries negotiation: slower, but the job runs.
      GetLogger("coordinator")
          ->warn("{}; negotiation stays on the Session streams",
                 std::string(listening.status().message()));
    } else {
      links = std::move(*listening);
    }
  }
  auto server =
      std::make_unique<ServerImpl>(options, incarnation, std::move(links));
  absl::Status st = server->Listen();
  if (!st.ok()) return st;
  return std::unique_ptr<CoordinatorServer>(std::move(server));
}

}  // namespace kolo::coordinator
