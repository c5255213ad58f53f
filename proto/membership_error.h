// The membership error: what every pending op of a survivor fails with when
// the coordinator ends its epoch because workers were lost (elastic jobs;
// docs/design.md "Elastic"), and what an evicted worker's ops fail with.
//
// It is absl::StatusCode::kAborted with a payload (under kMembershipPayloadUrl:
// a serialized proto::EpochAborted naming the epoch, the lost workers' ids,
// ranks and hosts, and the cause). kAborted alone is not enough to retry on:
// shutdown, the job's end and a transport abort use it too. Elastic retry
// (kolo::elastic::run) acts on the payload only, and never on an evicted
// worker's error: that worker is out of the job.
//
// Thread-safety: pure functions.
#ifndef KOLO_PROTO_MEMBERSHIP_ERROR_H_
#define KOLO_PROTO_MEMBERSHIP_ERROR_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/kolo.pb.h"

namespace kolo::proto {

inline constexpr absl::string_view kMembershipPayloadUrl =
    "type.kolo.dev/kolo.proto.EpochAborted";
inline constexpr absl::string_view kEvictedPayloadUrl =
    "type.kolo.dev/kolo.proto.Evicted";

// kAborted "<what>: <aborted.reason()>" with the payload.
absl::Status MembershipError(const EpochAborted& aborted,
                             absl::string_view what = "");
// kAborted "<evicted.reason()>" carrying both payloads (the epoch it was lost
// from, naming this worker) and the eviction mark.
absl::Status EvictedError(const Evicted& evicted, const LostWorker& self);

// Whether `s` is a membership error (any op; evicted or not).
bool IsMembershipError(const absl::Status& s);
// Whether `s` says this worker was evicted (not retryable).
bool IsEvictedError(const absl::Status& s);
// The payload of a membership error; nullopt for any other status.
std::optional<EpochAborted> MembershipPayload(const absl::Status& s);

}  // namespace kolo::proto

#endif  // KOLO_PROTO_MEMBERSHIP_ERROR_H_
