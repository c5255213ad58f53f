// FastPathLink: a CoordinatorLink (session/coordinator_link.h) around the
// negotiation link that, once the coordinator grants the fast path
// (proto FastPath, in a plan), negotiates cache hits among the ranks over the
// data plane instead of through the coordinator (docs/design.md "The fast
// path", issue: negotiation at the speed of the data plane).
//
// On the fast path:
// - SendAll keeps what the runtime sends instead of writing it: the cache
//   bits announced (hits), and whatever needs the coordinator — a full
//   Request (a miss, a changed signature, a join, a process-set op, ...),
//   changed settings. A Done is kept too (the exit reports it).
// - Receive runs rounds: every rank contributes one byte per cache bit of
//   the epoch (1: announced here and may run on the fast path: an allreduce
//   of process set 0, not grouped) and one flag byte (0: this rank needs the
//   coordinator), and a MIN allreduce over the data plane ANDs them. The bits
//   set on every rank run as a plan every rank derives alike: ascending bit
//   order, fused by the fusion planner with the granted settings, listed by
//   bit (Response.by_bit), numbered on from the granting plan. When any rank
//   needs the coordinator, every rank leaves after that round's plan: it
//   writes Done(fast_exit) with its last fast plan and then, in the same
//   write, every announcement kept and not run, and reads the link again.
// - The exit's Done also lists the bits the fast plans ran, least recently
//   run first (Done.fast_used): the coordinator's LRU order follows them;
//   and what they ran (Done.fast_tally: plans, collectives, tensors, bytes,
//   fusion), which the coordinator adds to its metrics.
// - A tensor announced with or after a change of settings (fusion
//   threshold, cache capacity, ...) never runs in a fast round: the rank
//   needs the coordinator, and the tensor runs under the new settings, as
//   off the fast path.
// - Rank 0 needs the coordinator kFastPathReportEvery after the grant, so
//   that the coordinator's metrics and status never lag the ranks by more
//   (the coordinator grants the fast path again at its next quiet plan).
// - Every rank comes to a round within about kFastPathPatience: a rank
//   that has had nothing to run on the fast path for that long needs the
//   coordinator (idle), and so does one whose oldest kept bit has waited
//   that long (a stall: the coordinator's stall inspector and `kolo-ctl
//   status` then see what it waits for). So a round waits for the peers
//   with a bounded inactivity timeout (RoundPatience), and a peer that
//   never comes is a fault like any other. The epoch's end and Stop abort
//   a round.
// - Leave (shutdown): the rank runs one more round that needs the
//   coordinator and contributes no bit, so that every rank leaves with it,
//   and hands nothing it kept to the coordinator (its ops were abandoned).
// - Announcements written before the grant and not yet read by the
//   coordinator when it granted (FastPath.announces) are the coordinator's:
//   this rank then needs the coordinator at its first round.
//
// Thread-safety: SendAll and Wake from any thread; Receive from the holder
// of the runtime's plan runner only (it drives the data plane). Lock order:
// the runtime's send lock, then mu_; describe (the runtime's lock) is called
// with mu_ released.
// Invariants: off the fast path every message passes through unchanged; on
// it nothing is written to the coordinator except the exit.
#ifndef KOLO_WORKER_LIB_RUNTIME_FAST_PATH_LINK_H_
#define KOLO_WORKER_LIB_RUNTIME_FAST_PATH_LINK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "allreduce/data_plane.h"
#include "common/mutex.h"
#include "fusion/fusion_planner.h"
#include "proto/kolo.pb.h"
#include "worker_lib/session/coordinator_link.h"

namespace kolo::worker {

// A rank leaves the fast path when it has had nothing to run on it for
// this long, or when a bit it kept has waited this long (see above).
inline constexpr absl::Duration kFastPathPatience = absl::Seconds(1);
// Rank 0 leaves the fast path this long after a grant (see above).
inline constexpr absl::Duration kFastPathReportEvery = absl::Seconds(5);

// How long a round waits for peers without any byte moving: the data-plane
// timeout, and no less than kShortestRoundPatience (a peer comes within
// kFastPathPatience plus a park of its background thread, about a second).
inline constexpr absl::Duration kShortestRoundPatience = absl::Seconds(10);
absl::Duration RoundPatience(absl::Duration data_timeout);

class FastPathLink final : public CoordinatorLink {
 public:
  struct Hooks {
    // The fusion candidate of cache bit `bit` when its op may run on the
    // fast path (an allreduce of process set 0, not grouped, as this rank's
    // cache mirror holds it), else nullopt. Takes the runtime's lock.
    std::function<std::optional<fusion::Candidate>(uint32_t bit,
                                                   uint64_t direct_bytes)>
        describe;
    // After each round (for the timeline): the bits run, and whether the
    // ranks left. May be empty.
    std::function<void(size_t bits, bool exit)> on_round;
  };

  // `inner`: the negotiation link; `data`: the epoch's data plane (must
  // outlive this); `data_timeout`: its inactivity timeout
  // (KOLO_TIMEOUT_SECONDS), restored after each round; `rank`: this rank.
  FastPathLink(std::unique_ptr<CoordinatorLink> inner, DataPlane* data,
               absl::Duration data_timeout, int rank, Hooks hooks);

  absl::Status SendAll(absl::Span<proto::WorkerMessage> msgs) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<proto::CoordinatorMessage>> Receive(
      absl::Duration timeout) override ABSL_LOCKS_EXCLUDED(mu_);
  void Wake() override ABSL_LOCKS_EXCLUDED(mu_);
  bool coalesces_writes() const override { return true; }
  bool carries_plans() const override { return true; }
  // On the fast path a Receive may wait for peers past its timeout.
  bool may_overrun_timeout() const override ABSL_LOCKS_EXCLUDED(mu_);
  // On the fast path with nothing kept, no need of the coordinator and no
  // Wake: when this rank's next round is due anyway (the idle exit, rank 0's
  // report); else `now`.
  absl::Time ReadBy(absl::Time now) const override ABSL_LOCKS_EXCLUDED(mu_);

  // Rounds run and fast plans derived so far (for tests and benchmarks).
  uint64_t rounds() const ABSL_LOCKS_EXCLUDED(mu_);

  // Before shutdown: whether this rank is on the fast path; if so, its next
  // round leaves it for every rank (see above), run by whichever thread
  // reads the link next. Later grants are left at once.
  bool Leave() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until this rank is off the fast path, or a round failed, or
  // `deadline`; true when off it.
  bool AwaitExit(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Starts the fast path granted in `plan` (Receive, off the fast path).
  void Grant(const proto::FastPath& grant, uint64_t seq)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `msg` (on the fast path), kept at `now`.
  void Keep(proto::WorkerMessage& msg, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether this rank's next round must leave (need_, or idle or stalled
  // for kFastPathPatience at `now`); sets need_ when it newly must.
  bool MustLeave(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Describes the bits kept since the last round (calls hooks_.describe
  // with mu_ released).
  void DescribeNewBits() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One round, from this rank's contribution to the plan (nullopt: no bit
  // ran); `exit` set when the ranks leave. Releases mu_ around the
  // allreduce.
  absl::StatusOr<std::optional<proto::Plan>> Round(bool& exit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The plan of `bits` (ascending), numbered fast_seq_ + 1.
  proto::Plan PlanOf(const std::vector<uint32_t>& bits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leaves the fast path: writes Done(fast_exit) and the announcements kept.
  absl::Status Exit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<CoordinatorLink> inner_;
  DataPlane* const data_;
  const absl::Duration data_timeout_;
  const int rank_;
  const Hooks hooks_;

  mutable Mutex mu_;
  CondVar cv_;  // something kept, Wake, Leave, or the exit
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // Announce messages written to the coordinator (off the fast path).
  uint64_t announces_sent_ ABSL_GUARDED_BY(mu_) = 0;
  // The fast path: whether on it, the grant, the last plan run or derived.
  bool fast_ ABSL_GUARDED_BY(mu_) = false;
  proto::FastPath grant_ ABSL_GUARDED_BY(mu_);
  uint64_t fast_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Whether this rank needs the coordinator (sticky until the exit).
  bool need_ ABSL_GUARDED_BY(mu_) = false;
  // Shutting down (Leave): no bit is contributed, nothing kept is handed on.
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;
  // A round failed (the data plane's error went to the caller).
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  // The grant, a kept message or a round that ran bits: the last activity
  // (for the idle exit); and when each kept bit was kept (for the stall
  // exit: ready_.front() is the oldest).
  absl::Time active_at_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> kept_at_ ABSL_GUARDED_BY(mu_);
  // Kept: announcements that need the coordinator (full Requests), the
  // latest settings, and the cache bits announced and not run yet, in
  // announcement order (bits_kept_[b]: 0 when b is not among them,
  // kKept, or kKeptAfterSettings when it was announced with or after a
  // change of settings kept here: the coordinator's to plan, under them).
  static constexpr uint8_t kKept = 1;
  static constexpr uint8_t kKeptAfterSettings = 2;
  proto::Announce kept_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<uint8_t> bits_kept_ ABSL_GUARDED_BY(mu_);
  // Per bit of the grant: 0 not described yet, 1 may run here, 2 may not;
  // and the candidates of those that may.
  std::vector<uint8_t> described_ ABSL_GUARDED_BY(mu_);
  std::vector<fusion::Candidate> candidates_ ABSL_GUARDED_BY(mu_);
  // Per bit: when a fast plan last ran it (a count of bits run; 0: never
  // since the grant), for the exit's Done.fast_used.
  std::vector<uint64_t> used_at_ ABSL_GUARDED_BY(mu_);
  uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
  // What the fast plans since the grant ran (the exit's Done.fast_tally),
  // and when the grant came (for kFastPathReportEvery).
  proto::FastPathTally tally_ ABSL_GUARDED_BY(mu_);
  absl::Time granted_at_ ABSL_GUARDED_BY(mu_);
  // The round's buffer: the flag byte, then one byte per bit.
  std::vector<uint8_t> round_ ABSL_GUARDED_BY(mu_);
  uint64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;
  // A round since the last plan (for its data-plane stamp).
  uint64_t rounds_in_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // A Receive runs a round (the data plane is in use outside mu_).
  bool in_round_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_FAST_PATH_LINK_H_
