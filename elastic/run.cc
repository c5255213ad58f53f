// kolo::elastic::run (include/kolo/elastic.h): the retry wrapper, and the
// predicates on the membership error that decide a retry.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "proto/membership_error.h"
#include "worker_lib/api_internal.h"

namespace kolo::elastic {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("elastic"));
  return *logger;
}

}  // namespace

bool IsMembershipError(const absl::Status& s) {
  return proto::IsMembershipError(s) && !proto::IsEvictedError(s);
}

bool IsEvictedError(const absl::Status& s) { return proto::IsEvictedError(s); }

absl::Status run(State& state, const std::function<absl::Status()>& fn,
                 const RunOptions& options) {
  int resets = 0;
  while (true) {
    absl::Status s = state.sync();
    if (s.ok()) s = fn();
    if (s.ok() || !IsMembershipError(s)) return s;
    ++resets;
    Log()->warn("membership change #{}: {}; restoring commit {} and regrouping",
                resets, std::string(s.message()), state.commits());
    state.restore();
    absl::Status next = internal::AwaitNextEpoch(options.epoch_timeout);
    if (!next.ok()) return next;
    state.on_reset();
  }
}

}  // namespace kolo::elastic
