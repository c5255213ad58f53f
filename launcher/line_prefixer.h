// LinePrefixer: cuts one worker stream (its stdout or its stderr) into lines
// and prefixes each with the rank, Horovod-style: "[3]<stdout>:text\n".
//
// Bytes arrive in arbitrary chunks; a line is emitted once its newline has
// arrived, a partial last line at Finish() (with a newline added). A line
// longer than kMaxLine is emitted in pieces so that memory stays bounded.
//
// Thread-safety: one LinePrefixer belongs to one thread (kolorun's main loop).
#ifndef KOLO_LAUNCHER_LINE_PREFIXER_H_
#define KOLO_LAUNCHER_LINE_PREFIXER_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kolo::launcher {

class LinePrefixer {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;

  // `stream` is "stdout" or "stderr".
  LinePrefixer(int rank, absl::string_view stream);

  // Adds bytes; returns the complete prefixed lines they finish (maybe "").
  std::string Append(absl::string_view bytes);
  // Returns the prefixed partial last line, if any ("" otherwise).
  std::string Finish();

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_LINE_PREFIXER_H_
