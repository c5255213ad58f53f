#include "worker_lib/session/session_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/socket_util.h"
#include "common/tls_probe.h"
#include "worker_lib/session/session_reactor.h"

namespace kolo::worker {
namespace {

// The start's probe (issue 39): while no coordinator has challenged this
// worker, it checks every kProbeEvery what listens at the coordinator's
// address. Nothing (refused): the coordinator is not up yet, waiting is
// right. A program that does not speak HTTP/2 (gRPC) for
// kNotACoordinatorAfter: another program holds the port (rank 0 then could
// not host the coordinator there), which waiting for the start timeout
// would not change. (gRPC's channel cannot tell: it is READY once TCP
// connects.)
constexpr absl::Duration kProbeEvery = absl::Milliseconds(500);
// How often SessionOptions::give_up is polled while waiting for admission.
constexpr absl::Duration kGiveUpEvery = absl::Milliseconds(100);
constexpr absl::Duration kProbeTimeout = absl::Seconds(1);
constexpr absl::Duration kNotACoordinatorAfter = absl::Seconds(3);
// Between two Sessions of one Connect (MayReconnect).
constexpr absl::Duration kReconnectPause = absl::Milliseconds(100);

enum class Listener { kNone, kHttp2, kOther };

// Waits until `fd` has `events` or `until` passes.
bool PollUntil(int fd, short events, absl::Time until) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(until - absl::Now());
    if (ms < 0) return false;
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(ms));
    if (rc > 0) return true;
    if (rc == 0 || errno != EINTR) return false;
  }
}

// What listens at `addr`: given HTTP/2's client preface and an empty
// SETTINGS frame, an HTTP/2 server (a gRPC server: a kolo coordinator)
// answers with its SETTINGS frame (9 bytes of header, type 4) within
// `timeout`.
Listener ProbeListener(const net::SockAddr& addr, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  absl::StatusOr<net::UniqueFd> fd = net::StartConnect(addr);
  if (!fd.ok() || !PollUntil(fd->get(), POLLOUT, until) ||
      !net::FinishConnect(fd->get()).ok()) {
    return Listener::kNone;
  }
  static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  std::string hello(kPreface, sizeof(kPreface) - 1);
  hello.append({0, 0, 0, 4, 0, 0, 0, 0, 0});  // SETTINGS, no parameters
  if (::send(fd->get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(hello.size())) {
    return Listener::kOther;
  }
  unsigned char header[9];
  size_t got = 0;
  while (got < sizeof(header)) {
    if (!PollUntil(fd->get(), POLLIN, until)) return Listener::kOther;
    const ssize_t n = ::recv(fd->get(), header + got, sizeof(header) - got, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return Listener::kOther;
    got += static_cast<size_t>(n);
  }
  return header[3] == 4 ? Listener::kHttp2 : Listener::kOther;
}

}  // namespace

// ---- Reactor: the blocking calls --------------------------------------------

absl::Status SessionClient::Reactor::NotACoordinator() const {
  const std::string& from = options_.coordinator_source;
  const std::string fix =
      from == "MASTER_ADDR:MASTER_PORT"
          ? "choose a free port in MASTER_PORT (under torchrun, MASTER_PORT is "
            "torchrun's own rendezvous store: set KOLO_COORDINATOR=<rank 0 "
            "host>:<free port> on every worker)"
      : from.empty() ? "choose a free port for the coordinator"
                     : absl::StrCat("choose a free port in ", from,
                                    " (the same on every worker)");
  return absl::UnavailableError(absl::StrCat(
      "something accepts connections at ", options_.coordinator,
      " but it is not a kolo coordinator (it did not answer as a gRPC server "
      "for ",
      absl::FormatDuration(kNotACoordinatorAfter), "; worker ",
      options_.worker_id,
      "): another program holds that port, so rank 0 could not host the "
      "coordinator there (its log says so); ",
      fix));
}

absl::StatusOr<bool> SessionClient::Reactor::ProbeStart(
    const net::SockAddr& addr, absl::Duration timeout) const {
  using Kind = tls::ProbeResult::Kind;
  const std::string who =
      absl::StrCat(Who(), " (worker ", options_.worker_id, ")");
  if (options_.tls == nullptr) {
    // A plaintext worker: does the port answer HTTP/2? Else, TLS?
    if (ProbeListener(addr, timeout) != Listener::kOther) return false;
    const tls::ProbeResult r = tls::ProbeTls(addr, nullptr, timeout);
    if (r.kind == Kind::kRefused || r.kind == Kind::kAccepted ||
        r.kind == Kind::kPeerUnverified) {
      return absl::UnauthenticatedError(absl::StrCat(
          who,
          " requires TLS (it answered with a TLS handshake), and this worker "
          "has no certificates: give it the job's in KOLO_TLS_CERT, "
          "KOLO_TLS_KEY and KOLO_TLS_CA (kolorun --tls does it for its "
          "workers)"));
    }
    return true;
  }
  const tls::ProbeResult r = tls::ProbeTls(addr, options_.tls.get(), timeout);
  switch (r.kind) {
    case Kind::kNoAnswer:
    case Kind::kAccepted:
      return false;
    case Kind::kPeerUnverified:
      return absl::UnauthenticatedError(absl::StrCat(
          who, " presented a TLS certificate this worker does not trust (",
          r.detail,
          "): it is not from the CA in KOLO_TLS_CA, has expired, or "
          "does not name '",
          tls::kJobName,
          "'; check that this worker was "
          "given this job's certificates, not another job's"));
    case Kind::kRefused:
      return absl::UnauthenticatedError(absl::StrCat(
          who, " refused this worker's TLS certificate (", r.detail,
          "): check that KOLO_TLS_CERT and KOLO_TLS_KEY are this job's, from "
          "the CA the coordinator was given, and not expired; the "
          "coordinator's log says why"));
    case Kind::kNotTls: {
      const Listener l = ProbeListener(addr, timeout);
      if (l == Listener::kHttp2) {
        return absl::UnauthenticatedError(absl::StrCat(
            who,
            " does not speak TLS (it answered in plaintext gRPC) and this "
            "worker has TLS certificates (KOLO_TLS_*): give the coordinator "
            "the job's certificates (kolo-coordinator --tls-cert, --tls-key, "
            "--tls-ca; KOLO_TLS_* on a rank 0 that hosts it), or start this "
            "worker without KOLO_TLS_*"));
      }
      // Another program: NotACoordinator says so in time.
      return l == Listener::kOther;
    }
  }
  return false;
}

bool SessionClient::Reactor::MayReconnect() const {
  MutexLock lock(&mu_);
  return !epoch_.membership.has_value() &&
         (verdict_.cause == SessionVerdict::Cause::kLostCoordinator ||
          verdict_.cause == SessionVerdict::Cause::kEndedBeforeAdmission);
}

absl::Status SessionClient::Reactor::WaitForMembership(absl::Time start,
                                                       absl::Time deadline,
                                                       SessionClient& client) {
  // Resolved once for the probe (a host name waits for the system's
  // resolver and its timeouts, as gRPC's own resolution does); without an
  // address there is no probe, only the start deadline.
  const absl::StatusOr<net::SockAddr> addr =
      net::ResolveAddress(options_.coordinator);
  absl::Time other_since = absl::InfiniteFuture();
  while (true) {
    {
      MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      if (epoch_.membership.has_value() || verdict_.given() || now >= deadline)
        break;
      if (options_.give_up && options_.give_up()) {
        Fail(absl::CancelledError(
                 absl::StrCat("worker ", options_.worker_id,
                              " was asked to leave (SIGTERM) before ", Who(),
                              " admitted it: it does not join")),
             SessionVerdict::Cause::kOther);
        break;
      }
      const bool probe = !incarnation_.has_value() && addr.ok();
      absl::Time wake =
          probe ? std::min(deadline, now + kProbeEvery) : deadline;
      if (options_.give_up) wake = std::min(wake, now + kGiveUpEvery);
      while (!epoch_.membership.has_value() && !verdict_.given()) {
        if (cv_.WaitWithDeadline(&mu_, wake)) break;
      }
      if (!probe || incarnation_.has_value() || epoch_.membership.has_value() ||
          verdict_.given())
        continue;
    }
    // Not challenged yet: is another program at the address, or a
    // coordinator that refuses this worker's TLS (or its plaintext)?
    const absl::Duration timeout =
        std::min(kProbeTimeout, deadline - absl::Now());
    absl::StatusOr<bool> other = ProbeStart(*addr, timeout);
    if (!other.ok()) {
      MutexLock lock(&mu_);
      if (!incarnation_.has_value()) {
        Fail(other.status(), SessionVerdict::Cause::kOther);
      }
      continue;
    }
    if (!*other) {
      other_since = absl::InfiniteFuture();
      continue;
    }
    other_since = std::min(other_since, absl::Now());
    if (absl::Now() - other_since >= kNotACoordinatorAfter) {
      MutexLock lock(&mu_);
      if (!incarnation_.has_value())
        Fail(NotACoordinator(), SessionVerdict::Cause::kOther);
    }
  }
  MutexLock lock(&mu_);
  if (verdict_.given()) return verdict_.status;
  if (epoch_.membership.has_value()) {
    client.incarnation_ = *incarnation_;
    return absl::OkStatus();
  }
  std::string waited = Secs(deadline - start);
  absl::Status s =
      incarnation_.has_value()
          ? absl::DeadlineExceededError(absl::StrCat(
                "no membership from ", Who(), " within ", waited,
                " for worker ", options_.worker_id,
                ": waiting for the other workers; raise KOLO_START_TIMEOUT "
                "or check that every worker started"))
          : absl::DeadlineExceededError(absl::StrCat(
                "could not reach ", Who(), " within ", waited, " (worker ",
                options_.worker_id,
                "): check that it runs (kolorun, rank 0 or kolo-coordinator) "
                "and that KOLO_COORDINATOR or MASTER_ADDR/MASTER_PORT point at "
                "it from this host; raise KOLO_START_TIMEOUT if it starts "
                "slowly"));
  Fail(s, SessionVerdict::Cause::kOther);
  return s;
}

absl::StatusOr<std::vector<std::string>> SessionClient::Reactor::Exchange(
    absl::string_view key, absl::string_view value, absl::Duration timeout,
    int32_t process_set) {
  if (key.size() > kMaxExchangeKeyBytes ||
      value.size() > kMaxExchangeValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "control_allgather('", key.substr(0, 64),
        key.size() > 64 ? "...'" : "'", ") on worker ", options_.worker_id,
        ": the key is ", key.size(), " bytes and the value ", value.size(),
        " bytes; it takes keys of at most ", kMaxExchangeKeyBytes,
        " and values of at most ", kMaxExchangeValueBytes,
        " bytes (it is for small control values; send data with the "
        "collectives)"));
  }
  const std::string k(key);
  const absl::Time deadline = absl::Now() + timeout;
  {
    MutexLock lock(&mu_);
    if (verdict_.given()) return verdict_.status;
    if (phase_ != Phase::kMember) {
      return absl::FailedPreconditionError(absl::StrCat(
          "control_allgather('", k, "') on worker ", options_.worker_id,
          ": the session is not running (call it after init() and before "
          "shutdown())"));
    }
    if (epoch_.ended()) return epoch_.error;
    if (exchanges_.contains(k)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "control_allgather('", k, "') is already pending on worker ",
          options_.worker_id, "; use a distinct key per concurrent call"));
    }
    exchanges_[k] = std::nullopt;
    proto::WorkerMessage msg;
    msg.mutable_exchange()->set_key(k);
    msg.mutable_exchange()->set_value(std::string(value));
    msg.mutable_exchange()->set_process_set(process_set);
    Enqueue(std::move(msg));
  }
  MaybeStartWrite(/*from_reaction=*/false);
  MutexLock lock(&mu_);
  while (!exchanges_[k].has_value() && !verdict_.given() && !epoch_.ended()) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  auto it = exchanges_.find(k);
  if (it->second.has_value()) {
    std::vector<std::string> values = std::move(*it->second);
    exchanges_.erase(it);
    return values;
  }
  exchanges_.erase(it);
  if (verdict_.given()) return verdict_.status;
  if (epoch_.ended()) return epoch_.error;
  return absl::DeadlineExceededError(absl::StrCat(
      "control_allgather('", k, "') on worker ", options_.worker_id, " (rank ",
      epoch_.membership->rank(), "): no result from ", Who(), " within ",
      Secs(timeout), ": some rank has not called it with this key"));
}

absl::Status SessionClient::Reactor::Leave(absl::Duration timeout) {
  absl::Status result;
  {
    MutexLock lock(&mu_);
    if (leaving() || phase_ == Phase::kClosing) {
      return absl::OkStatus();
    }
    if (verdict_.given() || stream_.done() ||
        stream_.writes == SessionStream::Writes::kBroken) {
      // Nothing to leave: the job ended or the coordinator is gone, which
      // the caller has been told.
      phase_ = Phase::kClosing;
      return absl::OkStatus();
    }
    phase_ = Phase::kLeaving;
    proto::WorkerMessage msg;
    msg.mutable_leave()->set_reason("shutdown");
    msg.mutable_leave()->set_built_epoch(built_epoch_);
    Enqueue(std::move(msg));
  }
  MaybeStartWrite(/*from_reaction=*/false);
  {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + timeout;
    while (phase_ != Phase::kLeft && !stream_.done() && !verdict_.given()) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    if (phase_ != Phase::kLeft && !verdict_.given()) {
      result = absl::DeadlineExceededError(
          absl::StrCat(Who(), " did not acknowledge the Leave of worker ",
                       options_.worker_id, " within ", Secs(timeout),
                       (stream_.done() ? " (the stream closed)" : "")));
      SessionLog()->warn("{}", std::string(result.message()));
    }
    stream_.RequestClose();
  }
  MaybeStartWrite(/*from_reaction=*/false);
  return result;
}

void SessionClient::Reactor::Abort() {
  {
    MutexLock lock(&mu_);
    if (!leaving()) phase_ = Phase::kClosing;
    if (stream_.done()) return;
  }
  context_.TryCancel();
}

bool SessionClient::Reactor::Close(absl::Duration timeout) {
  // From here on only reactions start operations (a WritesDone requested by
  // Leave may still go out from OnWriteDone); OnDone may come.
  ReleaseHold();
  bool done = false;
  for (int attempt = 0; attempt < 2 && !done; ++attempt) {
    {
      MutexLock lock(&mu_);
      if (!leaving()) phase_ = Phase::kClosing;
      const absl::Time deadline = absl::Now() + timeout;
      while (!stream_.done()) {
        if (cv_.WaitWithDeadline(&mu_, deadline)) break;
      }
      done = stream_.done();
    }
    if (!done && attempt == 0) {
      SessionLog()->warn(
          "{} did not end the Session of worker {} within {}; cancelling it",
          Who(), options_.worker_id, Secs(timeout));
      context_.TryCancel();
    }
  }
  {
    MutexLock lock(&mu_);
    phase_ = Phase::kClosing;  // from here on, losing the coordinator is fine
    Fail(absl::CancelledError(absl::StrCat("worker ", options_.worker_id,
                                           " has shut down its session")),
         SessionVerdict::Cause::kOther);
    stop_thread_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  return done;
}

// ---- SessionClient
// ------------------------------------------------------------

SessionClient::SessionClient(std::unique_ptr<Reactor> reactor)
    : reactor_(std::move(reactor)) {}

absl::StatusOr<std::unique_ptr<SessionClient>> SessionClient::Connect(
    const SessionOptions& options, absl::Time deadline) {
  const absl::Time start = absl::Now();
  while (true) {
    auto client =
        std::make_unique<SessionClient>(std::make_unique<Reactor>(options));
    client->reactor_->Start();
    absl::Status s =
        client->reactor_->WaitForMembership(start, deadline, *client);
    if (s.ok()) return client;
    if (!client->reactor_->MayReconnect() ||
        absl::Now() + kReconnectPause >= deadline) {
      return s;  // ~SessionClient cancels the stream
    }
    // Typically: this worker's init() after shutdown() reached the previous
    // job's coordinator while its host (rank 0) was stopping it.
    SessionLog()->info(
        "worker {}: the coordinator at {} went away before admitting it ({}); "
        "connecting again until the start deadline",
        options.worker_id, options.coordinator, std::string(s.message()));
    client.reset();
    absl::SleepFor(kReconnectPause);
  }
}

SessionClient::~SessionClient() {
  if (reactor_ == nullptr) return;
  if (!shut_down_) reactor_->Abort();
  if (!reactor_->Close(absl::Seconds(5))) {
    // gRPC still holds the reactor: destroying it would be a use after free.
    SessionLog()->error(
        "the Session stream did not end after cancellation; leaking "
        "its reactor");
    (void)reactor_.release();
  }
}

absl::StatusOr<std::vector<std::string>> SessionClient::Exchange(
    absl::string_view key, absl::string_view value, absl::Duration timeout,
    int32_t process_set) {
  if (shut_down_) {
    return absl::FailedPreconditionError(
        absl::StrCat("control_allgather('", key, "') after shutdown()"));
  }
  return reactor_->Exchange(key, value, timeout, process_set);
}

absl::Status SessionClient::Announce(proto::Announce announce) {
  proto::WorkerMessage msg;
  *msg.mutable_announce() = std::move(announce);
  return reactor_->SendMessage(std::move(msg));
}

absl::Status SessionClient::Done(uint64_t seq) {
  proto::WorkerMessage msg;
  msg.mutable_done()->set_seq(seq);
  return reactor_->SendMessage(std::move(msg));
}

absl::Status SessionClient::ReportPeerFault(const absl::Status& error,
                                            absl::Span<const int> peers,
                                            absl::Duration wait) {
  if (!peers.empty()) {  // else no one to judge: only wait for a verdict
    proto::WorkerMessage msg;
    msg.mutable_peer_fault()->mutable_peers()->Add(peers.begin(), peers.end());
    msg.mutable_peer_fault()->set_error(
        std::string(error.message().substr(0, 4096)));
    absl::Status sent = reactor_->SendMessage(std::move(msg));
    if (!sent.ok())
      return sent.code() == absl::StatusCode::kAborted ||
                     sent.code() == absl::StatusCode::kUnavailable
                 ? sent  // the verdict (or the loss) is known
                 : error;
  }
  absl::Status verdict = reactor_->WaitForVerdict(absl::Now() + wait);
  if (!verdict.ok()) return verdict;
  return absl::Status(error.code(),
                      absl::StrCat(error.message(),
                                   " (reported to the coordinator, which "
                                   "declared no worker failed within ",
                                   Secs(wait), ")"));
}

void SessionClient::OnPlan(std::function<void(const proto::Plan&)> sink) {
  reactor_->OnPlan(std::move(sink));
}

absl::Status SessionClient::Shutdown(absl::Duration timeout) {
  if (shut_down_.exchange(true)) return absl::OkStatus();
  absl::Status s = reactor_->Leave(timeout);
  // If gRPC does not let go of the stream, the destructor tries once more.
  (void)reactor_->Close(timeout);
  return s;
}

absl::Status SessionClient::health() const { return reactor_->health(); }

SessionClient::EpochView SessionClient::current() const {
  return reactor_->Current();
}

void SessionClient::MarkEpochBuilt(uint64_t epoch) {
  reactor_->MarkEpochBuilt(epoch);
}

void SessionClient::OnEpochEnd(
    std::function<void(const absl::Status&, uint64_t)> observer) {
  reactor_->OnEpochEnd(std::move(observer));
}

absl::StatusOr<SessionClient::EpochView> SessionClient::WaitForEpochAfter(
    uint64_t epoch, absl::Time deadline) {
  return reactor_->WaitForEpochAfter(epoch, deadline);
}

void SessionClient::OnTerminal(
    std::function<void(const absl::Status&)> observer) {
  reactor_->OnTerminal(std::move(observer));
}

}  // namespace kolo::worker
