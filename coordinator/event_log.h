// EventLog: the coordinator's event log (kolorun --events FILE,
// kolo-coordinator --events FILE): one JSON object a line for every epoch
// formed, worker lost or evicted, data-plane fault reported, stall warning,
// refusal and the job's end. Each line starts with "time" (RFC 3339, UTC,
// milliseconds), "event" and "epoch", then the event's own fields
// (docs/observability.md "The event log").
//
// Writes go through stdio's buffer under the log's own mutex and are
// flushed per line (events are rare: a few per epoch change, refusals
// rate-limited by the caller), so the file can be followed while the job
// runs; a write holds its caller only for one line.
//
// Thread-safety: Write and Flush may be called from any thread.
// Invariants: lines are whole and in the order of the Write calls.
#ifndef KOLO_COORDINATOR_EVENT_LOG_H_
#define KOLO_COORDINATOR_EVENT_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "nlohmann/json.hpp"

namespace kolo::coordinator {

// "2026-11-28T14:03:07.125Z".
std::string Rfc3339Millis(absl::Time t);

// One line of the log, without its newline: {"time", "event", "epoch", then
// `fields` in their order}.
std::string FormatEvent(absl::Time t, absl::string_view event, uint64_t epoch,
                        const nlohmann::ordered_json& fields);

class EventLog {
 public:
  // Creates (or truncates) `path`; fails naming it.
  static absl::StatusOr<std::shared_ptr<EventLog>> Open(
      const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  void Write(
      absl::Time t, absl::string_view event, uint64_t epoch,
      const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());
  void Flush();

 private:
  explicit EventLog(std::FILE* file) : file_(file) {}

  Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_EVENT_LOG_H_
