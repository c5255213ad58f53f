#include "worker_lib/session/cache_mirror.h"

#include "common/log.h"

namespace kolo::worker {
std::optional<uint32_t> CacheMirror::BitFor(const PendingOp& op) const {
  auto it = by_name_.find(op.name);
  if (it == by_name_.end() || !Announces(op, it->second.request)) {
    return std::nullopt;
  }
  return it->second.bit;
}

void CacheMirror::Evict(uint32_t bit) {
  auto it = by_bit_.find(bit);
  if (it == by_bit_.end()) return;
  by_name_.erase(it->second);
  by_bit_.erase(it);
}

void CacheMirror::NameByBit(proto::Plan& plan) const {
  for (proto::Response& r : *plan.mutable_responses()) {
    if (!r.by_bit() || r.names_size() != 0) continue;
    for (int32_t bit : r.cache_bits()) {
      const std::string* name =
          bit < 0 ? nullptr : NameOf(static_cast<uint32_t>(bit));
      if (name == nullptr) {
        GetLogger("runtime")->error(
            "plan {} lists cache bit {}, which names no tensor on this rank; "
            "its op cannot run here (the coordinator and this worker "
            "disagree on the cache)",
            plan.seq(), bit);
      }
      r.add_names(name == nullptr ? std::string() : *name);
    }
  }
}

void CacheMirror::Apply(
    const proto::Plan& plan,
    const std::function<const proto::Request*(const std::string&)>&
        request_of) {
  for (uint32_t bit : plan.cache_evicted()) Evict(bit);
  for (const proto::Response& r : plan.responses()) {
    if (r.cache_bits_size() == 0 || r.by_bit()) continue;
    if (r.cache_bits_size() != r.names_size()) {
      GetLogger("runtime")->error(
          "plan {} gives {} cache bits for {} names; the cache is not "
          "updated (the coordinator and this worker disagree on the protocol)",
          plan.seq(), r.cache_bits_size(), r.names_size());
      continue;
    }
    for (int i = 0; i < r.names_size(); ++i) {
      const std::string& name = r.names(i);
      const int32_t bit = r.cache_bits(i);
      if (bit < 0) {
        // Not cached (any more): forget a bit the name held.
        if (auto it = by_name_.find(name); it != by_name_.end()) {
          Evict(it->second.bit);
        }
        continue;
      }
      const proto::Request* request = request_of(name);
      if (request == nullptr) continue;
      const auto b = static_cast<uint32_t>(bit);
      auto it = by_name_.find(name);
      if (it != by_name_.end() && it->second.bit == b) {
        // Kept (a hit), or a changed request.
        if (request != &it->second.request &&
            !SameRequest(it->second.request, *request)) {
          it->second.request = *request;
        }
        continue;
      }
      // A copy first: `request` may be the entry evicted next (RequestOf).
      proto::Request copy = *request;
      if (it != by_name_.end()) Evict(it->second.bit);
      Evict(b);  // a bit names one tensor
      by_name_[name] = Entry{b, std::move(copy)};
      by_bit_[b] = name;
    }
  }
}

void CacheMirror::Clear() {
  by_name_.clear();
  by_bit_.clear();
}

const proto::Request* CacheMirror::RequestOf(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second.request;
}

const std::string* CacheMirror::NameOf(uint32_t bit) const {
  auto it = by_bit_.find(bit);
  return it == by_bit_.end() ? nullptr : &it->second;
}

}  // namespace kolo::worker
