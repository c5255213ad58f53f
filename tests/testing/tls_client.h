// TlsTestClient: a blocking OpenSSL client on 127.0.0.1 for tests of the
// coordinator's TLS port (coordinator/grpc_gate.h): it can offer the job's
// certificate or another, none, or cap the version (a TLS 1.2 client), and
// then send and read bytes inside TLS. Every read and write is bounded by
// the socket's timeouts.
//
// Thread-safety: one thread at a time (not thread-safe). Making one ignores
// SIGPIPE in the process (OpenSSL's socket BIO writes with write(2)).
#ifndef KOLO_TESTS_TESTING_TLS_CLIENT_H_
#define KOLO_TESTS_TESTING_TLS_CLIENT_H_

#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/socket_util.h"
#include "common/tls.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace kolo::testing {

class TlsTestClient {
 public:
  // Connects to 127.0.0.1:`port` (blocking). `m` null: no certificate and
  // no check of the server's; `max_version` 0: any (else e.g.
  // TLS1_2_VERSION). The client offers ALPN "h2", as gRPC's does.
  TlsTestClient(int port, const tls::TlsMaterial* m, int max_version = 0) {
    // OpenSSL's socket BIO writes with write(2): a server gone must be an
    // error here, not a SIGPIPE that ends the test binary.
    std::signal(SIGPIPE, SIG_IGN);
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (max_version != 0) SSL_CTX_set_max_proto_version(ctx_, max_version);
    if (m != nullptr) {
      Load(*m);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    absl::StatusOr<net::SockAddr> a =
        net::ResolveAddress(absl::StrCat("127.0.0.1:", port));
    EXPECT_TRUE(a.ok());
    fd_ = net::UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(fd_.get(),
                        reinterpret_cast<const sockaddr*>(&a->storage), a->len),
              0);
    SetTimeout(absl::Seconds(10));
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_.get());
    static const unsigned char kH2[] = {2, 'h', '2'};
    (void)SSL_set_alpn_protos(ssl_, kH2, sizeof(kH2));
    if (m != nullptr) (void)SSL_set1_host(ssl_, tls::kJobName);
  }
  ~TlsTestClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }
  TlsTestClient(const TlsTestClient&) = delete;
  TlsTestClient& operator=(const TlsTestClient&) = delete;

  int fd() const { return fd_.get(); }
  // The local port (to find the connection in the server's log).
  int local_port() const {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    (void)::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  }
  // This side's handshake (TLS 1.3: the server judges the certificate after
  // it; a refusal comes at the next read).
  bool Handshake() {
    ERR_clear_error();
    if (SSL_connect(ssl_) == 1) return true;
    error_ = Errors();
    return false;
  }
  bool Send(absl::string_view bytes) {
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }
  // Up to `n` bytes, as they come within `timeout`; fewer when the server
  // closed or the time passed.
  std::string Read(size_t n, absl::Duration timeout) {
    SetTimeout(timeout);
    std::string out;
    char buf[4096];
    while (out.size() < n) {
      const int r = SSL_read(
          ssl_, buf, static_cast<int>(std::min(sizeof(buf), n - out.size())));
      if (r <= 0) {
        error_ = Errors();
        break;
      }
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // Whether the server ended the connection (close_notify, FIN, an alert, a
  // reset) within `timeout`; what came before is read and dropped.
  bool ClosedWithin(absl::Duration timeout) {
    SetTimeout(timeout);
    char buf[4096];
    while (true) {
      const int r = SSL_read(ssl_, buf, sizeof(buf));
      if (r > 0) continue;
      const int e = SSL_get_error(ssl_, r);
      error_ = Errors();
      if (e == SSL_ERROR_WANT_READ ||
          (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK)))
        return false;  // the timeout
      return true;
    }
  }
  const std::string& error() const { return error_; }

 private:
  static std::string Errors() {
    std::string out;
    char buf[256];
    for (unsigned long e = ERR_get_error(); e != 0;  // NOLINT(runtime/int)
         e = ERR_get_error()) {
      ERR_error_string_n(e, buf, sizeof(buf));
      absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
    }
    return out;
  }
  void SetTimeout(absl::Duration d) {
    const int64_t us = absl::ToInt64Microseconds(d);
    timeval tv{static_cast<time_t>(us / 1000000),
               static_cast<suseconds_t>(us % 1000000)};
    (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  void Load(const tls::TlsMaterial& m) {
    BIO* cert =
        BIO_new_mem_buf(m.cert_pem.data(), static_cast<int>(m.cert_pem.size()));
    X509* x = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
    BIO_free(cert);
    BIO* key =
        BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size()));
    EVP_PKEY* k = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
    BIO_free(key);
    EXPECT_EQ(SSL_CTX_use_certificate(ctx_, x), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey(ctx_, k), 1);
    X509_free(x);
    EVP_PKEY_free(k);
    BIO* ca =
        BIO_new_mem_buf(m.ca_pem.data(), static_cast<int>(m.ca_pem.size()));
    X509_STORE* store = SSL_CTX_get_cert_store(ctx_);
    while (X509* c = PEM_read_bio_X509(ca, nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, c);
      X509_free(c);
    }
    BIO_free(ca);
    ERR_clear_error();  // the end of the CA file
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  net::UniqueFd fd_;
  std::string error_;
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_TLS_CLIENT_H_
