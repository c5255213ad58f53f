// OpenSSL helpers shared by the files of common/tls*: owning pointers, PEM
// reading, error text, a socket BIO, and the job's certificates loaded into
// an SSL_CTX (UseJobMaterial: one place for the negotiation link's
// TlsContext and the probe). Not for use outside common/tls*.
//
// Thread-safety: pure functions; OpenSSL's error queue is per thread.
// UseJobMaterial changes only the SSL_CTX it is given (callers own it and
// have not shared it yet).
#ifndef KOLO_COMMON_TLS_INTERNAL_H_
#define KOLO_COMMON_TLS_INTERNAL_H_

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/tls.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace kolo::tls::internal {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PrivateKeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PrivateKeyPtr = std::unique_ptr<EVP_PKEY, PrivateKeyFree>;

// OpenSSL's error queue of this thread as text (and cleared).
std::string OpenSslError();
// A read-only BIO over `pem`, which must outlive it.
BioPtr ReadBio(absl::string_view pem);
// Every PEM certificate in `pem`, in order (none when it holds none).
std::vector<X509Ptr> ReadCertificates(absl::string_view pem);
// The first unencrypted PEM private key in `pem`; null when there is none
// (OpenSSL's error queue says why).
PrivateKeyPtr ReadPrivateKey(absl::string_view pem);
// "Nov 29 03:23:49 2026 GMT".
std::string TimeText(const ASN1_TIME* t);
// A BIO over socket `fd` (not owned) that writes with MSG_NOSIGNAL: a peer
// gone mid-write is an error (EPIPE), never a SIGPIPE that kills the
// process, as OpenSSL's own socket BIO (write(2)) would.
BIO* NewSocketBio(int fd);

// Loads the job's certificates `m` into `ctx`: the first certificate of
// m.cert_pem with the key m.key_pem as this side's identity, the rest of
// m.cert_pem as its chain, and every certificate of m.ca_pem into the
// store that checks the peer. It sets neither the verify mode nor the
// protocol versions: those are the caller's. kInvalidArgument, with
// OpenSSL's words, when a PEM does not parse or OpenSSL refuses one.
// REQUIRES: ctx is not yet used by any SSL.
absl::Status UseJobMaterial(SSL_CTX* ctx, const TlsMaterial& m);

}  // namespace kolo::tls::internal

#endif  // KOLO_COMMON_TLS_INTERNAL_H_
