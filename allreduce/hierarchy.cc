#include "allreduce/hierarchy.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "common/check.h"

namespace kolo {

std::vector<int> Hierarchy::Leaders() const {
  std::vector<int> leaders;
  leaders.reserve(hosts.size());
  for (const std::vector<int>& h : hosts) leaders.push_back(h.front());
  return leaders;
}

int Hierarchy::MaxLocalSize() const {
  size_t m = 0;
  for (const std::vector<int>& h : hosts) m = std::max(m, h.size());
  return static_cast<int>(m);
}

bool Hierarchy::Uniform() const {
  for (const std::vector<int>& h : hosts) {
    if (h.size() != hosts.front().size()) return false;
  }
  return true;
}

std::vector<int> Hierarchy::Column(int local) const {
  KOLO_CHECK(Uniform() && local >= 0 &&
             local < static_cast<int>(hosts.front().size()))
      << "column " << local << " of a non-uniform hierarchy";
  std::vector<int> column;
  column.reserve(hosts.size());
  for (const std::vector<int>& h : hosts) column.push_back(h[local]);
  std::sort(column.begin(), column.end());
  return column;
}

bool Hierarchy::ColumnsInHostOrder() const {
  if (!Uniform()) return false;
  for (int j = 0; j < static_cast<int>(hosts.front().size()); ++j) {
    const std::vector<int> column = Column(j);
    for (size_t h = 0; h < column.size(); ++h) {
      if (host_of[column[h]] != static_cast<int>(h)) return false;
    }
  }
  return true;
}

std::vector<int> Hierarchy::HostMajorOrder() const {
  std::vector<int> order;
  order.reserve(host_of.size());
  for (const std::vector<int>& h : hosts) {
    order.insert(order.end(), h.begin(), h.end());
  }
  return order;
}

bool Hierarchy::HostMajor() const {
  int next = 0;
  for (const std::vector<int>& h : hosts) {
    for (int r : h) {
      if (r != next++) return false;
    }
  }
  return true;
}

Hierarchy GroupByHost(absl::Span<const std::string> names) {
  KOLO_CHECK(!names.empty()) << "a hierarchy of no ranks";
  Hierarchy h;
  absl::flat_hash_map<absl::string_view, int> index;
  h.host_of.resize(names.size());
  h.local_of.resize(names.size());
  for (size_t r = 0; r < names.size(); ++r) {
    auto [it, added] =
        index.try_emplace(names[r], static_cast<int>(h.hosts.size()));
    if (added) h.hosts.emplace_back();
    std::vector<int>& host = h.hosts[it->second];
    h.host_of[r] = it->second;
    h.local_of[r] = static_cast<int>(host.size());
    host.push_back(static_cast<int>(r));
  }
  return h;
}

bool UseHierarchy(HierarchicalMode mode, const Hierarchy& hierarchy) {
  switch (mode) {
    case HierarchicalMode::kOn:
      return true;
    case HierarchicalMode::kOff:
      return false;
    case HierarchicalMode::kAuto:
      return hierarchy.num_hosts() >= 2 && hierarchy.MaxLocalSize() >= 2;
  }
  return false;
}

}  // namespace kolo
