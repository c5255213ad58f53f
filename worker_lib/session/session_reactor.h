// SessionClient::Reactor: the gRPC reactor behind SessionClient, holding all
// Session state (internal to worker_lib; see session_client.h for behaviour).
//
// gRPC calls the On* reactions on its threads; they only move messages and
// update state under mu_. At most one read and one write are in flight;
// outgoing messages wait in queue_.
// Holds: threads other than gRPC's (the kolo thread, callers of Leave or
// Exchange) start writes too, so the reactor keeps a gRPC hold from Start
// until it will start no more operations (ReleaseHold: the read side closed,
// or Close). Without it, gRPC may finish the stream and destroy its call
// between our check and a StartWrite. Writes are started under mu_ (gRPC
// 1.51 never runs a client reaction inline in StartWrite/StartWritesDone), so
// "hold still held?" and "start the write" are one step.
//   session_reactor.cc  the stream: Start, reactions, message handling, and
//                       the kolo thread (heartbeats, lease, exit)
//   session_client.cc   the blocking calls (membership, exchange, leave,
//                       close) and SessionClient itself
//
// The state, under mu_: the phase (below); the stream, the view of the
// epoch and the terminal verdict (worker_lib/session/session_state.h); the
// coordinator's incarnation, known from its Challenge.
//
// Thread-safety: every public method may be called from any thread.
// Lifetime: must not be destroyed before OnDone ran (Close() says when).
#ifndef KOLO_WORKER_LIB_SESSION_SESSION_REACTOR_H_
#define KOLO_WORKER_LIB_SESSION_SESSION_REACTOR_H_

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/mutex.h"
#include "common/socket_util.h"
#include "grpcpp/grpcpp.h"
#include "proto/kolo.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "worker_lib/session/session_client.h"
#include "worker_lib/session/session_state.h"

namespace kolo::worker {

// The "session" logger.
std::shared_ptr<spdlog::logger> SessionLog();
// "1.5 s".
std::string Secs(absl::Duration d);

class SessionClient::Reactor final
    : public grpc::ClientBidiReactor<proto::WorkerMessage,
                                     proto::CoordinatorMessage> {
 public:
  explicit Reactor(SessionOptions options)
      : options_(std::move(options)),
        handshake_(options_.secret, options_.job_id, options_.worker_id) {}

  // Opens the stream, sends Hello and starts the kolo thread.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Until the Membership, a terminal error or `deadline`.
  absl::Status WaitForMembership(absl::Time start, absl::Time deadline,
                                 SessionClient& client)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After WaitForMembership failed: whether a new Session may find a
  // coordinator that admits this worker (the stream broke, or the job
  // ended well, before the Membership).
  bool MayReconnect() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<std::string>> Exchange(absl::string_view key,
                                                    absl::string_view value,
                                                    absl::Duration timeout,
                                                    int32_t process_set)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `msg` (Announce, Done) if the session is a running member;
  // returns the terminal error (or kFailedPrecondition) otherwise.
  absl::Status SendMessage(proto::WorkerMessage msg) ABSL_LOCKS_EXCLUDED(mu_);
  // See SessionClient::OnPlan.
  void OnPlan(std::function<void(const proto::Plan&)> sink)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Leave (saying the last epoch built: MarkEpochBuilt), LeaveAck,
  // WritesDone.
  absl::Status Leave(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // See SessionClient::MarkEpochBuilt.
  void MarkEpochBuilt(uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    built_epoch_ = std::max(built_epoch_, epoch);
  }
  // Marks the session closing and cancels the stream.
  void Abort() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for OnDone (cancelling after `timeout`), stops the kolo thread.
  // Returns true if gRPC is done with this reactor (it may be destroyed).
  bool Close(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status health() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return verdict_.status;
  }
  // Until the session ended (returns its terminal error), the epoch ended
  // (returns the membership error; also when the next epoch formed before
  // this thread woke, as it does at once when the coordinator reforms an
  // epoch with the same members) or `deadline` (returns OK).
  absl::Status WaitForVerdict(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // See SessionClient::OnEpochEnd, WaitForEpochAfter and current().
  void OnEpochEnd(std::function<void(const absl::Status&, uint64_t)> observer)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<EpochView> WaitForEpochAfter(uint64_t epoch,
                                              absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  EpochView Current() const ABSL_LOCKS_EXCLUDED(mu_);
  // See SessionClient::OnTerminal.
  void OnTerminal(std::function<void(const absl::Status&)> observer)
      ABSL_LOCKS_EXCLUDED(mu_);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // Hello sent; Proof sent, no Membership yet; a member (of the current
  // epoch, or awaiting the next after EpochAborted); Leave sent; LeaveAck
  // received; closing (Abort, Close or a failed Leave), when losing the
  // coordinator is no longer an error.
  enum class Phase {
    kHello,
    kAwaitMembership,
    kMember,
    kLeaving,
    kLeft,
    kClosing
  };
  bool leaving() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return phase_ == Phase::kLeaving || phase_ == Phase::kLeft;
  }

  // Stamps the fence and queues `msg`; MaybeStartWrite() sends it.
  void Enqueue(proto::WorkerMessage msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the next queued write, or WritesDone once requested. Outside a
  // reaction only while the hold is held.
  void MaybeStartWrite(bool from_reaction) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives up the hold taken in Start (once): no operation is started from
  // outside a reaction after this, and OnDone may follow.
  void ReleaseHold() ABSL_LOCKS_EXCLUDED(mu_);
  // A message read: a handler per kind, after the fencing check.
  void Handle(const proto::CoordinatorMessage& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleRefusal(const proto::Refusal& refusal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleChallenge(const proto::CoordinatorMessage& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the message is fenced out (another incarnation, or an epoch not
  // ours that it does not open as a Membership); logs it.
  bool Fenced(const proto::CoordinatorMessage& msg) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleMembership(const proto::CoordinatorMessage& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleEpochAborted(const proto::EpochAborted& aborted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleEvicted(const proto::Evicted& evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleExchangeResult(const proto::ExchangeResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandlePlan(const proto::Plan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleJobEnd(const proto::JobEnd& end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the terminal verdict (the first stays) and wakes every waiter.
  void Fail(absl::Status status, SessionVerdict::Cause cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The kolo thread: heartbeats, lease, exit on a lost coordinator.
  void ThreadMain() ABSL_LOCKS_EXCLUDED(mu_);
  // The start's error when another program holds the coordinator's port
  // (WaitForMembership's probe).
  absl::Status NotACoordinator() const;
  // WaitForMembership's probe of the coordinator's address: true when
  // another program (not HTTP/2, not TLS) listens there, false when
  // nothing or a coordinator does; an error when the coordinator and this
  // worker disagree on TLS (one speaks it, the other not) or refuse each
  // other's certificates (common/tls_probe.h).
  absl::StatusOr<bool> ProbeStart(const net::SockAddr& addr,
                                  absl::Duration timeout) const;
  std::string Who() const {
    return absl::StrCat("the coordinator at ", options_.coordinator);
  }

  const SessionOptions options_;
  const auth::ClientHandshake handshake_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  proto::CoordinatorMessage read_msg_;  // only the read reaction touches it
  std::thread thread_;

  mutable Mutex mu_;
  CondVar cv_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kHello;
  // The coordinator's, from its Challenge (a second one is ignored).
  std::optional<uint64_t> incarnation_ ABSL_GUARDED_BY(mu_);
  SessionEpoch epoch_ ABSL_GUARDED_BY(mu_);
  absl::Time last_heard_ ABSL_GUARDED_BY(mu_);
  SessionStream stream_ ABSL_GUARDED_BY(mu_);
  // Outgoing messages; the front one is in flight when
  // stream_.write_in_flight.
  std::deque<proto::WorkerMessage> queue_ ABSL_GUARDED_BY(mu_);
  // Pending exchanges: key -> the result once it arrived.
  absl::flat_hash_map<std::string, std::optional<std::vector<std::string>>>
      exchanges_ ABSL_GUARDED_BY(mu_);
  SessionVerdict verdict_ ABSL_GUARDED_BY(mu_);
  // Told each epoch's end, under mu_ (it must not call back in).
  std::function<void(const absl::Status&, uint64_t)> on_epoch_end_
      ABSL_GUARDED_BY(mu_);
  // Told the terminal error once, under mu_ (it must not call back in).
  std::function<void(const absl::Status&)> on_terminal_ ABSL_GUARDED_BY(mu_);
  // Given every Plan, under mu_ (it must not call back in).
  std::function<void(const proto::Plan&)> plan_sink_ ABSL_GUARDED_BY(mu_);
  // Asks the kolo thread to return (Close).
  bool stop_thread_ ABSL_GUARDED_BY(mu_) = false;
  // Set when the coordinator's proof failed: the error to report if it does
  // not refuse this worker by distrust_deadline_.
  absl::Status distrust_ ABSL_GUARDED_BY(mu_);
  absl::Time distrust_deadline_ ABSL_GUARDED_BY(mu_);
  uint64_t heartbeat_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The last epoch whose data plane this worker built (Leave says it).
  uint64_t built_epoch_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_SESSION_SESSION_REACTOR_H_
