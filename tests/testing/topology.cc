#include "tests/testing/topology.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace kolo::testing {

std::vector<Fields> ParseTagged(const std::string& output,
                                const std::string& tag) {
  std::vector<Fields> out;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    size_t pos = line.find(tag + " ");
    if (pos == absl::string_view::npos) continue;
    Fields f;
    for (absl::string_view kv : absl::StrSplit(
             line.substr(pos + tag.size() + 1), ' ', absl::SkipEmpty())) {
      std::vector<std::string> parts =
          absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (parts.size() == 2) f[parts[0]] = parts[1];
    }
    out.push_back(std::move(f));
  }
  return out;
}

int IntField(const Fields& f, const std::string& key) {
  auto it = f.find(key);
  int v = -999;
  if (it == f.end() || !absl::SimpleAtoi(it->second, &v)) return -999;
  return v;
}

}  // namespace kolo::testing
