// Rate-limited logging of refusals: "log once per key per interval".
//
// Bytes from outside the job (garbage, a wrong secret, an idle connection, a
// flood) are refused; an operator should see that someone is knocking without
// a flood filling the log. RateLimiter admits one event per key per interval
// and counts the rest; LogRefusal logs at warn once per (component, peer host)
// per minute, saying how many lines it held back since the last one.
//
// Memory is bounded: at most `max_keys` keys are tracked. When the table is
// full, keys idle for a whole interval are dropped; if none is, new keys share
// one overflow key (so a flood from many addresses still gets one line per
// interval, not one per address).
//
// Thread-safety: every method may be called from any thread.
#ifndef KOLO_COMMON_RATE_LIMITED_LOG_H_
#define KOLO_COMMON_RATE_LIMITED_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "spdlog/spdlog.h"

namespace kolo {

class RateLimiter {
 public:
  struct Options {
    absl::Duration interval = absl::Minutes(1);
    size_t max_keys = 1024;  // REQUIRES: >= 2 (one is the overflow key)
    // Tests inject a fake clock.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };
  // The key that stands for every key that did not fit in the table.
  static constexpr absl::string_view kOverflowKey = "<other addresses>";

  explicit RateLimiter(Options options);

  struct Admitted {
    // The key the event was counted under: `key`, or kOverflowKey.
    std::string key;
    // Events of this key held back since the last admitted one.
    uint64_t suppressed = 0;
  };
  // An event for `key`: admitted when no event of the key was admitted in the
  // last interval; otherwise counted and nullopt.
  std::optional<Admitted> Admit(absl::string_view key);

  // Keys tracked now (for tests: it never exceeds max_keys).
  size_t size() const;

 private:
  struct Entry {
    absl::Time last_admitted;
    uint64_t suppressed = 0;
  };
  // Drops keys whose last admission is older than an interval.
  void SweepLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// The host part of a peer address, the key for per-address limits:
// "ipv4:127.0.0.1:58710" -> "127.0.0.1", "ipv6:[::1]:5000" -> "::1",
// "10.0.0.2:7000" -> "10.0.0.2"; a unix socket or anything else is returned as
// it is.
std::string PeerHost(absl::string_view peer);

// Logs `text` at warn on `log`, at most once per minute per (logger, host of
// `peer`) in this process; a line says how many it held back. The lines held
// back are logged at debug. For refusals of bytes from outside the job.
void LogRefusal(spdlog::logger& log, absl::string_view peer,
                const std::string& text);

}  // namespace kolo

#endif  // KOLO_COMMON_RATE_LIMITED_LOG_H_
