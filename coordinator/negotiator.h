// Negotiator: which tensors are ready on every rank, in which global order
// they run, and whether the ranks agree on them — as a plain class with no
// gRPC and no clock of its own (announcements and times in, plans, warnings
// and a shutdown verdict out). CoordinatorCore owns one per epoch and feeds
// it the Announce and Done messages of the members; tests drive it directly.
//
// Rules (docs/design.md "Negotiation and fusion"; proto/kolo.proto for
// messages):
// - A name is ready when every rank has announced it. Ready names are
//   checked for agreement (op, dtype, device, and per op: shape, reduce op,
//   scale factors, root, trailing dimensions, splits); a disagreement or a
//   request flagged invalid on some rank becomes an error response for that
//   name, which every rank receives (so the next op works).
// - One global plan sequence per epoch (1, 2, ...); every plan goes to every
//   rank.
// - Dispatch: when the data plane is idle (every rank's Done covers every
//   plan sent) the responses that became ready in one call go out at once in
//   one plan; while it is busy, responses that become ready are held and go
//   out together in one plan as soon as it becomes idle, or once the oldest
//   held one has waited the cycle time, whichever comes first.
// - Fusion (fusion/fusion_planner.h): the responses of one plan are grouped
//   by PlanFusion with the fusion threshold; a group of several becomes one
//   Response whose names run as one collective over one buffer, in name
//   order. Tensors of at least the direct-bytes size never fuse (they run in
//   place, without the copies). Error responses and other ops never fuse.
// - Settings (proto Settings): each rank sends its own; the negotiator uses
//   the smallest threshold, direct size and cache capacity over the ranks
//   (the options' values until every rank sent one), and gives ready ticks
//   when any rank asks for a timeline.
// - Response cache (response_cache.h): a dispatched name gets a bit; a rank
//   may then announce the bit instead of its Request. A name every rank
//   announced by its live bit reuses the cached response without checks.
//   A fused response all of whose tensors are such hits (and no rank has
//   joined) lists them by bit, without names (Response.by_bit): the steady
//   state of a training step sends no names either way.
//   Bits evicted in a plan go out in Plan.cache_evicted.
// - Process sets: a request names its set (0 = every rank); a name is ready
//   when every member of its set announced it. Sets are registered and
//   removed by negotiated ops over every rank (PROCESS_SET_ADD/REMOVE): an
//   add of ranks that already form a set, or a remove of an unknown set or
//   of one with ops pending, fails on every rank. Ids count from 1 and are
//   never reused within an epoch. Set ops do not use the response cache.
//   All sets share the one plan sequence (docs/design.md "Invariants":
//   separate orders deadlock).
// - Join (JOIN): a joined rank counts as having announced every name of
//   its sets; an allreduce it did not announce carries it in
//   Response.joined (it contributes the identity), a barrier completes, and
//   any other op fails on every rank that announced it. When every rank
//   joined, a JOIN response names the last one, and the join state resets.
// - Groups (Request.group): the members of a group wait for each other and
//   go out in one plan. Under Settings.disable_group_fusion (any rank) they
//   fuse only with each other.
// - Members that left (Leave): a rank that shut down while the others stay
//   can take part in nothing more. Every op that needs it (on a process set
//   it belongs to) fails on every rank with an error naming it: the ops
//   partially announced or complete and held when it left, and any
//   announced later (at once). Ops on sets without it go on; its Done no
//   longer gates dispatch. (negotiator_leave.cc)
// - Stall inspector: a name announced by some ranks but not all for longer
//   than stall_check gives a warning naming the missing ranks and some
//   tensors, repeated every stall_check while it lasts; past stall_shutdown
//   (if non-zero) the negotiator returns a shutdown verdict with the reason,
//   once. Ages count from a name's first announcement.
// - The fast path (docs/design.md "The fast path"; negotiator_fast.cc): when
//   every rank asked for it (Settings.fast_path) and a plan leaves nothing
//   announced, joined, grouped, on a process set or held, the plan grants it
//   (Plan.fast_path): the ranks then agree on cache hits among themselves
//   over the data plane and number their own plans on. No plan goes out
//   until every rank that did not leave reported its exit (Done.fast_exit,
//   FastExit): the plan sequence then goes on after their last fast plan.
//   Announcements that arrive meanwhile wait.
// - Ordered streams (Request.order_stream; negotiator_order.cc): the ops of
//   a stream (a torch.distributed process group) are called by every member
//   of its set in one order, and each says its call's slot. Once every
//   member (that has not joined) announced an op in a slot, the slot is
//   settled: when they announced different ops there (names, or groups),
//   every op announced in the slot fails on every rank with an error naming
//   what each rank called, instead of waiting for ops the other ranks never
//   call. A rank that announces in a slot again before it settled (its
//   earlier op there failed on its own, e.g. for a member that left) starts
//   the slot over. A void (Request.order_void: the rank refused its call
//   there, and announces a barrier that stands for it) is never the same
//   op as any: the slot settles as ever, and every op announced there, the
//   voids too, fails on every rank with the refusal's reason (at once when
//   the void comes last), and the stream's next calls go on.
// - Agreement checks and their messages: coordinator/negotiator_checks.h.
//
// Files: negotiator.cc (readiness: announcements, joins, groups, Done, ticks,
// the stall inspector), negotiator_plans.cc (held responses into plans:
// dispatch, cache bits, fusion), negotiator_checks.cc (agreement),
// negotiator_order.cc (ordered streams), negotiator_leave.cc (members that
// left), negotiator_fast.cc (the fast path).
//
// Thread-safety: none; the owner serialises calls (CoordinatorCore holds its
// mutex).
// Invariants: plan sequence numbers are consecutive from 1; a name is in at
// most one of {partially announced, held, dispatched-and-forgotten}; after a
// name's response is dispatched the name may be announced again (a new op).
#ifndef KOLO_COORDINATOR_NEGOTIATOR_H_
#define KOLO_COORDINATOR_NEGOTIATOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/knob_defaults.h"
#include "common/knobs.h"
#include "coordinator/metrics.h"
#include "coordinator/partial_order.h"
#include "coordinator/response_cache.h"
#include "fusion/fusion_planner.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

struct NegotiatorOptions {
  int size = 1;  // members of the epoch, ranks 0..size-1
  // KOLO_CYCLE_TIME_MS: the longest a ready response waits while the data
  // plane is busy.
  absl::Duration cycle_time = knobs::kCycleTime.default_duration;
  // KOLO_STALL_CHECK_TIME_SECONDS; zero or negative disables the warning.
  absl::Duration stall_check = knobs::kStallCheck.default_duration;
  // KOLO_STALL_SHUTDOWN_TIME_SECONDS; zero = never.
  absl::Duration stall_shutdown = knobs::kStallShutdown.default_duration;
  // The settings used until every rank sent its own (proto Settings).
  uint64_t fusion_threshold =
      static_cast<uint64_t>(knob_defaults::kFusionThreshold);
  uint64_t fusion_direct_bytes =
      static_cast<uint64_t>(knob_defaults::kFusionDirectBytes);
  uint32_t cache_capacity =
      static_cast<uint32_t>(knob_defaults::kCacheCapacity);
  // Where the negotiator counts what it dispatches (coordinator/metrics.h);
  // null: nowhere. Its owner keeps it alive and serialises access to it
  // with the negotiator's calls (CoordinatorCore: under its mutex).
  NegotiationStats* stats = nullptr;
};

// The autotuner's settings (coordinator/autotune.h) for a Negotiator.
struct NegotiatorTuning {
  uint64_t fusion_threshold = 0;  // replaces the ranks' smallest
  absl::Duration cycle_time;      // replaces NegotiatorOptions::cycle_time
  // Grant no fast path: the tuner must see every step's plans.
  bool hold_fast_path = false;
  // false: the response cache is off (capacity 0, every bit evicted in the
  // next plan) whatever the ranks' capacity; true: the ranks' capacity.
  bool cache_enabled = true;
};

// The ranks' data-plane settings (proto::Settings message_allreduce, the
// two sizes and the hierarchy's two flags), once every rank sent its own:
// what autotune may tune, and where it starts.
struct RanksDataPlane {
  bool message_allreduce = false;      // every rank's allreduce
  uint64_t small_allreduce_bytes = 0;  // the smallest over the ranks
  uint64_t segment_bytes = 0;          // the smallest (0: automatic)
  bool hierarchical_tunable = false;   // every rank's
  bool hierarchical = false;           // in force on every rank
};

// What one call produced.
struct NegotiatorOutput {
  std::vector<proto::Plan> plans;     // send each to every rank, in order
  std::vector<std::string> warnings;  // stall warnings (the owner logs them)
  // Set once a stall lasted stall_shutdown: the job must end with this
  // reason (it says which tensors, which ranks, how long, which knob).
  std::optional<std::string> shutdown;
};

class Negotiator {
 public:
  explicit Negotiator(NegotiatorOptions options);
  Negotiator(const Negotiator&) = delete;
  Negotiator& operator=(const Negotiator&) = delete;

  // `rank` announced `requests`. A name this rank already announced and
  // that is not dispatched yet is ignored (logged): the worker refuses
  // duplicates before announcing, so only a faulty worker sends one.
  // REQUIRES: 0 <= rank < size.
  void Announce(int rank, const proto::Announce& announce, absl::Time now,
                NegotiatorOutput& out);
  // `rank` finished every plan up to `seq`.
  void Done(int rank, uint64_t seq, absl::Time now, NegotiatorOutput& out);
  // `rank` left the fast path after its fast plan `seq` (Done.fast_exit):
  // every plan up to seq finished there; `used` (Done.fast_used): the cache
  // bits its fast plans ran, least recently first, which the cache marks
  // used in that order (every rank sends the same); `tally`
  // (Done.fast_tally): what they ran, added to the stats once per stay on
  // the fast path (from the first exit). Ignored (logged) when no fast path
  // was granted.
  void FastExit(int rank, uint64_t seq, absl::Span<const uint32_t> used,
                const proto::FastPathTally& tally, absl::Time now,
                NegotiatorOutput& out);
  // The autotuner's settings from the next plan on (nullopt: the options'
  // and the ranks' again). Every rank runs the plans it builds, so every
  // rank switches at the same plan.
  void SetTuning(const std::optional<NegotiatorTuning>& tuning);
  uint64_t fusion_threshold() const { return fusion_threshold_; }
  absl::Duration cycle_time() const { return cycle_time_; }
  // nullopt until every rank sent its Settings.
  const std::optional<RanksDataPlane>& ranks_data_plane() const {
    return ranks_data_plane_;
  }
  // Whether the ranks are on the fast path (granted, not every exit in).
  bool on_fast_path() const { return fast_; }
  // `rank` left the epoch (kolo::shutdown(), or a Leave before its process
  // ended) while other members stay; `who` names it ("worker w1 (rank 1,
  // host h)"). See "Members that left" above. Idempotent.
  // REQUIRES: 0 <= rank < size.
  void Leave(int rank, const std::string& who, absl::Time now,
             NegotiatorOutput& out);
  // Flushes held responses whose cycle time is up; runs the stall inspector.
  void Tick(absl::Time now, NegotiatorOutput& out);

  // When Tick must be called next (InfiniteFuture when nothing waits): the
  // cycle deadline of held responses, the next stall warning or shutdown.
  absl::Time NextWake() const;

  // Names announced by some ranks and not all, oldest first (for Status()).
  std::vector<proto::PendingTensor> Pending(absl::Time now) const;
  uint64_t plans_sent() const { return last_seq_; }
  // The members of process set `set`, ascending (null: no such set).
  const std::vector<int>* Members(int32_t set) const;

 private:
  struct Partial {
    int32_t set = 0;                                     // its process set
    std::vector<std::optional<proto::Request>> by_rank;  // size entries
    std::vector<absl::Time> at;  // each rank's announcement
    int count = 0;
    int by_bit = 0;      // ranks that announced it by its cache bit
    int64_t bit = -1;    // the bit they announced
    absl::Time first;    // first announcement
    uint64_t order = 0;  // arrival order of the first announcement
  };
  // A live cache bit some ranks announced (the hot path of a steady-state
  // step: no per-name state, no copies). Indexed by bit in bits_.
  struct BitPartial {
    bool active = false;
    bool held = false;  // complete, in held_ (a hit)
    int count = 0;
    std::vector<uint8_t> ranks;  // size entries: announced
    std::vector<absl::Time> at;  // each rank's announcement
    absl::Time first;
    uint64_t order = 0;
  };
  // A slot of an ordered stream: its process set, stream and slot.
  struct OrderKey {
    int32_t set = 0;
    std::string stream;
    uint32_t slot = 0;
    bool operator==(const OrderKey& o) const {
      return set == o.set && slot == o.slot && stream == o.stream;
    }
    template <typename H>
    friend H AbslHashValue(H h, const OrderKey& k) {
      return H::combine(std::move(h), k.set, k.stream, k.slot);
    }
  };
  // What the members announced in an unsettled slot: per rank, whether it
  // did, its op (the group of a grouped op, else the name; a void's call),
  // and why it refused its call there (a void; else empty).
  struct OrderSlot {
    std::vector<uint8_t> ranks;  // size entries
    std::vector<std::string> ops;
    std::vector<std::string> voids;
  };
  // A ready response waiting for its plan.
  struct Held {
    proto::Response response;  // names = {name}; empty for a fast hit
    // The requests of the members that announced it, in rank order (every
    // rank's when `cacheable`); empty for a fast hit.
    std::vector<proto::Request> requests;
    int64_t hit_bit = -1;           // every rank announced this live bit
    std::vector<int64_t> ready_us;  // per rank, with a timeline
    std::vector<int> absent;        // joined members that did not announce
    int32_t set = 0;
    std::string group;  // a grouped op's group, and its member count
    int32_t group_size = 0;
    bool cacheable = false;  // every rank's request, a collective of set 0
  };

  // One rank's announcement of one request (`bit` >= 0: by that bit).
  void AnnounceOne(int rank, const proto::Request& request, int64_t bit,
                   absl::Time now);
  // One rank's announcement of a cache bit.
  void AnnounceBit(int rank, uint32_t bit, absl::Time now);
  // Records `rank`'s `request` (of an ordered stream; maybe a void) in its
  // slot and settles the slot once every member announced there. False
  // when the members called different ops there or one voided it: every op
  // announced in the slot, this one included, has then failed
  // (negotiator_order.cc).
  bool CheckOrder(int rank, const proto::Request& request, absl::Time now);
  // Fails every op announced in slot `key` on every rank with the mismatch
  // or the refusal `slot` shows.
  void FailOrderSlot(const OrderKey& key, const OrderSlot& slot,
                     absl::Time now);
  // A JOIN from `rank`.
  void Join(int rank, const proto::Request& request, absl::Time now);
  // Whether every member of `set` that has not joined announced (by
  // `announced(rank)`), and at least one did.
  template <typename Announced>
  bool Complete(int32_t set, Announced announced) const;
  // Joined members of `set` that did not announce.
  template <typename Announced>
  std::vector<int> Absent(int32_t set, Announced announced) const;
  // Moves the complete name partial `name` / bit partial `bit` to held.
  void CompleteName(const std::string& name, absl::Time now);
  void CompleteBit(uint32_t bit, absl::Time now);
  // Every partial that a join made complete.
  void CompleteJoined(absl::Time now);
  // Into held_, or into its group's wait until the group is complete.
  void Hold(Held held, absl::Time now);
  // After an announcement: the members of groups an error released early
  // (broken_now_) that some ranks announced and others never will (the
  // ranks disagree on the group's members) fail with the group's error on
  // every rank, instead of waiting forever. Every rank announces all of a
  // group's members in one Announce, so once a member completed, whatever
  // of the group is still partial will never complete.
  void FailGroupLeftovers(absl::Time now);
  // Members that left (negotiator_leave.cc). Whether a member of `set`
  // left; the error text naming those that did; an error record in held_
  // for `name` announced by `requests`; a held record turned into that
  // error in place.
  bool NeedsLeft(int32_t set) const;
  std::string LeftError(proto::OpType op, const std::string& name,
                        int32_t set) const;
  void HoldLeftError(const std::string& name, int32_t set, proto::OpType op,
                     std::vector<proto::Request> requests, absl::Time now);
  void FailHeldForLeft(Held& held);
  // The next record of held_ (reused: cleared by ClearHeld, which keeps the
  // storage of its Response's lists and of its vectors).
  Held& NewHeld();
  void ClearHeld();
  // In Flush, for the held response held_[index] (`first`: a request of
  // it): process set registration, and the join rules (Response.joined, or
  // an error).
  void FinishHeld(size_t index, const proto::Request& first);
  // add_process_set / remove_process_set: registers or removes the set, or
  // turns the response into an error.
  void FinishProcessSetOp(size_t index, const proto::Request& first);
  // Moves bits_[bit] (active) into partial_ under its name.
  void ToNamePartial(uint32_t bit);
  // Active bit partials of bits evicted since evicted_[from] go to the name
  // path (their bits no longer stand for a cached response).
  void DivertEvicted(size_t from);
  // The name, first announcement, set and ranks of a partial, for the stall
  // inspector and Pending().
  std::string KeyName(const PartialKey& key) const;
  int32_t KeySet(const PartialKey& key) const;
  absl::Time KeyFirst(const PartialKey& key) const;
  bool KeyAnnounced(const PartialKey& key, int rank) const;
  void Warn(int rank, const std::string& name) const;
  // The response for a name every rank announced: a run, or an error.
  proto::Response Resolve(const std::string& name,
                          const std::vector<std::optional<proto::Request>>& r);
  bool DataPlaneIdle() const;
  // Dispatches held responses now when the data plane is idle.
  void MaybeDispatch(NegotiatorOutput& out);
  void Flush(NegotiatorOutput& out);
  // Flush's steps. The fusion domain of a held response: responses fuse
  // only within their process set, their group under
  // KOLO_DISABLE_GROUP_FUSION, and their joined ranks (`domains`: this
  // plan's keys).
  uint64_t DomainOf(const Held& h,
                    absl::flat_hash_map<std::string, uint64_t>& domains) const;
  // The fast hits (by_bit: whether one may go by bit) and then the responses
  // resolved by name (put into the cache under plan `seq`): their fusion
  // candidates.
  void TakeFastHits(std::vector<uint8_t>& by_bit,
                    absl::flat_hash_map<std::string, uint64_t>& domains);
  void CacheResolved(uint64_t seq, bool cache_on,
                     absl::flat_hash_map<std::string, uint64_t>& domains);
  // A bit evicted by a later Put of this plan no longer stands for a name;
  // the plan lists the evicted bits.
  void ForgetEvictedBits(proto::Plan& plan);
  // The held responses, fused, into `plan`.
  // Adds dispatched response `r` (of fusion group `group`) to `stats`.
  void Count(const fusion::Group& group, const proto::Response& r,
             NegotiationStats& stats) const;
  void EmitFused(const std::vector<uint8_t>& by_bit, proto::Plan& plan);
  void Inspect(absl::Time now, NegotiatorOutput& out);
  // The effective settings (see the class comment).
  void UpdateSettings(int rank, const proto::Settings& settings);
  void ApplyCapacity();
  // After Flush built `plan`: grants the fast path in it when it may.
  void MaybeGrantFastPath(proto::Plan& plan);
  // Every rank that did not leave reported its fast-path exit: the plan
  // sequence goes on after their last fast plan.
  void EndFastPath(NegotiatorOutput& out);
  // Adds a stay's Done.fast_tally to options_.stats, once per stay.
  void CountFastTally(const proto::FastPathTally& tally);

  const NegotiatorOptions options_;
  absl::flat_hash_map<std::string, Partial> partial_;
  // The partials (names of partial_, active bits_) by order: oldest first.
  PartialOrder by_order_;
  std::vector<BitPartial> bits_;
  uint64_t next_order_ = 0;
  // The held responses are held_[0, held_size_); the records beyond are
  // cleared and kept for reuse.
  std::vector<Held> held_;
  size_t held_size_ = 0;
  std::vector<fusion::Candidate> candidates_;    // Flush's, kept for capacity
  absl::flat_hash_set<std::string> held_names_;  // the names in held_
  // Groups some of whose members are complete, by group; their names.
  absl::flat_hash_map<std::string, std::vector<Held>> groups_;
  absl::flat_hash_set<std::string> group_names_;
  // Groups released early by an error: how many of their members are still
  // to come (they go alone).
  absl::flat_hash_map<std::string, int> broken_groups_;
  // Groups an error released early during the current Announce, and the
  // error: their leftovers fail at its end (FailGroupLeftovers).
  std::vector<std::pair<std::string, proto::Response>> broken_now_;
  // The unsettled slots of ordered streams.
  absl::flat_hash_map<OrderKey, OrderSlot> order_slots_;
  // Process sets by id (0, every rank, is implicit); the next id to give.
  std::vector<int> all_ranks_;
  std::map<int32_t, std::vector<int>> sets_;
  int32_t next_set_ = 1;
  // Join: per rank, whether it joined; how many; the last to join.
  std::vector<uint8_t> joined_;
  int joined_count_ = 0;
  int last_joined_ = -1;
  // Per rank: whether it left (Leave), and who it was; how many left.
  std::vector<uint8_t> left_;
  std::vector<std::string> left_who_;
  int left_count_ = 0;
  bool disable_group_fusion_ = false;
  // Per rank: the latest Settings (nullopt until sent).
  std::vector<std::optional<proto::Settings>> settings_;
  uint64_t fusion_threshold_;
  // The autotuner's (SetTuning): its threshold, which wins over the ranks'
  // smallest (kept apart: nullopt until every rank sent one), its cycle
  // time, and whether it holds the fast path back.
  std::optional<uint64_t> tuned_threshold_, ranks_threshold_;
  absl::Duration cycle_time_;
  bool hold_fast_path_ = false;
  uint64_t fusion_direct_bytes_;
  // The ranks' smallest cache capacity (the options' until every rank sent
  // one), and whether the autotuner turned the cache off; ApplyCapacity
  // sets the cache's capacity from them.
  uint32_t ranks_capacity_;
  bool tuned_cache_off_ = false;
  std::optional<RanksDataPlane> ranks_data_plane_;
  bool timeline_ = false;
  ResponseCache cache_;
  std::vector<uint32_t> evicted_;  // for the next plan's cache_evicted
  absl::Time held_since_ = absl::InfiniteFuture();
  uint64_t last_seq_ = 0;
  std::vector<uint64_t> done_;  // per rank
  absl::Time next_stall_warning_ = absl::InfinitePast();
  bool shutdown_given_ = false;
  // The fast path: whether every rank asked for it (Settings.fast_path);
  // per rank, the Announce messages read; one past the highest cache bit
  // given out in the epoch; whether it is granted, and per rank whether it
  // exited (left ranks count as exited), and the last fast plan reported.
  bool fast_wanted_ = false;
  std::vector<uint64_t> announces_;
  uint32_t bits_end_ = 0;
  bool fast_ = false;
  std::vector<uint8_t> fast_exited_;
  bool fast_tally_counted_ = false;  // this stay's Done.fast_tally
  uint64_t fast_seq_ = 0;
  // A capacity set on the fast path, for its end.
  std::optional<uint32_t> capacity_after_fast_;
};

// The member templates, here so that every file of the class may use them.
template <typename Announced>
bool Negotiator::Complete(int32_t set, Announced announced) const {
  const std::vector<int>* members = Members(set);
  if (members == nullptr) return false;
  bool any = false;
  for (int r : *members) {
    if (announced(r)) {
      any = true;
    } else if (joined_[r] == 0) {
      return false;
    }
  }
  return any;
}

template <typename Announced>
std::vector<int> Negotiator::Absent(int32_t set, Announced announced) const {
  std::vector<int> absent;
  if (joined_count_ == 0) return absent;
  const std::vector<int>* members = Members(set);
  if (members == nullptr) return absent;
  for (int r : *members) {
    if (joined_[r] != 0 && !announced(r)) absent.push_back(r);
  }
  return absent;
}

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_NEGOTIATOR_H_
