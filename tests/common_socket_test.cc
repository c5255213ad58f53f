// Socket options of the data connections: the congestion-control choice
// falls through refused names to the first accepted one, and reports when
// none is accepted (the connection keeps the system default).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/socket_util.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace kolo::net {
namespace {

std::string Current(int fd) {
  char name[32] = {0};
  socklen_t len = sizeof(name);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) {
    return "?";
  }
  return std::string(name);
}

TEST(SocketUtil, CongestionControlTakesTheFirstAcceptedName) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(fd.valid());
  // "reno" is always built in and always allowed.
  absl::StatusOr<std::string> set =
      SetCongestionControl(fd.get(), {"no-such-algorithm", "reno"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, "reno");
  EXPECT_EQ(Current(fd.get()), "reno");
  // Nothing asked: nothing changes.
  set = SetCongestionControl(fd.get(), {});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(*set, "");
  EXPECT_EQ(Current(fd.get()), "reno");
}

TEST(SocketUtil, CongestionControlReportsWhenNothingIsAccepted) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(fd.valid());
  const std::string before = Current(fd.get());
  absl::StatusOr<std::string> set =
      SetCongestionControl(fd.get(), {"no-such-algorithm", "nor-this"});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(set.status().message().find("no-such-algorithm: "),
            std::string::npos)
      << set.status();
  EXPECT_NE(set.status().message().find("nor-this: "), std::string::npos);
  EXPECT_EQ(Current(fd.get()), before);
}

TEST(SocketUtil, BufferSizesAreSetOnlyWhenPositive) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(fd.valid());
  auto get = [&](int opt) {
    int v = 0;
    socklen_t len = sizeof(v);
    ::getsockopt(fd.get(), SOL_SOCKET, opt, &v, &len);
    return v;
  };
  const int rcv_before = get(SO_RCVBUF);
  ASSERT_TRUE(SetBufferSizes(fd.get(), 64 * 1024, 0).ok());
  EXPECT_EQ(get(SO_SNDBUF), 2 * 64 * 1024);  // the kernel doubles it
  EXPECT_EQ(get(SO_RCVBUF), rcv_before);     // 0: untouched
  ASSERT_TRUE(SetBufferSizes(fd.get(), 0, 96 * 1024).ok());
  EXPECT_EQ(get(SO_SNDBUF), 2 * 64 * 1024);
  EXPECT_EQ(get(SO_RCVBUF), 2 * 96 * 1024);
}

}  // namespace
}  // namespace kolo::net
