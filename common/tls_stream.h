// TLS on kolo's own sockets (issue 38): the negotiation link's, which kolo
// reads and writes itself (the coordinator in its epoll loop, a worker with
// poll), unlike gRPC's. TlsContext holds the job's certificates (the peer
// must present one of the job's CA; a client checks the name kJobName);
// TlsStream is one connection over a non-blocking socket, read and written
// like recv/send. The coordinator's gRPC gate (coordinator/grpc_gate.h)
// terminates the gRPC port's TLS with them too (with ALPN "h2", which
// gRPC's clients require).
//
// - Recv/Send return what recv/send would: > 0 bytes, 0 when the peer
//   closed (Recv), or -1 with errno: EAGAIN when TLS must wait for the
//   socket (wants_write() says which way), EPROTO when TLS failed
//   (error() says why, in OpenSSL's words). The handshake runs inside the
//   first calls (a server starts in accept state, a client in connect
//   state); Handshake() drives it alone.
// - Each SSL_read takes a whole record into a buffer of at least 16 KiB, so
//   no decrypted byte waits inside OpenSSL while the socket is idle: a
//   level-triggered poll on the socket stays right.
//
// Thread-safety: TlsContext is immutable once made and may be shared;
// a TlsStream is not thread-safe (one caller at a time: callers lock).
#ifndef KOLO_COMMON_TLS_STREAM_H_
#define KOLO_COMMON_TLS_STREAM_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tls.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace kolo::tls {

class TlsContext {
 public:
  enum class Role { kServer, kClient };
  // `alpn` (a server's): the application protocol it selects when a client
  // offers it ("h2" for gRPC); empty: none. A client that offers none, or
  // others only, is not refused for it.
  static absl::StatusOr<std::shared_ptr<const TlsContext>> Make(
      const TlsMaterial& m, Role role, absl::string_view alpn = {});
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  Role role() const { return role_; }
  SSL_CTX* get() const { return ctx_; }

 private:
  TlsContext(SSL_CTX* ctx, Role role, std::string alpn_wire)
      : ctx_(ctx), role_(role), alpn_wire_(std::move(alpn_wire)) {}
  SSL_CTX* const ctx_;
  const Role role_;
  const std::string alpn_wire_;  // length-prefixed, as TLS writes it
};

class TlsStream {
 public:
  // Over `fd` (non-blocking, not owned; it must outlive the stream).
  static absl::StatusOr<std::unique_ptr<TlsStream>> Make(
      std::shared_ptr<const TlsContext> ctx, int fd);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // See the header comment. REQUIRES: n >= 16 KiB for Recv.
  ssize_t Recv(void* buf, size_t n);
  ssize_t Send(const void* buf, size_t n);
  // 1: done; -1 with errno EAGAIN (wait as wants_write() says) or EPROTO.
  int Handshake();
  // Sends close_notify, once and without waiting (a full socket drops it:
  // the FIN the caller sends next says the same). Nothing after an error.
  void Close();
  bool wants_write() const { return wants_write_; }
  const std::string& error() const { return error_; }

 private:
  TlsStream(std::shared_ptr<const TlsContext> ctx, SSL* ssl)
      : ctx_(std::move(ctx)), ssl_(ssl) {}
  // errno and error_ after an SSL call returned `rc` <= 0; -1, or 0 when
  // the peer closed.
  ssize_t Failed(int rc);

  std::shared_ptr<const TlsContext> ctx_;
  SSL* const ssl_;
  bool wants_write_ = false;
  std::string error_;
};

}  // namespace kolo::tls

#endif  // KOLO_COMMON_TLS_STREAM_H_
