// kolorun --config-file FILE: horovodrun's YAML config file, read into the
// horovodrun flags it stands for. The keys are horovodrun 0.28.1's:
//
//   controller: gloo | mpi
//   params:          fusion_threshold_mb, cycle_time_ms, cache_capacity,
//                    hierarchical_allreduce, hierarchical_allgather,
//                    torus_allreduce
//   autotune:        enabled, log_file, warmup_samples, steps_per_sample,
//                    bayes_opt_max_samples, gaussian_process_noise
//   timeline:        filename, mark_cycles
//   stall_check:     enabled, warning_time_seconds, shutdown_time_seconds
//   library_options: mpi_threads_disable, num_nccl_streams, thread_affinity,
//                    gloo_timeout_seconds
//   logging:         level, with_timestamp
//
// Each key becomes the flag of the same meaning (params.cache_capacity: 0
// is --cache-capacity 0; stall_check.enabled: false is --no-stall-check);
// ParseArgs applies them before the command line's flags, so those win, in
// any order. A key with no value (null) is skipped, as horovodrun does.
//
// Pure: ParseConfigFile works on the text. Thread-safety: thread-safe.
// Invariants of a result: every flag is one horovod_flags.h's table or
// kolorun declares; a value is "" exactly for flags that take none.
#ifndef KOLO_LAUNCHER_CONFIG_FILE_H_
#define KOLO_LAUNCHER_CONFIG_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kolo::launcher {

struct ConfigEntry {
  std::string key;    // "params.fusion_threshold_mb"
  std::string flag;   // "--fusion-threshold-mb"
  std::string value;  // "32"; "" for a flag without a value
};

// Parses `text`, the YAML of the config file `path`. Errors
// (kInvalidArgument) name the file and the key: an unknown key (with the
// closest known one, if any), a value of the wrong type (with the type
// expected), or YAML that does not parse (with yaml-cpp's position).
absl::StatusOr<std::vector<ConfigEntry>> ParseConfigFile(
    absl::string_view path, absl::string_view text);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_CONFIG_FILE_H_
