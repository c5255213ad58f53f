// The autotuner's settings as the user gives them (kolorun and
// kolo-coordinator --autotune and friends; KOLO_AUTOTUNE* variables, or
// Horovod's HOROVOD_AUTOTUNE*), parsed here once for both programs with the
// same messages. The tuner itself is the coordinator's
// (coordinator/autotune.h).
//
//   flag                               variable (Horovod's alias)
//   --autotune / --no-autotune         KOLO_AUTOTUNE (HOROVOD_AUTOTUNE), 0/1
//   --autotune-log-file F              KOLO_AUTOTUNE_LOG (HOROVOD_AUTOTUNE_LOG)
//   --autotune-warmup-samples N        KOLO_AUTOTUNE_WARMUP_SAMPLES (...)
//   --autotune-steps-per-sample N      KOLO_AUTOTUNE_STEPS_PER_SAMPLE (...)
//   --autotune-bayes-opt-max-samples N KOLO_AUTOTUNE_BAYES_OPT_MAX_SAMPLES
//   --autotune-gaussian-process-noise X KOLO_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
//
// A KOLO_* variable wins over its alias, a flag over both; an empty value
// counts as unset.
//
// Thread-safety: the table is immutable and the functions are pure.
#ifndef KOLO_COMMON_AUTOTUNE_CONFIG_H_
#define KOLO_COMMON_AUTOTUNE_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/knobs.h"

namespace kolo {

// Horovod's defaults.
struct AutotuneConfig {
  bool enabled = false;
  std::string log_file;  // "": no log
  int warmup_samples = 3;
  int steps_per_sample = 10;
  int max_samples = 20;
  double noise = 0.8;
};

// One setting: its flag (the value flags; --autotune and --no-autotune are
// enabled's), its variable and Horovod's.
struct AutotuneSetting {
  const char* flag;
  const char* variable;
  const char* alias;
};
inline constexpr AutotuneSetting kAutotuneSettings[] = {
    {"--autotune", "KOLO_AUTOTUNE", "HOROVOD_AUTOTUNE"},
    {"--autotune-log-file", "KOLO_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG"},
    {"--autotune-warmup-samples", "KOLO_AUTOTUNE_WARMUP_SAMPLES",
     "HOROVOD_AUTOTUNE_WARMUP_SAMPLES"},
    {"--autotune-steps-per-sample", "KOLO_AUTOTUNE_STEPS_PER_SAMPLE",
     "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"},
    {"--autotune-bayes-opt-max-samples", "KOLO_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
     "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"},
    {"--autotune-gaussian-process-noise",
     "KOLO_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
     "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"},
};

// Reads the variables (then the flags may override them).
absl::Status AutotuneFromEnv(EnvLookup env, AutotuneConfig& config);

// Applies flag `flag` (a spelling of the table, or --no-autotune) with
// `value` ("" for --autotune / --no-autotune). Errors name the flag.
absl::Status SetAutotuneFlag(absl::string_view flag, absl::string_view value,
                             AutotuneConfig& config);

}  // namespace kolo

#endif  // KOLO_COMMON_AUTOTUNE_CONFIG_H_
