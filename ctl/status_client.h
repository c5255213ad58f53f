// kolo-ctl's gRPC side: one channel to the coordinator and a signed Status
// call (coordinator/status_auth.h) per poll, each with a deadline. Failures
// come back as statuses whose message says what happened and what to check
// (unreachable, refused, no answer in time, not a kolo coordinator).
//
// Thread-safety: Poll may be called from any thread; the channel is gRPC's
// and thread-safe.
#ifndef KOLO_CTL_STATUS_CLIENT_H_
#define KOLO_CTL_STATUS_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls.h"
#include "ctl/options.h"
#include "proto/kolo.grpc.pb.h"

namespace kolo::ctl {

class StatusClient {
 public:
  // `address` is HOST:PORT (or any gRPC target); no connection is made until
  // the first Poll. `tls`: the job's certificates (common/tls.h, from
  // --tls-* or KOLO_TLS_*), for a coordinator that requires TLS; null:
  // plaintext.
  StatusClient(std::string address, std::string job_id, std::string secret,
               const tls::TlsMaterial* tls = nullptr);

  // One Status call, bounded by `deadline` (from the call). Errors:
  // kUnavailable (cannot connect), kDeadlineExceeded (no answer in time),
  // kUnauthenticated (the coordinator refused the secret, the job id or this
  // host's clock), kUnimplemented (not a kolo coordinator), or the call's own
  // code.
  // With `metrics`, the reply carries the Prometheus page too
  // (StatusReply.metrics).
  absl::StatusOr<proto::StatusReply> Poll(
      absl::Duration deadline = kRpcDeadline, bool metrics = false) const;

 private:
  std::string address_, job_id_, secret_;
  bool tls_ = false;
  std::unique_ptr<proto::Coordinator::Stub> stub_;
};

}  // namespace kolo::ctl

#endif  // KOLO_CTL_STATUS_CLIENT_H_
