// Horovod's environment variables: every HOROVOD_* variable Horovod 0.28.1
// reads, and what kolo does with it. Honoured ones are read as aliases of
// kolo's own (common/knobs.h, worker_lib/config.cc, the Python package, or
// kolorun itself); the ones kolorun sets for every worker need nothing; each
// of the others gets one notice at kolorun's start ("HOROVOD_X is not used by
// kolo: why, or what to use instead"), so a job moved over from horovodrun
// does not silently lose a setting. docs/configuration.md ("Horovod's
// variables") documents the same table; tests/docs/check_reference.py reads
// the names from this file's table.
//
// Thread-safety: the table is constant; all functions are thread-safe.
// Invariants: every name appears once.
#ifndef KOLO_LAUNCHER_HOROVOD_VARIABLES_H_
#define KOLO_LAUNCHER_HOROVOD_VARIABLES_H_

#include <map>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace kolo::launcher {

enum class HorovodVariableUse {
  kHonoured,       // read by kolo, as `text` says
  kSetByLauncher,  // kolorun sets it for every worker
  kNotUsed,        // a notice: `text` says why, or what to use instead
};

struct HorovodVariable {
  const char* name;
  HorovodVariableUse use;
  const char* text;
};

absl::Span<const HorovodVariable> HorovodVariables();

// One notice per kNotUsed variable set (non-empty) in `env`, in table order.
std::vector<std::string> HorovodVariableNotices(
    const std::map<std::string, std::string>& env);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_HOROVOD_VARIABLES_H_
