// The check for KOLO_* variables nothing reads (worker_lib/config.h:
// UnknownVariableWarnings, KnownVariables), against common/variables.h's
// table, and the closest-name suggestion.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/edit_distance.h"
#include "common/variables.h"
#include "worker_lib/config.h"

namespace kolo::worker {
namespace {

constexpr char kKoloPrefix[] = "KOLO_";

// The KOLO_* names of common/variables.h's table, sorted; the internal ones
// only when `with_internal`.
std::vector<std::string> KoloNames(bool with_internal) {
  std::vector<std::string> names;
  for (const Variable& v : Variables()) {
    if (absl::StartsWith(v.name, kKoloPrefix) &&
        (with_internal || !v.internal)) {
      names.emplace_back(v.name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The known variable `name` most likely meant, or "" when none is close.
// Candidates: one name (of 4+ characters after KOLO_) a prefix of the other,
// as in a unit added or left out (KOLO_TIMEOUT, KOLO_START_TIMEOUT_SECONDS),
// or within a third of the longer name (after KOLO_) in edit distance. A
// prefix match beats a mere near one (KOLO_START_TIMEOUT_SECONDS is nearer
// KOLO_HEARTBEAT_TIMEOUT_SECONDS); then the smaller distance wins, then the
// first by name.
std::string ClosestKnownVariable(absl::string_view name) {
  const absl::string_view tail = absl::StripPrefix(name, kKoloPrefix);
  const std::string upper_tail = absl::AsciiStrToUpper(tail);
  std::string best;
  std::pair<bool, size_t> best_rank = {true, 0};  // (not a prefix, distance)
  for (const std::string& candidate : KoloNames(/*with_internal=*/false)) {
    const absl::string_view known =
        absl::StripPrefix(absl::string_view(candidate), kKoloPrefix);
    const size_t distance =
        EditDistance(tail, known, EditOps::kWithTranspositions);
    const size_t shorter = std::min(tail.size(), known.size());
    const bool prefix = shorter >= 4 && (absl::StartsWith(upper_tail, known) ||
                                         absl::StartsWith(known, upper_tail));
    const bool close = distance <= std::max(tail.size(), known.size()) / 3;
    if (!prefix && !close) continue;
    const std::pair<bool, size_t> rank = {!prefix, distance};
    if (best.empty() || rank < best_rank) {
      best = candidate;
      best_rank = rank;
    }
  }
  return best;
}

// What a warning may show of `name`'s value: nothing when the name, or the
// known name it is closest to, looks secret (a misspelt KOLO_SECRET holds
// the secret all the same); at most 64 characters otherwise.
std::string ShownValue(absl::string_view name, absl::string_view closest,
                       absl::string_view value) {
  const std::string upper = absl::AsciiStrToUpper(absl::StrCat(name, closest));
  for (const char* secret : {"SECRET", "SECRT", "TOKEN", "PASS", "KEY"}) {
    if (absl::StrContains(upper, secret)) return "<hidden>";
  }
  if (value.size() > 64) return absl::StrCat(value.substr(0, 61), "...");
  return std::string(value);
}

}  // namespace

std::vector<std::string> KnownVariables() {
  return KoloNames(/*with_internal=*/true);
}

std::vector<std::string> UnknownVariableWarnings(const EnvMap& env) {
  const std::vector<std::string> known = KnownVariables();
  std::vector<std::pair<std::string, std::string>> unknown;
  for (const auto& [name, value] : env) {
    if (!absl::StartsWith(name, kKoloPrefix)) continue;
    if (!std::binary_search(known.begin(), known.end(), name)) {
      unknown.emplace_back(name, value);
    }
  }
  std::sort(unknown.begin(), unknown.end());
  std::vector<std::string> warnings;
  for (const auto& [name, value] : unknown) {
    const std::string closest = ClosestKnownVariable(name);
    warnings.push_back(absl::StrCat(
        name, "=", ShownValue(name, closest, value),
        " is not a kolo variable; ",
        closest.empty() ? "it is ignored"
                        : absl::StrCat("did you mean ", closest, "?"),
        " (docs/configuration.md lists every variable)"));
  }
  return warnings;
}

}  // namespace kolo::worker
