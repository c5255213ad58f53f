#include "ctl/status_client.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/tls_grpc.h"
#include "coordinator/status_auth.h"

namespace kolo::ctl {

StatusClient::StatusClient(std::string address, std::string job_id,
                           std::string secret, const tls::TlsMaterial* tls)
    : address_(std::move(address)),
      job_id_(std::move(job_id)),
      secret_(std::move(secret)),
      tls_(tls != nullptr) {
  grpc::ChannelArguments args;
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      tls::ChannelCredentialsFor(tls, args);
  stub_ = proto::Coordinator::NewStub(
      grpc::CreateCustomChannel(address_, credentials, args));
}

absl::StatusOr<proto::StatusReply> StatusClient::Poll(absl::Duration deadline,
                                                      bool metrics) const {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  proto::StatusReply reply;
  proto::StatusRequest request =
      coordinator::SignStatusRequest(secret_, job_id_);
  request.set_metrics(metrics);
  grpc::Status st = stub_->Status(&ctx, request, &reply);
  if (st.ok()) return reply;
  const std::string said = st.error_message();
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the coordinator at ", address_, " (", said,
          "); check --coordinator or KOLO_COORDINATOR and that the job is "
          "running",
          tls_ ? "; with TLS (--tls-* or KOLO_TLS_*): that the coordinator "
                 "speaks TLS and that the certificates are this job's and not "
                 "expired"
               : "; if the job runs with TLS, give kolo-ctl its certificates "
                 "with --tls-cert, --tls-key and --tls-ca (or KOLO_TLS_CERT, "
                 "KOLO_TLS_KEY and KOLO_TLS_CA)"));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(
          absl::StrCat("the coordinator at ", address_, " did not answer in ",
                       absl::FormatDuration(deadline),
                       "; it may be overloaded, or the address may be wrong"));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(absl::StrCat(
          "the coordinator at ", address_,
          " refused the Status call: authentication failed; check that the "
          "secret (--secret-file, KOLO_SECRET or KOLO_SECRET_FILE) is this "
          "job's, that the job id '",
          job_id_,
          "' is right (--job-id or KOLO_JOB_ID), and that this host's clock "
          "is within ",
          absl::FormatDuration(coordinator::kStatusClockSkew),
          " of the coordinator's (the coordinator's log says which; it said: ",
          said, ")"));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnimplementedError(
          absl::StrCat(address_, " does not serve kolo's Status call (", said,
                       "); is it a kolo coordinator?"));
    default:
      return absl::Status(
          static_cast<absl::StatusCode>(st.error_code()),
          absl::StrCat("the Status call to ", address_, " failed: ", said));
  }
}

}  // namespace kolo::ctl
