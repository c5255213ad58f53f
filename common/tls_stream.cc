// TlsContext and TlsStream (common/tls_stream.h), with OpenSSL's SSL API.
#include "common/tls_stream.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/tls_internal.h"

namespace kolo::tls {
namespace {

// The server's ALPN choice: its one protocol (`arg`, wire format) when the
// client offers it, else no ALPN at all.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void* arg) {
  const auto* wire = static_cast<const std::string*>(arg);
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(
          &selected, outlen,
          reinterpret_cast<const unsigned char*>(wire->data()),
          static_cast<unsigned int>(wire->size()), in,
          inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::Make(
    const TlsMaterial& m, Role role, absl::string_view alpn) {
  if (alpn.size() > 255) {
    return absl::InvalidArgumentError(
        "an ALPN protocol name is 255 bytes at most");
  }
  SSL_CTX* ctx = SSL_CTX_new(role == Role::kServer ? TLS_server_method()
                                                   : TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(
        absl::StrCat("SSL_CTX_new: ", internal::OpenSslError()));
  }
  std::string wire;
  if (!alpn.empty()) {
    wire.push_back(static_cast<char>(alpn.size()));
    wire.append(alpn.data(), alpn.size());
  }
  std::shared_ptr<const TlsContext> out(
      new TlsContext(ctx, role, std::move(wire)));
  if (role == Role::kServer && !out->alpn_wire_.empty()) {
    // The callback only reads the string, which lives as long as ctx.
    SSL_CTX_set_alpn_select_cb(ctx, &SelectAlpn,
                               const_cast<std::string*>(&out->alpn_wire_));
  }
  // kolo's own links: both ends are kolo, on OpenSSL 3.
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_mode(
      ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (absl::Status st = internal::UseJobMaterial(ctx, m); !st.ok()) return st;
  // A server requires the client's certificate; both check the CA.
  SSL_CTX_set_verify(ctx,
                     role == Role::kServer
                         ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                         : SSL_VERIFY_PEER,
                     nullptr);
  // No session tickets: links are few and long-lived.
  SSL_CTX_set_num_tickets(ctx, 0);
  // A peer that closes without close_notify has closed: the framing says
  // whether a message was cut.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  return out;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::unique_ptr<TlsStream>> TlsStream::Make(
    std::shared_ptr<const TlsContext> ctx, int fd) {
  SSL* ssl = SSL_new(ctx->get());
  BIO* bio = internal::NewSocketBio(fd);
  if (ssl == nullptr || bio == nullptr) {
    if (ssl != nullptr) SSL_free(ssl);
    if (bio != nullptr) BIO_free(bio);
    return absl::InternalError(
        absl::StrCat("SSL_new: ", internal::OpenSslError()));
  }
  SSL_set_bio(ssl, bio, bio);  // one reference, the SSL's
  if (ctx->role() == TlsContext::Role::kServer) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
    (void)SSL_set1_host(ssl, kJobName);
  }
  return std::unique_ptr<TlsStream>(new TlsStream(std::move(ctx), ssl));
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

ssize_t TlsStream::Failed(int rc) {
  const int e = SSL_get_error(ssl_, rc);
  wants_write_ = e == SSL_ERROR_WANT_WRITE;
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    errno = EAGAIN;
    return -1;
  }
  if (e == SSL_ERROR_ZERO_RETURN) return 0;
  if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    if (errno == EINTR || errno == EAGAIN) return -1;
    if (rc == 0 || errno == 0) return 0;  // closed without close_notify
    error_ = absl::StrCat("TLS: ", std::strerror(errno));
    return -1;  // errno as the socket said
  }
  const long verify = SSL_get_verify_result(ssl_);  // NOLINT(runtime/int)
  error_ = absl::StrCat("TLS: ", internal::OpenSslError());
  if (verify != X509_V_OK) {
    absl::StrAppend(&error_, " (the peer's certificate: ",
                    X509_verify_cert_error_string(verify), ")");
  }
  errno = EPROTO;
  return -1;
}

ssize_t TlsStream::Recv(void* buf, size_t n) {
  ERR_clear_error();
  const int rc = SSL_read(ssl_, buf, static_cast<int>(n));
  if (rc > 0) return rc;
  return Failed(rc);
}

ssize_t TlsStream::Send(const void* buf, size_t n) {
  ERR_clear_error();
  const int rc = SSL_write(ssl_, buf, static_cast<int>(n));
  if (rc > 0) return rc;
  return Failed(rc);
}

int TlsStream::Handshake() {
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) return 1;
  if (Failed(rc) == 0) {
    error_ = "TLS: the peer closed the connection during the handshake";
    errno = EPROTO;
  }
  return -1;
}

void TlsStream::Close() {
  if (!error_.empty()) return;  // OpenSSL forbids it after a fatal error
  ERR_clear_error();
  (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

}  // namespace kolo::tls
