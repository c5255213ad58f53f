// The Session's state as types (internal to worker_lib; held by
// SessionClient::Reactor, worker_lib/session/session_reactor.h), apart from
// its phase (Hello .. Closing):
//   SessionStream   the gRPC stream: the call's lifetime and its write side
//   SessionEpoch    the Session's view of the epoch: its number, membership
//                   and, once it ended, its membership error
//   SessionVerdict  the terminal verdict: why the Session ended
//
// Thread-safety: none of its own; the reactor guards each with its mutex.
// Invariants: each phase moves only forward (SessionStream::Call and
// ::Writes; a broken write side stays broken); a verdict, once given,
// stays; SessionEpoch::error is OK while the epoch runs.
#ifndef KOLO_WORKER_LIB_SESSION_SESSION_STATE_H_
#define KOLO_WORKER_LIB_SESSION_SESSION_STATE_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "proto/kolo.pb.h"

namespace kolo::worker {

struct SessionStream {
  // The call: the reactor holds it (a gRPC hold, from Start) while threads
  // other than gRPC's may start operations; then it is released; then gRPC
  // ran OnDone.
  enum class Call { kHeld, kReleased, kDone };
  // The write side: open; half-close requested (Leave: WritesDone once the
  // queue drained); WritesDone started; or broken (a write failed: the
  // stream is over).
  enum class Writes { kOpen, kCloseRequested, kCloseStarted, kBroken };

  Call call = Call::kHeld;
  Writes writes = Writes::kOpen;
  // A write is in flight (the front of the reactor's queue).
  bool write_in_flight = false;

  bool done() const { return call == Call::kDone; }
  // Whether messages may still be queued.
  bool accepts_messages() const { return writes == Writes::kOpen; }
  // Leave's half-close; a write side that is not open stays as it is.
  void RequestClose() {
    if (writes == Writes::kOpen) writes = Writes::kCloseRequested;
  }
};

struct SessionEpoch {
  // 0 until the first Membership.
  uint64_t number = 0;
  std::optional<proto::Membership> membership;
  // Elastic jobs: the membership error of the epoch that ended
  // (EpochAborted), until the next Membership; OK otherwise.
  absl::Status error;
  // The membership error of the last epoch that ended (kept past the next
  // Membership, for WaitForVerdict).
  absl::Status last_error;

  bool ended() const { return !error.ok(); }
};

struct SessionVerdict {
  enum class Cause {
    kNone,             // the Session runs
    kLostCoordinator,  // the stream broke or the lease ran out
    kEvicted,          // the coordinator evicted this worker
    // The job ended well before this worker was admitted: the coordinator
    // was ending the previous job (init after shutdown, while the host of
    // the coordinator stops it); its successor may come up at the address.
    kEndedBeforeAdmission,
    kOther,  // refused, the job ended, the coordinator distrusted or absent
  };

  // OK while the Session runs.
  absl::Status status;
  Cause cause = Cause::kNone;

  bool given() const { return !status.ok(); }
  // Records the verdict unless one was given already; whether it did.
  bool Give(absl::Status s, Cause c) {
    if (given()) return false;
    status = std::move(s);
    cause = c;
    return true;
  }
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_SESSION_SESSION_STATE_H_
