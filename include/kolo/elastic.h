// kolo's elastic API (Horovod's model, in C++): training state that survives
// the loss of workers, and a retry wrapper.
//
//   kolo::elastic::State state;
//   state.add_tensor("weights", w.data(), w.size(), kolo::DataType::kFloat32);
//   state.add_blob("step", &step_bytes);
//   state.register_reset_callback([&] { lr = base_lr * kolo::size(); });
//   absl::Status s = kolo::elastic::run(state, [&]() -> absl::Status {
//     while (step < steps) {
//       ... kolo::allreduce(...) ...   // fails with the membership error
//                                      // when a worker is lost
//       if (absl::Status c = state.commit(); !c.ok()) return c;
//     }                                // (workers joined or left)
//     return absl::OkStatus();
//   });
//
// When a worker of an elastic job (kolorun --min-np) is lost, the
// coordinator ends the epoch: every pending op on every survivor fails with
// the *membership error* (kAborted with a payload naming the epoch and the
// lost workers; is_membership_error). run() then restores the state to its
// last commit, waits for the next epoch (the survivors, ranks reassigned in
// their old order), rebuilds the data plane, runs the reset callbacks,
// syncs rank 0's state to every rank and calls `fn` again. rank() and size()
// inside `fn` give the new epoch's values. Any other error — a caller's
// mistake (kInvalidArgument, kFailedPrecondition), the job's end, this worker
// evicted (it was judged lost; is_evicted_error) — is returned unchanged.
//
// Growth and planned leaves: a worker that starts while the job runs (a
// replacement, a new host) waits until every member reaches a membership
// check — State::commit() or check_host_updates() — and is admitted there.
// The check then fails on every member with the *hosts-updated* error
// (is_hosts_updated; a membership error too, Horovod's HostsUpdatedInterrupt):
// run() goes on from that commit without rollback, waits for the next epoch
// (newcomers appended after the survivors' ranks), runs the reset callbacks
// and syncs; the newcomer's run() starts with that sync. A worker that
// receives SIGTERM in an elastic job (or calls request_leave()) leaves at
// its next check: the others go on from there without rollback, and run()
// shuts kolo down on the leaver and exits the process with status 0
// (RunOptions::exit_on_leave). A worker that was evicted (stopped or cut
// off, then back) rejoins as a newcomer (RunOptions::rejoin_after_eviction).
//
// Thread-safety: a State is used by one thread (the training loop); run()
// calls `fn` on the calling thread.
#ifndef KOLO_ELASTIC_H_
#define KOLO_ELASTIC_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kolo/kolo.h"

// Elastic training: state that survives membership changes, and run().
namespace kolo::elastic {

// Whether `s` is a membership error an elastic retry acts on: the epoch
// ended because workers were lost (not: this worker was evicted).
bool is_membership_error(const absl::Status& s);
// Whether `s` says that this worker was evicted (judged lost; it must exit).
bool is_evicted_error(const absl::Status& s);
// Whether `s` is a planned membership change at a membership check
// (workers joined or left): go on without rollback.
bool is_hosts_updated(const absl::Status& s);
// Whether `s` is a planned change in which this worker leaves.
bool is_leaving(const absl::Status& s);

// One round through the coordinator (no data moves) at which every member
// of an elastic job learns of membership updates: OK when nothing changes;
// the hosts-updated error (is_hosts_updated) when workers join or leave here,
// is_leaving on a worker that leaves. Every member must call it at the same
// point (State::commit() does). OK at once outside elastic jobs.
absl::Status check_host_updates();
// Asks this worker to leave the job at its next membership check (what
// SIGTERM does in an elastic job; for programs with their own SIGTERM
// handler). Async-signal-safe.
void request_leave();

// The training state run() keeps consistent across membership changes:
// tensors and blobs the caller owns, committed, restored and synced.
class State {
 public:
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Registers a tensor the caller owns: `count` elements of `type` at `data`
  // (host memory), which must stay valid while the State is used. Names are
  // unique. kInvalidArgument for a duplicate name, a null buffer with a
  // non-zero count, a negative count.
  absl::Status add_tensor(std::string name, void* data, int64_t count,
                          DataType type);
  // Registers a byte blob the caller owns (its size may change between
  // commits: sync sends rank 0's size first).
  absl::Status add_blob(std::string name, std::string* blob);
  // Runs after a membership change, before sync(), in registration order
  // (rescale a learning rate, reshard data, re-add process sets).
  void register_reset_callback(std::function<void()> callback);

  // Copies every tensor and blob to host memory: the point restore() goes
  // back to (counts commits), then check_host_updates(): the hosts-updated
  // error when the membership changes here (return it from run()'s fn).
  absl::Status commit();
  // The copy of commit() without the membership check.
  void save();
  // Copies the last commit back into the tensors and blobs (nothing before
  // the first commit).
  void restore();
  // Rank 0's tensors and blobs to every rank (broadcast), then save():
  // every rank holds rank 0's committed state. Fails like a collective.
  absl::Status sync();
  // Runs the reset callbacks (run() does, after a membership change).
  void on_reset();

  // How many times the state was saved (commit(), save() and sync() save).
  int64_t commits() const { return commits_; }

 private:
  struct TensorEntry {
    std::string name;
    void* data = nullptr;
    int64_t count = 0;
    DataType type = DataType::kFloat32;
    std::string saved;  // bytes of the last commit
  };
  struct BlobEntry {
    std::string name;
    std::string* blob = nullptr;
    std::string saved;
  };
  bool known(const std::string& name) const;

  std::vector<TensorEntry> tensors_;
  std::vector<BlobEntry> blobs_;
  std::vector<std::function<void()>> on_reset_;
  int64_t commits_ = 0;
  bool committed_ = false;
};

// What run() does besides retrying.
struct RunOptions {
  // How long one retry waits for the next epoch (forming it includes the
  // survivors' acknowledgements and the new data plane's connections).
  absl::Duration epoch_timeout = absl::Seconds(120);
  // A worker that leaves (SIGTERM) shuts kolo down and exits with status 0;
  // false: run() returns the is_leaving error instead.
  bool exit_on_leave = true;
  // A worker the coordinator evicted (it was stopped or cut off, and came
  // back) joins the job again as a newcomer: it waits for the members'
  // next commit, then syncs from rank 0. false: run() returns the
  // is_evicted_error error (the process should exit). An op that failed
  // because the link to the coordinator broke (kUnavailable) waits, at most
  // the lease, for the eviction that may follow it (a partition that
  // healed); a worker whose lease ran out has lost its coordinator: run()
  // returns that error and the process exits (kolorun replaces it).
  bool rejoin_after_eviction = true;
};

// Calls fn(); on a membership error restores `state`, waits for the next
// epoch, runs the reset callbacks, syncs and calls fn() again (also syncs
// before the first call, so that every rank starts from rank 0's state).
// Returns fn's result, or the first error that is not a membership error.
absl::Status run(State& state, const std::function<absl::Status()>& fn,
                 const RunOptions& options = {});

}  // namespace kolo::elastic

#endif  // KOLO_ELASTIC_H_
