// CacheMirror: a worker's copy of the response cache bits the coordinator
// gave to this rank's requests (proto Response.cache_bits, Plan.cache_evicted;
// the coordinator side is coordinator/response_cache.h).
//
// Submitting an op, the runtime asks BitFor(op): when the name holds a
// bit and the op would be announced by the Request it had when the bit was
// assigned,
// the op is announced as that bit; otherwise as the full Request (a metadata
// change; the coordinator then checks it and reassigns). Running a plan, the
// runtime applies its evictions and assignments before it runs the plan's
// collectives and before it reports the plan done: the coordinator gives an
// evicted bit out again only after every rank reported that plan done, so a
// bit this rank announces always means what this rank thinks it means.
//
// Every rank applies the same plans in the same order, so the bit of a name
// is the same on every rank; the Requests (and so the hits) are per rank.
//
// Thread-safety: none; OpRuntime guards it with its mutex.
// Invariants: by_name_ and by_bit_ describe the same set of (name, bit)
// pairs; a bit and a name appear at most once.
#ifndef KOLO_WORKER_LIB_SESSION_CACHE_MIRROR_H_
#define KOLO_WORKER_LIB_SESSION_CACHE_MIRROR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "proto/kolo.pb.h"
#include "worker_lib/op_request.h"

namespace kolo::worker {

class CacheMirror {
 public:
  // The bit to announce `op` by, or nullopt (announce it in full).
  // REQUIRES: ValidateOp(op) gave "" (an invalid op never goes by bit).
  std::optional<uint32_t> BitFor(const PendingOp& op) const;

  // Fills in the names of `plan`'s by-bit responses (Response.by_bit: hits
  // listed by their bits) from this mirror. Call it before Apply (the bits
  // name what they named before this plan); a bit this mirror does not hold
  // (a protocol bug) gets an empty name, logged.
  void NameByBit(proto::Plan& plan) const;

  // Applies `plan`'s evictions, then its assignments (a by-bit response
  // assigns nothing: its bits stay as they were); `request_of(name)` gives
  // this rank's Request for a name the plan covers (nullptr: not pending
  // here, or announced by a bit evicted since; the assignment is skipped). It
  // may return RequestOf(name).
  void Apply(const proto::Plan& plan,
             const std::function<const proto::Request*(const std::string&)>&
                 request_of);

  void Clear();
  size_t size() const { return by_bit_.size(); }
  // The name holding `bit`, or nullptr.
  const std::string* NameOf(uint32_t bit) const;
  // The Request `name`'s bit was assigned for, or nullptr. Valid until the
  // next change (Apply copies it before it changes the entry).
  const proto::Request* RequestOf(const std::string& name) const;

 private:
  void Evict(uint32_t bit);

  struct Entry {
    uint32_t bit;
    proto::Request request;
  };
  absl::flat_hash_map<std::string, Entry> by_name_;
  absl::flat_hash_map<uint32_t, std::string> by_bit_;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_SESSION_CACHE_MIRROR_H_
