// Hierarchy: how the ranks of one transport group into hosts, for the
// hierarchical collectives (allreduce/hierarchical.h).
//
// A host is the set of ranks with the same launcher host name (not the
// kernel's hostname, which network namespaces share). Hosts are numbered in
// the order of their lowest rank, and a host's ranks are listed ascending;
// its lowest rank is its leader, the one that speaks for it across hosts.
// Ranks need not be grouped by host in rank order (a, b, a, b is a valid
// layout); every rank derives the same Hierarchy from the same names, so the
// groups agree without a message.
//
// Thread-safety: plain values and pure functions.
#ifndef KOLO_ALLREDUCE_HIERARCHY_H_
#define KOLO_ALLREDUCE_HIERARCHY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kolo {

// KOLO_HIERARCHICAL: auto (hierarchical when it can pay: at least two hosts
// and some host with at least two ranks), off, or on (always, even when one
// level is trivial: one host, or one rank per host).
enum class HierarchicalMode : uint8_t { kAuto, kOff, kOn };
// "auto", "0", "1" (header-only: the worker's configuration parses the
// knob without linking the data plane).
constexpr absl::string_view HierarchicalModeName(HierarchicalMode mode) {
  switch (mode) {
    case HierarchicalMode::kAuto:
      return "auto";
    case HierarchicalMode::kOff:
      return "0";
    case HierarchicalMode::kOn:
      return "1";
  }
  return "unknown";
}

struct Hierarchy {
  // The ranks of each host, ascending; hosts ordered by their lowest rank.
  std::vector<std::vector<int>> hosts;
  // Per rank: its host (an index into `hosts`) and its index among the
  // host's ranks (its local rank; 0 is the leader).
  std::vector<int> host_of;
  std::vector<int> local_of;

  int size() const { return static_cast<int>(host_of.size()); }
  int num_hosts() const { return static_cast<int>(hosts.size()); }
  int leader(int host) const { return hosts[host].front(); }
  // Every host's leader, ascending (hosts are ordered by their leader).
  std::vector<int> Leaders() const;
  // The largest number of ranks on one host.
  int MaxLocalSize() const;
  // Every host has the same number of ranks.
  bool Uniform() const;
  // Rank `local` of every host, ascending. REQUIRES: Uniform(),
  // 0 <= local < the hosts' size.
  std::vector<int> Column(int local) const;
  // Uniform(), and every Column() lists the hosts in host order (as when
  // each host's ranks are consecutive): then the columns combine the hosts'
  // values in the same order.
  bool ColumnsInHostOrder() const;
  // The ranks host by host (host 0's ranks, then host 1's, ...).
  std::vector<int> HostMajorOrder() const;
  // HostMajorOrder() is 0, 1, ..., size-1: each host's ranks are
  // consecutive (as kolorun numbers them).
  bool HostMajor() const;
};

// Groups ranks 0..names.size()-1 by equal name. REQUIRES: names non-empty.
Hierarchy GroupByHost(absl::Span<const std::string> names);

// Whether the collectives run hierarchically under `mode`: kOn always, kOff
// never, kAuto when there are at least two hosts and some host has at least
// two ranks (with one host, or one rank per host, one level is empty and
// the flat algorithms already are the best choice).
bool UseHierarchy(HierarchicalMode mode, const Hierarchy& hierarchy);

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_HIERARCHY_H_
