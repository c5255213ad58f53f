// Two "hosts" on one machine for the multi-host tests: two network
// namespaces, each joined by a veth pair to one bridge in this namespace (one
// L2 segment, so that the two reach each other and this namespace without
// routing). The bridge is 10.231.<net>.1, the hosts .2 and .3; the test
// picks <net> and a tag that keeps its names apart from other tests'.
//
// Needs root and iproute2's `ip`. Create() reports what it could not make
// (the test then skips, saying why); whatever it made is deleted by the
// destructor, on failure too.
//
// Thread-safety: none; one test's fixture owns it.
// Invariants: after a successful Create(), hosts() has two entries whose
// namespaces and interfaces exist until destruction.
#ifndef KOLO_TESTS_TESTING_NETNS_H_
#define KOLO_TESTS_TESTING_NETNS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kolo::testing {

// Runs a shell command, its output discarded; true on exit status 0.
bool RunQuietly(const std::string& command);

class TwoNamespaces {
 public:
  struct Host {
    std::string ns;        // the namespace's name
    std::string outer_if;  // its veth end on the bridge, in this namespace
    std::string inner_if;  // its veth end inside the namespace
    std::string ip;        // inner_if's address
  };

  TwoNamespaces() = default;
  TwoNamespaces(const TwoNamespaces&) = delete;
  TwoNamespaces& operator=(const TwoNamespaces&) = delete;
  ~TwoNamespaces();

  // Makes the bridge and both hosts. Names: namespaces <ns_prefix><id>a and
  // ...b, interfaces <if_prefix><id>br (the bridge), <if_prefix><id>a0/a1
  // and b0/b1 (at most 15 characters: keep the prefixes short). `net` in
  // 0..255 is the third byte of the addresses. kFailedPrecondition names
  // the step that failed.
  absl::Status Create(absl::string_view ns_prefix, absl::string_view if_prefix,
                      int id, int net);

  const std::string& bridge_ip() const { return bridge_ip_; }
  const std::vector<Host>& hosts() const { return hosts_; }

 private:
  std::string bridge_, bridge_ip_;
  std::vector<Host> hosts_;
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_NETNS_H_
