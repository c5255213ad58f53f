// Poller: the transport's one abortable wait primitive — an edge-triggered
// epoll set over the peer sockets plus an eventfd that Wake() signals.
//
// Thread-safety: Wake() may be called from any thread at any time; every
// other member belongs to the thread that owns the transport.
// Invariant: the eventfd is registered with tag kWakeTag.
#ifndef KOLO_ALLREDUCE_TCP_POLLER_H_
#define KOLO_ALLREDUCE_TCP_POLLER_H_

#include <sys/epoll.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/unique_fd.h"

namespace kolo::tcp {

class Poller {
 public:
  static constexpr uint64_t kWakeTag = ~0ull;

  static absl::StatusOr<std::unique_ptr<Poller>> Create();
  Poller(net::UniqueFd epoll, net::UniqueFd event)
      : epoll_(std::move(epoll)), event_(std::move(event)) {}

  // Watches `fd` for input and output, edge-triggered; events carry `tag`.
  absl::Status Add(int fd, uint64_t tag);
  // Waits up to `timeout` (zero: just polls) and returns the number of
  // events written to `events`. A wake-up appears as an event with kWakeTag.
  absl::StatusOr<int> Wait(absl::Duration timeout,
                           absl::Span<epoll_event> events);
  // Makes the current or next Wait return with a kWakeTag event.
  void Wake();

 private:
  net::UniqueFd epoll_;
  net::UniqueFd event_;
};

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_POLLER_H_
