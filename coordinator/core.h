// CoordinatorCore: the coordinator's whole state machine for one job, as a
// plain class with no gRPC: events in (a Session opened, a message arrived, a
// Session closed, the clock ticked), actions out (messages to send, Sessions
// to close). The gRPC service (coordinator/service.h) is a thin adapter that
// feeds it events and carries out its actions; tests drive it directly.
//
// What it does (see the header comment of proto/kolo.proto for the wire
// sequence):
// - Hello: refuses a wrong protocol version (naming both); otherwise answers
//   with a Challenge.
// - Proof: checks the HMAC (auth::ServerHandshake, one proof per challenge);
//   a wrong one is refused (AUTH_FAILED) and logged; nobody else is disturbed.
//   Then it refuses a wrong job id or expected size, a duplicate worker id
//   and a full job, each with a precise message.
// - Nothing useful before authentication: every refusal of a peer that has
//   not proven the secret (other than a version mismatch) carries only
//   auth::kUnauthenticatedRefusal; the details go to the log at warn, at most
//   once per peer address per minute (common/rate_limited_log.h).
// - When expected_size workers are authenticated it forms epoch 1 at once
//   (coordinator/membership.h) and sends every worker its Membership.
// - Fencing: after the Challenge every message must carry this incarnation,
//   and a member's messages the current epoch. (A Heartbeat or Leave stamped
//   epoch 0 by a member is accepted: it was sent before the Membership
//   reached the worker.) Anything else is refused (FENCED) and logged.
// - Liveness: OnTick sends Heartbeats every heartbeat_interval; a member
//   whose stream closes without Leave, or that is silent longer than
//   heartbeat_timeout, has failed: the job ends and every other Session gets
//   JobEnd{failure, reason naming worker id, rank and host}. Before the epoch
//   forms, an authenticated worker that disconnects is only removed.
// - Blame: only the coordinator decides who failed. The first failure it
//   judges ends the job and is its verdict (JobEnd.failed_worker, Status);
//   later disconnects are consequences, logged as such. A member whose
//   collective failed because of peers sends PeerFault and waits for the
//   verdict instead of leaving: a reported peer silent for
//   suspect_silence() (3 heartbeat intervals, at least 1.5 s, at most the
//   heartbeat timeout) has failed at once; a reporter that disconnects is
//   not blamed; reports that no silence explains within heartbeat_timeout
//   end the job (an elastic job: the epoch, reformed with the same members)
//   naming the broken data connections (every worker was
//   alive).
// - Exchange: when every member sent a value under a key, all get the values
//   in rank order.
// - Negotiation: Announce and Done from members feed the epoch's Negotiator
//   (coordinator/negotiator.h); its plans go to every member, its stall
//   warnings are logged, and its stall-shutdown verdict ends the job.
//   Actions::wake_at says when OnTick is due for it (cycle time, stalls).
//   Leave: LeaveAck; when every member left, the job ended well.
// - Autotune (CoreOptions::autotuner; core_autotune.cc): the plans it sends
//   end training steps (StepDetector); at a sample's end the tuner may
//   switch the negotiator's fusion threshold, cycle time and response cache
//   (NegotiatorTuning), and the plan
//   that ended it carries the switch (Plan.autotune) to every member. Once
//   every member's allreduce runs the message algorithms (the negotiator's
//   ranks_data_plane), the tuner tunes the data plane's settings too (and
//   the hierarchy on or off once every member's is tunable), which
//   reach the ranks only through the switches: a new epoch's first plan
//   carries the tuner's settings again (its data planes start from the
//   ranks' own). A new epoch starts from the tuner's settings; a membership
//   change while tuning restarts it.
// - Re-init (Horovod's init() after shutdown(), non-elastic jobs): a worker
//   that left may say Hello again under its worker id (a new Session). If
//   members of the epoch are still in it, it waits (kWaiting); once every
//   member left (or after the job ended well), the job forms again: a new
//   epoch, numbered after the last, from the expected_size workers that
//   came back, with their requested ranks and a fresh Negotiator. The
//   left Sessions stay fenced with the epoch they left. A job that ended
//   in failure cannot be re-joined.
// - Elastic jobs (CoreOptions::elastic; docs/design.md "Elastic"): a lost
//   member ends its epoch, not the job. The coordinator evicts it (Evicted,
//   then its stream closes, if it is still open: a silent worker may come
//   back), tells every survivor EpochAborted naming the lost workers, drops the
//   epoch's negotiation state and links (Actions::unbind_links), and waits
//   for every survivor's EpochAck (a survivor that does not ack within the
//   heartbeat timeout is lost too). Then it forms epoch e+1 from the
//   survivors, who keep their relative order (so the oldest survivor is rank
//   0), with a fresh Negotiator. A failure during that recovery is handled
//   the same way. With fewer survivors than min_size the job waits (phase
//   "short") for newcomers and ends after elastic_timeout saying so; past
//   reset_limit epoch changes the job ends saying so.
// - Elastic growth (docs/design.md "Elastic"): a worker that authenticates
//   while the job runs is a newcomer: it waits (heartbeating) until it is
//   admitted. Newcomers join when an epoch forms after a loss (appended
//   after the survivors, in arrival order), or at a membership check
//   (MEMBERSHIP_CHECK, State::commit): when every member announced the
//   check and newcomers wait (within max_size) or members asked to leave
//   (SIGTERM), the check's response is withheld and the epoch ends with a
//   planned EpochAborted (no rollback): the leavers depart (their Session
//   stays fenced with the epoch they left from, for their Leave), the
//   others acknowledge, and the next epoch is survivors + newcomers.
//   Without a change the check is answered like a barrier. A newcomer
//   with the worker id of a member and a higher incarnation replaces it
//   (the launcher saw the old process end): the old one is lost.
//   Every epoch formed is recorded (StatusReply.history).
//   A member's message fenced with an epoch that has ended is dropped
//   quietly (it was sent before the worker learnt of the change); only a
//   fence from another coordinator start, or from an epoch not yet formed,
//   is refused.
//
// Where it lives: core.cc (events, epoch formation, the end of the job),
// core_liveness.cc (the tick, heartbeats, silence), core_handshake.cc
// (Hello, Proof, admission, re-init), core_faults.cc (blame), core_status.cc
// (Status and the read-only queries), recovery.cc (elastic recovery; its
// state is a Recovery, coordinator/recovery.h) and core_growth.cc (elastic
// growth: membership checks, superseding). The job's history is a
// JobHistory (coordinator/job_history.h).
//
// Thread-safety: every method may be called from any thread; one internal
// kolo::Mutex serialises them. Callers that need the actions of successive
// events delivered in order (the gRPC adapter does) must serialise "call +
// deliver" themselves.
// Invariants: a session id is opened once; after a Close action for it the
// core forgets it, and later events for it are ignored.
#ifndef KOLO_COORDINATOR_CORE_H_
#define KOLO_COORDINATOR_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/knobs.h"
#include "common/mutex.h"
#include "common/rate_limited_log.h"
#include "coordinator/autotune.h"
#include "coordinator/event_log.h"
#include "coordinator/job_history.h"
#include "coordinator/metrics.h"
#include "coordinator/negotiator.h"
#include "coordinator/recovery.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

// Chosen by the adapter, unique per stream for the life of the core.
using SessionId = uint64_t;

struct CoreOptions {
  int expected_size = 1;  // workers that form epoch 1
  std::string job_id;
  std::string secret;        // job secret (never logged)
  uint64_t incarnation = 0;  // random per coordinator start
  absl::Duration heartbeat_interval =
      knobs::kHeartbeatInterval.default_duration;
  absl::Duration heartbeat_timeout = knobs::kHeartbeatTimeout.default_duration;
  // Negotiation: each epoch's Negotiator starts from these (its size set to
  // the epoch's).
  NegotiatorOptions negotiator;
  // The negotiation link port told to members in their Membership (0: none;
  // coordinator/link_server.h).
  int link_port = 0;
  // Elastic membership (see the header comment). min_size: the fewest
  // workers an epoch may have (kolorun --min-np); elastic_timeout: how long
  // the job waits below it; reset_limit: epoch changes allowed (-1: any).
  bool elastic = false;
  int min_size = 1;
  int max_size = 0;  // the most workers an epoch may have; 0: no cap
  absl::Duration elastic_timeout = knobs::kElasticTimeout.default_duration;
  int reset_limit = -1;
  // This coordinator picks up an elastic job whose coordinator was lost
  // (kolorun's restart of its own, --fault kill-coordinator:for=): besides
  // the workers that reconnect, the launcher's fresh replacements of
  // workers that exited meanwhile count toward the reconnect settle (see
  // MaybeFormEpoch), since the job may have run at fewer than
  // expected_size before (leaves free no slot).
  bool restarted = false;
  // The event log (kolorun / kolo-coordinator --events; null: none).
  std::shared_ptr<EventLog> events;
  // The autotuner (kolorun / kolo-coordinator --autotune;
  // coordinator/autotune.h; null: none). Called under the core's mutex.
  std::shared_ptr<Autotuner> autotuner;
  // When a message arrives (for liveness). Tests inject a fake clock and pass
  // the same clock's time to OnTick.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

// What the adapter must do after one event: first every send (in order),
// then every close (finish the stream with `status` once its sends are out).
struct Actions {
  struct Send {
    SessionId session;
    proto::CoordinatorMessage message;
  };
  struct Close {
    SessionId session;
    absl::Status status;
  };
  std::vector<Send> sends;
  std::vector<Close> closes;
  // Sessions whose negotiation links belong to an epoch that ended: the
  // adapter closes those links (LinkServer::Unbind).
  std::vector<SessionId> unbind_links;
  // Call OnTick no later than this (the negotiator's next deadline).
  absl::Time wake_at = absl::InfiniteFuture();

  bool empty() const {
    return sends.empty() && closes.empty() && unbind_links.empty();
  }
};

// How long a restarted coordinator waits after the last reconnecting worker
// before it forms its first epoch with fewer than expected_size
// (CoordinatorCore::MaybeFormEpoch).
inline constexpr absl::Duration kReconnectSettle = absl::Seconds(1);

class CoordinatorCore {
 public:
  // REQUIRES: options.expected_size >= 1.
  explicit CoordinatorCore(CoreOptions options);
  CoordinatorCore(const CoordinatorCore&) = delete;
  CoordinatorCore& operator=(const CoordinatorCore&) = delete;

  // A stream opened; `peer` is the transport's peer address (for messages).
  Actions OnOpen(SessionId session, std::string peer);
  Actions OnMessage(SessionId session, const proto::WorkerMessage& message);
  // The stream ended from the worker's side or broke. `cause` is for logs.
  Actions OnClosed(SessionId session, absl::string_view cause);
  // Sends heartbeats when due and detects silent workers.
  Actions OnTick(absl::Time now);
  // Ends the job (if it has not ended): JobEnd{failure, reason} to every open
  // Session, and closes them all. Idempotent. `failed_worker`: the worker
  // the reason blames, if one (the launcher saw it die).
  Actions Shutdown(bool failure, absl::string_view reason,
                   absl::string_view failed_worker = "");

  // The Session of member `worker_id` in `epoch`, for binding its
  // negotiation link; kFailedPrecondition saying why when there is none.
  absl::StatusOr<SessionId> MemberSession(const std::string& worker_id,
                                          uint64_t epoch) const;

  // Whether Session `session` proved the job secret (false once closed).
  bool IsProven(SessionId session) const;

  proto::StatusReply Status() const;
  // The Prometheus page (coordinator/metrics.h): Status() and the counters.
  std::string Metrics() const;
  uint64_t incarnation() const { return options_.incarnation; }
  int expected_size() const { return options_.expected_size; }
  // The current epoch: 0 while forming, then 1, 2, ... (elastic jobs).
  uint64_t epoch() const;
  bool epoch_formed() const;
  // An epoch formed and none of its members is still in (they left, or
  // were lost). True also while workers that left say Hello again to form
  // the next epoch (re-init): whoever stops the coordinator then sends
  // them away, and they look for its successor (SessionClient::Connect).
  bool every_member_left() const;
  bool ended() const;
  // Meaningful once ended().
  bool ended_in_failure() const;
  std::string end_reason() const;
  // The worker the job's end blames ("" when none).
  std::string failed_worker() const;
  // Who the epoch still waits for, e.g. "waiting for 2 of 3 workers; in: w0
  // (host a); handshaking: w2 (host b)".
  std::string DescribeMissing() const;
  // Members that have not left, e.g. "w1 (rank 1, host b)".
  std::string DescribeStillIn() const;

 private:
  enum class State { kAwaitHello, kAwaitProof, kWaiting, kMember, kLeft };
  // kRecovering and kShort: elastic jobs only (see the header comment).
  enum class Phase { kForming, kRunning, kRecovering, kShort, kEnded };

  struct Session {
    std::string peer;
    State state = State::kAwaitHello;
    proto::Hello hello;
    std::unique_ptr<auth::ServerHandshake> handshake;
    // The peer proved the job secret. Until then a refusal tells it nothing
    // (auth::kUnauthenticatedRefusal) and the details go to the log only.
    bool proven = false;
    absl::Time opened;
    absl::Time last_heard;
    uint64_t arrival = 0;  // order of authentication
    int rank = -1;
    // Left at a membership check of this epoch (elastic): out of the
    // membership (rank -1, kLeft) but fenced with that epoch until its
    // Leave, which is acknowledged.
    uint64_t departed_epoch = 0;
  };
  struct Member {
    std::string worker_id, host_name, data_address;
    uint32_t incarnation = 0;
    int64_t pid = 0;
    SessionId session = 0;
    bool open = true;
    proto::MemberState state = proto::MEMBER_STATE_MEMBER;
    absl::Time last_heard;
    bool acked = false;  // EpochAck while recovering
  };
  // PeerFault reports of an epoch, oldest first.
  struct FaultReport {
    int reporter = 0;
    std::vector<int> peers;
    std::string error;
    absl::Time at;
  };
  // What lives for one epoch: made by FormEpoch, replaced by the next one.
  struct Epoch {
    uint64_t number = 0;  // 0 while the first one forms
    // By rank (empty while forming).
    std::vector<Member> members;
    // Negotiation state (null while forming and once the epoch ended).
    std::unique_ptr<Negotiator> negotiator;
    std::vector<FaultReport> faults;
    // Pending exchanges: key -> value per rank (of the exchange's process
    // set; every member for set 0).
    absl::flat_hash_map<std::string, std::vector<std::optional<std::string>>>
        exchanges;
  };

  // OnMessage's steps after the Hello: the fence check (false when the
  // message is dropped or its Session refused), a Session that departed at a
  // membership check, and the dispatch on the message's body.
  bool CheckFence(SessionId id, const Session& s,
                  const proto::WorkerMessage& message, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleAfterDeparture(SessionId id, const Session& s,
                            const proto::WorkerMessage& message, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(SessionId id, Session& s, const proto::WorkerMessage& message,
                Actions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleHello(SessionId id, Session& s, const proto::Hello& hello,
                   Actions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleProof(SessionId id, Session& s, const proto::Proof& proof,
                   Actions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // HandleProof's steps once the proof checked. Each check returns false
  // when it refused the Session.
  bool CheckSameJob(SessionId id, Session& s, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ClaimWorkerId(SessionId id, Session& s, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A member of the last epoch that left says Hello again (re-init); true
  // when `s` was taken in that way.
  bool Rejoin(Session& s, Actions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admits `s` as waiting (forming, or a newcomer of an elastic job), or
  // refuses it when the job is full or ended.
  void Admit(SessionId id, Session& s, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleExchange(SessionId id, Session& s, const proto::Exchange& ex,
                      Actions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker leaves (kolo::shutdown). An elastic member that has not built
  // the running epoch's data plane (Leave.built_epoch) ends that epoch:
  // the others would wait for its connections.
  void HandleLeave(SessionId id, Session& s, const proto::Leave& leave,
                   Actions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A member's data plane blames peers: recorded, then judged.
  void HandlePeerFault(Session& s, const proto::PeerFault& fault, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Judges the outstanding PeerFault reports (see "Blame" above): a
  // reported peer silent for suspect_silence() has failed; reports no
  // member's silence explains within heartbeat_timeout end the job naming
  // the data connections (an elastic job's epoch: ReformEpoch).
  void JudgeFaults(absl::Time now, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OnTick's steps: the periodic Heartbeat to every live Session; the
  // elastic recovery deadlines (an unacknowledged end of epoch fails its
  // member; a job short of workers past the elastic timeout ends); and the
  // Sessions silent past heartbeat_timeout (refused, dropped or failed).
  void SendHeartbeats(absl::Time now, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JudgeRecoveryDeadlines(absl::Time now, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JudgeSilence(absl::Time now, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration suspect_silence() const;
  // Sends the negotiator's plans to every member, logs its warnings, ends
  // the job on its shutdown verdict, and sets out.wake_at.
  // Autotuning (core_autotune.cc): the tuner's settings for a new epoch's
  // Negotiator (`membership_changed`: not the first epoch); a plan about to
  // go out, which may end a step and switch the settings.
  void TuneNewEpoch(bool membership_changed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TuneOnPlan(proto::Plan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Apply(NegotiatorOutput& result, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forms epoch 1 once expected_size workers are in.
  // A restarted coordinator (reconnecting Hellos, or CoreOptions::restarted;
  // elastic) also forms with fewer than expected_size (at least min_size)
  // once kReconnectSettle passed without another such worker: the ones lost
  // while it was down never come.
  void MaybeFormEpoch(Actions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes epoch `number` of `sessions` (in arrival order; `keep_order`: the
  // order is the ranks) and sends every member its Membership.
  // `record` says why (cause, joined, left, lost); FormEpoch completes it
  // and appends it to the history.
  void FormEpoch(uint64_t number, const std::vector<SessionId>& sessions,
                 bool keep_order, proto::EpochRecord record, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: ends the current epoch because `lost` (its rank) failed with
  // `cause`, or adds it to the losses of the recovery under way.
  void LoseMember(int rank, const std::string& cause, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: ends the running epoch although nobody was lost (`why`: its
  // data connections broke, or `left_rank`, a member that left, cannot
  // take part): every member is told (the membership error, not planned:
  // they restore their last commit) and the next epoch forms with the same
  // members (but the one that left), in the same order, once they
  // acknowledged.
  void ReformEpoch(const std::string& why, Actions& out, int left_rank = -1)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: forms the next epoch once every survivor acked (or ends the
  // job, or waits below min_size), with the waiting newcomers appended.
  void MaybeFormNextEpoch(absl::Time now, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: if `plan` answers a membership check while workers wait to
  // join (with room under max_size) or members leave, removes that
  // response and returns the leaving ranks (the epoch must end).
  std::optional<std::vector<int>> TakeMembershipChange(proto::Plan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: the running epoch ends (a loss or a check): counts the reset,
  // drops its negotiation state and starts a Recovery: it waits
  // (kRecovering) for the acks until the heartbeat timeout.
  void BeginRecovery(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every change of phase_: a phase other than kRecovering and kShort ends
  // the recovery under way (BeginRecovery starts one before kRecovering).
  // Checks the recovery_ invariant (below); a failure is a kolo bug.
  void SetPhase(Phase next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: ends the current epoch at a membership check: `leavers`
  // depart, every other member is told (planned EpochAborted) and acks.
  void EndEpochPlanned(const std::vector<int>& leavers, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Authenticated workers waiting to join, in arrival order, at most
  // `room` of them (-1: all).
  std::vector<SessionId> Newcomers(int room) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many newcomers an epoch of `staying` members may take (-1: any).
  int RoomFor(int staying) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The epoch a message to `s` is fenced with.
  uint64_t FenceOf(const Session& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: a proven worker whose id is taken by `other` (waiting or a
  // member) with a lower incarnation replaces it; false if it may not.
  bool Supersede(const Session& s, SessionId other_id, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends a Refusal, closes the stream and logs a warning. A refused member
  // fails the job. A peer that has not proven the secret gets the generic
  // refusal instead of `message`, which is only logged (rate-limited).
  void Refuse(SessionId id, proto::Refusal::Reason reason,
              const std::string& message, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The member of `rank` failed: the job ends with JobEnd to every open
  // Session (elastic jobs: its epoch ends instead, LoseMember).
  void FailMember(int rank, const std::string& cause, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndJob(bool failure, const std::string& reason, Actions& out,
              const std::string& failed_worker = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Send(SessionId id, proto::CoordinatorMessage msg, Actions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int AuthenticatedCount() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job ended (phase_ is kEnded): its event, and the log flushed.
  void JobEndEvent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `event` of the current epoch to the event log, if there is one.
  void Event(absl::string_view event, nlohmann::ordered_json fields) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "worker w1 (host h, from <peer>)" / "worker w1 (rank 1, host h)".
  std::string Describe(const Session& s) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoreOptions options_;

  mutable Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kForming;
  Epoch ep_ ABSL_GUARDED_BY(mu_);
  bool end_failure_ ABSL_GUARDED_BY(mu_) = false;
  std::string end_reason_ ABSL_GUARDED_BY(mu_);
  std::string failed_worker_ ABSL_GUARDED_BY(mu_);
  // Open sessions only.
  absl::flat_hash_map<SessionId, Session> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_arrival_ ABSL_GUARDED_BY(mu_) = 0;
  // When the last reconnecting worker (Hello.reconnecting) authenticated
  // before the first epoch: MaybeFormEpoch.
  absl::Time last_reconnect_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t heartbeat_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Elastic: the recovery under way (coordinator/recovery.h).
  // Invariant: engaged exactly while phase_ is kRecovering or kShort
  // (SetPhase keeps it so and checks it).
  std::optional<Recovery> recovery_ ABSL_GUARDED_BY(mu_);
  // Resets, every worker lost and every epoch formed (StatusReply).
  JobHistory history_ ABSL_GUARDED_BY(mu_);
  // The metrics' counters. Each epoch's Negotiator adds to
  // stats_.negotiation through NegotiatorOptions::stats (under mu_, as
  // every call to it).
  CoreStats stats_ ABSL_GUARDED_BY(mu_);
  // The autotuner's step ends, in the plans sent (core_autotune.cc).
  StepDetector step_detector_ ABSL_GUARDED_BY(mu_);
  // The epoch's first plan must carry the tuned data-plane settings (and
  // the hierarchy's choice).
  bool autotune_resend_ ABSL_GUARDED_BY(mu_) = false;
  // Refusals of unproven peers go to the event log at most once per peer
  // host per minute, as they go to the log.
  RateLimiter refusal_events_{RateLimiter::Options{}};
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_CORE_H_
