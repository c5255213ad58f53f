// The absl::Status a Refusal (proto/kolo.proto) stands for, one mapping for
// both ends: the coordinator finishes a refused stream with it, and the worker
// turns a Refusal it receives into it.
//
//   AUTH_FAILED       kUnauthenticated
//   DUPLICATE_WORKER  kAlreadyExists
//   JOB_FULL          kResourceExhausted
//   PROTOCOL_ERROR    kInvalidArgument
//   FENCED            kFailedPrecondition: a message of another coordinator
//                     start or epoch. Not kAborted: kAborted with a
//                     membership payload is what an elastic retry acts on,
//                     and retrying cannot cure a fenced worker.
//   VERSION_MISMATCH, WRONG_JOB, anything else: kFailedPrecondition
//
// Thread-safety: a pure function.
#ifndef KOLO_PROTO_REFUSAL_H_
#define KOLO_PROTO_REFUSAL_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/kolo.pb.h"

namespace kolo::proto {

absl::Status RefusalStatus(Refusal::Reason reason, absl::string_view message);

}  // namespace kolo::proto

#endif  // KOLO_PROTO_REFUSAL_H_
