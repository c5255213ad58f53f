#include "ctl/names.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace kolo::ctl {

std::string StateName(proto::MemberState state) {
  switch (state) {
    case proto::MEMBER_STATE_AUTHENTICATING:
      return "authenticating";
    case proto::MEMBER_STATE_WAITING:
      return "waiting";
    case proto::MEMBER_STATE_MEMBER:
      return "member";
    case proto::MEMBER_STATE_LEFT:
      return "left";
    case proto::MEMBER_STATE_FAILED:
      return "failed";
    case proto::MEMBER_STATE_ENDED:
      return "ended";
    case proto::MEMBER_STATE_DISCONNECTED:
      return "disconnected";
    default:
      return "unknown";
  }
}

std::string FormatUnixMillis(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::string IncarnationHex(uint64_t incarnation) {
  return absl::StrFormat("%016x", incarnation);
}

std::string DescribeLost(const proto::LostWorker& lost) {
  std::string where = absl::StrCat("rank ", lost.rank());
  if (!lost.host_name().empty()) {
    absl::StrAppend(&where, ", host ", lost.host_name());
  }
  if (!lost.cause().empty()) absl::StrAppend(&where, ": ", lost.cause());
  return absl::StrCat(lost.worker_id(), " (", where, ")");
}

}  // namespace kolo::ctl
