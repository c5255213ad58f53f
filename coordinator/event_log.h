// EventLog: the coordinator's event log (kolorun --events FILE,
// kolo-coordinator --events FILE): one JSON object a line for every epoch
// formed, worker lost or evicted, data-plane fault reported, stall warning,
// refusal and the job's end. Each line starts with "time" (RFC 3339, UTC,
// milliseconds), "event" and "epoch", then the event's own fields
// (docs/observability.md "The event log").
//
// kolorun's fault report is derived from the same events: kolorun opens the
// log to keep every event in memory too (Kept), and with no --events file
// it uses a log that only keeps them (InMemory).
//
// Writes go through stdio's buffer under the log's own mutex and are
// flushed per line (events are rare: a few per epoch change, refusals
// rate-limited by the caller), so the file can be followed while the job
// runs; a write holds its caller only for one line.
//
// Thread-safety: Write and Flush may be called from any thread.
// Invariants: lines are whole and in the order of the Write calls; Kept()
// holds the same events in the same order.
#ifndef KOLO_COORDINATOR_EVENT_LOG_H_
#define KOLO_COORDINATOR_EVENT_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "nlohmann/json.hpp"

namespace kolo::coordinator {

// "2026-11-28T14:03:07.125Z".
std::string Rfc3339Millis(absl::Time t);

// One event: {"time", "event", "epoch", then `fields` in their order}.
nlohmann::ordered_json MakeEvent(absl::Time t, absl::string_view event,
                                 uint64_t epoch,
                                 const nlohmann::ordered_json& fields);
// One line of the log (MakeEvent's object), without its newline.
std::string FormatEvent(absl::Time t, absl::string_view event, uint64_t epoch,
                        const nlohmann::ordered_json& fields);
// An event's "time" back as a time; InfinitePast when it does not parse.
absl::Time EventTime(const nlohmann::ordered_json& event);

class EventLog {
 public:
  // Creates (or truncates) `path`; fails naming it. With `keep`, every
  // event is kept in memory as well (Kept).
  static absl::StatusOr<std::shared_ptr<EventLog>> Open(const std::string& path,
                                                        bool keep = false);
  // A log without a file that keeps every event.
  static std::shared_ptr<EventLog> InMemory();
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  void Write(
      absl::Time t, absl::string_view event, uint64_t epoch,
      const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());
  void Flush();
  // The events written so far, oldest first (none unless kept).
  std::vector<nlohmann::ordered_json> Kept() const;

 private:
  EventLog(std::FILE* file, bool keep) : file_(file), keep_(keep) {}

  mutable Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);  // null: memory only
  const bool keep_;
  std::vector<nlohmann::ordered_json> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_EVENT_LOG_H_
