#include "common/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/net.h"

namespace kolo::net {

absl::StatusOr<SockAddr> ResolveAddress(absl::string_view host_port) {
  absl::StatusOr<net::HostPort> hp = net::ParseHostPort(host_port);
  if (!hp.ok()) return hp.status();
  SockAddr out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (inet_pton(AF_INET, hp->host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(hp->port));
    out.len = sizeof(sockaddr_in);
    return out;
  }
  if (inet_pton(AF_INET6, hp->host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(hp->port));
    out.len = sizeof(sockaddr_in6);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(hp->host.c_str(), std::to_string(hp->port).c_str(),
                         &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve data-plane address ", host_port, ": ",
                     gai_strerror(rc)));
  }
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

absl::StatusOr<UniqueFd> StartConnect(const SockAddr& addr) {
  UniqueFd fd(::socket(addr.storage.ss_family,
                       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return absl::InternalError(
        absl::StrCat("socket(): ", std::strerror(errno)));
  }
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage),
                   addr.len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    return absl::UnavailableError(
        absl::StrCat("connect: ", std::strerror(errno)));
  }
  return fd;
}

absl::Status FinishConnect(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
    err = errno;
  }
  if (err != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status SetNoDelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return absl::InternalError(
        absl::StrCat("setsockopt(TCP_NODELAY): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status SetBufferSizes(int fd, int send_bytes, int recv_bytes) {
  if (send_bytes > 0 && ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_bytes,
                                     sizeof(send_bytes)) != 0) {
    return absl::InternalError(
        absl::StrCat("setsockopt(SO_SNDBUF): ", std::strerror(errno)));
  }
  if (recv_bytes > 0 && ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &recv_bytes,
                                     sizeof(recv_bytes)) != 0) {
    return absl::InternalError(
        absl::StrCat("setsockopt(SO_RCVBUF): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SetCongestionControl(
    int fd, const std::vector<std::string>& names) {
  std::string refusals;
  for (const std::string& name : names) {
    if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                     static_cast<socklen_t>(name.size())) == 0) {
      return name;
    }
    absl::StrAppend(&refusals, refusals.empty() ? "" : ", ", name, ": ",
                    std::strerror(errno));
  }
  if (names.empty()) return std::string();
  return absl::UnavailableError(absl::StrCat(
      "setsockopt(TCP_CONGESTION) refused every choice (", refusals, ")"));
}

absl::StatusOr<UniqueFd> ListenTcp(const std::string& host, int port,
                                   int backlog, int* bound_port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found);
      rc != 0 || found == nullptr) {
    return absl::UnavailableError(::gai_strerror(rc));
  }
  SockAddr addr;
  std::memcpy(&addr.storage, found->ai_addr, found->ai_addrlen);
  addr.len = found->ai_addrlen;
  ::freeaddrinfo(found);
  UniqueFd fd(::socket(addr.storage.ss_family,
                       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  auto fail = [](absl::string_view what) {
    return absl::UnavailableError(
        absl::StrCat(what, ": ", std::strerror(errno)));
  };
  if (!fd.valid()) return fail("socket");
  int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage),
             addr.len) != 0) {
    return fail("bind");
  }
  if (::listen(fd.get(), backlog) != 0) return fail("listen");
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return fail("getsockname");
  }
  *bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  return fd;
}

absl::Status EnsureNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the data-plane listening socket (fd ", fd,
                     ") is not open: ", std::strerror(errno)));
  }
  if ((flags & O_NONBLOCK) == 0 &&
      ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return absl::InternalError(
        absl::StrCat("fcntl(O_NONBLOCK): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return "?";
  }
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    return net::HostPort{buf, ntohs(v4->sin_port)}.ToString();
  }
  if (ss.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    return net::HostPort{buf, ntohs(v6->sin6_port)}.ToString();
  }
  return "?";
}

namespace {

// The abstract address of `name` (a leading NUL, no terminator).
absl::StatusOr<SockAddr> LocalAddress(absl::string_view name) {
  SockAddr addr;
  auto* un = reinterpret_cast<sockaddr_un*>(&addr.storage);
  if (name.empty() || name.size() + 1 > sizeof(un->sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("local socket name '", name, "' is empty or too long"));
  }
  un->sun_family = AF_UNIX;
  un->sun_path[0] = '\0';
  std::memcpy(un->sun_path + 1, name.data(), name.size());
  addr.len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return addr;
}

}  // namespace

absl::StatusOr<UniqueFd> ListenLocal(absl::string_view name) {
  absl::StatusOr<SockAddr> addr = LocalAddress(name);
  if (!addr.ok()) return addr.status();
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0 ||
      ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr->storage),
             addr->len) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    return absl::UnavailableError(absl::StrCat("listen on local socket @", name,
                                               ": ", std::strerror(errno)));
  }
  return fd;
}

absl::StatusOr<UniqueFd> ConnectLocal(absl::string_view name) {
  absl::StatusOr<SockAddr> addr = LocalAddress(name);
  if (!addr.ok()) return addr.status();
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    return absl::UnavailableError(
        absl::StrCat("local socket: ", std::strerror(errno)));
  }
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr->storage),
                   addr->len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "connect to local socket @", name, ": ", std::strerror(errno)));
  }
  return fd;
}

bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  const std::string text(host);
  return ::inet_pton(AF_INET, text.c_str(), &v4) == 1 &&
         (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace kolo::net
