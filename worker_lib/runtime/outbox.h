// Outbox: what a worker's op runtime has for the coordinator and has not
// written yet — announcements of submitted ops, the settings when they
// changed, and the Done of the last plan run — and when it must go. On a
// link that coalesces writes (session/coordinator_link.h) a step's
// submissions wait here for one write, and a Done waits to ride with them
// (op_runtime.h, "Announcements"); on the Session stream each goes at once.
//
// Thread-safety: none; the runtime guards its Outbox with its mutex.
// Invariant: flush_at is InfiniteFuture exactly when no announcement waits.
#ifndef KOLO_WORKER_LIB_RUNTIME_OUTBOX_H_
#define KOLO_WORKER_LIB_RUNTIME_OUTBOX_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/time/time.h"
#include "proto/kolo.pb.h"

namespace kolo::worker {

struct Outbox {
  // Announcements not yet sent, their size (about), and when they must go.
  proto::Announce announce;
  size_t bytes = 0;
  absl::Time flush_at = absl::InfiniteFuture();
  // A finished plan's Done not yet sent (0: none).
  uint64_t unsent_done = 0;
  // The runtime's settings; they go with the next announcement when
  // changed (the first one always).
  proto::Settings settings;
  bool settings_changed = true;

  bool announcing() const { return flush_at != absl::InfiniteFuture(); }

  // The announcements as a message (with the settings if they changed),
  // emptying them; nullopt when there are none.
  std::optional<proto::WorkerMessage> TakeAnnounce() {
    if (announce.requests_size() == 0 && announce.cached_size() == 0) {
      return std::nullopt;
    }
    proto::WorkerMessage msg;
    proto::Announce& out = *msg.mutable_announce();
    out.Swap(&announce);
    if (settings_changed) {
      *out.mutable_settings() = settings;
      settings_changed = false;
    }
    flush_at = absl::InfiniteFuture();
    bytes = 0;
    return msg;
  }

  // Drops the announcements (the runtime failed: nothing goes any more).
  void Drop() {
    announce.Clear();
    bytes = 0;
    flush_at = absl::InfiniteFuture();
  }
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_OUTBOX_H_
