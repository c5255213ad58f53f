// OpenSSL helpers shared by common/tls.cc and common/tls_generate.cc: owning
// pointers, PEM reading, error text. Not for use outside common/tls*.
//
// Thread-safety: pure functions; OpenSSL's error queue is per thread.
#ifndef KOLO_COMMON_TLS_INTERNAL_H_
#define KOLO_COMMON_TLS_INTERNAL_H_

#include <openssl/bio.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kolo::tls::internal {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

// OpenSSL's error queue of this thread as text (and cleared).
std::string OpenSslError();
// A read-only BIO over `pem`, which must outlive it.
BioPtr ReadBio(absl::string_view pem);
// Every PEM certificate in `pem`, in order (none when it holds none).
std::vector<X509Ptr> ReadCertificates(absl::string_view pem);
// "Nov 29 03:23:49 2026 GMT".
std::string TimeText(const ASN1_TIME* t);
// A BIO over socket `fd` (not owned) that writes with MSG_NOSIGNAL: a peer
// gone mid-write is an error (EPIPE), never a SIGPIPE that kills the
// process, as OpenSSL's own socket BIO (write(2)) would.
BIO* NewSocketBio(int fd);

}  // namespace kolo::tls::internal

#endif  // KOLO_COMMON_TLS_INTERNAL_H_
