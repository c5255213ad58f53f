// GrpcGate (coordinator/grpc_gate.h): one thread polls the listener, a
// wake-up eventfd, the connections whose preface (or, under TLS, whose
// handshake) has not come, and the duplicates of the unproven ones handed to
// gRPC (for their end). Under TLS a TlsRelay's thread moves the bytes.
#include "coordinator/grpc_gate.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "common/log.h"
#include "common/rate_limited_log.h"
#include "common/socket_util.h"
#include "common/tls_stream.h"

namespace kolo::coordinator {
namespace {

// A preface that came in part is looked at again this much later (the rest
// is due at once; the socket stays readable meanwhile).
constexpr absl::Duration kPartialRecheck = absl::Milliseconds(10);
constexpr int kAcceptsPerRound = 256;
constexpr absl::Duration kOutOfFilesRest = absl::Milliseconds(100);

std::shared_ptr<spdlog::logger> GateLog() {
  // Never destroyed: the thread may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("coordinator"));
  return *logger;
}

// "10.0.0.2:5000" -> "ipv4:10.0.0.2:5000", "[::1]:5000" -> "ipv6:[::1]:5000",
// as gRPC writes peers.
std::string GrpcStylePeer(const std::string& address) {
  return absl::StrCat(absl::StartsWith(address, "[") ? "ipv6:" : "ipv4:",
                      address);
}

}  // namespace

struct GrpcGate::Conn {
  // Before the hand-over the socket; after it a duplicate of gRPC's
  // descriptor, kept while unproven (to see its end and to shut it down).
  net::UniqueFd fd;
  // Under TLS, before the hand-over: the handshake over `fd` (declared
  // after it: destroyed first).
  std::unique_ptr<tls::TlsStream> tls;
  bool tls_wants_write = false;
  int grpc_fd = -1;  // the descriptor gRPC owns, once handed over
  bool handed_over = false;
  bool proven = false;
  bool dead = false;   // closed: removed at the end of the round
  std::string remote;  // as gRPC writes peers: "ipv4:10.0.0.2:5000"
  std::string host;    // PeerHost(remote), the key of the per-host cap
  absl::Time accepted;
  absl::Time recheck_at = absl::InfinitePast();  // preface: poll from then
};

GrpcGate::GrpcGate(GrpcGateOptions options, net::UniqueFd listener,
                   net::UniqueFd wake, int port,
                   std::shared_ptr<const tls::TlsContext> tls,
                   std::unique_ptr<TlsRelay> relay)
    : options_(std::move(options)),
      listener_(std::move(listener)),
      wake_(std::move(wake)),
      port_(port),
      tls_(std::move(tls)),
      relay_(std::move(relay)) {}

GrpcGate::~GrpcGate() { Stop(); }

absl::StatusOr<std::unique_ptr<GrpcGate>> GrpcGate::Listen(
    GrpcGateOptions options) {
  if (options.max_unproven < 1 || options.max_unproven_per_host < 1 ||
      options.handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "GrpcGate: the caps must be >= 1 and the handshake timeout positive");
  }
  std::shared_ptr<const tls::TlsContext> tls;
  std::unique_ptr<TlsRelay> relay;
  if (options.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<const tls::TlsContext>> made =
        tls::TlsContext::Make(*options.tls, tls::TlsContext::Role::kServer,
                              "h2");
    if (!made.ok()) return made.status();
    tls = *std::move(made);
    absl::StatusOr<std::unique_ptr<TlsRelay>> started =
        TlsRelay::Start(GateLog());
    if (!started.ok()) return started.status();
    relay = *std::move(started);
  }
  int port = 0;
  absl::StatusOr<net::UniqueFd> listener =
      net::ListenTcp(options.bind_host, options.port, 1024, &port);
  if (!listener.ok()) return listener.status();
  net::UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) {
    return absl::InternalError(
        absl::StrCat("GrpcGate: eventfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<GrpcGate>(
      new GrpcGate(std::move(options), *std::move(listener), std::move(wake),
                   port, std::move(tls), std::move(relay)));
}

void GrpcGate::Start(HandOverFn hand_over) {
  hand_over_ = std::move(hand_over);
  thread_ = std::thread([this] { Loop(); });
}

void GrpcGate::StopAccepting() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  listener_.Reset();
  MutexLock lock(&mu_);
  conns_.clear();  // closes what was not handed over, and the duplicates
}

void GrpcGate::Stop() {
  StopAccepting();
  if (relay_ != nullptr) relay_->Stop();
}

GrpcGate::Conn* GrpcGate::FindLocked(absl::string_view grpc_peer) const {
  int fd = -1;
  absl::string_view rest = grpc_peer;
  const bool by_fd =
      absl::ConsumePrefix(&rest, "fd:") && absl::SimpleAtoi(rest, &fd);
  // The newest first: an older record of the same descriptor is stale.
  for (auto it = conns_.rbegin(); it != conns_.rend(); ++it) {
    Conn& c = **it;
    if (c.dead || !c.handed_over) continue;
    if (by_fd ? c.grpc_fd == fd : c.remote == grpc_peer) return &c;
  }
  return nullptr;
}

void GrpcGate::Proven(absl::string_view grpc_peer) {
  {
    MutexLock lock(&mu_);
    Conn* c = FindLocked(grpc_peer);
    if (c == nullptr || c->proven) return;
    c->proven = true;
    c->fd.Reset();  // gRPC's alone from now on
  }
  // The thread's poll holds the duplicate's socket until it returns: woken,
  // it lets go at once, so that gRPC's close ends the connection (under TLS
  // the relay sees it) without waiting for the poll's timeout.
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

std::string GrpcGate::PeerOf(absl::string_view grpc_peer) const {
  MutexLock lock(&mu_);
  const Conn* c = FindLocked(grpc_peer);
  return c != nullptr ? c->remote : std::string(grpc_peer);
}

size_t GrpcGate::unproven() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& c : conns_) n += (!c->dead && !c->proven) ? 1 : 0;
  return n;
}

void GrpcGate::DropLocked(Conn& c, const std::string& why) {
  // Logged first: whoever sees the close finds the line.
  LogRefusal(*GateLog(), c.remote,
             absl::StrCat("closed an unauthenticated connection to the gRPC "
                          "port from ",
                          c.remote, ": ", why));
  // A handed-over socket is shut down through the duplicate: gRPC reads its
  // end and closes its descriptor (under TLS the relay sees it and closes
  // the TLS connection).
  if (c.handed_over && c.fd.valid()) (void)::shutdown(c.fd.get(), SHUT_RDWR);
  c.tls.reset();
  c.fd.Reset();
  c.dead = true;
}

void GrpcGate::MakeRoomLocked(const std::string& host) {
  for (auto& c : conns_) {
    if (c->dead || c->proven || (!host.empty() && c->host != host)) continue;
    DropLocked(*c, absl::StrCat("the oldest, dropped to make room: ",
                                host.empty() ? options_.max_unproven
                                             : options_.max_unproven_per_host,
                                " unauthenticated connections ",
                                host.empty() ? "in all" : "from its address",
                                " is the most held"));
    return;
  }
}

absl::Time GrpcGate::ExpireLocked(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto& c : conns_) {
    if (c->dead || c->proven) continue;
    const absl::Time due = c->accepted + options_.handshake_timeout;
    if (now < due) {
      next = std::min(next, due);
      continue;
    }
    DropLocked(*c,
               absl::StrCat("no call on it proved the job secret within ",
                            absl::FormatDuration(options_.handshake_timeout),
                            c->handed_over    ? ""
                            : tls_ != nullptr ? " (it never completed the TLS "
                                                "handshake)"
                                              : " (it never began HTTP/2)"));
  }
  return next;
}

void GrpcGate::RemoveDeadLocked() {
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                              [](const auto& c) { return c->dead; }),
               conns_.end());
}

std::optional<absl::string_view> GrpcGate::PeekFirstBytes(
    Conn& c, absl::Span<char> buf, absl::string_view before) {
  const ssize_t n = ::recv(c.fd.get(), buf.data(), buf.size(), MSG_PEEK);
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      DropLocked(c, std::strerror(errno));
    }
    return std::nullopt;
  }
  if (n == 0) {
    DropLocked(c, absl::StrCat("it closed the connection before ", before));
    return std::nullopt;
  }
  return absl::string_view(buf.data(), static_cast<size_t>(n));
}

void GrpcGate::CheckPreface(Conn& c, absl::Time now) {
  char buf[kHttp2Preface.size()];
  const std::optional<absl::string_view> first =
      PeekFirstBytes(c, absl::MakeSpan(buf), "speaking HTTP/2");
  if (!first.has_value()) return;
  const absl::string_view got = *first;
  if (got != kHttp2Preface.substr(0, got.size())) {
    DropLocked(c, absl::StrCat("it does not speak gRPC (HTTP/2); its first "
                               "bytes: \"",
                               absl::CHexEscape(got.substr(0, 16)), "\""));
    return;
  }
  if (got.size() < kHttp2Preface.size()) {
    c.recheck_at = now + kPartialRecheck;
    return;
  }
  const int dup = ::fcntl(c.fd.get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    DropLocked(c, absl::StrCat("dup: ", std::strerror(errno)));
    return;
  }
  c.grpc_fd = c.fd.Release();
  c.fd = net::UniqueFd(dup);
  c.handed_over = true;
}

void GrpcGate::ForgetFdLocked(int fd) {
  for (auto& old : conns_) {
    if (old->handed_over && old->grpc_fd == fd) old->dead = true;
  }
}

void GrpcGate::StartTls(Conn& c) {
  // Its first bytes: a TLS ClientHello opens with a handshake record
  // (type 22); say plainly what else came.
  char buf[kHttp2Preface.size()];
  const std::optional<absl::string_view> first =
      PeekFirstBytes(c, absl::MakeSpan(buf), "its TLS handshake");
  if (!first.has_value()) return;
  const absl::string_view got = *first;
  if (got == kHttp2Preface.substr(0, got.size())) {
    DropLocked(c,
               "it spoke plaintext gRPC (HTTP/2) to a port that takes TLS "
               "only: a worker or kolo-ctl without the job's certificates "
               "(KOLO_TLS_CERT, KOLO_TLS_KEY, KOLO_TLS_CA)?");
    return;
  }
  if (got[0] != 22) {
    DropLocked(c, absl::StrCat("it does not speak TLS; its first bytes: \"",
                               absl::CHexEscape(got.substr(0, 16)), "\""));
    return;
  }
  absl::StatusOr<std::unique_ptr<tls::TlsStream>> stream =
      tls::TlsStream::Make(tls_, c.fd.get());
  if (!stream.ok()) {
    DropLocked(c,
               absl::StrCat("cannot start TLS: ", stream.status().message()));
    return;
  }
  c.tls = *std::move(stream);
}

void GrpcGate::DriveHandshake(Conn& c) {
  if (c.tls == nullptr) {
    StartTls(c);
    if (c.tls == nullptr) return;  // refused, or its first bytes are due
  }
  if (c.tls->Handshake() != 1) {
    if (errno == EAGAIN || errno == EINTR) {
      c.tls_wants_write = c.tls->wants_write();
      return;
    }
    const std::string error = c.tls->error();
    if (absl::StrContains(error, "closed the connection during")) {
      DropLocked(c,
                 "it closed the connection during its TLS handshake (as a "
                 "client that does not trust this coordinator's certificate "
                 "does: one with another job's CA)");
      return;
    }
    DropLocked(c,
               absl::StrCat(
                   "its TLS handshake was refused (", error,
                   absl::StrContains(error, "unsupported protocol")
                       ? "; the port takes TLS 1.3 only"
                       : "",
                   "): a peer without this job's certificate (another job's or "
                   "CA's, expired, none) or with an older TLS"));
    return;
  }
  HandOverTls(c);
}

void GrpcGate::HandOverTls(Conn& c) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   pair) != 0) {
    DropLocked(c, absl::StrCat("socketpair: ", std::strerror(errno)));
    return;
  }
  net::UniqueFd relay_end(pair[0]);
  net::UniqueFd grpc_end(pair[1]);
  ForgetFdLocked(pair[0]);
  ForgetFdLocked(pair[1]);
  const int dup = ::fcntl(grpc_end.get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    DropLocked(c, absl::StrCat("dup: ", std::strerror(errno)));
    return;
  }
  ForgetFdLocked(dup);
  relay_->Add(std::move(c.fd), std::move(c.tls), std::move(relay_end),
              c.remote);
  c.grpc_fd = grpc_end.Release();
  c.fd = net::UniqueFd(dup);
  c.handed_over = true;
}

void GrpcGate::AcceptAll() {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    const int fd = ::accept4(listener_.get(), nullptr, nullptr,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        LogRefusal(
            *GateLog(), "accept",
            absl::StrCat("accept on the gRPC port: ", std::strerror(errno)));
        rest_until_ = absl::Now() + kOutOfFilesRest;
      }
      return;
    }
    (void)net::SetNoDelay(fd);
    auto c = std::make_unique<Conn>();
    c->fd = net::UniqueFd(fd);
    c->remote = GrpcStylePeer(net::PeerAddress(fd));
    c->host = PeerHost(c->remote);
    c->accepted = absl::Now();
    MutexLock lock(&mu_);
    ForgetFdLocked(fd);
    RemoveDeadLocked();
    size_t from_host = 0, all = 0;
    for (const auto& other : conns_) {
      if (other->proven) continue;
      ++all;
      from_host += other->host == c->host ? 1 : 0;
    }
    if (from_host >= options_.max_unproven_per_host) {
      MakeRoomLocked(c->host);
    } else if (all >= options_.max_unproven) {
      MakeRoomLocked("");
    }
    conns_.push_back(std::move(c));
  }
}

void GrpcGate::Loop() {
  std::vector<pollfd> pfds;
  std::vector<Conn*> polled;
  std::vector<int> hand;
  while (true) {
    pfds.clear();
    polled.clear();
    const absl::Time now = absl::Now();
    const bool listening = now >= rest_until_;
    pfds.push_back({wake_.get(), POLLIN, 0});
    pfds.push_back({listening ? listener_.get() : -1, POLLIN, 0});
    absl::Time next = listening ? absl::InfiniteFuture() : rest_until_;
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      next = std::min(next, ExpireLocked(now));
      RemoveDeadLocked();
      // Conn pointers stay valid across the poll: only this thread removes.
      for (auto& c : conns_) {
        if (c->proven) continue;
        if (!c->handed_over && now < c->recheck_at) {
          next = std::min(next, c->recheck_at);
          continue;
        }
        // A duplicate shows the end of the connection (gRPC shut it down,
        // or the peer closed it).
        short events = POLLIN;
        if (c->handed_over) {
          events = POLLRDHUP;
        } else if (c->tls != nullptr && c->tls_wants_write) {
          events = POLLOUT;
        }
        pfds.push_back({c->fd.get(), events, 0});
        polled.push_back(c.get());
      }
    }
    // Until the next deadline (rounded up), 1 s at most.
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(next - now + absl::Milliseconds(1)), 0,
        1000));
    const int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n <= 0) continue;  // a timeout, EINTR (or ENOMEM: retried)
    if (pfds[0].revents != 0) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof(v));
    }
    hand.clear();
    {
      MutexLock lock(&mu_);
      for (size_t i = 0; i < polled.size(); ++i) {
        Conn& c = *polled[i];
        if (pfds[i + 2].revents == 0 || c.dead || c.proven) continue;
        if (c.handed_over) {
          DropLocked(c, "it ended before any call on it proved the job secret");
          continue;
        }
        if (tls_ != nullptr) {
          DriveHandshake(c);
        } else {
          CheckPreface(c, absl::Now());
        }
        if (c.handed_over) hand.push_back(c.grpc_fd);
      }
      RemoveDeadLocked();
    }
    // Without the mutex: gRPC may call back into the service.
    for (int fd : hand) hand_over_(fd);
    if (pfds[1].revents != 0) AcceptAll();
  }
}

}  // namespace kolo::coordinator
