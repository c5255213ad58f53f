#include "worker_lib/session/negotiation_link.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/net.h"
#include "common/socket_util.h"
#include "common/version.h"

namespace kolo::worker {
namespace {

int PollMillis(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  if (left > absl::Seconds(1)) return 1000;  // re-check at least every second
  return static_cast<int>(absl::ToInt64Milliseconds(
      left + absl::Milliseconds(1) - absl::Nanoseconds(1)));
}

// The same with microsecond precision, for ppoll (Receive's short waits).
timespec PollSpan(absl::Time deadline) {
  absl::Duration left = std::clamp(deadline - absl::Now(), absl::ZeroDuration(),
                                   absl::Seconds(1));
  return absl::ToTimespec(left);
}

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

NegotiationLink::NegotiationLink(net::UniqueFd fd, net::UniqueFd wake,
                                 LinkOptions options, std::string peer)
    : fd_(std::move(fd)),
      wake_(std::move(wake)),
      options_(std::move(options)),
      peer_(std::move(peer)) {}

NegotiationLink::~NegotiationLink() = default;

absl::StatusOr<std::unique_ptr<NegotiationLink>> NegotiationLink::Connect(
    const LinkOptions& options) {
  // A coordinator on this host also listens on a local socket: the same link
  // without the TCP/IP stack (net::ListenLocal). The port when it does not,
  // or when the link there fails (another job's coordinator may hold the
  // name, when two coordinators bound the same port on different loopback
  // addresses).
  if (net::IsLoopbackHost(options.host)) {
    absl::StatusOr<std::unique_ptr<NegotiationLink>> local =
        Open(options, /*local=*/true);
    // A refusal from this job's coordinator stands (the port would refuse
    // the same way); anything else (no local socket, another job's
    // coordinator, one that cannot prove the secret) tries the port.
    if (local.ok() || absl::IsPermissionDenied(local.status())) return local;
  }
  return Open(options, /*local=*/false);
}

absl::StatusOr<std::unique_ptr<NegotiationLink>> NegotiationLink::Open(
    const LinkOptions& options, bool local) {
  const std::string where =
      options.host.find(':') != std::string::npos
          ? absl::StrCat("[", options.host, "]:", options.port)
          : absl::StrCat(options.host, ":", options.port);
  auto fail = [&](absl::string_view what) {
    return absl::UnavailableError(absl::StrCat(
        "negotiation link to the coordinator at ", where, ": ", what));
  };
  const absl::Time deadline = absl::Now() + options.timeout;
  std::string peer = where;
  absl::StatusOr<net::UniqueFd> fd = absl::UnavailableError("not local");
  if (local) {
    const std::string name = net::LocalLinkName(options.port);
    fd = net::ConnectLocal(name);
    if (!fd.ok()) return fail(fd.status().message());
    peer = absl::StrCat(where, " (local socket @", name, ")");
  } else {
    absl::StatusOr<net::SockAddr> addr = net::ResolveAddress(where);
    if (!addr.ok()) return fail(addr.status().message());
    fd = net::StartConnect(*addr);
    if (!fd.ok()) return fail(fd.status().message());
    while (true) {
      pollfd p{fd->get(), POLLOUT, 0};
      int n = ::poll(&p, 1, PollMillis(deadline));
      if (n > 0) break;
      if (n < 0 && errno != EINTR) return fail(ErrnoText(errno));
      if (absl::Now() >= deadline) return fail("connect timed out");
    }
    if (absl::Status s = net::FinishConnect(fd->get()); !s.ok()) {
      return fail(s.message());
    }
    if (absl::Status s = net::SetNoDelay(fd->get()); !s.ok()) {
      return fail(s.message());
    }
  }
  net::UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (wake.get() < 0) return fail(absl::StrCat("eventfd: ", ErrnoText(errno)));
  std::unique_ptr<NegotiationLink> link(
      new NegotiationLink(std::move(*fd), std::move(wake), options, peer));
  if (options.tls != nullptr) {
    if (absl::Status st = link->StartTls(deadline); !st.ok()) {
      return fail(st.message());
    }
  }

  // Handshake: Hello, Challenge (the coordinator proves first), Proof,
  // LinkReady.
  auth::ClientHandshake handshake(options.secret, options.job_id,
                                  options.worker_id);
  proto::WorkerMessage hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_feature_bits(kFeatureBits);
  hello.mutable_hello()->set_job_id(options.job_id);
  hello.mutable_hello()->set_worker_id(options.worker_id);
  hello.mutable_hello()->set_client_nonce(handshake.client_nonce());
  if (absl::Status s = link->Send(std::move(hello)); !s.ok()) return s;
  auto expect = [&](proto::CoordinatorMessage::BodyCase body)
      -> absl::StatusOr<proto::CoordinatorMessage> {
    absl::StatusOr<std::optional<proto::CoordinatorMessage>> m =
        link->ReadMessage(deadline, /*wakeable=*/false);
    if (!m.ok()) return fail(m.status().message());
    if (!m->has_value()) return fail("the handshake timed out");
    if ((*m)->has_refusal()) {
      if (local && (*m)->refusal().reason() == proto::Refusal::WRONG_JOB) {
        // Another job's coordinator holds the name: try the port.
        return fail((*m)->refusal().message());
      }
      return absl::PermissionDeniedError(
          absl::StrCat("negotiation link to the coordinator at ", where,
                       " refused: ", (*m)->refusal().message()));
    }
    if ((*m)->body_case() != body) {
      return fail(absl::StrCat("unexpected message ", (*m)->body_case(),
                               " during the handshake"));
    }
    return std::move(**m);
  };
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      expect(proto::CoordinatorMessage::kChallenge);
  if (!challenge.ok()) return challenge.status();
  absl::StatusOr<std::string> mac =
      handshake.Answer(challenge->challenge().server_nonce(),
                       challenge->challenge().server_proof());
  if (!mac.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("negotiation link to the coordinator at ", where, ": ",
                     mac.status().message()));
  }
  proto::WorkerMessage proof;
  proof.mutable_proof()->set_mac(*mac);
  if (absl::Status s = link->Send(std::move(proof)); !s.ok()) return s;
  absl::StatusOr<proto::CoordinatorMessage> ready =
      expect(proto::CoordinatorMessage::kLinkReady);
  if (!ready.ok()) return ready.status();
  return link;
}

absl::Status NegotiationLink::Send(proto::WorkerMessage msg) {
  return SendAll(absl::MakeSpan(&msg, 1));
}

absl::Status NegotiationLink::SendAll(absl::Span<proto::WorkerMessage> msgs) {
  if (closed_.load()) {
    return absl::UnavailableError(
        absl::StrCat("the negotiation link to ", peer_, " is closed"));
  }
  std::string bytes;
  for (proto::WorkerMessage& msg : msgs) {
    msg.mutable_fence()->set_incarnation(options_.incarnation);
    msg.mutable_fence()->set_epoch(options_.epoch);
    AppendFrame(msg.SerializeAsString(), &bytes);
  }
  MutexLock lock(&send_mu_);
  return WriteAll(bytes, absl::Now() + options_.send_timeout);
}

absl::Status NegotiationLink::WriteAll(const std::string& bytes,
                                       absl::Time deadline) {
  size_t off = 0;
  while (off < bytes.size()) {
    std::string error;
    ssize_t n = Write(bytes.data() + off, bytes.size() - off, error);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "the negotiation link to ", peer_, " took no bytes for ",
            absl::FormatDuration(options_.send_timeout)));
      }
      pollfd p{fd_.get(), POLLOUT, 0};
      (void)::poll(&p, 1, PollMillis(deadline));
      if (closed_.load()) break;
      continue;
    }
    return absl::UnavailableError(absl::StrCat(
        "the negotiation link to ", peer_, " broke: ",
        n < 0 ? (error.empty() ? ErrnoText(errno) : error) : "closed"));
  }
  if (closed_.load()) {
    return absl::UnavailableError(
        absl::StrCat("the negotiation link to ", peer_, " is closed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<proto::CoordinatorMessage>>
NegotiationLink::Receive(absl::Duration timeout) {
  return ReadMessage(absl::Now() + timeout, /*wakeable=*/true);
}

absl::StatusOr<std::optional<proto::CoordinatorMessage>>
NegotiationLink::ReadMessage(absl::Time deadline, bool wakeable) {
  while (true) {
    if (!broken_.ok()) return broken_;
    if (closed_.load()) {
      broken_ = absl::UnavailableError(
          absl::StrCat("the negotiation link to ", peer_, " is closed"));
      return broken_;
    }
    absl::StatusOr<std::optional<std::string>> frame = decoder_.Next();
    if (!frame.ok()) {
      broken_ = absl::DataLossError(absl::StrCat(
          "the negotiation link to ", peer_, ": ", frame.status().message()));
      return broken_;
    }
    if (frame->has_value()) {
      proto::CoordinatorMessage msg;
      if (!msg.ParseFromString(**frame)) {
        broken_ = absl::DataLossError(absl::StrCat(
            "the negotiation link to ", peer_, " sent an unreadable message"));
        return broken_;
      }
      return std::optional<proto::CoordinatorMessage>(std::move(msg));
    }
    char buf[64 * 1024];
    std::string error;
    ssize_t n = Recv(buf, sizeof(buf), error);
    if (n > 0) {
      decoder_.Append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      broken_ = absl::UnavailableError(absl::StrCat(
          "the coordinator closed the negotiation link (", peer_, ")"));
      return broken_;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      broken_ = absl::UnavailableError(
          absl::StrCat("the negotiation link to ", peer_,
                       " broke: ", error.empty() ? ErrnoText(errno) : error));
      return broken_;
    }
    pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    const timespec span = PollSpan(deadline);
    int ready = ::ppoll(p, wakeable ? 2 : 1, &span, nullptr);
    if (ready < 0 && errno != EINTR) {
      broken_ = absl::InternalError(absl::StrCat("poll: ", ErrnoText(errno)));
      return broken_;
    }
    if (wakeable && (p[1].revents & POLLIN) != 0) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof(v));
      return std::optional<proto::CoordinatorMessage>();
    }
    if (ready == 0 && absl::Now() >= deadline) {
      return std::optional<proto::CoordinatorMessage>();
    }
  }
}

absl::Status NegotiationLink::StartTls(absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<const tls::TlsContext>> ctx =
      tls::TlsContext::Make(*options_.tls, tls::TlsContext::Role::kClient);
  if (!ctx.ok()) return ctx.status();
  absl::StatusOr<std::unique_ptr<tls::TlsStream>> stream =
      tls::TlsStream::Make(*std::move(ctx), fd_.get());
  if (!stream.ok()) return stream.status();
  MutexLock lock(&tls_mu_);
  tls_ = *std::move(stream);
  while (tls_->Handshake() != 1) {
    if (errno != EAGAIN) return absl::UnavailableError(tls_->error());
    pollfd p{fd_.get(),
             static_cast<short>(tls_->wants_write() ? POLLOUT : POLLIN), 0};
    if (::poll(&p, 1, PollMillis(deadline)) == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("the TLS handshake timed out");
    }
  }
  return absl::OkStatus();
}

ssize_t NegotiationLink::Recv(char* buf, size_t n, std::string& error) {
  MutexLock lock(&tls_mu_);
  if (tls_ == nullptr) return ::recv(fd_.get(), buf, n, 0);
  const ssize_t got = tls_->Recv(buf, n);
  if (got < 0) error = tls_->error();
  return got;
}

ssize_t NegotiationLink::Write(const char* buf, size_t n, std::string& error) {
  MutexLock lock(&tls_mu_);
  if (tls_ == nullptr) return ::send(fd_.get(), buf, n, MSG_NOSIGNAL);
  const ssize_t sent = tls_->Send(buf, n);
  if (sent < 0) error = tls_->error();
  return sent;
}

void NegotiationLink::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void NegotiationLink::Close() {
  if (closed_.exchange(true)) return;
  ::shutdown(fd_.get(), SHUT_RDWR);  // a blocked poll sees the hang-up
  Wake();
}

}  // namespace kolo::worker
