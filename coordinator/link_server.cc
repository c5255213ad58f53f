#include "coordinator/link_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/framing.h"
#include "common/log.h"
#include "common/net.h"
#include "common/rate_limited_log.h"
#include "common/socket_util.h"
#include "common/version.h"

namespace kolo::coordinator {
namespace {

constexpr uint64_t kListenerTag = 0;
constexpr uint64_t kWakeTag = ~0ull;
constexpr uint64_t kLocalListenerTag = ~0ull - 1;
// A link whose worker reads nothing while this much is queued is dropped.
constexpr size_t kMaxQueuedBytes = size_t{256} << 20;
// What an unauthenticated peer may make the coordinator hold.
constexpr size_t kMaxHandshakeBytes = size_t{64} << 10;

std::shared_ptr<spdlog::logger> Log() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("link"));
  return *logger;
}

std::string ErrnoText(int err) { return std::strerror(err); }

// The process at the other end of a local (Unix) socket, for messages: "a
// local socket (pid P, uid U)" from SO_PEERCRED, or "a local socket" when
// the kernel does not say.
std::string LocalPeer(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
      len != sizeof(cred) || cred.pid <= 0) {
    return "a local socket";
  }
  return absl::StrCat("a local socket (pid ", cred.pid, ", uid ", cred.uid,
                      ")");
}

}  // namespace

struct LinkServer::Conn {
  enum class State { kHello, kProof, kBound };
  uint64_t id = 0;  // the epoll tag
  net::UniqueFd fd;
  // For messages: "ip:port", or a local socket's process (LocalPeer).
  std::string peer;
  bool local = false;  // came on the local (Unix) listener
  State state = State::kHello;
  absl::Time opened;
  FrameDecoder in;
  std::string out;        // bytes not yet taken by the socket
  bool want_out = false;  // EPOLLOUT registered
  std::unique_ptr<auth::ServerHandshake> handshake;
  std::string worker_id;
  uint64_t epoch = 0;
  // What the Hello claimed, checked once the peer proved the secret.
  std::string job_id;
  uint64_t incarnation = 0;
  SessionId session = 0;
  std::unique_ptr<tls::TlsStream> tls;  // under TLS; over fd

  ssize_t Recv(char* buf, size_t n) {
    return tls != nullptr ? tls->Recv(buf, n) : ::recv(fd.get(), buf, n, 0);
  }
  ssize_t Send(const char* buf, size_t n) {
    return tls != nullptr
               ? tls->Send(buf, n)
               : ::send(fd.get(), buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  // The key of its refusal lines' rate limit (LogRefusal): its host, or one
  // key for every local process.
  std::string RefusalKey() const { return local ? "a local socket" : peer; }
  // Why the last call failed: TLS's words, or errno's.
  std::string Error(int err) const {
    return tls != nullptr && !tls->error().empty() ? tls->error()
                                                   : ErrnoText(err);
  }
};

LinkServer::LinkServer(LinkServerOptions options, net::UniqueFd listener,
                       net::UniqueFd local_listener, net::UniqueFd epoll,
                       net::UniqueFd wake, int port)
    : options_(std::move(options)),
      listener_(std::move(listener)),
      local_listener_(std::move(local_listener)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)),
      port_(port) {}

LinkServer::~LinkServer() { Stop(); }

absl::StatusOr<std::unique_ptr<LinkServer>> LinkServer::Listen(
    LinkServerOptions options) {
  const std::string where =
      options.bind_host.find(':') != std::string::npos
          ? absl::StrCat("[", options.bind_host, "]:", options.port)
          : absl::StrCat(options.bind_host, ":", options.port);
  auto fail = [&](absl::string_view what) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen for negotiation links on ", where, ": ", what));
  };
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(options.port);
  if (int rc = ::getaddrinfo(options.bind_host.c_str(), port_text.c_str(),
                             &hints, &found);
      rc != 0 || found == nullptr) {
    return fail(::gai_strerror(rc));
  }
  net::SockAddr addr;
  std::memcpy(&addr.storage, found->ai_addr, found->ai_addrlen);
  addr.len = found->ai_addrlen;
  ::freeaddrinfo(found);
  net::UniqueFd fd(::socket(addr.storage.ss_family,
                            SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return fail(ErrnoText(errno));
  int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage),
             addr.len) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    return fail(ErrnoText(errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return fail(ErrnoText(errno));
  }
  const int port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  net::UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  net::UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (ep.get() < 0 || wake.get() < 0) return fail(ErrnoText(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag;
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) {
    return fail(ErrnoText(errno));
  }
  ev.data.u64 = kWakeTag;
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) {
    return fail(ErrnoText(errno));
  }
  // Workers on this host (in this network namespace) connect here instead:
  // the same links without the TCP/IP stack. Without it they use the port.
  net::UniqueFd local;
  if (absl::StatusOr<net::UniqueFd> l =
          net::ListenLocal(net::LocalLinkName(port));
      l.ok()) {
    ev.data.u64 = kLocalListenerTag;
    if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, l->get(), &ev) == 0) {
      local = std::move(*l);
    }
  } else {
    Log()->info("{}; workers on this host use TCP port {} instead",
                std::string(l.status().message()), port);
  }
  std::shared_ptr<const tls::TlsContext> tls;
  if (options.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<const tls::TlsContext>> made =
        tls::TlsContext::Make(*options.tls, tls::TlsContext::Role::kServer);
    if (!made.ok()) return fail(made.status().message());
    tls = *std::move(made);
  }
  auto server = std::unique_ptr<LinkServer>(
      new LinkServer(std::move(options), std::move(fd), std::move(local),
                     std::move(ep), std::move(wake), port));
  server->tls_ = std::move(tls);
  return server;
}

absl::Status LinkServer::Start(BindFn bind, MessageFn on_message,
                               TimerFn on_timer) {
  bind_ = std::move(bind);
  on_message_ = std::move(on_message);
  on_timer_ = std::move(on_timer);
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void LinkServer::Loop() {
  link_thread_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  epoll_event events[64];
  absl::Time next_timer = absl::InfiniteFuture();
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    // At most 500 ms (handshake expiry, Stop), less when a timer is due
    // sooner; rounded up so that the timer is due when the wait ends.
    int timeout_ms = 500;
    if (next_timer != absl::InfiniteFuture()) {
      const absl::Duration left = next_timer - absl::Now();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Microseconds(left + absl::Microseconds(999)) / 1000, 0,
          500));
    }
    int n = ::epoll_wait(epoll_.get(), events, 64, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      Log()->error("epoll_wait: {}; negotiation links stop", ErrnoText(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) {
        uint64_t v;
        (void)!::read(wake_.get(), &v, sizeof(v));
      } else if (tag == kListenerTag) {
        Accept(listener_.get());
      } else if (tag == kLocalListenerTag) {
        Accept(local_listener_.get());
      } else {
        if ((events[i].events & EPOLLOUT) != 0) {
          MutexLock lock(&mu_);
          auto it = conns_.find(tag);
          if (it != conns_.end() && !Flush(*it->second)) {
            CloseLocked(tag, "its link broke while sending");
          }
        }
        if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
          OnReadable(tag);
        }
      }
    }
    const absl::Time now = absl::Now();
    CloseExpired(now);
    if (on_timer_) next_timer = on_timer_(now);
  }
}

void LinkServer::Accept(int listener) {
  const bool local = listener == local_listener_.get();
  while (true) {
    int fd =
        ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        Log()->warn("accept on the link port: {}", ErrnoText(errno));
      }
      return;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = net::UniqueFd(fd);
    conn->peer = local ? LocalPeer(fd) : net::PeerAddress(fd);
    conn->local = local;
    conn->opened = absl::Now();
    if (!local) (void)net::SetNoDelay(fd);
    if (tls_ != nullptr) {
      absl::StatusOr<std::unique_ptr<tls::TlsStream>> stream =
          tls::TlsStream::Make(tls_, fd);
      if (!stream.ok()) {
        Log()->warn("cannot start TLS on the link from {}: {}", conn->peer,
                    std::string(stream.status().message()));
        continue;
      }
      conn->tls = *std::move(stream);
    }
    MutexLock lock(&mu_);
    const uint64_t id = next_id_++;
    conn->id = id;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      Log()->warn("cannot watch the link from {}: {}", conn->peer,
                  ErrnoText(errno));
      continue;
    }
    conns_.emplace(id, std::move(conn));
  }
}

void LinkServer::OnReadable(uint64_t id) {
  std::vector<proto::WorkerMessage> messages;
  std::string broke;  // why the link ends after its messages, if it does
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    char buf[64 * 1024];
    // At most 1 MiB per call (epoll is level-triggered: the rest comes next
    // round), so that Send() never waits long behind a burst.
    size_t taken = 0;
    while (broke.empty() && taken < (size_t{1} << 20)) {
      ssize_t n = c.Recv(buf, sizeof(buf));
      if (n > 0) {
        c.in.Append(buf, static_cast<size_t>(n));
        taken += static_cast<size_t>(n);
        if (c.state != Conn::State::kBound &&
            c.in.buffered() > kMaxHandshakeBytes) {
          broke = "more than 64 KiB before its handshake ended";
        }
        continue;
      }
      if (n == 0) {
        broke = "the worker closed it";
      } else if (errno == EINTR) {
        continue;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        broke = c.Error(errno);
      }
      break;
    }
    while (true) {
      absl::StatusOr<std::optional<std::string>> frame = c.in.Next();
      if (!frame.ok()) {
        broke = std::string(frame.status().message());
        break;
      }
      if (!frame->has_value()) break;
      proto::WorkerMessage& msg = messages.emplace_back();
      if (!msg.ParseFromString(**frame)) {
        messages.pop_back();
        broke = "an unreadable message";
        break;
      }
    }
  }
  for (const proto::WorkerMessage& msg : messages) {
    std::optional<SessionId> session;
    {
      MutexLock lock(&mu_);
      auto it = conns_.find(id);
      if (it == conns_.end()) return;  // refused or unbound meanwhile
      if (it->second->state == Conn::State::kBound) {
        session = it->second->session;
      }
    }
    if (session.has_value()) {
      on_message_(*session, msg);
    } else {
      Handshake(id, msg);
    }
  }
  if (!broke.empty()) {
    MutexLock lock(&mu_);
    CloseLocked(id, broke);
  }
}

void LinkServer::RefuseLocked(uint64_t id, Conn& c,
                              proto::Refusal::Reason reason,
                              const std::string& message, bool proven) {
  proto::CoordinatorMessage out;
  out.mutable_refusal()->set_reason(reason);
  if (proven || reason == proto::Refusal::VERSION_MISMATCH) {
    Log()->warn("refused the negotiation link of worker {} from {}: {}",
                c.worker_id.empty() ? std::string("?") : c.worker_id, c.peer,
                message);
    out.mutable_refusal()->set_message(message);
  } else {
    // Nothing about the job for a peer that has not proven the secret.
    LogRefusal(*Log(), c.RefusalKey(),
               absl::StrCat("refused an unauthenticated negotiation link from ",
                            c.peer, ": ", message));
    out.mutable_refusal()->set_reason(proto::Refusal::AUTH_FAILED);
    out.mutable_refusal()->set_message(
        std::string(auth::kUnauthenticatedRefusal));
  }
  QueueLocked(c, out);
  (void)Flush(c);
  CloseLocked(id, "refused");
}

void LinkServer::Handshake(uint64_t id, const proto::WorkerMessage& msg) {
  std::string worker_id;
  uint64_t epoch = 0;
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    if (c.state == Conn::State::kHello) {
      ChallengeLocked(id, c, msg);
      return;
    }
    if (!CheckProofLocked(id, c, msg)) return;
    worker_id = c.worker_id;
    epoch = c.epoch;
  }
  // The core's lock is taken in bind_: call it without ours.
  absl::StatusOr<SessionId> session = bind_(worker_id, epoch);
  MutexLock lock(&mu_);
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  BindLocked(id, c, worker_id, epoch, session);
}

void LinkServer::ChallengeLocked(uint64_t id, Conn& c,
                                 const proto::WorkerMessage& msg) {
  if (!msg.has_hello()) {
    RefuseLocked(id, c, proto::Refusal::PROTOCOL_ERROR,
                 "expected a Hello first", /*proven=*/false);
    return;
  }
  if (msg.hello().protocol_version() != kProtocolVersion) {
    RefuseLocked(
        id, c, proto::Refusal::VERSION_MISMATCH,
        absl::StrCat("protocol version ", msg.hello().protocol_version(),
                     " but this coordinator speaks ", kProtocolVersion),
        /*proven=*/false);
    return;
  }
  // The job and the incarnation are checked after the proof, which
  // covers the job id the peer claims.
  c.worker_id = msg.hello().worker_id();
  c.epoch = msg.fence().epoch();
  c.job_id = msg.hello().job_id();
  c.incarnation = msg.fence().incarnation();
  c.handshake = std::make_unique<auth::ServerHandshake>(
      options_.secret, c.job_id, c.worker_id, msg.hello().client_nonce());
  proto::CoordinatorMessage out;
  out.mutable_fence()->set_incarnation(options_.incarnation);
  out.mutable_fence()->set_epoch(c.epoch);
  out.mutable_challenge()->set_server_nonce(c.handshake->server_nonce());
  out.mutable_challenge()->set_server_proof(c.handshake->server_proof());
  QueueLocked(c, out);
  c.state = Conn::State::kProof;
  if (!Flush(c)) CloseLocked(id, "its link broke during the handshake");
}

bool LinkServer::CheckProofLocked(uint64_t id, Conn& c,
                                  const proto::WorkerMessage& msg) {
  absl::Status verified = msg.has_proof()
                              ? c.handshake->Verify(msg.proof().mac())
                              : absl::InvalidArgumentError("expected a Proof");
  if (!verified.ok()) {
    RefuseLocked(id, c, proto::Refusal::AUTH_FAILED,
                 absl::StrCat("worker ", c.worker_id,
                              ": authentication "
                              "failed: ",
                              verified.message()),
                 /*proven=*/false);
    return false;
  }
  if (c.job_id != options_.job_id) {
    RefuseLocked(
        id, c, proto::Refusal::WRONG_JOB,
        absl::StrCat("job '", c.job_id, "' but this coordinator runs job '",
                     options_.job_id, "'"),
        /*proven=*/true);
    return false;
  }
  if (c.incarnation != options_.incarnation) {
    RefuseLocked(id, c, proto::Refusal::FENCED,
                 "fenced: from another coordinator incarnation",
                 /*proven=*/true);
    return false;
  }
  return true;
}

void LinkServer::BindLocked(uint64_t id, Conn& c, const std::string& worker_id,
                            uint64_t epoch,
                            const absl::StatusOr<SessionId>& session) {
  proto::CoordinatorMessage out;
  out.mutable_fence()->set_incarnation(options_.incarnation);
  out.mutable_fence()->set_epoch(epoch);
  if (!session.ok()) {
    Log()->warn("refused the negotiation link of worker {} from {}: {}",
                worker_id, c.peer, std::string(session.status().message()));
    out.mutable_refusal()->set_reason(proto::Refusal::FENCED);
    out.mutable_refusal()->set_message(std::string(session.status().message()));
    QueueLocked(c, out);
    (void)Flush(c);
    CloseLocked(id, "refused");
    return;
  }
  if (auto old = bound_.find(*session); old != bound_.end()) {
    CloseLocked(old->second, "the worker opened a new link");
  }
  c.state = Conn::State::kBound;
  c.session = *session;
  bound_[*session] = id;
  out.mutable_link_ready();
  QueueLocked(c, out);
  if (!Flush(c)) {
    CloseLocked(id, "its link broke during the handshake");
    return;
  }
  Log()->info("negotiation link of worker {} bound (from {})", worker_id,
              c.peer);
}

void LinkServer::QueueLocked(Conn& conn,
                             const google::protobuf::MessageLite& msg) {
  AppendFrame(msg.SerializeAsString(), &conn.out);
}

bool LinkServer::Flush(Conn& conn) {
  size_t off = 0;
  bool ok = true;
  while (off < conn.out.size()) {
    ssize_t n = conn.Send(conn.out.data() + off, conn.out.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      ok = false;
      break;
    }
  }
  conn.out.erase(0, off);
  if (!ok || conn.out.size() > kMaxQueuedBytes) return false;
  const bool want_out = !conn.out.empty();
  if (want_out != conn.want_out) {
    epoll_event ev{};
    ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0u);
    ev.data.u64 = conn.id;
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conn.fd.get(), &ev);
    conn.want_out = want_out;
  }
  return true;
}

bool LinkServer::Send(SessionId session, const proto::CoordinatorMessage& msg) {
  MutexLock lock(&mu_);
  auto b = bound_.find(session);
  if (b == bound_.end()) return false;
  const uint64_t id = b->second;
  Conn& c = *conns_.at(id);
  const bool idle = c.out.empty();
  QueueLocked(c, msg);
  if (!Flush(c)) {
    CloseLocked(id, "its link broke while sending");
    // Only a message that did not start to leave can go another way.
    return !idle;
  }
  return true;
}

void LinkServer::Unbind(SessionId session) {
  MutexLock lock(&mu_);
  auto b = bound_.find(session);
  if (b != bound_.end()) CloseLocked(b->second, "its Session ended");
}

void LinkServer::CloseLocked(uint64_t id, const std::string& why) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.state == Conn::State::kBound) {
    auto b = bound_.find(c.session);
    if (b != bound_.end() && b->second == id) bound_.erase(b);
    Log()->info("negotiation link of worker {} closed: {}", c.worker_id, why);
  } else if (why != "refused") {
    // Garbage or an idle connection on the port: someone may be knocking.
    LogRefusal(*Log(), c.RefusalKey(),
               absl::StrCat("negotiation link from ", c.peer,
                            " closed before it was bound: ", why));
  }
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  conns_.erase(it);  // closes the socket
}

void LinkServer::CloseExpired(absl::Time now) {
  MutexLock lock(&mu_);
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : conns_) {
    if (c->state != Conn::State::kBound &&
        now - c->opened > options_.handshake_timeout) {
      expired.push_back(id);
    }
  }
  for (uint64_t id : expired) {
    CloseLocked(id,
                absl::StrCat("no handshake within ",
                             absl::FormatDuration(options_.handshake_timeout)));
  }
}

void LinkServer::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  listener_.Reset();  // later connections are refused at once
  local_listener_.Reset();
  MutexLock lock(&mu_);
  bound_.clear();
  conns_.clear();
}

}  // namespace kolo::coordinator
