#include "worker_lib/session/cache_mirror.h"

#include <cstring>

#include "common/log.h"

namespace kolo::worker {
namespace {

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

template <typename Repeated>
bool SameList(const Repeated& a, const Repeated& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (a.Get(i) != b.Get(i)) return false;
  }
  return true;
}

}  // namespace

bool SameRequest(const proto::Request& a, const proto::Request& b) {
  return a.op() == b.op() && a.dtype() == b.dtype() &&
         a.reduce_op() == b.reduce_op() && a.root() == b.root() &&
         a.device() == b.device() && SameBits(a.prescale(), b.prescale()) &&
         SameBits(a.postscale(), b.postscale()) &&
         SameList(a.shape(), b.shape()) && SameList(a.splits(), b.splits()) &&
         SameList(a.expect(), b.expect()) && a.name() == b.name() &&
         a.invalid() == b.invalid() && a.process_set() == b.process_set() &&
         a.group() == b.group() && a.group_size() == b.group_size() &&
         a.order_stream() == b.order_stream() &&
         a.order_slot() == b.order_slot() && a.order_void() == b.order_void();
}

std::optional<uint32_t> CacheMirror::BitFor(
    const proto::Request& request) const {
  if (!request.invalid().empty()) return std::nullopt;
  auto it = by_name_.find(request.name());
  if (it == by_name_.end() || !SameRequest(it->second.request, request)) {
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
