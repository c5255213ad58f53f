// CapturedLog (tests/testing/captured_log.h).
#include "tests/testing/captured_log.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {

CapturedLog::CapturedLog(absl::string_view component,
                         std::optional<spdlog::level::level_enum> level,
                         size_t capacity)
    : logger_(GetLogger(component)),
      saved_level_(logger_->level()),
      sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(capacity)) {
  if (level.has_value()) logger_->set_level(*level);
  logger_->sinks().push_back(sink_);
}

CapturedLog::~CapturedLog() {
  std::vector<spdlog::sink_ptr>& sinks = logger_->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  logger_->set_level(saved_level_);
}

std::vector<std::string> CapturedLog::lines() const {
  return sink_->last_formatted();
}

std::string CapturedLog::text() const { return absl::StrJoin(lines(), ""); }

bool CapturedLog::Contains(absl::string_view needle) const {
  return absl::StrContains(text(), needle);
}

std::string CapturedLog::WaitFor(absl::string_view needle,
                                 absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + Scaled(timeout);
  while (true) {
    std::string all = text();
    if (absl::StrContains(all, needle) || absl::Now() >= deadline) return all;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace kolo::testing
