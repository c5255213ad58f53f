// TlsRelay (coordinator/tls_relay.h): one thread, poll(2) over a wake-up
// eventfd and the two sockets of every relayed connection.
#include "coordinator/tls_relay.h"

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
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/rate_limited_log.h"

namespace kolo::coordinator {
namespace {

// Buffers moved per direction per connection per wake-up (fairness).
constexpr int kRelayRoundsPerWake = 8;

bool RelayWouldBlock(int e) {
  return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

}  // namespace

struct TlsRelay::Pipe {
  // One direction's bytes: a TLS record's most plaintext (TlsStream::Recv
  // takes a whole one).
  struct Buffer {
    static constexpr size_t kSize = 16 * 1024;
    char data[kSize];
    size_t begin = 0;
    size_t end = 0;
    size_t size() const { return end - begin; }
    void Consumed(size_t n) {
      begin += n;
      if (begin == end) begin = end = 0;
    }
  };

  net::UniqueFd tcp;
  std::unique_ptr<tls::TlsStream> tls;  // over tcp: declared after it
  net::UniqueFd plain;                  // the relay's end of the socketpair
  std::string remote;
  Buffer down;  // from the TLS peer, for gRPC
  Buffer up;    // from gRPC, for the TLS peer
  size_t preface_checked = 0;
  bool tls_eof = false;    // the TLS peer ended its side
  bool plain_eof = false;  // gRPC ended its side
  bool down_shut = false;  // gRPC's end was told (SHUT_WR)
  bool up_shut = false;    // the TLS peer was told (close_notify, FIN)
  bool recv_wants_write = false;
  bool send_wants_write = false;
  std::string failed;  // why it ends at once; empty while it works
  absl::Time ending_since = absl::InfiniteFuture();
};

TlsRelay::TlsRelay(std::shared_ptr<spdlog::logger> log, net::UniqueFd wake)
    : log_(std::move(log)), wake_(std::move(wake)) {}

TlsRelay::~TlsRelay() { Stop(); }

absl::StatusOr<std::unique_ptr<TlsRelay>> TlsRelay::Start(
    std::shared_ptr<spdlog::logger> log) {
  net::UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) {
    return absl::InternalError(
        absl::StrCat("TlsRelay: eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<TlsRelay> relay(
      new TlsRelay(std::move(log), std::move(wake)));
  relay->thread_ = std::thread([r = relay.get()] { r->Loop(); });
  return relay;
}

void TlsRelay::Add(net::UniqueFd tcp, std::unique_ptr<tls::TlsStream> tls,
                   net::UniqueFd plain, std::string remote) {
  auto p = std::make_unique<Pipe>();
  p->tcp = std::move(tcp);
  p->tls = std::move(tls);
  p->plain = std::move(plain);
  p->remote = std::move(remote);
  {
    MutexLock lock(&mu_);
    if (stopping_) return;  // closed here
    added_.push_back(std::move(p));
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void TlsRelay::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  pipes_.clear();
  size_.store(0);
  MutexLock lock(&mu_);
  added_.clear();
}

bool TlsRelay::CheckPreface(Pipe& p, size_t n) {
  if (p.preface_checked >= kHttp2Preface.size()) return true;
  const size_t k = std::min(n, kHttp2Preface.size() - p.preface_checked);
  const absl::string_view got(p.down.data, k);
  if (got == kHttp2Preface.substr(p.preface_checked, k)) {
    p.preface_checked += k;
    return true;
  }
  p.failed = "it does not speak gRPC (HTTP/2)";
  LogRefusal(*log_, p.remote,
             absl::StrCat("closed an unauthenticated connection to the gRPC "
                          "port from ",
                          p.remote,
                          ": it does not speak gRPC (HTTP/2) inside TLS; its "
                          "first bytes: \"",
                          absl::CHexEscape(absl::string_view(
                              p.down.data, std::min<size_t>(n, 16))),
                          "\""));
  return false;
}

void TlsRelay::PumpDown(Pipe& p, bool& progress) {
  if (p.down.size() == 0 && !p.tls_eof) {
    const ssize_t n = p.tls->Recv(p.down.data, Pipe::Buffer::kSize);
    if (n > 0) {
      p.down.end = static_cast<size_t>(n);
      progress = true;
      if (!CheckPreface(p, static_cast<size_t>(n))) return;
    } else if (n == 0) {
      p.tls_eof = true;
      progress = true;
    } else if (RelayWouldBlock(errno)) {
      p.recv_wants_write = p.tls->wants_write();
    } else {
      p.failed = p.tls->error().empty()
                     ? absl::StrCat("TLS peer: ", std::strerror(errno))
                     : p.tls->error();
      return;
    }
  }
  if (p.down.size() > 0) {
    const ssize_t n = ::send(p.plain.get(), p.down.data + p.down.begin,
                             p.down.size(), MSG_NOSIGNAL);
    if (n > 0) {
      p.down.Consumed(static_cast<size_t>(n));
      progress = true;
    } else if (n < 0 && !RelayWouldBlock(errno)) {
      p.failed = absl::StrCat("gRPC's end: ", std::strerror(errno));
      return;
    }
  }
  if (p.tls_eof && p.down.size() == 0 && !p.down_shut) {
    (void)::shutdown(p.plain.get(), SHUT_WR);
    p.down_shut = true;
  }
}

void TlsRelay::PumpUp(Pipe& p, bool& progress) {
  if (p.up.size() == 0 && !p.plain_eof) {
    const ssize_t n = ::recv(p.plain.get(), p.up.data, Pipe::Buffer::kSize, 0);
    if (n > 0) {
      p.up.end = static_cast<size_t>(n);
      progress = true;
    } else if (n == 0) {
      p.plain_eof = true;
      progress = true;
    } else if (!RelayWouldBlock(errno)) {
      p.failed = absl::StrCat("gRPC's end: ", std::strerror(errno));
      return;
    }
  }
  if (p.up.size() > 0) {
    // A retry after EAGAIN passes the same bytes, as SSL_write requires.
    const ssize_t n = p.tls->Send(p.up.data + p.up.begin, p.up.size());
    if (n > 0) {
      p.up.Consumed(static_cast<size_t>(n));
      progress = true;
    } else if (n < 0 && RelayWouldBlock(errno)) {
      p.send_wants_write = p.tls->wants_write();
    } else {
      p.failed = p.tls->error().empty()
                     ? absl::StrCat("TLS peer: ", std::strerror(errno))
                     : p.tls->error();
      return;
    }
  }
  if (p.plain_eof && p.up.size() == 0 && !p.up_shut) {
    p.tls->Close();
    (void)::shutdown(p.tcp.get(), SHUT_WR);
    p.up_shut = true;
  }
}

bool TlsRelay::Pump(Pipe& p, absl::Time now, bool broken) {
  bool any = false;
  bool progress = true;
  for (int round = 0; round < kRelayRoundsPerWake && progress; ++round) {
    progress = false;
    PumpDown(p, progress);
    if (p.failed.empty()) PumpUp(p, progress);
    if (!p.failed.empty()) break;
    any = any || progress;
  }
  // An error or hang-up that moved nothing would wake poll again at once.
  if (p.failed.empty() && broken && !any) p.failed = "the connection broke";
  if (p.failed.empty() && (p.tls_eof || p.plain_eof) &&
      p.ending_since == absl::InfiniteFuture()) {
    p.ending_since = now;
  }
  if (p.failed.empty() && now >= p.ending_since + kLinger) {
    p.failed = absl::StrCat("one side ended and the other did not within ",
                            absl::FormatDuration(kLinger));
  }
  if (!p.failed.empty()) {
    log_->debug("TLS relay of the gRPC connection from {} ended: {}", p.remote,
                p.failed);
    return true;
  }
  return p.down_shut && p.up_shut;  // both sides ended, every byte passed
}

void TlsRelay::Loop() {
  std::vector<pollfd> pfds;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      for (auto& p : added_) pipes_.push_back(std::move(p));
      added_.clear();
    }
    size_.store(pipes_.size());
    pfds.clear();
    pfds.push_back({wake_.get(), POLLIN, 0});
    absl::Time next = absl::Now() + absl::Seconds(1);
    for (const auto& p : pipes_) {
      short tcp = 0, plain = 0;
      if (p->down.size() == 0 && !p->tls_eof) {
        tcp |= p->recv_wants_write ? POLLOUT : POLLIN;
      }
      if (p->up.size() > 0) tcp |= p->send_wants_write ? POLLOUT : POLLIN;
      if (p->up.size() == 0 && !p->plain_eof) plain |= POLLIN;
      if (p->down.size() > 0) plain |= POLLOUT;
      // A socket with nothing to wait for is left out: its hang-up would
      // wake poll in a loop (the other socket's traffic shows the end).
      pfds.push_back({tcp != 0 ? p->tcp.get() : -1, tcp, 0});
      pfds.push_back({plain != 0 ? p->plain.get() : -1, plain, 0});
      next = std::min(next, p->ending_since + kLinger);
    }
    const absl::Time now = absl::Now();
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(next - now + absl::Milliseconds(1)), 0,
        1000));
    const int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0) continue;  // EINTR (or ENOMEM: retried)
    if (pfds[0].revents != 0) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof(v));
    }
    const absl::Time after = absl::Now();
    constexpr short kBroken = POLLERR | POLLHUP | POLLNVAL;
    for (size_t i = 0; i < pipes_.size(); ++i) {
      const short a = pfds[1 + 2 * i].revents;
      const short b = pfds[2 + 2 * i].revents;
      Pipe& p = *pipes_[i];
      if (a == 0 && b == 0 && after < p.ending_since + kLinger) continue;
      if (Pump(p, after, ((a | b) & kBroken) != 0)) pipes_[i].reset();
    }
    pipes_.erase(std::remove(pipes_.begin(), pipes_.end(), nullptr),
                 pipes_.end());
  }
}

}  // namespace kolo::coordinator
