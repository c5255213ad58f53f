#include "common/fault_spec.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kolo {
namespace {

struct KindInfo {
  FaultKind kind;
  const char* name;
  // Keys allowed besides the target and trigger keys listed below.
  std::vector<std::string> keys;
  bool has_target;   // rank= / worker= / pick=
  bool at_op;        // at-op= allowed
  const char* help;  // for error messages
};

const std::vector<KindInfo>& Kinds() {
  static const auto* const kinds = new std::vector<KindInfo>{
      {FaultKind::kKill,
       "kill",
       {},
       true,
       true,
       "kill:(rank=N|worker=ID)[:after=DUR|:at-op=N]"},
      {FaultKind::kStop,
       "stop",
       {"for"},
       true,
       true,
       "stop:(rank=N|worker=ID)[:after=DUR|:at-op=N][:for=DUR]"},
      {FaultKind::kTerm,
       "term",
       {},
       true,
       true,
       "term:(rank=N|worker=ID)[:after=DUR|:at-op=N]"},
      {FaultKind::kDelay,
       "delay",
       {"ms", "for"},
       true,
       true,
       "delay:(rank=N|worker=ID):ms=N[:after=DUR|:at-op=N][:for=DUR]"},
      {FaultKind::kDrop,
       "drop",
       {"peer"},
       true,
       true,
       "drop:(rank=N|worker=ID)[:peer=N][:after=DUR|:at-op=N]"},
      {FaultKind::kSlow,
       "slow",
       {"factor", "for"},
       true,
       true,
       "slow:(rank=N|worker=ID):factor=F[:after=DUR|:at-op=N][:for=DUR]"},
      {FaultKind::kPartition,
       "partition",
       {"host", "for"},
       false,
       false,
       "partition:host=H[:after=DUR][:for=DUR]"},
      {FaultKind::kKillCoordinator,
       "kill-coordinator",
       {"for"},
       false,
       false,
       "kill-coordinator[:after=DUR][:for=DUR: then a new coordinator at its "
       "address]"},
      {FaultKind::kRandom,
       "random",
       {"rate", "kinds", "until"},
       false,
       false,
       "random:rate=R/min:until=DUR[:kinds=kill,stop,delay,...]"},
  };
  return *kinds;
}

const KindInfo* FindKind(absl::string_view name) {
  for (const KindInfo& k : Kinds()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

const KindInfo& InfoOf(FaultKind kind) {
  for (const KindInfo& k : Kinds()) {
    if (k.kind == kind) return k;
  }
  return Kinds().front();
}

std::string KindList() {
  std::vector<std::string> names;
  for (const KindInfo& k : Kinds()) names.push_back(k.name);
  return absl::StrJoin(names, ", ");
}

// "500ms", "3s", "1.5s", "2m".
bool ParseDur(absl::string_view text, absl::Duration* out) {
  double scale = 0;
  if (absl::ConsumeSuffix(&text, "ms")) {
    scale = 1e-3;
  } else if (absl::ConsumeSuffix(&text, "s")) {
    scale = 1;
  } else if (absl::ConsumeSuffix(&text, "m")) {
    scale = 60;
  } else {
    return false;
  }
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < 0 ||
      v * scale > 7 * 24 * 3600) {
    return false;
  }
  *out = absl::Seconds(v * scale);
  return true;
}

std::string DurText(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Milliseconds(d), "ms");
}

absl::Status Bad(absl::string_view spec, absl::string_view what,
                 absl::string_view allowed) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad fault spec '", spec, "': ", what, "; ", allowed));
}

constexpr char kDurHelp[] =
    "durations are a number with ms, s or m (3s, 500ms)";

}  // namespace

absl::string_view FaultKindName(FaultKind kind) { return InfoOf(kind).name; }

int FaultTarget::RankAmong(int size) const {
  if (kind == Kind::kRank) return rank < size ? rank : -1;
  if (kind == Kind::kPick && size > 0) {
    return std::min(size - 1, static_cast<int>(pick * size));
  }
  return -1;
}

bool FiredByWorker(const FaultSpec& spec) {
  switch (spec.kind) {
    case FaultKind::kDelay:
    case FaultKind::kDrop:
    case FaultKind::kSlow:
      return true;
    case FaultKind::kKill:
    case FaultKind::kStop:
    case FaultKind::kTerm:
      return spec.at_op >= 0;
    default:
      return false;
  }
}

namespace {

// Whether `key` (of `part`, "key=value") may be given here: once, with a
// value, and applying to the kind.
absl::Status CheckKey(absl::string_view text, absl::string_view part,
                      const std::string& key, absl::string_view value,
                      const KindInfo& info, std::set<std::string>& seen,
                      const std::string& usage) {
  if (value.empty()) {
    return Bad(text, absl::StrCat("'", part, "' is not key=value"), usage);
  }
  if (!seen.insert(key).second) {
    return Bad(text, absl::StrCat("'", key, "' is given twice"), usage);
  }
  const bool target_key = key == "rank" || key == "worker" || key == "pick";
  const bool extra =
      std::find(info.keys.begin(), info.keys.end(), key) != info.keys.end();
  const bool trigger_key = key == "after" || (key == "at-op" && info.at_op);
  if (!(extra || trigger_key || (target_key && info.has_target)) ||
      (info.kind == FaultKind::kRandom && key == "after")) {
    return Bad(text, absl::StrCat("'", key, "' does not apply to ", info.name),
               usage);
  }
  return absl::OkStatus();
}

// rank=, worker= or pick=: the one worker a fault strikes.
absl::Status ParseTarget(absl::string_view text, const std::string& key,
                         absl::string_view value, FaultSpec& spec) {
  if (key == "rank") {
    int r = 0;
    if (!absl::SimpleAtoi(value, &r) || r < 0) {
      return Bad(text, absl::StrCat("rank '", value, "' is not a rank"),
                 "a rank is an integer >= 0");
    }
    spec.target.kind = FaultTarget::Kind::kRank;
    spec.target.rank = r;
  } else if (key == "worker") {
    spec.target.kind = FaultTarget::Kind::kWorker;
    spec.target.name = std::string(value);
  } else {
    double u = 0;
    if (!absl::SimpleAtod(value, &u) || !(u >= 0 && u < 1)) {
      return Bad(text, absl::StrCat("pick '", value, "' is not in [0, 1)"),
                 "pick=U chooses rank floor(U * size) at firing");
    }
    spec.target.kind = FaultTarget::Kind::kPick;
    spec.target.pick = u;
  }
  return absl::OkStatus();
}

// rate=R/min or R/s (random).
absl::Status ParseRate(absl::string_view text, absl::string_view value,
                       FaultSpec& spec) {
  absl::string_view r = value;
  double per = 0;
  if (absl::ConsumeSuffix(&r, "/min")) {
    per = 1;
  } else if (absl::ConsumeSuffix(&r, "/s")) {
    per = 60;
  }
  double v = 0;
  if (per == 0 || !absl::SimpleAtod(r, &v) || !(v > 0) || v * per > 6000) {
    return Bad(text, absl::StrCat("rate '", value, "' is not a rate"),
               "rate=R/min or R/s, at most 100/s");
  }
  spec.rate_per_minute = v * per;
  return absl::OkStatus();
}

// kinds=: the kinds a random fault draws from.
absl::Status ParseKinds(absl::string_view text, absl::string_view value,
                        FaultSpec& spec) {
  for (absl::string_view k : absl::StrSplit(value, ',')) {
    const KindInfo* ki = FindKind(k);
    if (ki == nullptr ||
        !(ki->has_target || ki->kind == FaultKind::kKillCoordinator)) {
      return Bad(text, absl::StrCat("'", k, "' cannot be a random fault"),
                 "kinds= lists some of kill, stop, term, delay, drop, "
                 "slow, kill-coordinator");
    }
    spec.kinds.push_back(ki->kind);
  }
  return absl::OkStatus();
}

// Every other key's value (the trigger, the duration, the kind's own keys).
absl::Status ParseSetting(absl::string_view text, const std::string& key,
                          absl::string_view value, FaultSpec& spec) {
  if (key == "after") {
    if (!ParseDur(value, &spec.after)) {
      return Bad(text, absl::StrCat("after '", value, "' is not a duration"),
                 kDurHelp);
    }
  } else if (key == "at-op") {
    if (!absl::SimpleAtoi(value, &spec.at_op) || spec.at_op < 0) {
      return Bad(text, absl::StrCat("at-op '", value, "' is not a count"),
                 "at-op=N counts the target's completed collectives, N >= 0");
    }
  } else if (key == "for") {
    if (!ParseDur(value, &spec.duration) ||
        spec.duration <= absl::ZeroDuration()) {
      return Bad(text,
                 absl::StrCat("for '", value, "' is not a positive duration"),
                 kDurHelp);
    }
  } else if (key == "ms") {
    if (!absl::SimpleAtoi(value, &spec.delay_ms) || spec.delay_ms < 1 ||
        spec.delay_ms > 60000) {
      return Bad(text, absl::StrCat("ms '", value, "' is out of range"),
                 "ms=N delays each collective of the target by N ms, "
                 "1 <= N <= 60000");
    }
  } else if (key == "peer") {
    if (!absl::SimpleAtoi(value, &spec.peer) || spec.peer < 0) {
      return Bad(text, absl::StrCat("peer '", value, "' is not a rank"),
                 "peer=N names the rank at the other end, N >= 0");
    }
  } else if (key == "factor") {
    if (!absl::SimpleAtod(value, &spec.factor) || !(spec.factor > 1) ||
        spec.factor > 100) {
      return Bad(text, absl::StrCat("factor '", value, "' is out of range"),
                 "factor=F makes each collective of the target take F "
                 "times as long, 1 < F <= 100");
    }
  } else if (key == "host") {
    spec.target.kind = FaultTarget::Kind::kHost;
    spec.target.name = std::string(value);
  } else if (key == "rate") {
    return ParseRate(text, value, spec);
  } else if (key == "until") {
    if (!ParseDur(value, &spec.until) || spec.until <= absl::ZeroDuration()) {
      return Bad(text,
                 absl::StrCat("until '", value,
                              "' is not a positive "
                              "duration"),
                 kDurHelp);
    }
  } else if (key == "kinds") {
    return ParseKinds(text, value, spec);
  }
  return absl::OkStatus();
}

// What the kind requires of the whole spec, once every key is read.
absl::Status CheckComplete(absl::string_view text, const KindInfo& info,
                           const FaultSpec& spec, bool trigger_time,
                           const std::string& usage) {
  if (trigger_time && spec.at_op >= 0) {
    return Bad(text, "both after= and at-op= are given", "give one trigger");
  }
  if (info.has_target && spec.target.kind == FaultTarget::Kind::kNone) {
    return Bad(text, "no target", usage);
  }
  if (spec.kind == FaultKind::kPartition && spec.target.name.empty()) {
    return Bad(text, "no host", usage);
  }
  if (spec.kind == FaultKind::kDelay && spec.delay_ms == 0) {
    return Bad(text, "no ms=", usage);
  }
  if (spec.kind == FaultKind::kSlow && spec.factor <= 1) {
    return Bad(text, "no factor=", usage);
  }
  if (spec.kind == FaultKind::kRandom) {
    if (spec.rate_per_minute == 0) {
      return Bad(text,
                 "no rate= (random requires it: how many faults a "
                 "minute or a second it draws)",
                 usage);
    }
    if (spec.until == absl::ZeroDuration()) {
      return Bad(text,
                 "no until= (random requires it: the time since "
                 "kolorun started up to which it draws faults)",
                 usage);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view raw) {
  const absl::string_view text = absl::StripAsciiWhitespace(raw);
  // (A null view, as "2" split at '=' gives, splits into no parts at all.)
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (text.empty() || parts.empty()) {
    return Bad(text, "no fault kind",
               absl::StrCat("the kinds are ", KindList()));
  }
  const KindInfo* info = FindKind(parts[0]);
  if (info == nullptr) {
    return Bad(text, absl::StrCat("unknown fault kind '", parts[0], "'"),
               absl::StrCat("the kinds are ", KindList()));
  }
  FaultSpec spec;
  spec.kind = info->kind;
  const std::string usage = absl::StrCat("expected ", info->help);
  std::set<std::string> seen;
  bool trigger_time = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    const std::string key(kv.first);
    const absl::string_view value = kv.second;
    if (absl::Status st =
            CheckKey(text, parts[i], key, value, *info, seen, usage);
        !st.ok()) {
      return st;
    }
    if (key == "rank" || key == "worker" || key == "pick") {
      if (spec.target.kind != FaultTarget::Kind::kNone) {
        return Bad(text, "more than one target", usage);
      }
      if (absl::Status st = ParseTarget(text, key, value, spec); !st.ok()) {
        return st;
      }
    } else if (absl::Status st = ParseSetting(text, key, value, spec);
               !st.ok()) {
      return st;
    }
    if (key == "after") trigger_time = true;
  }
  if (absl::Status st = CheckComplete(text, *info, spec, trigger_time, usage);
      !st.ok()) {
    return st;
  }
  if (spec.kind == FaultKind::kRandom && spec.kinds.empty()) {
    spec.kinds = {FaultKind::kKill, FaultKind::kStop, FaultKind::kDelay};
  }
  return spec;
}

absl::StatusOr<std::vector<FaultSpec>> ParseFaultList(absl::string_view text) {
  std::vector<FaultSpec> out;
  for (absl::string_view part : absl::StrSplit(text, ';')) {
    if (absl::StripAsciiWhitespace(part).empty()) continue;
    absl::StatusOr<FaultSpec> spec = ParseFaultSpec(part);
    if (!spec.ok()) return spec.status();
    out.push_back(*std::move(spec));
  }
  return out;
}

std::string FaultSpecText(const FaultSpec& s) {
  std::string out(FaultKindName(s.kind));
  switch (s.target.kind) {
    case FaultTarget::Kind::kRank:
      absl::StrAppend(&out, ":rank=", s.target.rank);
      break;
    case FaultTarget::Kind::kWorker:
      absl::StrAppend(&out, ":worker=", s.target.name);
      break;
    case FaultTarget::Kind::kPick:
      absl::StrAppend(&out, ":pick=", absl::StrFormat("%.6f", s.target.pick));
      break;
    case FaultTarget::Kind::kHost:
      absl::StrAppend(&out, ":host=", s.target.name);
      break;
    case FaultTarget::Kind::kNone:
      break;
  }
  if (s.kind == FaultKind::kDelay) absl::StrAppend(&out, ":ms=", s.delay_ms);
  if (s.kind == FaultKind::kSlow) {
    absl::StrAppend(&out, ":factor=", absl::StrFormat("%g", s.factor));
  }
  if (s.kind == FaultKind::kDrop && s.peer >= 0) {
    absl::StrAppend(&out, ":peer=", s.peer);
  }
  if (s.kind == FaultKind::kRandom) {
    absl::StrAppend(&out, ":rate=", absl::StrFormat("%g", s.rate_per_minute),
                    "/min:until=", DurText(s.until), ":kinds=");
    std::vector<std::string> names;
    for (FaultKind k : s.kinds) names.emplace_back(FaultKindName(k));
    absl::StrAppend(&out, absl::StrJoin(names, ","));
    return out;
  }
  if (s.at_op >= 0) {
    absl::StrAppend(&out, ":at-op=", s.at_op);
  } else {
    absl::StrAppend(&out, ":after=", DurText(s.after));
  }
  if (s.duration != absl::InfiniteDuration()) {
    absl::StrAppend(&out, ":for=", DurText(s.duration));
  }
  return out;
}

std::vector<PlannedFault> PlanFaults(const std::vector<FaultSpec>& specs,
                                     uint64_t seed) {
  std::vector<PlannedFault> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    out.push_back(PlannedFault{static_cast<int>(i), -1, specs[i]});
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (size_t i = 0; i < specs.size(); ++i) {
    const FaultSpec& r = specs[i];
    if (r.kind != FaultKind::kRandom) continue;
    std::exponential_distribution<double> gap(r.rate_per_minute / 60.0);
    double t = 0;
    const double until = absl::ToDoubleSeconds(r.until);
    while (true) {
      t += gap(rng);
      if (t > until) break;
      FaultSpec f;
      f.kind = r.kinds[static_cast<size_t>(
                           unit(rng) * static_cast<double>(r.kinds.size())) %
                       r.kinds.size()];
      f.target.kind = FaultTarget::Kind::kPick;
      f.target.pick = std::min(unit(rng), 0.999999);
      // Whole milliseconds, so that the plan survives FaultSpecText.
      f.after = absl::Milliseconds(std::llround(t * 1000));
      const double u = unit(rng);
      switch (f.kind) {
        case FaultKind::kStop:
          f.duration = absl::Milliseconds(1000 + std::llround(u * 3000));
          break;
        case FaultKind::kDelay:
          f.delay_ms = 5 + std::llround(u * 45);
          f.duration = absl::Seconds(2);
          break;
        case FaultKind::kSlow:
          f.factor = 2 + std::floor(u * 3);
          f.duration = absl::Seconds(3);
          break;
        case FaultKind::kKillCoordinator:
          // Always restarted: a coordinator that stays down ends the job.
          f.target = FaultTarget{};
          f.duration = absl::Seconds(1);
          break;
        default:
          break;
      }
      out.push_back(PlannedFault{static_cast<int>(out.size()),
                                 static_cast<int>(i), std::move(f)});
    }
  }
  return out;
}

std::string EncodeWorkerPlan(const std::vector<PlannedFault>& faults) {
  std::vector<std::string> parts;
  for (const PlannedFault& f : faults) {
    parts.push_back(absl::StrCat(f.id, "=", FaultSpecText(f.spec)));
  }
  return absl::StrJoin(parts, ";");
}

absl::StatusOr<std::vector<PlannedFault>> DecodeWorkerPlan(
    absl::string_view text) {
  std::vector<PlannedFault> out;
  for (absl::string_view part : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    PlannedFault f;
    if (!absl::SimpleAtoi(kv.first, &f.id) || f.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad fault plan entry '", part, "': expected ID=SPEC"));
    }
    absl::StatusOr<FaultSpec> spec = ParseFaultSpec(kv.second);
    if (!spec.ok()) return spec.status();
    f.spec = *std::move(spec);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace kolo
