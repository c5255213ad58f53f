// JobCertificates: a job's throwaway CA and certificate for the tests of
// kolo's TLS ports, and the certificates a port must refuse: an expired one
// of the job's CA, and one of another job's CA. JobCerts() makes them once
// per test binary (key generation takes a while).
//
// Thread-safety: JobCerts() is safe from any thread (a function-local
// static); the certificates are immutable once made.
#ifndef KOLO_TESTS_TESTING_JOB_CERTIFICATES_H_
#define KOLO_TESTS_TESTING_JOB_CERTIFICATES_H_

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/tls.h"
#include "common/tls_generate.h"

namespace kolo::testing {

struct JobCertificates {
  tls::KeyAndCert ca, leaf, expired, other_ca, other_leaf;

  JobCertificates() {
    const absl::Time now = absl::Now();
    const absl::Time from = now - absl::Hours(1), to = now + absl::Hours(1);
    ca = *tls::MakeCa(Spec("job CA", from, to));
    leaf = *tls::MakeLeaf(ca, Spec(tls::kJobName, from, to));
    expired = *tls::MakeLeaf(
        ca, Spec(tls::kJobName, now - absl::Hours(3), now - absl::Hours(2)));
    other_ca = *tls::MakeCa(Spec("another job's CA", from, to));
    other_leaf = *tls::MakeLeaf(other_ca, Spec(tls::kJobName, from, to));
  }

  // `own`'s certificate and key; the job's CA unless `trust` says another.
  tls::TlsMaterial Material(const tls::KeyAndCert& own,
                            const tls::KeyAndCert* trust = nullptr) const {
    return {own.cert_pem, own.key_pem, (trust ? *trust : ca).cert_pem};
  }

 private:
  static tls::CertSpec Spec(const std::string& cn, absl::Time from,
                            absl::Time to) {
    tls::CertSpec s;
    s.common_name = cn;
    s.not_before = from;
    s.not_after = to;
    return s;
  }
};

inline const JobCertificates& JobCerts() {
  static const JobCertificates* const certs = new JobCertificates();
  return *certs;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_JOB_CERTIFICATES_H_
