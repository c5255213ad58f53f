// ProbeTls (common/tls_probe.h), with OpenSSL's SSL API on a blocking
// socket whose reads and writes time out.
#include "common/tls_probe.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/tls_internal.h"

namespace kolo::tls {
namespace {

using Kind = ProbeResult::Kind;

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

bool Connect(int fd, absl::Time until) {
  pollfd p{fd, POLLOUT, 0};
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(until - absl::Now());
    if (ms <= 0) return false;
    const int rc = ::poll(&p, 1, static_cast<int>(ms));
    if (rc > 0) break;
    if (rc == 0 || errno != EINTR) return false;
  }
  if (!net::FinishConnect(fd).ok()) return false;
  // Blocking from here, each read and write bounded by what is left.
  const int flags = ::fcntl(fd, F_GETFL);
  (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const int64_t us =
      std::max<int64_t>(1000, absl::ToInt64Microseconds(until - absl::Now()));
  timeval tv{static_cast<time_t>(us / 1000000),
             static_cast<suseconds_t>(us % 1000000)};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return true;
}

// After a failed SSL call: whose doing it was. `checks_peer`: this side
// verifies the server's certificate (OpenSSL records a verification result
// even when it was not asked to check, e.g. for a probe without material).
ProbeResult Classify(SSL* ssl, bool handshake_done, bool checks_peer) {
  const unsigned long err = ERR_peek_error();  // NOLINT(runtime/int)
  const int reason = ERR_GET_REASON(err);
  std::string text = internal::OpenSslError();
  if (checks_peer && SSL_get_verify_result(ssl) != X509_V_OK) {
    return {Kind::kPeerUnverified,
            X509_verify_cert_error_string(SSL_get_verify_result(ssl))};
  }
  if (err != 0 && reason >= SSL_AD_REASON_OFFSET) {
    return {Kind::kRefused, absl::StrCat("it sent the alert: ", text)};
  }
  if (handshake_done) {
    return {Kind::kRefused,
            "it closed the connection at the end of the TLS handshake"};
  }
  return {Kind::kNotTls, err != 0 ? text : "the connection closed"};
}

}  // namespace

ProbeResult ProbeTls(const net::SockAddr& addr, const TlsMaterial* material,
                     absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  absl::StatusOr<net::UniqueFd> fd = net::StartConnect(addr);
  if (!fd.ok() || !Connect(fd->get(), until)) return {Kind::kNoAnswer, ""};
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) return {Kind::kNoAnswer, internal::OpenSslError()};
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (material != nullptr) {
    if (absl::Status st = internal::UseJobMaterial(ctx.get(), *material);
        !st.ok()) {
      return {Kind::kNoAnswer, std::string(st.message())};
    }
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  }
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx.get()));
  BIO* bio = internal::NewSocketBio(fd->get());
  if (ssl == nullptr || bio == nullptr) {
    if (bio != nullptr) BIO_free(bio);
    return {Kind::kNoAnswer, internal::OpenSslError()};
  }
  SSL_set_bio(ssl.get(), bio, bio);                  // one reference, the SSL's
  static const unsigned char kH2[] = {2, 'h', '2'};  // gRPC asks for ALPN h2
  (void)SSL_set_alpn_protos(ssl.get(), kH2, sizeof(kH2));
  if (material != nullptr) (void)SSL_set1_host(ssl.get(), kJobName);
  if (SSL_connect(ssl.get()) != 1) {
    if (absl::Now() >= until) return {Kind::kNoAnswer, "timed out"};
    return Classify(ssl.get(), /*handshake_done=*/false, material != nullptr);
  }
  // TLS 1.3: the server judges this side's certificate after the client's
  // handshake ends; an accepted connection gets session tickets and
  // HTTP/2's SETTINGS, a refused one an alert or the end of the stream.
  char byte;
  const int n = SSL_read(ssl.get(), &byte, 1);
  if (n > 0) return {Kind::kAccepted, ""};
  const int e = SSL_get_error(ssl.get(), n);
  if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_SYSCALL) &&
      (errno == EAGAIN || errno == EWOULDBLOCK)) {
    ERR_clear_error();
    return {Kind::kAccepted, ""};  // nothing said against it in time
  }
  return Classify(ssl.get(), /*handshake_done=*/true, material != nullptr);
}

}  // namespace kolo::tls
