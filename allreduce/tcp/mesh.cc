#include "allreduce/tcp/mesh.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/tcp/acceptor.h"
#include "allreduce/tcp/handshake.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/rate_limited_log.h"
#include "common/socket_util.h"

namespace kolo::tcp {
namespace {

// Most half-open accepted connections kept at once; beyond, the oldest is
// dropped, so a flood of silent clients cannot exhaust descriptors.
constexpr size_t kMaxPendingAccepts = 64;
constexpr absl::Duration kFirstRetry = absl::Milliseconds(10);
constexpr absl::Duration kMaxRetry = absl::Milliseconds(200);
constexpr absl::string_view kNoConnection = "no connection yet";

enum class Phase {
  kConnecting,      // connector: non-blocking connect in flight
  kRetryWait,       // connector: waiting to connect again
  kAwaitChallenge,  // connector: Hello sent (or queued)
  kAwaitVerdict,    // connector: Proof sent
  kAwaitHello,      // acceptor
  kAwaitProof,      // acceptor: Challenge sent
  kFlushAccept,     // acceptor: Accept queued; established once written
};

struct Conn {
  net::UniqueFd fd;
  bool connector = false;
  int peer = -1;  // known from the start for a connector
  Phase phase = Phase::kAwaitHello;
  std::string remote;  // address text for messages
  std::string out;
  size_t out_off = 0;
  std::string in;
  bool have_header = false;
  MsgHeader header;
  Hello hello;
  std::string acceptor_nonce;
  absl::Time retry_at;
  absl::Duration backoff = kFirstRetry;
  // Acceptor: closed if not proven by then (accepted + handshake timeout).
  absl::Time expires = absl::InfiniteFuture();
  bool dead = false;
  // Acceptor: the peer proved the job secret (or was refused for its
  // protocol version, which is public), so a refusal may say why. Until then
  // it gets auth::kUnauthenticatedRefusal and the reason is only logged.
  bool proven = false;
};

class Mesh {
 public:
  Mesh(const TcpOptions& o, absl::Time deadline)
      : o_(o), deadline_(deadline), log_(GetLogger("transport")) {
    links_.resize(o.size);
    last_error_.resize(o.size, std::string(kNoConnection));
    view_ = {o.protocol_version,
             o.epoch,
             o.job_id,
             o.rank,
             o.size,
             o.worker_ids,
             static_cast<uint8_t>(o.encryption)};
  }

  absl::StatusOr<std::vector<MeshLink>> Run();

 private:
  std::string Self() const {
    return absl::StrCat("rank ", o_.rank, " (worker ", o_.worker_ids[o_.rank],
                        ")");
  }
  std::string Peer(int r) const {
    return absl::StrCat("rank ", r, " (worker ", o_.worker_ids[r], " at ",
                        o_.addresses[r], ")");
  }
  void Connect(Conn& c);
  void Established(Conn& c);
  void Refuse(Conn& c, const absl::Status& why);
  void Retry(Conn& c, absl::string_view why);
  absl::Status OnReadable(Conn& c);
  absl::Status OnMessage(Conn& c, absl::string_view body);
  absl::Status Flush(Conn& c);
  void AcceptAll();
  // A connection accepted at `accepted` joins the handshakes (the oldest
  // unfinished one makes room beyond kMaxPendingAccepts).
  void AddAccepted(net::UniqueFd fd, std::string remote, absl::Time accepted);
  // Closes the accepted connections past their deadline; returns the next.
  absl::Time ExpireAccepted(absl::Time now);
  // Starts a connection to every lower rank.
  absl::Status ConnectLower();
  // Fills `pfds` (`polled`: the connection of each, null for the listener
  // and the abort fd) for one round at `now`, starting the retries that are
  // due and lowering `wake` to the next; returns the abort fd's slot
  // (SIZE_MAX without one).
  size_t PollSet(absl::Time now, absl::Time& wake, std::vector<pollfd>& pfds,
                 std::vector<Conn*>& polled);
  // One round's event on `c`: its connect finished (it says hello), or it
  // can be written or read.
  absl::Status OnEvent(Conn& c, short revents);
  // What a failed connection becomes: a connector retries (a wrong secret
  // is fatal: returned); an accepted one is refused or dropped.
  absl::Status OnFailure(Conn& c, const absl::Status& s);
  // The error of a mesh incomplete at the deadline.
  absl::Status Incomplete() const;
  // Logs the accepted connections that never finished their handshake.
  void DropUnfinished();
  // Socket options of a data connection: TCP_NODELAY, buffer sizes,
  // congestion control.
  void Tune(int fd) {
    (void)net::SetNoDelay(fd);
    (void)net::SetBufferSizes(fd, o_.send_buffer_bytes, o_.recv_buffer_bytes);
    absl::StatusOr<std::string> cc =
        net::SetCongestionControl(fd, o_.congestion_control);
    if (!cc.ok() && !cc_warned_) {
      cc_warned_ = true;  // once per mesh: every connection would say it
      log_->info("{}: keeping the system's TCP congestion control: {}", Self(),
                 std::string(cc.status().message()));
    }
  }
  absl::Status Fatal(Conn& c, absl::string_view what) {
    std::string msg = absl::StrCat(Self(), ": ", Peer(c.peer), " ", what);
    log_->warn("{}", msg);
    return absl::PermissionDeniedError(msg);
  }

  const TcpOptions& o_;
  const absl::Time deadline_;
  std::shared_ptr<spdlog::logger> log_;
  AcceptorView view_;
  std::vector<MeshLink> links_;
  std::vector<std::string> last_error_;
  std::vector<net::SockAddr> addrs_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int missing_ = 0;
  bool cc_warned_ = false;
};

void Mesh::Connect(Conn& c) {
  absl::StatusOr<net::UniqueFd> fd = net::StartConnect(addrs_[c.peer]);
  if (!fd.ok()) {
    Retry(c, fd.status().message());
    return;
  }
  c.fd = std::move(*fd);
  c.phase = Phase::kConnecting;
}

void Mesh::Retry(Conn& c, absl::string_view why) {
  last_error_[c.peer] = std::string(why);
  log_->debug("{}: connecting to {}: {}; retrying", Self(), Peer(c.peer),
              std::string(why));
  c.fd.Reset();
  c.in.clear();
  c.out.clear();
  c.out_off = 0;
  c.have_header = false;
  c.phase = Phase::kRetryWait;
  c.retry_at = absl::Now() + c.backoff;
  c.backoff = std::min(c.backoff * 2, kMaxRetry);
}

void Mesh::Refuse(Conn& c, const absl::Status& why) {
  const std::string detail =
      absl::StrCat(Self(), ": refused a data-plane connection from ", c.remote,
                   c.peer >= 0 ? absl::StrCat(" claiming rank ", c.peer) : "",
                   ": ", why.message());
  absl::string_view told = auth::kUnauthenticatedRefusal;
  if (c.proven) {
    log_->warn("{}", detail);
    told = why.message();
  } else {
    LogRefusal(*log_, c.remote, detail);
  }
  std::string msg = EncodeMsg(MsgType::kRefuse,
                              EncodeString(told.substr(0, kMaxReasonBytes)));
  // Best effort: the socket's buffer is empty, so this rarely blocks.
  (void)!::send(c.fd.get(), msg.data(), msg.size(), MSG_NOSIGNAL);
  ::shutdown(c.fd.get(), SHUT_RDWR);
  c.dead = true;
}

void Mesh::Established(Conn& c) {
  log_->debug("{}: connected to {}", Self(), Peer(c.peer));
  MeshLink& link = links_[c.peer];
  link.fd = std::move(c.fd);
  link.connector_nonce = c.hello.nonce;
  link.acceptor_nonce = c.acceptor_nonce;
  c.dead = true;
  --missing_;
}

absl::Status Mesh::Flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off,
                       c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) return absl::UnavailableError(std::strerror(errno));
    c.out_off += static_cast<size_t>(n);
  }
  if (c.out_off == c.out.size() && c.phase == Phase::kFlushAccept) {
    Established(c);
  }
  return absl::OkStatus();
}

absl::Status Mesh::OnReadable(Conn& c) {
  // Reads exactly the bytes of the current message, never beyond: data
  // frames may follow the handshake on the same stream.
  while (!c.dead) {
    size_t need =
        c.have_header ? kMsgHeaderBytes + c.header.body_bytes : kMsgHeaderBytes;
    size_t have = c.in.size();
    if (have < need) {
      c.in.resize(need);
      ssize_t n = ::recv(c.fd.get(), c.in.data() + have, need - have, 0);
      c.in.resize(have + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return absl::OkStatus();
      }
      if (n < 0) return absl::UnavailableError(std::strerror(errno));
      if (n == 0) {
        return absl::UnavailableError(
            "closed the connection during the handshake");
      }
      continue;
    }
    if (!c.have_header) {
      absl::StatusOr<MsgHeader> h = ParseMsgHeader(c.in);
      if (!h.ok()) return h.status();
      c.header = *h;
      c.have_header = true;
      continue;
    }
    std::string body = c.in.substr(kMsgHeaderBytes);
    c.in.clear();
    c.have_header = false;
    absl::Status s = OnMessage(c, body);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Mesh::OnMessage(Conn& c, absl::string_view body) {
  MsgType type = c.header.type;
  if (c.connector) {
    if (type == MsgType::kRefuse) {
      absl::StatusOr<std::string> reason = ParseString(body, kMaxReasonBytes);
      return Fatal(c, absl::StrCat("refused the connection: ",
                                   reason.ok() ? *reason : "(no reason)"));
    }
    if (c.phase == Phase::kAwaitChallenge && type == MsgType::kChallenge) {
      absl::StatusOr<Challenge> ch = ParseChallenge(body);
      if (!ch.ok()) return Fatal(c, ch.status().message());
      if (ch->worker_id != o_.worker_ids[c.peer]) {
        return Fatal(c, absl::StrCat("answered as worker '", ch->worker_id,
                                     "': another worker listens there"));
      }
      std::string expected =
          AcceptorProof(o_.secret, c.hello, ch->worker_id, ch->nonce);
      if (!auth::ConstantTimeEqual(expected, ch->proof)) {
        return Fatal(c,
                     "did not prove knowledge of the job secret (wrong secret:"
                     " check that every worker got this job's secret)");
      }
      c.acceptor_nonce = ch->nonce;
      c.out += EncodeMsg(MsgType::kProof,
                         EncodeString(ConnectorProof(
                             o_.secret, c.hello, ch->worker_id, ch->nonce)));
      c.phase = Phase::kAwaitVerdict;
      return Flush(c);
    }
    if (c.phase == Phase::kAwaitVerdict && type == MsgType::kAccept) {
      Established(c);
      return absl::OkStatus();
    }
    return Fatal(c, "sent an unexpected handshake message");
  }
  // Acceptor. Only the version is checked before the proof (it is public);
  // the job, epoch and ranks after it, so that a peer without the secret
  // learns nothing about the job.
  if (c.phase == Phase::kAwaitHello && type == MsgType::kHello) {
    absl::StatusOr<Hello> h = ParseHello(body);
    if (!h.ok()) return h.status();
    c.hello = *h;
    if (c.hello.version != view_.version) {
      c.proven = true;  // a version mismatch may be told
      return CheckHello(c.hello, view_);
    }
    c.acceptor_nonce = auth::RandomBytes(auth::kNonceBytes);
    Challenge ch{o_.worker_ids[o_.rank], c.acceptor_nonce,
                 AcceptorProof(o_.secret, c.hello, o_.worker_ids[o_.rank],
                               c.acceptor_nonce)};
    c.out += EncodeMsg(MsgType::kChallenge, EncodeChallenge(ch));
    c.phase = Phase::kAwaitProof;
    return Flush(c);
  }
  if (c.phase == Phase::kAwaitProof && type == MsgType::kProof) {
    absl::StatusOr<std::string> mac = ParseString(body, auth::kMacBytes);
    if (!mac.ok()) return mac.status();
    std::string expected = ConnectorProof(
        o_.secret, c.hello, o_.worker_ids[o_.rank], c.acceptor_nonce);
    if (!auth::ConstantTimeEqual(expected, *mac)) {
      return absl::UnauthenticatedError(
          "wrong job secret: the peer's proof does not match (check that "
          "every worker got this job's secret)");
    }
    c.proven = true;
    if (absl::Status s = CheckHello(c.hello, view_); !s.ok()) {
      if (c.hello.from_rank > static_cast<uint32_t>(o_.rank) &&
          c.hello.from_rank < static_cast<uint32_t>(o_.size)) {
        last_error_[c.hello.from_rank] = absl::StrCat("refused: ", s.message());
      }
      return s;
    }
    c.peer = static_cast<int>(c.hello.from_rank);
    if (links_[c.peer].fd.valid()) {
      return absl::AlreadyExistsError(
          absl::StrCat("rank ", c.peer, " is already connected"));
    }
    c.out += EncodeMsg(MsgType::kAccept, "");
    c.phase = Phase::kFlushAccept;
    return Flush(c);
  }
  return absl::InvalidArgumentError("unexpected handshake message");
}

void Mesh::AcceptAll() {
  if (o_.acceptor != nullptr) {
    for (AcceptedConn& a : o_.acceptor->Take()) {
      AddAccepted(std::move(a.fd), std::move(a.remote), a.accepted);
    }
    return;
  }
  while (true) {
    int fd =
        ::accept4(o_.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log_->warn("{}: accept on the data-plane socket failed: {}", Self(),
                   std::strerror(errno));
      }
      return;
    }
    std::string remote = net::PeerAddress(fd);
    AddAccepted(net::UniqueFd(fd), std::move(remote), absl::Now());
  }
}

void Mesh::AddAccepted(net::UniqueFd fd, std::string remote,
                       absl::Time accepted) {
  auto c = std::make_unique<Conn>();
  c->fd = std::move(fd);
  c->remote = std::move(remote);
  c->phase = Phase::kAwaitHello;
  c->expires = accepted + o_.handshake_timeout;
  Tune(c->fd.get());
  size_t pending = 0;
  for (const auto& other : conns_) {
    if (!other->connector && !other->dead) ++pending;
  }
  if (pending >= kMaxPendingAccepts) {
    for (auto& other : conns_) {
      if (!other->connector && !other->dead) {
        Refuse(*other,
               absl::ResourceExhaustedError("too many unfinished handshakes"));
        break;
      }
    }
  }
  conns_.push_back(std::move(c));
}

absl::Time Mesh::ExpireAccepted(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto& c : conns_) {
    if (c->connector || c->dead || c->proven) continue;
    if (now < c->expires) {
      next = std::min(next, c->expires);
      continue;
    }
    LogRefusal(*log_, c->remote,
               absl::StrCat(Self(), ": closed a data-plane connection from ",
                            c->remote, ": no handshake within the deadline of ",
                            absl::FormatDuration(o_.handshake_timeout)));
    c->dead = true;
  }
  return next;
}

absl::Status Mesh::ConnectLower() {
  addrs_.resize(o_.size);
  for (int r = 0; r < o_.rank; ++r) {
    absl::StatusOr<net::SockAddr> a = net::ResolveAddress(o_.addresses[r]);
    if (!a.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Self(), ": bad data-plane address of ", Peer(r), ": ",
                       a.status().message()));
    }
    addrs_[r] = *a;
    auto c = std::make_unique<Conn>();
    c->connector = true;
    c->peer = r;
    c->remote = o_.addresses[r];
    Connect(*c);
    conns_.push_back(std::move(c));
  }
  return absl::OkStatus();
}

size_t Mesh::PollSet(absl::Time now, absl::Time& wake,
                     std::vector<pollfd>& pfds, std::vector<Conn*>& polled) {
  pfds.clear();
  polled.clear();
  const bool accepting = o_.rank < o_.size - 1;
  int accepted_missing = 0;
  for (int r = o_.rank + 1; r < o_.size; ++r) {
    if (!links_[r].fd.valid()) ++accepted_missing;
  }
  if (accepting && accepted_missing > 0) {
    pfds.push_back(
        {o_.acceptor != nullptr ? o_.acceptor->ready_fd() : o_.listen_fd,
         POLLIN, 0});
    polled.push_back(nullptr);
  }
  const size_t abort_slot = o_.abort_fd >= 0 ? pfds.size() : SIZE_MAX;
  if (o_.abort_fd >= 0) {
    pfds.push_back({o_.abort_fd, POLLIN, 0});
    polled.push_back(nullptr);
  }
  for (auto& c : conns_) {
    if (c->dead) continue;
    if (c->phase == Phase::kRetryWait) {
      if (c->retry_at <= now) {
        Connect(*c);
      }
      if (c->phase == Phase::kRetryWait) {
        wake = std::min(wake, c->retry_at);
        continue;
      }
    }
    short events = c->phase == Phase::kConnecting ? POLLOUT : POLLIN;
    if (c->out_off < c->out.size()) events |= POLLOUT;
    pfds.push_back({c->fd.get(), events, 0});
    polled.push_back(c.get());
  }
  return abort_slot;
}

absl::Status Mesh::OnEvent(Conn& c, short revents) {
  absl::Status s;
  if (c.phase == Phase::kConnecting) {
    s = net::FinishConnect(c.fd.get());
    if (s.ok()) {
      Tune(c.fd.get());
      c.hello = Hello{o_.protocol_version,
                      o_.epoch,
                      static_cast<uint32_t>(o_.rank),
                      static_cast<uint32_t>(c.peer),
                      o_.job_id,
                      o_.worker_ids[o_.rank],
                      auth::RandomBytes(auth::kNonceBytes),
                      static_cast<uint8_t>(o_.encryption)};
      c.out = EncodeMsg(MsgType::kHello, EncodeHello(c.hello));
      c.out_off = 0;
      c.phase = Phase::kAwaitChallenge;
      s = Flush(c);
    }
  } else {
    if (revents & POLLOUT) s = Flush(c);
    if (s.ok() && !c.dead && (revents & (POLLIN | POLLHUP | POLLERR))) {
      s = OnReadable(c);
    }
  }
  return s;
}

absl::Status Mesh::OnFailure(Conn& c, const absl::Status& s) {
  if (c.connector) {
    if (s.code() == absl::StatusCode::kPermissionDenied) return s;
    Retry(c, s.message());
  } else if (s.code() == absl::StatusCode::kUnavailable) {
    LogRefusal(*log_, c.remote,
               absl::StrCat(
                   Self(), ": a data-plane connection from ", c.remote,
                   c.peer >= 0 ? absl::StrCat(" claiming rank ", c.peer) : "",
                   " ", s.message(),
                   " (it may not know the job secret, or it belongs to another "
                   "job or epoch)"));
    c.dead = true;
  } else {
    Refuse(c, s);
  }
  return absl::OkStatus();
}

absl::Status Mesh::Incomplete() const {
  std::vector<std::string> missing;
  for (int r = 0; r < o_.size; ++r) {
    if (r == o_.rank || links_[r].fd.valid()) continue;
    std::string why;
    if (r < o_.rank) {
      why = absl::StrCat("connecting: ", last_error_[r]);
    } else if (last_error_[r] != kNoConnection) {
      why = last_error_[r];  // its connection was refused: why
    } else {
      why = "it never connected";
    }
    missing.push_back(absl::StrCat(Peer(r), " (", why, ")"));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      Self(), ": the data-plane mesh of epoch ", o_.epoch,
      " is incomplete after the connect deadline; missing ",
      absl::StrJoin(missing, ", "),
      ". Check that those workers are alive and reachable at their "
      "advertised addresses (KOLO_IFACE / KOLO_ADDR)"));
}

void Mesh::DropUnfinished() {
  for (const auto& c : conns_) {
    if (c->connector || c->dead) continue;
    LogRefusal(*log_, c->remote,
               absl::StrCat(Self(), ": dropped a data-plane connection from ",
                            c->remote,
                            " that did not complete its handshake before the "
                            "mesh of epoch ",
                            o_.epoch, " was complete"));
  }
}

absl::StatusOr<std::vector<MeshLink>> Mesh::Run() {
  if (absl::Status st = ConnectLower(); !st.ok()) return st;
  missing_ = o_.size - 1;
  std::vector<pollfd> pfds;
  std::vector<Conn*> polled;
  while (missing_ > 0) {
    absl::Time now = absl::Now();
    if (now >= deadline_) break;
    absl::Time wake = std::min(deadline_, ExpireAccepted(now));
    const size_t abort_slot = PollSet(now, wake, pfds, polled);
    int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(wake - now) + 1, 0, 1000));
    int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    }
    if (n > 0 && abort_slot != SIZE_MAX && pfds[abort_slot].revents != 0) {
      return absl::AbortedError(
          absl::StrCat(Self(), ": the data-plane mesh of epoch ", o_.epoch,
                       " was abandoned while it formed (the epoch ended)"));
    }
    for (size_t i = 0; n > 0 && i < pfds.size(); ++i) {
      if (pfds[i].revents == 0 || i == abort_slot) continue;
      Conn* c = polled[i];
      if (c == nullptr) {
        AcceptAll();
        continue;
      }
      if (c->dead) continue;
      const absl::Status s = OnEvent(*c, pfds[i].revents);
      if (s.ok()) continue;
      if (absl::Status fatal = OnFailure(*c, s); !fatal.ok()) return fatal;
    }
    conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                                [](const auto& c) { return c->dead; }),
                 conns_.end());
  }
  if (missing_ > 0) return Incomplete();
  // Connections that never finished their handshake (idle, or too slow)
  // are dropped with the mesh: someone may be knocking.
  DropUnfinished();
  return std::move(links_);
}

}  // namespace

absl::StatusOr<std::vector<MeshLink>> ConnectMesh(const TcpOptions& options,
                                                  absl::Time deadline) {
  return Mesh(options, deadline).Run();
}

}  // namespace kolo::tcp
