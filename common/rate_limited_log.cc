#include "common/rate_limited_log.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo {

RateLimiter::RateLimiter(Options options) : options_(std::move(options)) {
  KOLO_CHECK(options_.max_keys >= 2);
  KOLO_CHECK(options_.clock != nullptr);
}

void RateLimiter::SweepLocked(absl::Time now) {
  std::vector<std::string> stale;
  for (const auto& [key, e] : entries_) {
    if (now - e.last_admitted >= options_.interval) stale.push_back(key);
  }
  for (const std::string& key : stale) entries_.erase(key);
}

std::optional<RateLimiter::Admitted> RateLimiter::Admit(absl::string_view key) {
  const absl::Time now = options_.clock();
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    // Keep one slot for the overflow key.
    if (entries_.size() + 1 >= options_.max_keys) SweepLocked(now);
    if (entries_.size() + 1 >= options_.max_keys) {
      key = kOverflowKey;
    }
    it = entries_.find(key);
    if (it == entries_.end()) {
      entries_.emplace(std::string(key), Entry{now, 0});
      return Admitted{std::string(key), 0};
    }
  }
  Entry& e = it->second;
  if (now - e.last_admitted < options_.interval) {
    ++e.suppressed;
    return std::nullopt;
  }
  Admitted admitted{std::string(key), e.suppressed};
  e.last_admitted = now;
  e.suppressed = 0;
  return admitted;
}

size_t RateLimiter::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

std::string PeerHost(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:")) return std::string(peer);
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (absl::StartsWith(peer, scheme)) peer.remove_prefix(scheme.size());
  }
  if (absl::StartsWith(peer, "[")) {
    size_t close = peer.find(']');
    if (close != absl::string_view::npos) {
      return std::string(peer.substr(1, close - 1));
    }
    return std::string(peer);
  }
  size_t colon = peer.find(':');
  if (colon != absl::string_view::npos && peer.rfind(':') == colon) {
    return std::string(peer.substr(0, colon));  // host:port
  }
  return std::string(peer);  // no port, or a bare IPv6 address
}

void LogRefusal(spdlog::logger& log, absl::string_view peer,
                const std::string& text) {
  // Leaked on purpose: threads may still refuse connections during exit.
  static RateLimiter* const limiter =
      std::make_unique<RateLimiter>(RateLimiter::Options{}).release();
  std::optional<RateLimiter::Admitted> admitted =
      limiter->Admit(absl::StrCat(log.name(), "|", PeerHost(peer)));
  if (!admitted) {
    log.debug("{}", text);  // held back at warn; there for whoever debugs
    return;
  }
  if (admitted->suppressed == 0) {
    log.warn("{}", text);
  } else {
    log.warn("{} ({} more refusals from {} in the last minute not logged)",
             text, admitted->suppressed,
             admitted->key == RateLimiter::kOverflowKey
                 ? std::string(RateLimiter::kOverflowKey)
                 : PeerHost(peer));
  }
}

}  // namespace kolo
