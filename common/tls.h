// A job's TLS certificates for the control plane (issue 38): which files
// (TlsFiles, from KOLO_TLS_CERT / KOLO_TLS_KEY / KOLO_TLS_CA or the
// --tls-cert / --tls-key / --tls-ca flags) and their contents, loaded and
// checked before anything connects (TlsMaterial), so that a wrong file is
// said at start, naming the file and what to do, not as a failed handshake.
//
// What a job's certificates must be (docs/security.md says it for users):
// - the CA (`ca`) is the job's own: every peer pins it; a certificate of
//   another CA (another job) is refused;
// - the certificate (`cert`, with its private key `key`) is signed by that
//   CA, valid now, and names kJobName ("kolo-job") as a DNS
//   subjectAltName: a client checks that name, not the coordinator's address
//   (which is often 127.0.0.1 or a pod IP no certificate names);
// - it serves both ends (the coordinator's server and the workers' client):
//   no extendedKeyUsage, or both serverAuth and clientAuth.
// The job secret's HMAC proof stays: a certificate proves a machine holds
// the job's certificates, the secret proves the job.
//
// Thread-safety: pure functions (they read files and the clock).
#ifndef KOLO_COMMON_TLS_H_
#define KOLO_COMMON_TLS_H_

#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kolo::tls {

// The DNS name every job certificate carries and every client checks.
inline constexpr char kJobName[] = "kolo-job";

// Paths of the PEM files. Invariant: all three set, or none (TLS off).
struct TlsFiles {
  std::string cert;  // this process's certificate (chain), PEM
  std::string key;   // its private key, PEM, unencrypted
  std::string ca;    // the job's CA certificate(s), PEM
  bool enabled() const { return !cert.empty(); }
};

// TlsFiles from three values given by `given_by` (for messages, e.g.
// "--tls-cert, --tls-key and --tls-ca"): all empty is TLS off; a partial set
// is kInvalidArgument naming the missing ones.
absl::StatusOr<TlsFiles> MakeTlsFiles(std::string cert, std::string key,
                                      std::string ca,
                                      absl::string_view cert_name,
                                      absl::string_view key_name,
                                      absl::string_view ca_name);

// From KOLO_TLS_CERT, KOLO_TLS_KEY and KOLO_TLS_CA, read with `getenv`
// (nullptr or "" is unset).
absl::StatusOr<TlsFiles> TlsFilesFromEnvironment(
    absl::FunctionRef<const char*(const char*)> getenv);

// The rule of every program with --tls-cert, --tls-key and --tls-ca flags
// (kolorun, kolo-coordinator, kolo-ctl): `flags` (their values, "" for one
// not given) when any is given, else KOLO_TLS_* read with `env` (nullopt or
// "" is unset); flags and variables are not mixed. A partial set is
// MakeTlsFiles' kInvalidArgument, naming the missing flags or variables.
absl::StatusOr<TlsFiles> TlsFilesFromFlagsOrEnvironment(
    const TlsFiles& flags,
    absl::FunctionRef<std::optional<std::string>(const char*)> env);

// The files' contents, as gRPC's SSL credentials take them.
struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
};

// Reads and checks `files` (CheckTlsMaterial at `now`); errors name the file.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files,
                                            absl::Time now = absl::Now());

// Checks that `m` is usable as a job's certificates at `now`: each PEM
// parses, the key is the certificate's, the certificate is valid at `now`
// (else the error names its dates), is signed by the CA and names kJobName.
// `files` names the files in messages (may be the default: "the
// certificate").
absl::Status CheckTlsMaterial(const TlsMaterial& m, absl::Time now,
                              const TlsFiles& files = {});

}  // namespace kolo::tls

#endif  // KOLO_COMMON_TLS_H_
