#include "coordinator/status_auth.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/check.h"

namespace kolo::coordinator {
namespace {
constexpr absl::string_view kStatusRole = "kolo/status/v1";
}  // namespace

std::string StatusRequestMac(absl::string_view secret, absl::string_view job_id,
                             absl::string_view client_nonce, int64_t unix_ms) {
  return auth::Hmac(secret,
                    {kStatusRole, job_id, client_nonce, absl::StrCat(unix_ms)});
}

proto::StatusRequest SignStatusRequest(absl::string_view secret,
                                       absl::string_view job_id,
                                       absl::Time now) {
  proto::StatusRequest r;
  r.set_job_id(std::string(job_id));
  r.set_client_nonce(auth::RandomBytes(auth::kNonceBytes));
  r.set_unix_ms(absl::ToUnixMillis(now));
  r.set_mac(StatusRequestMac(secret, job_id, r.client_nonce(), r.unix_ms()));
  return r;
}

absl::Status CheckStatusRequest(const proto::StatusRequest& request,
                                absl::string_view job_id,
                                absl::string_view secret, absl::Time now) {
  if (request.client_nonce().size() != auth::kNonceBytes) {
    return absl::UnauthenticatedError(absl::StrCat(
        "a Status request with a ", request.client_nonce().size(),
        "-byte nonce (expected ", auth::kNonceBytes,
        "): not signed with a job secret (an old kolo-ctl or another client)"));
  }
  const std::string expected = StatusRequestMac(
      secret, request.job_id(), request.client_nonce(), request.unix_ms());
  if (!auth::ConstantTimeEqual(expected, request.mac())) {
    return absl::UnauthenticatedError(
        "a Status request with a wrong mac: the caller does not know this "
        "job's secret");
  }
  if (request.job_id() != job_id) {
    return absl::UnauthenticatedError(
        absl::StrCat("a Status request for job '", request.job_id(),
                     "', but this coordinator serves job '", job_id, "'"));
  }
  const absl::Duration skew = absl::FromUnixMillis(request.unix_ms()) - now;
  if (skew > kStatusClockSkew || skew < -kStatusClockSkew) {
    return absl::UnauthenticatedError(absl::StrCat(
        "a Status request whose time is ", absl::FormatDuration(skew),
        " off this coordinator's clock (at most ",
        absl::FormatDuration(kStatusClockSkew),
        " allowed): a replay, or the caller's clock is wrong"));
  }
  return absl::OkStatus();
}

StatusVerifier::StatusVerifier(std::string job_id, std::string secret,
                               size_t max_nonces)
    : job_id_(std::move(job_id)),
      secret_(std::move(secret)),
      max_nonces_(max_nonces) {
  KOLO_CHECK(max_nonces_ >= 1);
}

absl::Status StatusVerifier::Verify(const proto::StatusRequest& request,
                                    absl::Time now) {
  absl::Status st = CheckStatusRequest(request, job_id_, secret_, now);
  if (!st.ok()) return st;
  MutexLock lock(&mu_);
  ForgetOld(now);
  if (seen_.contains(request.client_nonce())) {
    return absl::UnauthenticatedError(
        "a replayed Status request (its nonce was used before)");
  }
  while (order_.size() >= max_nonces_) {
    seen_.erase(order_.front().nonce);
    order_.pop_front();
  }
  seen_.insert(request.client_nonce());
  order_.push_back(Seen{now, request.client_nonce()});
  return absl::OkStatus();
}

void StatusVerifier::ForgetOld(absl::Time now) {
  // A nonce older than twice the window belongs to a request whose time is
  // out of the window by now (its time was at most one window before it
  // arrived), so a replay of it is refused by CheckStatusRequest.
  while (!order_.empty() && now - order_.front().at > 2 * kStatusClockSkew) {
    seen_.erase(order_.front().nonce);
    order_.pop_front();
  }
}

}  // namespace kolo::coordinator
