// Two namespaces on a bridge for the multi-host tests: see netns.h.
#include "tests/testing/netns.h"

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace kolo::testing {

bool RunQuietly(const std::string& command) {
  const int rc = std::system((command + " >/dev/null 2>&1").c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

absl::Status TwoNamespaces::Create(absl::string_view ns_prefix,
                                   absl::string_view if_prefix, int id,
                                   int net) {
  bridge_ = absl::StrCat(if_prefix, id, "br");
  bridge_ip_ = absl::StrCat("10.231.", net, ".1");
  if (!RunQuietly("ip link add " + bridge_ + " type bridge") ||
      !RunQuietly(
          absl::StrCat("ip addr add ", bridge_ip_, "/24 dev ", bridge_)) ||
      !RunQuietly("ip link set " + bridge_ + " up")) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create bridge ", bridge_));
  }
  for (const char* tag : {"a", "b"}) {
    hosts_.push_back(Host{
        absl::StrCat(ns_prefix, id, tag), absl::StrCat(if_prefix, id, tag, "0"),
        absl::StrCat(if_prefix, id, tag, "1"),
        absl::StrCat("10.231.", net, ".", 2 + hosts_.size())});
    const Host& x = hosts_.back();
    const std::string in_ns = absl::StrCat("ip netns exec ", x.ns, " ");
    const bool ok =
        RunQuietly("ip netns add " + x.ns) &&
        RunQuietly(absl::StrCat("ip link add ", x.outer_if,
                                " type veth peer name ", x.inner_if)) &&
        RunQuietly(absl::StrCat("ip link set ", x.inner_if, " netns ", x.ns)) &&
        RunQuietly(
            absl::StrCat("ip link set ", x.outer_if, " master ", bridge_)) &&
        RunQuietly(absl::StrCat("ip link set ", x.outer_if, " up")) &&
        RunQuietly(absl::StrCat(in_ns, "ip addr add ", x.ip, "/24 dev ",
                                x.inner_if)) &&
        RunQuietly(absl::StrCat(in_ns, "ip link set ", x.inner_if, " up")) &&
        RunQuietly(in_ns + "ip link set lo up");
    if (!ok) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create network namespace ", x.ns, " with a veth pair"));
    }
  }
  return absl::OkStatus();
}

TwoNamespaces::~TwoNamespaces() {
  for (const Host& x : hosts_) {
    RunQuietly("ip link del " + x.outer_if);
    RunQuietly("ip netns del " + x.ns);
  }
  if (!bridge_.empty()) RunQuietly("ip link del " + bridge_);
}

}  // namespace kolo::testing
