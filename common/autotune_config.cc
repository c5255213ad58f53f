// The autotuner's flags and variables: see common/autotune_config.h.
#include "common/autotune_config.h"

#include <cmath>
#include <iterator>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kolo {
namespace {

// `what` names the setting in messages: "--autotune-warmup-samples" or
// "bad value KOLO_AUTOTUNE_WARMUP_SAMPLES='x'"-style for a variable.
absl::Status SetValue(size_t index, absl::string_view what,
                      absl::string_view value, AutotuneConfig& c) {
  auto bad = [&](absl::string_view expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected ", expected, ", got '", value, "'"));
  };
  int n = 0;
  switch (index) {
    case 0:
      if (value == "1" || value == "true") {
        c.enabled = true;
      } else if (value == "0" || value == "false") {
        c.enabled = false;
      } else {
        return bad("0 or 1");
      }
      return absl::OkStatus();
    case 1:
      c.log_file = std::string(value);
      return absl::OkStatus();
    case 2:
      if (!absl::SimpleAtoi(value, &n) || n < 0) {
        return bad("a number of samples, 0 or more");
      }
      c.warmup_samples = n;
      return absl::OkStatus();
    case 3:
      if (!absl::SimpleAtoi(value, &n) || n < 1) {
        return bad("a number of steps, 1 or more");
      }
      c.steps_per_sample = n;
      return absl::OkStatus();
    case 4:
      if (!absl::SimpleAtoi(value, &n) || n < 2) {
        return bad("a number of samples, 2 or more");
      }
      c.max_samples = n;
      return absl::OkStatus();
    case 5: {
      double x = 0;
      if (!absl::SimpleAtod(value, &x) || !std::isfinite(x) || x < 0) {
        return bad("a number, 0 or more");
      }
      c.noise = x;
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("autotune: no such setting");
  }
}

}  // namespace

absl::Status AutotuneFromEnv(EnvLookup env, AutotuneConfig& config) {
  for (size_t i = 0; i < std::size(kAutotuneSettings); ++i) {
    const AutotuneSetting& s = kAutotuneSettings[i];
    for (const char* name : {s.variable, s.alias}) {
      std::optional<std::string> value = env(name);
      if (!value.has_value() || value->empty()) continue;
      if (absl::Status st = SetValue(i, name, *value, config); !st.ok()) {
        return st;
      }
      break;  // the KOLO_* variable wins over the alias
    }
  }
  return absl::OkStatus();
}

absl::Status SetAutotuneFlag(absl::string_view flag, absl::string_view value,
                             AutotuneConfig& config) {
  if (flag == "--autotune" || flag == "--no-autotune") {
    config.enabled = flag == "--autotune";
    return absl::OkStatus();
  }
  for (size_t i = 1; i < std::size(kAutotuneSettings); ++i) {
    if (flag != kAutotuneSettings[i].flag) continue;
    if (i == 1 && value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": expected a path, got ''"));
    }
    return SetValue(i, flag, value, config);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown autotune flag '", flag, "'"));
}

}  // namespace kolo
