// StreamLink (stream_link.h): announcements and Done on the Session stream.
#include "worker_lib/session/stream_link.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kolo::worker {

absl::Status StreamLink::SendAll(absl::Span<proto::WorkerMessage> msgs) {
  for (proto::WorkerMessage& msg : msgs) {
    absl::Status s;
    if (msg.has_announce()) {
      s = session_->Announce(std::move(*msg.mutable_announce()));
    } else if (msg.has_done()) {
      s = session_->Done(msg.done().seq());
    } else {
      s = absl::InternalError(
          absl::StrCat("a message of kind ", msg.body_case(),
                       " cannot go on the Session stream's hot path"));
    }
    if (!s.ok()) {
      MutexLock lock(&mu_);
      if (broken_.ok()) broken_ = s;
      cv_.SignalAll();
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<proto::CoordinatorMessage>> StreamLink::Receive(
    absl::Duration timeout) {
  MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + timeout;
  while (!woken_ && broken_.ok()) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (!broken_.ok()) return broken_;
  woken_ = false;
  return std::nullopt;
}

void StreamLink::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.SignalAll();
}

}  // namespace kolo::worker
