#include "proto/membership_error.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace kolo::proto {

absl::Status MembershipError(const EpochAborted& aborted,
                             absl::string_view what) {
  absl::Status s = absl::AbortedError(
      what.empty() ? aborted.reason()
                   : absl::StrCat(what, ": ", aborted.reason()));
  s.SetPayload(kMembershipPayloadUrl, absl::Cord(aborted.SerializeAsString()));
  return s;
}

absl::Status EvictedError(const Evicted& evicted, const LostWorker& self) {
  EpochAborted aborted;
  aborted.set_epoch(evicted.epoch());
  *aborted.add_lost() = self;
  aborted.set_reason(evicted.reason());
  absl::Status s = MembershipError(aborted);
  s.SetPayload(kEvictedPayloadUrl, absl::Cord(evicted.SerializeAsString()));
  return s;
}

bool IsMembershipError(const absl::Status& s) {
  return absl::IsAborted(s) && s.GetPayload(kMembershipPayloadUrl).has_value();
}

bool IsEvictedError(const absl::Status& s) {
  return IsMembershipError(s) && s.GetPayload(kEvictedPayloadUrl).has_value();
}

std::optional<EpochAborted> MembershipPayload(const absl::Status& s) {
  if (!absl::IsAborted(s)) return std::nullopt;
  auto p = s.GetPayload(kMembershipPayloadUrl);
  if (!p.has_value()) return std::nullopt;
  EpochAborted aborted;
  if (!aborted.ParseFromString(std::string(*p))) return std::nullopt;
  return aborted;
}

}  // namespace kolo::proto
