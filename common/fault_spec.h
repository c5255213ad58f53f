// Fault specs: what `kolorun --fault SPEC` (and KOLO_FAULTS) asks for, parsed
// into a FaultSpec; shared by kolorun, which fires the process faults, and
// the worker library, whose fault hook (worker_lib/fault_hook.h) fires the
// traffic faults and the op-counted ones.
//
// Grammar (docs/fault-injection.md):
//   SPEC    := KIND (':' KEY '=' VALUE)*
//   KIND    := kill | stop | term | delay | drop | slow | partition
//            | kill-coordinator | random
//   target  := rank=N (the worker that has rank N when the fault fires)
//            | worker=ID (a worker id, w<N> under kolorun)
//            | pick=U (random's faults: rank floor(U * size) at firing)
//            | host=H (partition: a launcher host name, a network namespace)
//   trigger := after=DUR (since kolorun started; default 0s)
//            | at-op=N (once the target completed N collectives)
//   DUR     := a number with a unit: 500ms, 3s, 1.5s, 2m
// Keys per kind:
//   kill, term          target, trigger
//   stop                target, trigger, [for=DUR: then SIGCONT]
//   delay               target, trigger, ms=N (1..60000), [for=DUR]
//   drop                target, trigger, [peer=N: that rank's connection;
//                       default every data connection of the target]
//   slow                target, trigger, factor=F (1 < F <= 100), [for=DUR]
//   partition           host=H, after=DUR, [for=DUR: then the link is back]
//   kill-coordinator    after=DUR, [for=DUR: then a new coordinator at the
//                       old one's address, the job's id and secret (elastic
//                       jobs only; kolorun checks)]
//   random              rate=R/min or R/s, until=DUR (both required),
//                       [kinds=K,K,...: of kill stop term delay drop slow
//                       kill-coordinator; default kill,stop,delay]
// Bad specs are kInvalidArgument saying what is wrong and what is allowed.
//
// Thread-safety: pure functions and plain values.
#ifndef KOLO_COMMON_FAULT_SPEC_H_
#define KOLO_COMMON_FAULT_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kolo {

enum class FaultKind {
  kKill,
  kStop,
  kTerm,
  kDelay,
  kDrop,
  kSlow,
  kPartition,
  kKillCoordinator,
  kRandom,
};

absl::string_view FaultKindName(FaultKind kind);

struct FaultTarget {
  enum class Kind { kNone, kRank, kWorker, kPick, kHost };
  Kind kind = Kind::kNone;
  int rank = -1;     // kRank
  std::string name;  // kWorker (worker id), kHost (host name)
  double pick = 0;   // kPick, in [0, 1)
  // The rank this target names among `size` ranks (kRank, kPick), or -1.
  int RankAmong(int size) const;
};

struct FaultSpec {
  FaultKind kind = FaultKind::kKill;
  FaultTarget target;
  absl::Duration after = absl::ZeroDuration();  // trigger by time ...
  int64_t at_op = -1;                           // ... or by op count (>= 0)
  // stop, delay, slow, partition: how long it lasts (Infinite: to the end).
  absl::Duration duration = absl::InfiniteDuration();
  int64_t delay_ms = 0;  // delay
  int peer = -1;         // drop: -1 = every peer
  double factor = 1;     // slow
  // random
  double rate_per_minute = 0;
  std::vector<FaultKind> kinds;
  absl::Duration until = absl::ZeroDuration();
};

// Whether the worker's fault hook fires it (traffic faults, and process
// faults triggered by an op count); else kolorun does.
bool FiredByWorker(const FaultSpec& spec);

// Parses one SPEC. kInvalidArgument names the spec, what is wrong, and what
// is allowed.
absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view text);

// Parses `;`-separated SPECs (KOLO_FAULTS); empty entries are skipped.
absl::StatusOr<std::vector<FaultSpec>> ParseFaultList(absl::string_view text);

// The canonical text of a spec, which ParseFaultSpec reads back to an equal
// spec (durations in ms).
std::string FaultSpecText(const FaultSpec& spec);

// A fault as planned for a job: its number (0, 1, ... in the order given,
// random's draws after the given ones) and, for random's draws, the number
// of the random spec it came from (-1 otherwise).
struct PlannedFault {
  int id = 0;
  int from_random = -1;
  FaultSpec spec;
};

// The job's fault plan: every spec but random in order, then each random's
// draws (a Poisson process of its rate until its `until`; a kind from its
// kinds; a target pick; stop for 1-4 s, delay 5-50 ms for 2 s, slow x2-x4
// for 3 s, kill-coordinator down for 1 s), all from `seed` alone: the same
// specs and seed give the same plan. Randoms keep their id (they fire nothing
// themselves).
std::vector<PlannedFault> PlanFaults(const std::vector<FaultSpec>& specs,
                                     uint64_t seed);

// The worker's share of a plan, as kolorun passes it (KOLO_FAULT_PLAN):
// "ID=SPEC;ID=SPEC...", and back.
std::string EncodeWorkerPlan(const std::vector<PlannedFault>& faults);
absl::StatusOr<std::vector<PlannedFault>> DecodeWorkerPlan(
    absl::string_view text);

}  // namespace kolo

#endif  // KOLO_COMMON_FAULT_SPEC_H_
