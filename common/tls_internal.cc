// The OpenSSL helpers of common/tls_internal.h.
#include "common/tls_internal.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kolo::tls::internal {

std::string OpenSslError() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {  // NOLINT(runtime/int)
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

BioPtr ReadBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::vector<X509Ptr> ReadCertificates(absl::string_view pem) {
  std::vector<X509Ptr> out;
  BioPtr bio = ReadBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    out.emplace_back(x);
  }
  ERR_clear_error();  // the end of the input reads as an error
  return out;
}

std::string TimeText(const ASN1_TIME* t) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (t == nullptr || ASN1_TIME_print(bio.get(), t) != 1) return "?";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

PrivateKeyPtr ReadPrivateKey(absl::string_view pem) {
  BioPtr bio = ReadBio(pem);
  return PrivateKeyPtr(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

absl::Status UseJobMaterial(SSL_CTX* ctx, const TlsMaterial& m) {
  std::vector<X509Ptr> chain = ReadCertificates(m.cert_pem);
  std::vector<X509Ptr> cas = ReadCertificates(m.ca_pem);
  PrivateKeyPtr key = ReadPrivateKey(m.key_pem);
  bool ok = !chain.empty() && !cas.empty() && key != nullptr &&
            SSL_CTX_use_certificate(ctx, chain[0].get()) == 1 &&
            SSL_CTX_use_PrivateKey(ctx, key.get()) == 1;
  for (size_t i = 1; ok && i < chain.size(); ++i) {
    ok = SSL_CTX_add1_chain_cert(ctx, chain[i].get()) == 1;
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (size_t i = 0; ok && i < cas.size(); ++i) {
    ok = X509_STORE_add_cert(store, cas[i].get()) == 1;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot use the job's TLS certificates: ", OpenSslError()));
  }
  return absl::OkStatus();
}

namespace {

int BioFd(BIO* b) {
  return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b)));
}

int BioWrite(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n =
      ::send(BioFd(b), data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(b);
  }
  return static_cast<int>(n);
}

int BioRead(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::recv(BioFd(b), data, static_cast<size_t>(len), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(b);
  }
  return static_cast<int>(n);
}

long BioCtrl(BIO*, int cmd, long, void*) {  // NOLINT(runtime/int)
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int BioCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

}  // namespace

BIO* NewSocketBio(int fd) {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m =
        BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kolo socket");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, BioCreate);
    return m;
  }();
  BIO* b = BIO_new(method);
  if (b != nullptr) BIO_set_data(b, reinterpret_cast<void*>(intptr_t{fd}));
  return b;
}

}  // namespace kolo::tls::internal
