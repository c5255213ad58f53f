// Acceptor (allreduce/tcp/acceptor.h): one thread polls the listening socket,
// a wake-up eventfd and the connections that have sent nothing yet.
#include "allreduce/tcp/acceptor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "allreduce/tcp/handshake.h"
#include "common/log.h"
#include "common/rate_limited_log.h"
#include "common/socket_util.h"

namespace kolo::tcp {
namespace {

// Most connections taken from the backlog per round, so that the deadlines
// and the hand-over keep running under a flood.
constexpr int kAcceptsPerRound = 256;
// How long the listener rests after accept ran out of descriptors (it stays
// readable: without a rest the thread would spin).
constexpr absl::Duration kOutOfFilesRest = absl::Milliseconds(100);

std::shared_ptr<spdlog::logger> Log() {
  // Never destroyed: the thread may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("transport"));
  return *logger;
}

// The first bytes of every handshake message (handshake.h), big endian.
absl::string_view MagicBytes() {
  static const char bytes[] = {
      static_cast<char>(kHandshakeMagic >> 24),
      static_cast<char>((kHandshakeMagic >> 16) & 0xff),
      static_cast<char>((kHandshakeMagic >> 8) & 0xff),
      static_cast<char>(kHandshakeMagic & 0xff)};
  return absl::string_view(bytes, sizeof(bytes));
}

void Signal(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

void Drain(int fd) {
  uint64_t v;
  (void)!::read(fd, &v, sizeof(v));
}

template <typename T>
void RemoveDead(std::vector<T>& v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](const T& h) { return h.dead; }),
          v.end());
}

}  // namespace

Acceptor::Acceptor(int listen_fd, AcceptorOptions options, net::UniqueFd wake,
                   net::UniqueFd ready)
    : listen_fd_(listen_fd),
      options_(std::move(options)),
      wake_(std::move(wake)),
      ready_(std::move(ready)) {}

Acceptor::~Acceptor() { Stop(); }

absl::StatusOr<std::unique_ptr<Acceptor>> Acceptor::Start(
    int listen_fd, AcceptorOptions options) {
  if (options.max_held < 1 ||
      options.handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "Acceptor: max_held must be >= 1 and handshake_timeout positive");
  }
  if (absl::Status s = net::EnsureNonBlocking(listen_fd); !s.ok()) return s;
  net::UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  net::UniqueFd ready(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid() || !ready.valid()) {
    return absl::InternalError(
        absl::StrCat("Acceptor: eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<Acceptor> a(new Acceptor(listen_fd, std::move(options),
                                           std::move(wake), std::move(ready)));
  a->thread_ = std::thread([p = a.get()] { p->Loop(); });
  return a;
}

void Acceptor::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  Signal(wake_.get());
  if (thread_.joinable()) thread_.join();
  MutexLock lock(&mu_);
  idle_.clear();
  ready_conns_.clear();
}

std::vector<AcceptedConn> Acceptor::Take() {
  MutexLock lock(&mu_);
  std::vector<AcceptedConn> out;
  out.reserve(ready_conns_.size());
  for (Held& h : ready_conns_) out.push_back(std::move(h.conn));
  ready_conns_.clear();
  Drain(ready_.get());
  return out;
}

size_t Acceptor::held() const {
  MutexLock lock(&mu_);
  return idle_.size() + ready_conns_.size();
}

void Acceptor::Drop(const AcceptedConn& c, const std::string& why) {
  LogRefusal(
      *Log(), c.remote,
      absl::StrCat(options_.owner, ": closed a data-plane connection from ",
                   c.remote, ": ", why));
}

void Acceptor::MakeRoomLocked() {
  std::vector<Held>& from = !idle_.empty() ? idle_ : ready_conns_;
  if (from.empty()) return;
  Drop(from.front().conn,
       absl::StrCat("dropped (the oldest ",
                    &from == &idle_ ? "idle one" : "unanswered one",
                    ") to make room: ", options_.max_held,
                    " connections waiting for a handshake, the most held"));
  from.erase(from.begin());
}

absl::Time Acceptor::ExpireLocked(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (std::vector<Held>* list : {&idle_, &ready_conns_}) {
    for (Held& h : *list) {
      const absl::Time due = h.conn.accepted + options_.handshake_timeout;
      if (now < due) {
        next = std::min(next, due);
        continue;
      }
      Drop(h.conn,
           absl::StrCat(list == &idle_ ? "it sent nothing"
                                       : "no mesh took it (no epoch formed)",
                        " within the handshake deadline of ",
                        absl::FormatDuration(options_.handshake_timeout)));
      h.dead = true;
    }
    RemoveDead(*list);
  }
  return next;
}

void Acceptor::AcceptAll() {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    const int fd =
        ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        LogRefusal(*Log(), "accept",
                   absl::StrCat(options_.owner, ": accept on the data port: ",
                                std::strerror(errno)));
        rest_until_ = absl::Now() + kOutOfFilesRest;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        Log()->warn("{}: accept on the data port: {}", options_.owner,
                    std::strerror(errno));
        rest_until_ = absl::Now() + kOutOfFilesRest;
      }
      return;
    }
    Held h;
    h.conn.fd = net::UniqueFd(fd);
    h.conn.remote = net::PeerAddress(fd);
    h.conn.accepted = absl::Now();
    MutexLock lock(&mu_);
    if (idle_.size() + ready_conns_.size() >= options_.max_held) {
      MakeRoomLocked();
    }
    idle_.push_back(std::move(h));
  }
}

void Acceptor::Loop() {
  std::vector<pollfd> pfds;
  while (true) {
    pfds.clear();
    pfds.push_back({wake_.get(), POLLIN, 0});
    const absl::Time now = absl::Now();
    const bool listening = now >= rest_until_;
    pfds.push_back({listening ? listen_fd_ : -1, POLLIN, 0});
    size_t idle_count = 0;
    absl::Time next;
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      next = std::min(ExpireLocked(now),
                      listening ? absl::InfiniteFuture() : rest_until_);
      for (const Held& h : idle_) pfds.push_back({h.conn.fd.get(), POLLIN, 0});
      idle_count = idle_.size();
    }
    // Until the next deadline (rounded up), 1 s at most.
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(next - now + absl::Milliseconds(1)), 0,
        1000));
    const int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n <= 0) continue;  // a timeout, EINTR (or ENOMEM: retried)
    if (pfds[0].revents != 0) Drain(wake_.get());
    {
      MutexLock lock(&mu_);
      bool moved = false;
      // Only this thread adds to or removes from idle_: index i still
      // names the connection polled in slot i + 2.
      for (size_t i = 0; i < idle_count; ++i) {
        if (pfds[i + 2].revents == 0) continue;
        Held& h = idle_[i];
        char head[sizeof(kHandshakeMagic)];
        const ssize_t got =
            ::recv(h.conn.fd.get(), head, sizeof(head), MSG_PEEK);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (got <= 0) {
          Drop(h.conn, got == 0 ? "it closed the connection without a word"
                                : std::strerror(errno));
        } else if (absl::string_view(head, static_cast<size_t>(got)) !=
                   MagicBytes().substr(0, static_cast<size_t>(got))) {
          // Garbage: refused at once, not held for a mesh.
          Drop(h.conn,
               absl::StrCat("it does not speak the data-plane handshake; its "
                            "first bytes: \"",
                            absl::CHexEscape(absl::string_view(
                                head, static_cast<size_t>(got))),
                            "\""));
        } else {
          ready_conns_.push_back(Held{std::move(h.conn), false});
          moved = true;
        }
        h.dead = true;
      }
      RemoveDead(idle_);
      if (moved) Signal(ready_.get());
    }
    if (pfds[1].revents != 0) AcceptAll();
  }
}

}  // namespace kolo::tcp
