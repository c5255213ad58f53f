// kolorun --hostfile: see launcher/hostfile.h.
#include "launcher/hostfile.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kolo::launcher {
namespace {

constexpr char kHostfileExpected[] =
    "expected 'host slots=N' with N a positive integer (or host:N, or a "
    "bare host)";

bool PositiveInt(absl::string_view text, int& n) {
  return absl::SimpleAtoi(text, &n) && n >= 1;
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseHostfile(absl::string_view path,
                                                     absl::string_view text,
                                                     int default_slots) {
  std::vector<HostSlots> hosts;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    absl::string_view content = line.substr(0, line.find('#'));
    content = absl::StripAsciiWhitespace(content);
    if (content.empty()) continue;
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hostfile ", path, ", line ", number, ": '", content, "': ", what));
    };
    std::vector<absl::string_view> words =
        absl::StrSplit(content, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    HostSlots host;
    host.slots = default_slots;
    absl::string_view name = words[0];
    if (const size_t colon = name.rfind(':');
        colon != absl::string_view::npos) {
      if (!PositiveInt(name.substr(colon + 1), host.slots))
        return bad(kHostfileExpected);
      name = name.substr(0, colon);
    }
    if (name.empty() || absl::StrContains(name, '='))
      return bad(kHostfileExpected);
    host.name = std::string(name);
    for (size_t i = 1; i < words.size(); ++i) {
      const absl::string_view word = words[i];
      int n = 0;
      if (absl::StartsWith(word, "slots=")) {
        if (!PositiveInt(word.substr(6), n)) return bad(kHostfileExpected);
        host.slots = n;
      } else if (absl::StartsWith(word, "max_slots=")) {
        if (!PositiveInt(word.substr(10), n)) {
          return bad("expected max_slots=M with M a positive integer");
        }
      } else {
        return bad(absl::StrCat("unknown '", word, "'; ", kHostfileExpected));
      }
    }
    hosts.push_back(std::move(host));
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostfile ", path, ": no hosts; expected lines 'host slots=N'"));
  }
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path,
                                                    const ReadFileFn& read_file,
                                                    int default_slots) {
  absl::StatusOr<std::string> text = read_file(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hostfile ", path, ": ", text.status().message()));
  }
  return ParseHostfile(path, *text, default_slots);
}

absl::StatusOr<std::vector<HostSlots>> ParseHosts(absl::string_view text,
                                                  int default_slots) {
  std::vector<HostSlots> hosts;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-H '", text, "': empty host entry; expected host:slots,host:slots"));
    }
    HostSlots h;
    h.slots = default_slots;
    size_t colon = item.rfind(':');
    if (colon == absl::string_view::npos) {
      h.name = std::string(item);
    } else {
      h.name = std::string(item.substr(0, colon));
      absl::string_view slots = item.substr(colon + 1);
      if (!absl::SimpleAtoi(slots, &h.slots) || h.slots < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "-H '", text, "': bad slot count '", slots, "' for host '", h.name,
            "'; expected a positive integer (host:slots)"));
      }
    }
    if (h.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("-H '", text, "': empty host name in '", item, "'"));
    }
    hosts.push_back(std::move(h));
  }
  return hosts;
}

}  // namespace kolo::launcher
