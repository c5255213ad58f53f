// Small socket helpers shared by the TCP data plane, the negotiation link and
// the coordinator's link server: address resolution, non-blocking connect,
// socket options, local (abstract Unix) sockets, and the peer's address for
// messages.
//
// Thread-safety: free functions without shared state.
#ifndef KOLO_COMMON_SOCKET_UTIL_H_
#define KOLO_COMMON_SOCKET_UTIL_H_

#include <sys/socket.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"

namespace kolo::net {

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
};

// Resolves "ip:port" / "[v6]:port" (a host name is resolved too, blocking).
absl::StatusOr<SockAddr> ResolveAddress(absl::string_view host_port);

// Creates a non-blocking, close-on-exec TCP socket and starts connecting it.
// The connection completes (or fails) later: wait for POLLOUT, then call
// FinishConnect. Fails at once if the socket cannot be created or the
// kernel refuses synchronously (e.g. ECONNREFUSED on loopback).
absl::StatusOr<UniqueFd> StartConnect(const SockAddr& addr);
// The outcome of a connect started by StartConnect (SO_ERROR).
absl::Status FinishConnect(int fd);

// TCP_NODELAY on, so small frames leave at once.
absl::Status SetNoDelay(int fd);
// SO_SNDBUF / SO_RCVBUF, each only when > 0 (0 keeps autotuning).
absl::Status SetBufferSizes(int fd, int send_bytes, int recv_bytes);
// Sets the TCP congestion control to the first name of `names` that the
// kernel accepts (an unprivileged process may only pick names in
// net.ipv4.tcp_allowed_congestion_control). Returns the name set, "" when
// `names` is empty (the system default stays), or kUnavailable listing the
// refusals when none was accepted (the system default stays too).
absl::StatusOr<std::string> SetCongestionControl(
    int fd, const std::vector<std::string>& names);
// A non-blocking, close-on-exec TCP socket listening on host:port (port 0:
// the kernel picks; `host` a numeric address or a name), with SO_REUSEADDR
// and without SO_REUSEPORT, so that a port in use is an error. The port bound
// goes to *bound_port.
absl::StatusOr<UniqueFd> ListenTcp(const std::string& host, int port,
                                   int backlog, int* bound_port);
// Sets O_NONBLOCK if it is not set.
absl::Status EnsureNonBlocking(int fd);

// "ip:port" of the remote end of `fd`, or "?" if unknown.
std::string PeerAddress(int fd);

// Local sockets: a stream socket in the abstract Unix namespace (Linux;
// `name` without the leading NUL). Abstract names are per network namespace,
// like loopback addresses, and vanish with their socket. A local socket
// carries a loopback connection's bytes without the TCP/IP stack (about a
// third less CPU per round trip on these VMs).
// A non-blocking, close-on-exec listener.
absl::StatusOr<UniqueFd> ListenLocal(absl::string_view name);
// A non-blocking, close-on-exec connection (local connects complete at
// once); fails when nobody listens.
absl::StatusOr<UniqueFd> ConnectLocal(absl::string_view name);
// Whether `host` names this host's loopback ("localhost", 127.0.0.0/8,
// "::1").
bool IsLoopbackHost(absl::string_view host);

}  // namespace kolo::net

#endif  // KOLO_COMMON_SOCKET_UTIL_H_
