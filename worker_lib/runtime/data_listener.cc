#include "worker_lib/runtime/data_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/net.h"

namespace kolo::worker {

absl::StatusOr<std::string> ChooseDataIp(const WorkerConfig& config) {
  if (!config.data_addr.empty()) return config.data_addr;
  if (!config.data_iface.empty()) {
    return net::InterfaceAddress(config.data_iface);
  }
  auto ip =
      // Only the route matters: any port will do while the coordinator's is
      // not known yet (0: the hosting worker lets the kernel pick it).
      net::LocalAddressToward(config.coordinator.host,
                              std::max(config.coordinator.port, 1));
  if (!ip.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot choose the data-plane address of worker ", config.worker_id,
        ": ", ip.status().message(), " (the coordinator is at ",
        config.coordinator.ToString(), " from ", config.coordinator_source,
        "); set KOLO_IFACE=<interface> or KOLO_ADDR=<ip> to choose it"));
  }
  return *ip;
}

absl::StatusOr<std::unique_ptr<DataListener>> DataListener::Open(
    const std::string& ip, const std::string& source,
    tcp::AcceptorOptions acceptor) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    len = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("data-plane address '", ip,
                                                   "' (from ", source,
                                                   ") is not an IP address"));
  }
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("socket() for the data plane: ", std::strerror(errno)));
  }
  auto fail = [&](absl::string_view what) {
    int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(
        "cannot listen for the data plane on ", ip, " (from ", source,
        "): ", what, ": ", std::strerror(err),
        source == "KOLO_ADDR"
            ? "; KOLO_ADDR must be an address of this host: fix or unset it"
            : "; set KOLO_ADDR=<ip of this host> or KOLO_IFACE=<interface>"));
  };
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return fail("bind");
  }
  if (::listen(fd, 128) != 0) return fail("listen");
  len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return fail("getsockname");
  }
  int port = ntohs(family == AF_INET ? v4->sin_port : v6->sin6_port);
  net::HostPort hp{ip, port};
  auto listener = std::make_unique<DataListener>(fd, port, hp.ToString());
  absl::StatusOr<std::unique_ptr<tcp::Acceptor>> started =
      tcp::Acceptor::Start(fd, std::move(acceptor));
  if (!started.ok()) return started.status();  // ~DataListener closes fd
  listener->acceptor_ = *std::move(started);
  return listener;
}

DataListener::~DataListener() {
  if (acceptor_ != nullptr) acceptor_->Stop();  // before its socket closes
  ::close(fd_);
}

}  // namespace kolo::worker
