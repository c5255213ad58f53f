// Small networking helpers shared by the launcher, the worker library and the
// tests: host:port parsing, the local address that routes toward a peer,
// interface addresses, and the kernel's host name.
//
// Thread-safety: all functions are thread-safe (no shared state).
#ifndef KOLO_COMMON_NET_H_
#define KOLO_COMMON_NET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kolo::net {

struct HostPort {
  std::string host;  // without brackets for IPv6
  int port = 0;
  std::string ToString() const;  // "host:port" or "[v6]:port"
};

// Parses "host:port" or "[v6addr]:port"; port in 1..65535 (0 if allow_zero).
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       bool allow_zero = false);

// The local IP address the kernel would use as source toward host:port
// (a connected UDP socket's name; nothing is sent). `host` may be a name.
absl::StatusOr<std::string> LocalAddressToward(const std::string& host,
                                               int port);

// The first IPv4 address of interface `iface` (e.g. "eth0"). The error lists
// the interfaces this host has.
absl::StatusOr<std::string> InterfaceAddress(const std::string& iface);

// True if `addr` is a numeric IPv4 or IPv6 address.
bool IsIpLiteral(const std::string& addr);

// The abstract local socket name (net::ListenLocal) where the coordinator
// whose negotiation link listens on TCP `port` also takes links from
// workers on its host: "kolo-link.<port>" (unique per network namespace, as
// the port is).
std::string LocalLinkName(int port);
// gethostname(), or "localhost" if that fails.
std::string KernelHostName();

// A TCP port that was free on `host` a moment ago (bind to port 0, read it,
// close). Racy by nature; for tests and for choosing a default.
absl::StatusOr<int> PickFreePort(const std::string& host = "127.0.0.1");

}  // namespace kolo::net

#endif  // KOLO_COMMON_NET_H_
