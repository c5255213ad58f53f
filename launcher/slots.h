// SlotTable: kolorun's elastic bookkeeping of where workers may run — the
// host slots of the job, which of them should run a worker, the identity of
// each slot's worker, and the blacklist with its cooldowns. It decides; the
// Supervisor (launcher/supervisor.h) carries the decisions out.
//
// Model:
//   - A slot is (host, index); each runs at most one worker at a time. Slots
//     come from -H host:slots or from the discovery script (SetHosts), in
//     host order; a host listed twice has the sum of its slot counts.
//   - A slot's worker id ("w<N>") is given the first time the slot starts a
//     worker and kept for good (also when its host leaves and comes back):
//     numbers continue in start order (w0..w3 for -np 4, then w4, w5, ...).
//     Every start in a slot is a new incarnation: 0, 1, 2, ...
//   - A slot is *wanted* when it should run a worker: the first `n` slots at
//     the start (Want), the slots of a host that appears later (Want again),
//     and a failed worker's slot until it is replaced. A worker that exits 0
//     (it finished, or left on purpose) or that kolorun stopped leaves its
//     slot unwanted: it is not replaced.
//   - Blacklist: a failure within policy.healthy_run of the worker's start
//     extends the slot's streak of failures (a later one starts a new
//     streak). The first failure of a streak is retried at once; failure k
//     (k >= 2) cools the slot down for min(hi, lo * 2^(k-2)). Never forever.
//     A host is blacklisted as a whole only while none of its slots runs a
//     worker and one of them cools down (so one crash on a host that still
//     has live workers blacklists the slot only).
//   - Replacement: a failed slot that may not start now (cooling down, or
//     its host blacklisted) hands its want to a free slot elsewhere (present,
//     unwanted, idle, not cooling, host not blacklisted) when there is one;
//     else it keeps it and gets its worker when the cooldown ends.
//   - policy.max_workers (kolorun --max-np; 0 = no cap) caps the slots that
//     are wanted or still run a worker: nothing beyond it is started.
//
// Pure: no I/O, no processes, no logging; the clock is injected, so every
// rule here is unit-tested with a fake clock (tests/launcher_slots_test.cc).
// Decisions come back with a message for the caller to log.
//
// Thread-safety: not thread-safe; the Supervisor uses it from its one thread.
// Invariants: slot indices are stable (slots are never erased); a running
// slot has a worker id; count(wanted or running) <= max_workers when a cap
// is set (except that a host's slots that vanish keep running until their
// workers end).
#ifndef KOLO_LAUNCHER_SLOTS_H_
#define KOLO_LAUNCHER_SLOTS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "launcher/args.h"

namespace kolo::launcher {

struct SlotPolicy {
  // --blacklist-cooldown-range LO HI.
  absl::Duration cooldown_lo = absl::Seconds(2);
  absl::Duration cooldown_hi = absl::Seconds(60);
  // A worker that ran at least this long before it failed was healthy: its
  // failure starts a new streak (retried at once).
  absl::Duration healthy_run = absl::Seconds(30);
  int max_workers = 0;  // --max-np; 0: no cap
};

struct Slot {
  std::string host;
  int index = 0;           // among its host's slots
  std::string worker_id;   // "" until its first start
  int worker_number = -1;  // the N of w<N>
  int next_incarnation = 0;
  bool present = true;  // in the latest host list
  bool wanted = false;
  bool running = false;
  absl::Time started_at = absl::InfinitePast();
  int streak = 0;  // failures in a row, each within healthy_run of its start
  absl::Time cooldown_until = absl::InfinitePast();

  std::string Name() const;  // "host:index"
};

// Who a started worker is.
struct WorkerIdentity {
  int slot = -1;
  std::string worker_id;
  int worker_number = 0;
  int incarnation = 0;
  std::string host;
  int local_index = 0;  // the slot's index on its host
  int host_slots = 1;   // slots its host has now
};

// What changed with SetHosts.
struct HostChange {
  std::vector<std::string> added_hosts;    // not present before
  std::vector<std::string> removed_hosts;  // present before, gone now
  std::vector<int> added_slots;            // slots present now, not before
  std::vector<int> to_stop;                // gone slots that run a worker
};

enum class WorkerEnd {
  kSucceeded,  // exited 0: finished or left on purpose
  kFailed,     // non-zero exit or a signal
  kStopped,    // kolorun asked it to leave (its host left, --graceful-term)
};

// What happens after a worker ended.
struct EndDecision {
  bool replace = false;           // the want stays (on `replacement_slot`)
  int replacement_slot = -1;      // where the replacement runs
  absl::Duration cooldown;        // of the failed slot (0: retried at once)
  bool host_blacklisted = false;  // its host may start nothing meanwhile
  std::string message;            // for the log ("" when nothing to say)
};

class SlotTable {
 public:
  using Clock = std::function<absl::Time()>;
  SlotTable(SlotPolicy policy, Clock clock);

  // Makes `hosts` the job's hosts (see the file comment).
  HostChange SetHosts(const std::vector<HostSlots>& hosts);

  // Wants up to `n` more slots among `candidates` (in that order) that are
  // present, unwanted and idle, within max_workers; returns how many.
  int Want(const std::vector<int>& candidates, int n);
  // Ditto, among every slot in table order.
  int Want(int n);

  // No slot is wanted any more (the job ends, --graceful-term).
  void UnwantAll();

  // The wanted, present, idle slots that may start now (not cooling down,
  // host not blacklisted), in slot order.
  std::vector<int> Startable() const;

  // Records a start. REQUIRES: `slot` is in Startable().
  WorkerIdentity Start(int slot);

  // Records the end of the slot's worker. REQUIRES: the slot is running.
  EndDecision Ended(int slot, WorkerEnd how);

  // True while a wanted, present slot has no worker (a replacement, or a
  // start, is pending).
  bool Pending() const;

  // When the earliest cooldown of a wanted slot ends (InfiniteFuture when
  // none), for the caller's wakeups.
  absl::Time NextCooldownEnd() const;

  // The time until which `host` is blacklisted (InfinitePast when it is
  // not): none of its slots runs a worker and one cools down.
  absl::Time HostBlacklistedUntil(const std::string& host) const;

  const std::vector<Slot>& slots() const { return slots_; }
  int Running() const;
  int WantedOrRunning() const;

 private:
  bool CanStart(const Slot& s, absl::Time now) const;
  int HostSlotCount(const std::string& host) const;

  SlotPolicy policy_;
  Clock clock_;
  std::vector<Slot> slots_;
  int next_worker_number_ = 0;
};

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_SLOTS_H_
