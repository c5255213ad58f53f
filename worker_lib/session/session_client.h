// SessionClient: the worker's side of the Session stream to the coordinator
// (see the header comment of proto/kolo.proto for the wire sequence).
//
// Connect() opens the stream (waiting for the coordinator to come up until the
// start deadline: workers may start before it; but failing within seconds when
// another program accepts connections at the address and does not answer as
// an HTTP/2 (gRPC) server: rank 0 could not host the coordinator on a taken
// port), says Hello, checks the
// coordinator's proof of the job secret, sends its own, and waits for the
// Membership of epoch 1. Then:
//   - a small kolo thread sends a Heartbeat every heartbeat_interval and
//     watches the lease: no message from the coordinator for `lease`, or the
//     stream breaking, means the coordinator is lost — every pending and later
//     call fails with kUnavailable, the loss is logged at error level, and
//     (if exit_on_lost_coordinator) the process exits with
//     kLostCoordinatorExitCode after a short grace: a worker without a
//     coordinator must not linger. Once Shutdown() began, a loss is expected.
//   - JobEnd from the coordinator fails pending and later calls with
//     kAborted carrying its reason.
//   - Elastic jobs: EpochAborted ends the current epoch (not the session):
//     pending Exchanges, Announces and Dones fail with the membership error
//     (proto/membership_error.h), the OnEpochEnd observer is told, EpochAck
//     goes back, and the next Membership opens the next epoch
//     (WaitForEpochAfter). Evicted (this worker was judged lost) is
//     terminal with the evicted membership error; with
//     exit_on_lost_coordinator and exit_on_evicted the process then exits
//     with kEvictedExitCode after the grace (else the API may rejoin the
//     job with a new Session).
//   - Exchange() is the control-plane allgather.
// Fencing: every message sent carries (coordinator incarnation, epoch) as
// learned from the Challenge and the Membership; a coordinator message with
// another fence is logged and dropped.
//
// The stream is a grpc::ClientBidiReactor (so no write blocks without a
// deadline): at most one read and one write in flight, outgoing messages wait
// in a queue. The reactor is owned here and destroyed only after gRPC called
// its OnDone.
//
// Thread-safety: every method may be called from any thread; Exchange may run
// concurrently for different keys, and with Shutdown (which fails it). The
// destructor must not race with other calls.
#ifndef KOLO_WORKER_LIB_SESSION_SESSION_CLIENT_H_
#define KOLO_WORKER_LIB_SESSION_SESSION_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/knob_defaults.h"
#include "common/knobs.h"
#include "common/tls.h"
#include "common/version.h"
#include "proto/kolo.pb.h"

namespace kolo::worker {

// Exit status of a worker that lost its coordinator (EX_TEMPFAIL).
inline constexpr int kLostCoordinatorExitCode = 75;
// After SessionOptions::reconnect_window, the time a reconnecting worker has
// to close the old Session (Job::Rejoin) before the process exits.
inline constexpr absl::Duration kReconnectGrace = absl::Seconds(5);
// Exit status of a worker the coordinator evicted (elastic jobs).
inline constexpr int kEvictedExitCode = 76;

// Limits of control_allgather (Exchange), checked before anything is sent:
// every rank's value comes back in one coordinator message.
inline constexpr size_t kMaxExchangeKeyBytes = 16 * 1024;
inline constexpr size_t kMaxExchangeValueBytes = 64 * 1024;
// The largest message the worker takes from its coordinator.
inline constexpr int kMaxCoordinatorMessageBytes = 256 << 20;

struct SessionOptions {
  std::string coordinator;  // "host:port"
  // Where the address came from ("KOLO_COORDINATOR", "MASTER_ADDR:MASTER_PORT";
  // "" when given directly): named when another program holds the port.
  std::string coordinator_source;
  std::string job_id;
  std::string worker_id;
  uint32_t worker_incarnation = 0;
  std::string host_name;     // launcher host name
  std::string data_address;  // "ip:port"
  int requested_rank = -1;
  int expected_size = 0;
  std::string secret;
  // The job's certificates (common/tls.h); null: a plaintext channel.
  std::shared_ptr<const tls::TlsMaterial> tls;
  absl::Duration heartbeat_interval =
      knobs::kHeartbeatInterval.default_duration;
  absl::Duration lease = knob_defaults::kLease;
  // Exit the process when the coordinator is lost after the Membership
  // arrived (the API turns this on; tests observe the failure instead).
  bool exit_on_lost_coordinator = false;
  // With exit_on_lost_coordinator: also exit (kEvictedExitCode) when
  // evicted. Elastic jobs turn it off: kolo::elastic::run rejoins instead.
  bool exit_on_evicted = true;
  // With exit_on_lost_coordinator: a lost coordinator may come back (a
  // standalone coordinator restarted at its address): the process exits
  // (kLostCoordinatorExitCode) only if this session is still open
  // `reconnect_window` + kReconnectGrace after the loss (kolo::elastic::run
  // reconnects with a new Session, which closes this one). Zero: exit after
  // exit_grace.
  absl::Duration reconnect_window = absl::ZeroDuration();
  absl::Duration exit_grace = absl::Milliseconds(200);
  // Polled (every 100 ms) while waiting for the Membership: true ends the
  // wait with kCancelled (a worker asked to leave before it was admitted).
  std::function<bool()> give_up;
  // This worker lost its coordinator and dials it again (Hello.reconnecting).
  bool reconnecting = false;
  // What the Hello claims; tests inject a mismatch.
  uint32_t protocol_version = kProtocolVersion;
  uint64_t feature_bits = kFeatureBits;
};

class SessionClient {
 public:
  // Connects, authenticates and waits for the Membership until `deadline`.
  // Errors: kUnauthenticated / kFailedPrecondition / ... when the coordinator
  // refuses this worker (naming its reason), kUnauthenticated when the
  // coordinator cannot prove the secret, kDeadlineExceeded when the
  // coordinator is unreachable or the epoch did not form in time,
  // kUnavailable when the stream broke, kAborted when the job ended.
  static absl::StatusOr<std::unique_ptr<SessionClient>> Connect(
      const SessionOptions& options, absl::Time deadline);

  class Reactor;  // the gRPC reactor (session_client.cc)
  // Use Connect().
  explicit SessionClient(std::unique_ptr<Reactor> reactor);
  // Abrupt end if Shutdown() was not called: cancels the stream (bounded).
  ~SessionClient();
  SessionClient(const SessionClient&) = delete;
  SessionClient& operator=(const SessionClient&) = delete;

  // This worker's place in the current epoch (the latest Membership).
  struct EpochView {
    proto::Membership membership;
    uint64_t epoch = 0;
  };
  EpochView current() const;
  // This worker's data plane of `epoch` is connected (its Leave says the
  // last such epoch; see proto Leave.built_epoch).
  void MarkEpochBuilt(uint64_t epoch);
  proto::Membership membership() const { return current().membership; }
  uint64_t epoch() const { return current().epoch; }
  uint64_t incarnation() const { return incarnation_; }

  // Elastic jobs: calls `observer` with the membership error and the epoch
  // when the coordinator ends an epoch (EpochAborted), on a gRPC thread
  // under the session's lock: it must be quick and must not call this
  // client.
  void OnEpochEnd(std::function<void(const absl::Status&, uint64_t)> observer);
  // Elastic jobs: waits until an epoch later than `epoch` formed (its
  // Membership arrived and it has not ended since). The session's terminal
  // error if it ends first; kDeadlineExceeded at `deadline`.
  absl::StatusOr<EpochView> WaitForEpochAfter(uint64_t epoch,
                                              absl::Time deadline);

  // Sends `value` under `key`; returns every member's value in rank order —
  // of process set `process_set`'s members only (in the set's rank order)
  // when it is not 0 (this worker must be one; else no values come back).
  // kDeadlineExceeded after `timeout`, kAborted if the job ends, kUnavailable
  // if the coordinator is lost, kFailedPrecondition if this key is already
  // pending on this worker or after Shutdown.
  absl::StatusOr<std::vector<std::string>> Exchange(absl::string_view key,
                                                    absl::string_view value,
                                                    absl::Duration timeout,
                                                    int32_t process_set = 0);

  // Negotiation (proto/kolo.proto): queues an Announce / Done for the
  // coordinator. Returns the terminal error once the session ended.
  absl::Status Announce(proto::Announce announce);
  absl::Status Done(uint64_t seq);
  // A collective failed on the data plane because of `peers` (ranks of the
  // epoch): tells the coordinator (PeerFault; nothing when `peers` is
  // empty) and waits up to `wait` for its verdict. Returns the verdict (the
  // job's end: kAborted naming the worker the coordinator judged failed; in
  // elastic jobs the epoch's end, the membership error), or `error`, noting
  // that no verdict came, after `wait`.
  absl::Status ReportPeerFault(const absl::Status& error,
                               absl::Span<const int> peers,
                               absl::Duration wait);

  // Calls `sink` with every Plan the coordinator sends, in order, on a gRPC
  // thread under the session's lock: it must be quick (queue the plan) and
  // must not call this client. Set it before the first Announce.
  void OnPlan(std::function<void(const proto::Plan&)> sink);

  // Orderly leave: Leave, wait for LeaveAck (at most `timeout`), half-close,
  // wait for the stream to end (bounded), join the kolo thread. After it, a
  // lost coordinator is no longer an error. Idempotent. Returns an error if
  // the coordinator did not acknowledge the Leave.
  absl::Status Shutdown(absl::Duration timeout = absl::Seconds(5));

  // The terminal error, OK while the session is healthy (for tests/logs).
  absl::Status health() const;

  // Calls `observer` once with the terminal error (the job ended, the
  // coordinator was lost, or Shutdown) — at once if the session already
  // ended. The API uses it to abort the data plane, so that collectives
  // blocked on peers fail with the coordinator's reason instead of waiting
  // for the inactivity deadline. `observer` runs under the session's lock on
  // a gRPC or kolo thread: it must be quick and must not call this client.
  void OnTerminal(std::function<void(const absl::Status&)> observer);

 private:
  // Never null; destroyed only after gRPC's OnDone (else leaked, logged).
  std::unique_ptr<Reactor> reactor_;
  uint64_t incarnation_ = 0;
  std::atomic<bool> shut_down_{false};
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_SESSION_SESSION_CLIENT_H_
