// Job-secret authentication: HMAC-SHA256 challenge-response, used by the
// Session and the negotiation link (worker <-> coordinator), and with role
// labels of their own by the data-plane handshake (allreduce/tcp/handshake.h)
// and the Status call (coordinator/status_auth.h).
//
// The secret never crosses the wire. Each side contributes a fresh 32-byte
// nonce; each proof is an HMAC over a role label, the job id, the worker id and
// both nonces (every field length-prefixed), so a proof is valid for one
// handshake only (no replay) and a proof of one role never passes as the other.
// The coordinator proves first, so a worker never answers an impostor.
//
// Thread-safety: free functions are thread-safe; a handshake object belongs to
// one stream and is not shared between threads without external locking.
#ifndef KOLO_COMMON_AUTH_H_
#define KOLO_COMMON_AUTH_H_

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kolo::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;

// The one refusal a peer that has not proven the job secret gets, whatever
// the cause: it learns nothing about the job (worker ids, hosts, size). The
// details go to the refusing side's log.
inline constexpr absl::string_view kUnauthenticatedRefusal =
    "refused: authentication failed or not completed (the log of the process "
    "that refused says why; check that this process was given the job's "
    "secret)";

// How long a connection from outside may stay open without proving the job
// secret, on every port kolo listens on: the coordinator's gRPC port, its
// negotiation-link port and a worker's data port. Then it is closed and the
// refusal logged (rate-limited). A real peer proves within milliseconds; 10 s
// covers a loaded host.
inline constexpr absl::Duration kHandshakeTimeout = absl::Seconds(10);

// Cryptographically random bytes (OpenSSL RAND_bytes). CHECK-fails if the
// system has no entropy, which would be a broken host.
std::string RandomBytes(size_t n);
// `n` random bytes as 2n lowercase hex characters.
std::string RandomHex(size_t n);

// HMAC-SHA256(key, len(f1) f1 len(f2) f2 ...), lengths as 8-byte big endian.
std::string Hmac(absl::string_view key,
                 std::initializer_list<absl::string_view> fields);
bool ConstantTimeEqual(absl::string_view a, absl::string_view b);

// The two proofs of the Session handshake.
std::string CoordinatorProof(absl::string_view secret, absl::string_view job_id,
                             absl::string_view worker_id,
                             absl::string_view client_nonce,
                             absl::string_view server_nonce);
std::string WorkerProof(absl::string_view secret, absl::string_view job_id,
                        absl::string_view worker_id,
                        absl::string_view client_nonce,
                        absl::string_view server_nonce);

// Coordinator side of one handshake. Issues a fresh server nonce on
// construction and accepts at most one proof for it.
class ServerHandshake {
 public:
  ServerHandshake(std::string secret, std::string job_id, std::string worker_id,
                  std::string client_nonce);
  const std::string& server_nonce() const { return server_nonce_; }
  // What the coordinator sends to prove it knows the secret.
  std::string server_proof() const;
  // OK for the right mac, the first time. kUnauthenticated for a wrong mac or a
  // client nonce of the wrong length; kFailedPrecondition once already used
  // (a replayed or repeated proof).
  absl::Status Verify(absl::string_view mac);

 private:
  std::string secret_, job_id_, worker_id_, client_nonce_, server_nonce_;
  bool used_ = false;
};

// Worker side of one handshake.
class ClientHandshake {
 public:
  ClientHandshake(std::string secret, std::string job_id,
                  std::string worker_id);
  const std::string& client_nonce() const { return client_nonce_; }
  // Checks the coordinator's proof and returns the worker's mac.
  // kUnauthenticated when the coordinator does not know the secret.
  absl::StatusOr<std::string> Answer(absl::string_view server_nonce,
                                     absl::string_view server_proof) const;

 private:
  std::string secret_, job_id_, worker_id_, client_nonce_;
};

// The shortest job secret accepted anywhere one comes in (secret file,
// KOLO_SECRET): 16 bytes, 128 bits if random, beyond guessing.
inline constexpr size_t kMinSecretBytes = 16;
// How to make a good secret, for error messages.
inline constexpr absl::string_view kMakeSecretHint =
    "make one with `head -c 32 /dev/urandom | base64 > secret` (or `openssl "
    "rand -hex 32 > secret`)";

// kInvalidArgument when `secret` (from `source`, e.g. "KOLO_SECRET" or
// "the job secret file 'F'") is empty or shorter than kMinSecretBytes; the
// message says how long it must be and how to make one.
absl::Status CheckSecretStrength(absl::string_view secret,
                                 absl::string_view source);

// A warning when the secret file at `path` is readable or writable by group
// or others (as ssh warns about keys); nullopt when its mode is private or it
// cannot be stat'ed.
std::optional<std::string> SecretFileModeWarning(const std::string& path);

// Reads a job secret from a file: the whole content, trailing whitespace
// removed. Errors name the file and say what to do; a secret shorter than
// kMinSecretBytes is refused. Logs SecretFileModeWarning at warn.
absl::StatusOr<std::string> LoadSecretFile(const std::string& path);

}  // namespace kolo::auth

#endif  // KOLO_COMMON_AUTH_H_
