// horovodrun's command line, flag by flag: every flag of horovodrun 0.28.1
// (and mpirun's -x), what kolorun does with it, and how the ones kolorun
// reads are applied to LaunchOptions. A Horovod user keeps the command line:
// each flag either works as in Horovod, is accepted with a notice saying why
// kolo does not need it, or is refused with one sentence saying what to do
// instead; none is an "unknown flag". docs/running.md ("horovodrun's
// flags") documents the same table.
//
// ParseArgs (launcher/args.cc) declares every spelling here to CLI11 and
// calls ApplyHorovodFlag for the kMapped ones.
// Thread-safety: the table is constant; all functions are thread-safe.
// Invariants of the table: every spelling appears once, in one entry, and
// none is one of kolorun's own flags except in kSame entries; kAlias entries
// name a flag kolorun declares; kNotice and kRefused entries have a text.
#ifndef KOLO_LAUNCHER_HOROVOD_FLAGS_H_
#define KOLO_LAUNCHER_HOROVOD_FLAGS_H_

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "launcher/args.h"

namespace kolo::launcher {

enum class HorovodFlagAction {
  kSame,     // kolorun has the flag, spelt the same, with the same meaning
  kAlias,    // another spelling of kolorun's flag `target`
  kMapped,   // read into LaunchOptions by ApplyHorovodFlag
  kNotice,   // accepted; kolorun prints `text` once at start
  kRefused,  // kolorun exits 2 with `text`
};

// The kMapped flags.
enum class HorovodFlagId {
  kNone,
  kExtraEnv,            // -x NAME[=VALUE]
  kHostfile,            // --hostfile FILE
  kConfigFile,          // --config-file FILE
  kOutputFilename,      // --output-filename DIR
  kNetworkInterfaces,   // --network-interface(s) IF[,IF...]
  kSshPort,             // -p N
  kSshIdentityFile,     // -i FILE
  kCheckBuild,          // -cb
  kVerbose,             // --verbose
  kFusionThresholdMb,   // KOLO_FUSION_THRESHOLD, in bytes
  kCacheCapacity,       // KOLO_CACHE_CAPACITY
  kHierarchicalOn,      // KOLO_HIERARCHICAL=1
  kHierarchicalOff,     // KOLO_HIERARCHICAL=0
  kTimelineFilename,    // KOLO_TIMELINE
  kGlooTimeoutSeconds,  // KOLO_TIMEOUT_SECONDS
  kStallCheckOff,       // --no-stall-check
  kStallCheckOn,        // --stall-check
  kTimestampOn,         // worker lines carry a timestamp
  kTimestampOff,
  kAutotune,  // --autotune and friends: LaunchOptions::autotune
};

struct HorovodFlag {
  // Up to three spellings, as typed (one dash for -np, -cb, -hostfile,
  // -prefix-timestamp); unused ones are nullptr.
  const char* spellings[3];
  HorovodFlagAction action;
  bool takes_value;
  HorovodFlagId id;    // kMapped
  const char* target;  // kSame / kAlias: kolorun's flag
  // kNotice / kRefused: the sentence kolorun prints (after "<flag>: ");
  // otherwise what kolorun does, for the documentation and the tests.
  const char* text;
};

// The whole table, in horovodrun's --help order.
absl::Span<const HorovodFlag> HorovodFlags();

// What a parse remembers beyond LaunchOptions until every flag is read.
struct HorovodFlagState {
  std::optional<bool> stall_check_off;  // --no-stall-check / --stall-check
};

// Applies the kMapped flag `flag`, given as `name` with `value` ("" for a
// flag without one); `env` is kolorun's environment (for -x NAME).
// Errors (kInvalidArgument) name the flag and say what is expected.
absl::Status ApplyHorovodFlag(const HorovodFlag& flag, absl::string_view name,
                              const std::string& value,
                              const std::map<std::string, std::string>& env,
                              LaunchOptions& o, HorovodFlagState& state);

// After every flag: what the state implies (the stall check off, --verbose's
// log level). `log_level_set`: --log-level was given (on the command line
// or in the config file).
void FinishHorovodFlags(const HorovodFlagState& state, bool log_level_set,
                        LaunchOptions& o);

// -x NAME=VALUE, or -x NAME with NAME's value from `env`.
absl::StatusOr<std::pair<std::string, std::string>> ParseExtraEnv(
    absl::string_view value, const std::map<std::string, std::string>& env);

// Sets (or replaces) the worker variable `name` in o.worker_vars.
void SetWorkerVar(LaunchOptions& o, const std::string& name, std::string value);

// Adds `notice` to o.notices unless it is there already.
void AddNotice(LaunchOptions& o, std::string notice);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_HOROVOD_FLAGS_H_
