// The check for KOLO_* variables nothing reads (worker_lib/config.h:
// UnknownVariableWarnings, KnownVariables): the table of known names and the
// closest-name suggestion.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "worker_lib/config.h"

namespace kolo::worker {
namespace {

// Every KOLO_* environment variable that some part of kolo reads, sorted,
// with who reads it. UnknownVariableWarnings warns about any other KOLO_*
// name, so a new variable must be added here (and, unless internal, to
// docs/configuration.md, which tests/docs/check_reference.py checks) in
// the same change that reads it; `grep -rhoE 'KOLO_[A-Z0-9_]+'` over the tree
// finds them (minus include guards, macros and CMake options). Internal ones
// (set by the test harness) are known but never suggested to users.
struct KnownVariable {
  const char* name;
  const char* read_by;
  bool internal;
};
constexpr KnownVariable kKnownVariables[] = {
    {"KOLO_ADDR", "worker", false},
    {"KOLO_ALLREDUCE_ALGORITHM", "worker, kolo-bench", false},
    {"KOLO_BENCH_OUT", "scripts/bench-report.sh", false},
    {"KOLO_BIN_DIR", "tests (set by CTest)", true},
    {"KOLO_CACHE_CAPACITY", "worker", false},
    {"KOLO_COORDINATOR", "worker (set by kolorun)", false},
    {"KOLO_CUDA_STAGING", "worker", false},
    {"KOLO_CYCLE_TIME_MS", "worker, kolorun, kolo-coordinator", false},
    {"KOLO_DISABLE_GROUP_FUSION", "worker", false},
    {"KOLO_ELASTIC", "worker (set by kolorun --min-np), kolo-coordinator",
     false},
    {"KOLO_ELASTIC_TIMEOUT", "worker, kolorun, kolo-coordinator", false},
    {"KOLO_FAULTS", "kolorun (like --fault)", false},
    {"KOLO_FAULT_EVENTS", "worker (set by kolorun --fault)", true},
    {"KOLO_FAULT_ORIGIN_MS", "worker (set by kolorun --fault)", true},
    {"KOLO_FAULT_PLAN", "worker (set by kolorun --fault)", true},
    {"KOLO_FAULT_SEED", "kolorun (like --fault-seed)", false},
    {"KOLO_FUSION_DIRECT_BYTES", "worker", false},
    {"KOLO_FUSION_THRESHOLD", "worker", false},
    {"KOLO_HEARTBEAT_INTERVAL_MS", "worker", false},
    {"KOLO_HEARTBEAT_TIMEOUT_SECONDS", "worker, kolorun", false},
    {"KOLO_HIERARCHICAL", "worker, kolo-bench", false},
    {"KOLO_HOSTNAME", "worker (set by kolorun)", false},
    {"KOLO_HOST_COORDINATOR", "worker", false},
    {"KOLO_IFACE", "worker", false},
    {"KOLO_JOB_ID", "worker (set by kolorun)", false},
    {"KOLO_LAUNCHER", "worker (set by kolorun)", false},
    {"KOLO_LEASE_SECONDS", "worker", false},
    {"KOLO_LOCAL_RANK", "worker (set by kolorun)", false},
    {"KOLO_LOCAL_SIZE", "user scripts (set by kolorun)", false},
    {"KOLO_LOG_LEVEL", "worker, kolorun, kolo-coordinator", false},
    {"KOLO_LONG_TESTS", "tests (the long soaks)", true},
    {"KOLO_NEGOTIATION_LINK", "worker, kolo-bench", false},
    {"KOLO_RANK", "worker (set by kolorun)", false},
    {"KOLO_SECRET", "worker (set by kolorun)", false},
    {"KOLO_SECRET_FILE", "worker, kolo-coordinator", false},
    {"KOLO_SEGMENT_BYTES", "worker", false},
    {"KOLO_SHM", "worker, kolo-bench", false},
    {"KOLO_SHM_BYTES", "worker, kolo-bench", false},
    {"KOLO_SIZE", "worker (set by kolorun)", false},
    {"KOLO_SMALL_ALLREDUCE_BYTES", "worker, kolo-bench", false},
    {"KOLO_SOAK_SECONDS", "tests (multiprocess_elastic_test's soak)", true},
    {"KOLO_SOCKET_RCVBUF", "worker", false},
    {"KOLO_SOCKET_SNDBUF", "worker", false},
    {"KOLO_SPIN_US", "worker, kolo-bench", false},
    {"KOLO_STALL_CHECK_TIME_SECONDS", "worker, kolorun, kolo-coordinator",
     false},
    {"KOLO_STALL_SHUTDOWN_TIME_SECONDS", "worker, kolorun, kolo-coordinator",
     false},
    {"KOLO_START_TIMEOUT", "worker, kolorun", false},
    {"KOLO_TCP_CONGESTION", "worker", false},
    {"KOLO_TEST_FAKE_HOST", "tests/workers/mp_worker", true},
    {"KOLO_TIMELINE", "worker (rank 0)", false},
    {"KOLO_TIMEOUT_SCALE", "tests (set by CTest)", true},
    {"KOLO_TIMEOUT_SECONDS", "worker", false},
    {"KOLO_WORKER_ID", "worker (set by kolorun)", false},
    {"KOLO_WORKER_INCARNATION", "worker", false},
};
constexpr char kKoloPrefix[] = "KOLO_";

// Optimal string alignment distance (Levenshtein plus adjacent
// transpositions), ignoring ASCII case.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  const std::string x = absl::AsciiStrToUpper(a), y = absl::AsciiStrToUpper(b);
  const size_t n = x.size(), m = y.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = x[i - 1] == y[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// The known variable `name` most likely meant, or "" when none is close.
// Candidates: one name (of 4+ characters after KOLO_) a prefix of the other,
// as in a unit added or left out (KOLO_TIMEOUT, KOLO_START_TIMEOUT_SECONDS),
// or within a third of the longer name (after KOLO_) in edit distance. A
// prefix match beats a mere near one (KOLO_START_TIMEOUT_SECONDS is nearer
// KOLO_HEARTBEAT_TIMEOUT_SECONDS); then the smaller distance wins, then the
// first in the table.
std::string ClosestKnownVariable(absl::string_view name) {
  const absl::string_view tail = absl::StripPrefix(name, kKoloPrefix);
  const std::string upper_tail = absl::AsciiStrToUpper(tail);
  std::string best;
  std::pair<bool, size_t> best_rank = {true, 0};  // (not a prefix, distance)
  for (const KnownVariable& k : kKnownVariables) {
    if (k.internal) continue;
    const absl::string_view known =
        absl::StripPrefix(absl::string_view(k.name), kKoloPrefix);
    const size_t distance = EditDistance(tail, known);
    const size_t shorter = std::min(tail.size(), known.size());
    const bool prefix = shorter >= 4 && (absl::StartsWith(upper_tail, known) ||
                                         absl::StartsWith(known, upper_tail));
    const bool close = distance <= std::max(tail.size(), known.size()) / 3;
    if (!prefix && !close) continue;
    const std::pair<bool, size_t> rank = {!prefix, distance};
    if (best.empty() || rank < best_rank) {
      best = k.name;
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
  std::vector<std::string> names;
  for (const KnownVariable& k : kKnownVariables) names.emplace_back(k.name);
  return names;
}

std::vector<std::string> UnknownVariableWarnings(const EnvMap& env) {
  std::vector<std::pair<std::string, std::string>> unknown;
  for (const auto& [name, value] : env) {
    if (!absl::StartsWith(name, kKoloPrefix)) continue;
    const bool known = std::any_of(
        std::begin(kKnownVariables), std::end(kKnownVariables),
        [&name = name](const KnownVariable& k) { return name == k.name; });
    if (!known) unknown.emplace_back(name, value);
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
