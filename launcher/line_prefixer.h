// LinePrefixer: cuts one worker stream (its stdout or its stderr) into lines
// and prefixes each with the rank, Horovod-style: "[3]<stdout>:text\n"; with
// a timestamp (--prefix-output-with-timestamp), the time kolorun received
// the line, in UTC, after the prefix:
//   "[3]<stdout>:2026-11-28 05:59:01.123 text\n"
// (ISO 8601 date, 24-hour time with milliseconds, one space after it).
//
// Bytes arrive in arbitrary chunks; a line is emitted once its newline has
// arrived, a partial last line at Finish() (with a newline added). A line
// longer than kMaxLine is emitted in pieces so that memory stays bounded.
//
// With a copy file (--output-filename), every byte is also written to it as
// it arrives, unchanged: no prefix, no timestamp, no added newline.
//
// Thread-safety: one LinePrefixer belongs to one thread (kolorun's main loop).
#ifndef KOLO_LAUNCHER_LINE_PREFIXER_H_
#define KOLO_LAUNCHER_LINE_PREFIXER_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kolo::launcher {

class LinePrefixer {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;

  struct Options {
    bool timestamp = false;
    // The clock of the timestamps (tests); default absl::Now.
    std::function<absl::Time()> clock;
    // A file descriptor that gets the raw bytes; owned (closed by the
    // destructor); -1: none.
    int copy_fd = -1;
  };

  // `stream` is "stdout" or "stderr".
  LinePrefixer(int rank, absl::string_view stream);
  LinePrefixer(int rank, absl::string_view stream, Options options);
  ~LinePrefixer();
  LinePrefixer(const LinePrefixer&) = delete;
  LinePrefixer& operator=(const LinePrefixer&) = delete;

  // Adds bytes; returns the complete prefixed lines they finish (maybe "").
  std::string Append(absl::string_view bytes);
  // Returns the prefixed partial last line, if any ("" otherwise).
  std::string Finish();

 private:
  // prefix_, then the timestamp when asked for.
  std::string LinePrefix() const;

  std::string prefix_;
  std::string partial_;
  Options options_;
};

// The timestamp format of LinePrefixer: "2026-11-28 05:59:01.123" (UTC).
std::string LineTimestamp(absl::Time t);

// --output-filename DIR: creates DIR and its parents (existing ones are
// fine). The error names the path and the reason (errno's text).
absl::Status CreateOutputDir(const std::string& dir);

// Opens DIR/rank.<rank>/<stream> for writing (creating rank.<rank>), close
// on exec; `append`: keep what is there (an elastic replacement of that
// worker number), else truncate.
absl::StatusOr<int> OpenRankOutput(const std::string& dir, int rank,
                                   absl::string_view stream, bool append);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_LINE_PREFIXER_H_
