// Raw TCP helpers for tests of ports that meet strangers (the coordinator's
// gRPC gate, the data port's acceptor): connect as an outsider would, see
// whether the other side closed, wait (bounded) for a condition.
//
// Thread-safety: free functions; each blocks its caller, bounded.
#ifndef KOLO_TESTS_TESTING_RAW_SOCKET_H_
#define KOLO_TESTS_TESTING_RAW_SOCKET_H_

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/socket_util.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace kolo::testing {

// A non-blocking connection to 127.0.0.1:`port`, connected (10 s at most).
inline net::UniqueFd RawConnect(int port) {
  absl::StatusOr<net::SockAddr> a =
      net::ResolveAddress(absl::StrCat("127.0.0.1:", port));
  EXPECT_TRUE(a.ok());
  absl::StatusOr<net::UniqueFd> fd = net::StartConnect(*a);
  EXPECT_TRUE(fd.ok()) << fd.status();
  pollfd p{fd->get(), POLLOUT, 0};
  EXPECT_EQ(::poll(&p, 1, 10000), 1);
  return *std::move(fd);
}

// Whether the other side closed `fd` within `timeout` (what it sent first
// is read and dropped).
inline bool ClosedWithin(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

// Waits until `pred` holds, at most `timeout`; whether it did.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_RAW_SOCKET_H_
