#include "proto/refusal.h"

namespace kolo::proto {

absl::Status RefusalStatus(Refusal::Reason reason, absl::string_view message) {
  switch (reason) {
    case Refusal::AUTH_FAILED:
      return absl::UnauthenticatedError(message);
    case Refusal::DUPLICATE_WORKER:
      return absl::AlreadyExistsError(message);
    case Refusal::JOB_FULL:
      return absl::ResourceExhaustedError(message);
    case Refusal::PROTOCOL_ERROR:
      return absl::InvalidArgumentError(message);
    default:  // FENCED, VERSION_MISMATCH, WRONG_JOB
      return absl::FailedPreconditionError(message);
  }
}

}  // namespace kolo::proto
