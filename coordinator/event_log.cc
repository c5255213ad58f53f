// EventLog: one JSON object a line (see event_log.h).
#include "coordinator/event_log.h"

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace kolo::coordinator {

std::string Rfc3339Millis(absl::Time t) {
  const int64_t ms = absl::ToUnixMillis(t);
  const absl::Time whole =
      absl::FromUnixSeconds(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  const int64_t frac = ms - absl::ToUnixSeconds(whole) * 1000;
  return absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%S", whole, absl::UTCTimeZone()),
      absl::StrFormat(".%03dZ", frac));
}

nlohmann::ordered_json MakeEvent(absl::Time t, absl::string_view event,
                                 uint64_t epoch,
                                 const nlohmann::ordered_json& fields) {
  nlohmann::ordered_json line;
  line["time"] = Rfc3339Millis(t);
  line["event"] = std::string(event);
  line["epoch"] = epoch;
  for (const auto& [key, value] : fields.items()) line[key] = value;
  return line;
}

namespace {

std::string Dump(const nlohmann::ordered_json& line) {
  // Invalid UTF-8 (a peer's bytes in a refusal) is replaced, not thrown.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string FormatEvent(absl::Time t, absl::string_view event, uint64_t epoch,
                        const nlohmann::ordered_json& fields) {
  return Dump(MakeEvent(t, event, epoch, fields));
}

absl::Time EventTime(const nlohmann::ordered_json& event) {
  auto it = event.find("time");
  absl::Time t;
  std::string err;
  if (it == event.end() || !it->is_string() ||
      !absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", it->get<std::string>(),
                       absl::UTCTimeZone(), &t, &err)) {
    return absl::InfinitePast();
  }
  return t;
}

absl::StatusOr<std::shared_ptr<EventLog>> EventLog::Open(
    const std::string& path, bool keep) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write the event log '", path, "': ", std::strerror(errno)));
  }
  return std::shared_ptr<EventLog>(new EventLog(file, keep));
}

std::shared_ptr<EventLog> EventLog::InMemory() {
  return std::shared_ptr<EventLog>(new EventLog(nullptr, true));
}

EventLog::~EventLog() {
  MutexLock lock(&mu_);
  if (file_ != nullptr) std::fclose(file_);
}

void EventLog::Write(absl::Time t, absl::string_view event, uint64_t epoch,
                     const nlohmann::ordered_json& fields) {
  nlohmann::ordered_json made = MakeEvent(t, event, epoch, fields);
  MutexLock lock(&mu_);
  if (file_ != nullptr) {
    const std::string line = Dump(made) + "\n";
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
  }
  if (keep_) kept_.push_back(std::move(made));
}

void EventLog::Flush() {
  MutexLock lock(&mu_);
  if (file_ != nullptr) std::fflush(file_);
}

std::vector<nlohmann::ordered_json> EventLog::Kept() const {
  MutexLock lock(&mu_);
  return kept_;
}

}  // namespace kolo::coordinator
