// Fuzz target: the coordinator's end of the negotiation link
// (coordinator/link_server.h), reached the way a worker reaches it: over a
// connection to a LinkServer started once for the whole run (its local
// socket, which workers on its host use).
// LinkServer reads its bytes only from a socket, and its file is being
// changed by others, so the harness talks to it through the socket instead of
// adding a seam.
//
// Input (fuzz/byte_reader.h): a flags byte, then the bytes to send.
//   flag 1: open with a valid Hello frame (this job, worker w0, epoch 1);
//           otherwise a first chunk (a U16 length, then bytes) goes raw.
//   flag 2: after the Challenge, answer with the right proof (computed here
//           from the fixed secret and the server's nonce), so the link binds
//           and what follows reaches on_message as a bound member's messages;
//           otherwise nothing more is sent before the rest.
// The rest of the input goes raw, then the harness half-closes and reads to
// EOF, i.e. until the server has handled every byte and closed the link.
// A crash, a sanitizer report, or a server that never closes is a finding.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/auth.h"
#include "common/check.h"
#include "common/framing.h"
#include "common/log.h"
#include "common/net.h"
#include "common/socket_util.h"
#include "common/unique_fd.h"
#include "common/version.h"
#include "coordinator/link_server.h"
#include "fuzz/byte_reader.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/kolo.pb.h"

namespace {

constexpr char kJob[] = "job";
constexpr char kSecret[] = "fuzz-secret";
constexpr uint64_t kIncarnation = 42;
constexpr kolo::coordinator::SessionId kSession = 7;

kolo::coordinator::LinkServer* server = nullptr;
std::atomic<uint64_t> delivered{0};

std::string Frame(const google::protobuf::MessageLite& m) {
  std::string out;
  kolo::AppendFrame(m.SerializeAsString(), &out);
  return out;
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n =
        ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // the server closed the link: fine
    off += static_cast<size_t>(n);
  }
  return true;
}

// The next frame from the server as a CoordinatorMessage; nullopt at EOF or
// after 5 s (`why` says which).
std::optional<kolo::proto::CoordinatorMessage> ReadMessage(
    int fd, kolo::FrameDecoder& decoder, std::string* why = nullptr) {
  while (true) {
    auto frame = decoder.Next();
    KOLO_CHECK(frame.ok());  // the server frames correctly
    if (frame->has_value()) {
      kolo::proto::CoordinatorMessage m;
      KOLO_CHECK(m.ParseFromString(**frame));
      return m;
    }
    pollfd p{fd, POLLIN, 0};
    // libFuzzer's SIGALRM (its -timeout check) interrupts poll: retry.
    const int r = ::poll(&p, 1, 5000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (why != nullptr) *why = "no answer within 5 s";
      return std::nullopt;
    }
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (why != nullptr) *why = n == 0 ? "EOF" : std::strerror(errno);
      return std::nullopt;
    }
    decoder.Append(buf, static_cast<size_t>(n));
  }
}

// Reads until the server closes the link. Aborts (a finding) when it does
// not close within 10 s of the worker's half-close.
void DrainToEof(int fd) {
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 10000);
    if (r < 0 && errno == EINTR) continue;
    KOLO_CHECK(r > 0);  // the server must close a half-closed link
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
  }
}

// The local (Unix) socket of the link server, as a worker on its host
// dials it: loopback TCP would run out of ports to TIME_WAIT after some
// 100,000 inputs. Made blocking for the plain I/O above.
kolo::net::UniqueFd Connect(int port) {
  absl::StatusOr<kolo::net::UniqueFd> fd =
      kolo::net::ConnectLocal(kolo::net::LocalLinkName(port));
  KOLO_CHECK(fd.ok()) << fd.status();
  const int flags = ::fcntl(fd->get(), F_GETFL);
  KOLO_CHECK(::fcntl(fd->get(), F_SETFL, flags & ~O_NONBLOCK) == 0);
  return *std::move(fd);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)kolo::SetLogLevel("off");
  // Strings with invalid UTF-8 are logged by protobuf on every parse.
  google::protobuf::SetLogHandler(nullptr);
  kolo::coordinator::LinkServerOptions o;
  o.job_id = kJob;
  o.secret = kSecret;
  o.incarnation = kIncarnation;
  auto s = kolo::coordinator::LinkServer::Listen(o);
  KOLO_CHECK(s.ok());
  server = s->release();  // lives for the whole run
  KOLO_CHECK(server
                 ->Start(
                     [](const std::string& worker_id,
                        uint64_t epoch) -> absl::StatusOr<uint64_t> {
                       if (worker_id == "w0" && epoch == 1) return kSession;
                       return absl::FailedPreconditionError("not a member");
                     },
                     [](kolo::coordinator::SessionId id,
                        const kolo::proto::WorkerMessage&) {
                       KOLO_CHECK(id == kSession);
                       delivered.fetch_add(1, std::memory_order_relaxed);
                     })
                 .ok());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::ByteReader in(data, size);
  const uint8_t flags = in.U8();
  const kolo::net::UniqueFd conn = Connect(server->port());
  const int fd = conn.get();
  kolo::FrameDecoder decoder;
  const std::string client_nonce(kolo::auth::kNonceBytes, 'n');
  bool open = true;
  if (flags & 1) {
    kolo::proto::WorkerMessage hello;
    hello.mutable_fence()->set_incarnation(kIncarnation);
    hello.mutable_fence()->set_epoch(1);
    hello.mutable_hello()->set_protocol_version(kolo::kProtocolVersion);
    hello.mutable_hello()->set_job_id(kJob);
    hello.mutable_hello()->set_worker_id("w0");
    hello.mutable_hello()->set_client_nonce(client_nonce);
    open = WriteAll(fd, Frame(hello));
  } else {
    open = WriteAll(fd, in.Blob());
  }
  if (open && (flags & 1) && (flags & 2)) {
    std::optional<kolo::proto::CoordinatorMessage> challenge =
        ReadMessage(fd, decoder);
    if (challenge.has_value() && challenge->has_challenge()) {
      KOLO_CHECK(
          challenge->challenge().server_proof() ==
          kolo::auth::CoordinatorProof(kSecret, kJob, "w0", client_nonce,
                                       challenge->challenge().server_nonce()));
      kolo::proto::WorkerMessage proof;
      proof.mutable_fence()->set_incarnation(kIncarnation);
      proof.mutable_fence()->set_epoch(1);
      proof.mutable_proof()->set_mac(
          kolo::auth::WorkerProof(kSecret, kJob, "w0", client_nonce,
                                  challenge->challenge().server_nonce()));
      open = WriteAll(fd, Frame(proof));
      if (open) {
        std::string why;
        std::optional<kolo::proto::CoordinatorMessage> ready =
            ReadMessage(fd, decoder, &why);
        // A right proof binds the link (bind accepts w0 in epoch 1).
        KOLO_CHECK(ready.has_value() && ready->has_link_ready())
            << (ready.has_value() ? ready->ShortDebugString() : why);
      }
    }
  }
  if (open) open = WriteAll(fd, in.Rest());
  ::shutdown(fd, SHUT_WR);
  DrainToEof(fd);
  return 0;
}
