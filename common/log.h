// Logging: one spdlog logger per component, every line tagged with the
// process's identity ("rank 3", "coordinator", "kolorun", or "rank ?" before
// the epoch forms).
//
// Thread-safety: all functions may be called from any thread.
// Level: KOLO_LOG_LEVEL (alias HOROVOD_LOG_LEVEL), parsed into the config and
// applied with SetLogLevel; the default is "warn".
#ifndef KOLO_COMMON_LOG_H_
#define KOLO_COMMON_LOG_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

namespace kolo {

// Returns the logger named `component`, creating it (stderr, kolo's pattern)
// on first use. kolo's loggers live in a registry of their own that is never
// destroyed (not spdlog's), so that a log line written by another thread
// while the process exits (a gRPC reaction during static destruction) never
// touches a destroyed registry.
std::shared_ptr<spdlog::logger> GetLogger(absl::string_view component);

// Flushes every kolo logger (before _exit).
void FlushLogs();

// Sets the tag printed in every line, e.g. "rank 2" or "coordinator".
void SetLogIdentity(absl::string_view identity);
// Shorthand for SetLogIdentity("rank N").
void SetLogRank(int rank);

// "trace", "debug", "info", "warn"/"warning", "error", "critical", "off".
absl::Status SetLogLevel(absl::string_view level);

}  // namespace kolo

#endif  // KOLO_COMMON_LOG_H_
