// Authentication of the Status RPC: the caller (kolo-ctl, a test) proves that
// it knows the job secret, as a worker does in its Session handshake, but in
// one message, since Status is a unary call.
//
// The request carries the job id, a fresh 32-byte client nonce, the caller's
// wall-clock time in milliseconds and an HMAC-SHA256 over them with the job
// secret (auth::Hmac, under its own role label, so that a Status mac never
// passes for a Session proof or the other way round). The secret never
// crosses the wire. The coordinator accepts a request when the mac is right,
// the job is its own, the time is within kStatusClockSkew of its clock and the
// nonce was not seen before: a captured request cannot be replayed, and one
// older than the skew window is refused by its time alone.
//
// Thread-safety: SignStatusRequest and CheckStatusRequest are pure;
// StatusVerifier may be called from any thread (it locks its own state).
#ifndef KOLO_COORDINATOR_STATUS_AUTH_H_
#define KOLO_COORDINATOR_STATUS_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

// How far a request's time may be from the coordinator's clock.
inline constexpr absl::Duration kStatusClockSkew = absl::Minutes(5);

// The mac of a Status request (see the header comment).
std::string StatusRequestMac(absl::string_view secret, absl::string_view job_id,
                             absl::string_view client_nonce, int64_t unix_ms);

// A request for `job_id`, signed with `secret` at `now` with a fresh nonce.
proto::StatusRequest SignStatusRequest(absl::string_view secret,
                                       absl::string_view job_id,
                                       absl::Time now = absl::Now());

// Checks one request against the job (`job_id`, `secret`) at `now`, without
// the replay check. OK, or kUnauthenticated with a message for the
// coordinator's log only (it names the cause: wrong secret, wrong job, clock
// skew; never the secret).
absl::Status CheckStatusRequest(const proto::StatusRequest& request,
                                absl::string_view job_id,
                                absl::string_view secret, absl::Time now);

// The coordinator's side: CheckStatusRequest plus the replay check. The
// nonces of accepted requests are remembered for twice the skew window (a
// request outside it is refused by its time anyway), at most `max_nonces` of
// them; past that the oldest are forgotten first. Only requests with a right
// mac are remembered, so only holders of the secret can fill the table.
class StatusVerifier {
 public:
  // REQUIRES: max_nonces >= 1.
  StatusVerifier(std::string job_id, std::string secret,
                 size_t max_nonces = 65536);

  // OK, or kUnauthenticated with a message for the log (as
  // CheckStatusRequest's, or "replayed request").
  absl::Status Verify(const proto::StatusRequest& request, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Seen {
    absl::Time at;
    std::string nonce;
  };
  void ForgetOld(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string job_id_;
  const std::string secret_;  // never logged
  const size_t max_nonces_;
  Mutex mu_;
  std::deque<Seen> order_ ABSL_GUARDED_BY(mu_);  // oldest first
  absl::flat_hash_set<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_STATUS_AUTH_H_
