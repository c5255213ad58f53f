// Helpers shared by the fuzz targets that read text: cutting the input into
// fields the way a command line or an environment block holds them.
#ifndef KOLO_FUZZ_FUZZ_TEXT_H_
#define KOLO_FUZZ_FUZZ_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace kolo::fuzz {

// `text` cut at every `sep` (empty fields kept).
inline std::vector<std::string> Split(absl::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    if (end == absl::string_view::npos) {
      out.emplace_back(text.substr(start));
      return out;
    }
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
}

// NAME=VALUE lines (newline-separated) as (name, value) pairs; a line with
// no '=' is a name with an empty value.
inline std::vector<std::pair<std::string, std::string>> EnvLines(
    absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::string& line : Split(text, '\n')) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      out.emplace_back(std::move(line), "");
    } else {
      out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    }
  }
  return out;
}

}  // namespace kolo::fuzz

#endif  // KOLO_FUZZ_FUZZ_TEXT_H_
