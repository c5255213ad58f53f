// Throwaway certificates (issue 38): kolorun, given --tls and no files, makes
// a CA for the job and one certificate from it (EC P-256, SHA-256, the
// subjectAltName common/tls.h asks for), valid for the job's length; the
// CA's key is dropped once the certificate is signed, so nothing else can
// ever be signed by it. Tests make CAs and certificates of every kind with
// the same calls (expired, of another CA).
//
// Thread-safety: pure functions (they read OpenSSL's random source).
#ifndef KOLO_COMMON_TLS_GENERATE_H_
#define KOLO_COMMON_TLS_GENERATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls.h"

namespace kolo::tls {

// A private key and its certificate, PEM.
struct KeyAndCert {
  std::string key_pem;
  std::string cert_pem;
};

// What a certificate says of itself.
struct CertSpec {
  std::string common_name = "kolo job CA";
  absl::Time not_before = absl::Now() - absl::Minutes(5);  // clock skew
  absl::Time not_after = absl::Now() + absl::Hours(24);
  std::string dns_name = kJobName;  // the subjectAltName of a leaf
};

// A self-signed CA certificate (basicConstraints CA:TRUE, keyCertSign).
absl::StatusOr<KeyAndCert> MakeCa(const CertSpec& spec);

// A certificate signed by `ca` for both TLS ends (serverAuth and
// clientAuth), naming spec.dns_name as its DNS subjectAltName.
absl::StatusOr<KeyAndCert> MakeLeaf(const KeyAndCert& ca, const CertSpec& spec);

// A fresh CA and one certificate from it, valid from 5 minutes ago for
// `validity`; the CA's key is not kept.
absl::StatusOr<TlsMaterial> MakeJobMaterial(absl::Duration validity);

}  // namespace kolo::tls

#endif  // KOLO_COMMON_TLS_GENERATE_H_
