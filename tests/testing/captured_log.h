// CapturedLog: what a kolo logger (common/log.h) prints while the capture
// lives, for tests that check a log line (a refusal, a warning). RAII: the
// constructor adds a ring-buffer sink to the logger and, unless told to keep
// it, sets its level to debug (LogRefusal's held-back lines are at debug);
// the destructor removes that sink and restores the level.
//
// Thread-safety: text(), lines(), Contains() and WaitFor() may be called from
// any thread while other threads log. Construct and destroy it while no other
// capture of the same logger is made or destroyed (captures nest: LIFO).
// spdlog reads a logger's sink list without a lock, so a capture is made
// before the threads whose lines it wants start logging, as the tests do.
#ifndef KOLO_TESTS_TESTING_CAPTURED_LOG_H_
#define KOLO_TESTS_TESTING_CAPTURED_LOG_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"

namespace kolo::testing {

class CapturedLog {
 public:
  // Captures the logger `component` (GetLogger); the last `capacity` lines
  // are kept. `level`: the logger's level meanwhile (nullopt: unchanged).
  explicit CapturedLog(
      absl::string_view component,
      std::optional<spdlog::level::level_enum> level = spdlog::level::debug,
      size_t capacity = 1000);
  ~CapturedLog();
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // The lines kept, oldest first, each with its newline.
  std::vector<std::string> lines() const;
  // Every line kept, joined.
  std::string text() const;
  bool Contains(absl::string_view needle) const;
  // Waits up to `timeout` (scaled by KOLO_TIMEOUT_SCALE) for a line with
  // `needle`; returns text() then, found or not.
  std::string WaitFor(absl::string_view needle, absl::Duration timeout) const;

 private:
  std::shared_ptr<spdlog::logger> logger_;
  spdlog::level::level_enum saved_level_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_CAPTURED_LOG_H_
