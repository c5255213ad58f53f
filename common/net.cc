#include "common/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kolo::net {
namespace {

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string SockaddrIp(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf,
              sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr,
              buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos)
    return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       bool allow_zero) {
  HostPort hp;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() ||
        text[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad address '", text, "': expected [ipv6]:port"));
    }
    hp.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad address '", text, "': expected host:port"));
    }
    hp.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  if (!absl::SimpleAtoi(port_text, &hp.port) ||
      hp.port < (allow_zero ? 0 : 1) || hp.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port '", port_text,
                                                   "' in address '", text,
                                                   "': expected 1..65535"));
  }
  return hp;
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& host,
                                               int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  std::string port_str = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), port_str.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, &freeaddrinfo);
  std::string last_error;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) !=
        0) {
      last_error = std::strerror(errno);
      continue;
    }
    return SockaddrIp(reinterpret_cast<sockaddr*>(&local));
  }
  return absl::UnavailableError(absl::StrCat(
      "no route from this host toward ", host, ":", port, ": ", last_error));
}

absl::StatusOr<std::string> InterfaceAddress(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::InternalError(
        absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(list, &freeifaddrs);
  std::vector<std::string> seen;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    if (it->ifa_addr->sa_family != AF_INET) continue;
    std::string ip = SockaddrIp(it->ifa_addr);
    if (iface == it->ifa_name) return ip;
    seen.push_back(absl::StrCat(it->ifa_name, "=", ip));
  }
  return absl::NotFoundError(
      absl::StrCat("KOLO_IFACE=", iface,
                   ": no IPv4 address on that interface; this host has ",
                   seen.empty() ? "none" : absl::StrJoin(seen, ", ")));
}

bool IsIpLiteral(const std::string& addr) {
  in_addr v4;
  in6_addr v6;
  return inet_pton(AF_INET, addr.c_str(), &v4) == 1 ||
         inet_pton(AF_INET6, addr.c_str(), &v6) == 1;
}

std::string LocalLinkName(int port) { return absl::StrCat("kolo-link.", port); }

std::string KernelHostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0')
    return "localhost";
  return buf;
}

absl::StatusOr<int> PickFreePort(const std::string& host) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0)
    return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an IPv4 address: ", host));
  }
  sa.sin_port = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("bind ", host, ":0: ", std::strerror(errno)));
  }
  socklen_t len = sizeof(sa);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return absl::InternalError(
        absl::StrCat("getsockname: ", std::strerror(errno)));
  }
  return ntohs(sa.sin_port);
}

}  // namespace kolo::net
