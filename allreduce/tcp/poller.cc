#include "allreduce/tcp/poller.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kolo::tcp {

absl::StatusOr<std::unique_ptr<Poller>> Poller::Create() {
  net::UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep.valid()) {
    return absl::InternalError(
        absl::StrCat("epoll_create1: ", std::strerror(errno)));
  }
  net::UniqueFd ev(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!ev.valid()) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  epoll_event e{};
  // Level-triggered: once woken (aborted), every later Wait sees it too.
  e.events = EPOLLIN;
  e.data.u64 = kWakeTag;
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, ev.get(), &e) != 0) {
    return absl::InternalError(
        absl::StrCat("epoll_ctl(eventfd): ", std::strerror(errno)));
  }
  return std::make_unique<Poller>(std::move(ep), std::move(ev));
}

absl::Status Poller::Add(int fd, uint64_t tag) {
  epoll_event e{};
  e.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  e.data.u64 = tag;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &e) != 0) {
    return absl::InternalError(
        absl::StrCat("epoll_ctl(ADD): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Poller::Wait(absl::Duration timeout,
                                 absl::Span<epoll_event> events) {
  int ms = 0;
  if (timeout > absl::ZeroDuration()) {
    // Round up, so a deadline is never reached early; cap to stay in int.
    ms = static_cast<int>(std::min<int64_t>(
        absl::ToInt64Milliseconds(timeout + absl::Microseconds(999)), 1 << 30));
  }
  int n = ::epoll_wait(epoll_.get(), events.data(),
                       static_cast<int>(events.size()), ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    return absl::InternalError(
        absl::StrCat("epoll_wait: ", std::strerror(errno)));
  }
  return n;
}

void Poller::Wake() {
  uint64_t one = 1;
  // Never drained: the eventfd stays readable, so every later wait wakes too.
  // A full counter (EAGAIN) is just as readable.
  (void)!::write(event_.get(), &one, sizeof(one));
}

}  // namespace kolo::tcp
