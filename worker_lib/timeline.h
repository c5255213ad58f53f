// Timeline: writes what a worker does as a Chrome trace (KOLO_TIMELINE=path),
// which opens in chrome://tracing and in Perfetto (ui.perfetto.dev).
//
// The file is in Chrome's "JSON Array Format": `[`, then one event per line
// separated by commas, then `]` when the timeline is closed. (The format lets
// the `]` be missing, so a file cut off by a crash still loads.) Every event
// has "name", "ph", "ts" (microseconds since Options::origin, with nanosecond
// decimals), "pid" (this worker's rank) and "tid" (its row). Row 0 is "plans"
// (Marker); every tensor name gets a row of its own, numbered 1, 2, ... in the
// order their first events are written, named by a "thread_name" metadata
// event written just before the row's first event. Args are strings, written as
// a JSON object. Names and args are escaped as JSON; bytes that are not UTF-8
// are written as U+FFFD.
//
// Never blocks its callers: an event call takes a mutex only to append the
// event to an in-memory queue (and wakes the writer at most when the queue
// was empty or is a quarter full); a writer thread of its own formats the
// events and writes them, one fwrite and fflush per batch it takes off the
// queue, a batch every Options::flush_interval at most.
// When Options::max_queued events are waiting, new events are dropped and
// counted (dropped()); a dropped Begin drops its End too, so that the file's
// B/E events stay balanced. A write error (disk full) is logged once and
// every later event is dropped and counted.
//
// Close() drains the queue, ends the slices still open (at the close time),
// writes a last instant event on the plans row, "timeline closed", whose args
// hold "dropped_events" (the count so far), then `]`, and closes the file.
//
// Thread-safety: every method may be called from any thread, concurrently.
// Invariants: the queue holds at most max_queued events, plus the End events
// of accepted Begins and one "thread_name" event per row; per row, the file's
// B/E events nest like the calls that made them.
// REQUIRES: per tensor, Begin/End calls nest (every End closes the latest
// open Begin of that tensor; an End with none open is ignored). Timestamps
// need not be monotonic, but Chrome draws a row's slices from them, so a
// tensor's times should not go backwards.
#ifndef KOLO_WORKER_LIB_TIMELINE_H_
#define KOLO_WORKER_LIB_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace kolo::worker {

// (Outside the class so that `Options options = {}` compiles with GCC.)
struct TimelineOptions {
  // Events waiting for the writer; beyond it new events are dropped and
  // counted. 64 Ki events of ~100 bytes: a few MiB held while a slow disk
  // catches up.
  size_t max_queued = size_t{1} << 16;
  // Time zero of "ts". InfinitePast: the time of Open. A time every rank
  // shares (absl::UnixEpoch()) lets the files of several ranks be merged
  // into one trace.
  absl::Time origin = absl::InfinitePast();
  // How long the writer lets events gather before it writes them (sooner
  // when a quarter of max_queued wait): few wakeups of the writer and few
  // writes, at the cost of losing up to this much of the trace in a crash.
  absl::Duration flush_interval = absl::Milliseconds(100);
};

class Timeline {
 public:
  using Options = TimelineOptions;
  // String values, JSON-escaped by the writer.
  using Args = std::vector<std::pair<std::string, std::string>>;

  // Creates or truncates `path` and starts the writer thread. An error
  // (its code from errno: kNotFound, kPermissionDenied, ...) names the path
  // and says to fix KOLO_TIMELINE.
  static absl::StatusOr<std::unique_ptr<Timeline>> Open(const std::string& path,
                                                        int rank,
                                                        Options options = {});
  // Close().
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Duration events ("ph":"B" / "E") on `tensor`'s row.
  void Begin(absl::string_view tensor, absl::string_view phase, absl::Time at,
             Args args = {}) ABSL_LOCKS_EXCLUDED(mu_);
  void End(absl::string_view tensor, absl::Time at) ABSL_LOCKS_EXCLUDED(mu_);
  // An instant event ("ph":"i", "s":"t") on `tensor`'s row, e.g. a rank's
  // ready tick.
  void Instant(absl::string_view tensor, absl::string_view name, absl::Time at,
               Args args = {}) ABSL_LOCKS_EXCLUDED(mu_);
  // An instant event on the plans row (tid 0), e.g. one per plan.
  void Marker(absl::string_view name, absl::Time at, Args args = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // Drains the queue, finishes the file (see above) and closes it; joins the
  // writer. Logs the number of dropped events, if any. Idempotent; a second
  // caller returns once the first has finished. Events given after Close
  // are dropped and counted.
  void Close() ABSL_LOCKS_EXCLUDED(mu_, close_mu_);

  // Events not written: dropped because the queue was full, lost to a write
  // error, or given after Close.
  uint64_t dropped() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // kClosed: the last record, written by the writer itself.
  enum class Kind : uint8_t { kRowName, kBegin, kEnd, kInstant, kClosed };
  struct Event {
    Kind kind;
    int tid;
    absl::Time at;
    std::string name;  // kRowName: the tensor; kEnd: empty
    Args args;
  };
  struct Row {
    // Given with the row's kRowName, when its first event is queued (so
    // that tids follow the file's order even when events are dropped); 0
    // until then.
    int tid = 0;
    // Open Begins, innermost last: true if it was queued, false if dropped.
    std::vector<bool> open;
  };

  Timeline(std::FILE* file, std::string path, int rank, Options options);

  // The row of `tensor`, created on first sight.
  Row& RowOf(absl::string_view tensor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `event` on `row` (`tensor`'s; null for the plans row) if `exempt`
  // or the queue has room; else counts a drop. Returns whether it was
  // queued. Gives `row` its tid and name first if it has none yet.
  bool Push(Row* row, absl::string_view tensor, Event event, bool exempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the caller must wake the writer (it sleeps, and what it waits
  // for is there).
  bool TakeWake() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriterMain() ABSL_LOCKS_EXCLUDED(mu_);
  // Appends one event (with its leading separator) to `out`.
  void Format(const Event& event, std::string* out);
  // Writes and flushes `bytes` holding `events` events; on the first error
  // logs it and from then on counts every event as dropped.
  void Write(const std::string& bytes, size_t events) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string path_;
  const int rank_;
  const Options options_;
  const absl::Time origin_;
  const size_t full_batch_;  // a quarter of max_queued, at least 1

  mutable Mutex mu_;
  CondVar cv_;  // events queued, or closing
  std::vector<Event> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Row> rows_ ABSL_GUARDED_BY(mu_);
  int next_tid_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // What the sleeping writer waits for: kNothing while it works.
  enum class Wants : uint8_t { kNothing, kAnyEvent, kFullBatch };
  Wants writer_wants_ ABSL_GUARDED_BY(mu_) = Wants::kNothing;

  // The writer thread's own (and Open's, before the thread starts).
  std::FILE* file_;
  bool write_failed_ = false;
  absl::Time latest_ = absl::InfinitePast();  // the latest ts written

  Mutex close_mu_;  // held through Close
  bool closed_ ABSL_GUARDED_BY(close_mu_) = false;
  std::thread writer_;
};

// Appends `s` to `out` as a JSON string literal, quotes included: `"` and
// `\` escaped, control characters as \n, \t, ... or \u00XX, bytes that are
// not part of valid UTF-8 as \ufffd.
void AppendJsonString(absl::string_view s, std::string* out);

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_TIMELINE_H_
