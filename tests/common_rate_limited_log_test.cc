// RateLimiter: once per key per interval with a fake clock, counts of what
// it held back, bounded memory under a flood of keys; PeerHost.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rate_limited_log.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1000);
};

RateLimiter::Options Opts(FakeClock* clock, size_t max_keys = 16) {
  RateLimiter::Options o;
  o.interval = absl::Minutes(1);
  o.max_keys = max_keys;
  o.clock = [clock] { return clock->now; };
  return o;
}

TEST(RateLimiter, OncePerKeyPerInterval) {
  FakeClock clock;
  RateLimiter limiter(Opts(&clock));
  auto first = limiter.Admit("10.0.0.1");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->suppressed, 0u);
  EXPECT_FALSE(limiter.Admit("10.0.0.1").has_value());
  EXPECT_FALSE(limiter.Admit("10.0.0.1").has_value());
  // Another key is independent.
  EXPECT_TRUE(limiter.Admit("10.0.0.2").has_value());
  clock.now += absl::Seconds(59);
  EXPECT_FALSE(limiter.Admit("10.0.0.1").has_value());
  clock.now += absl::Seconds(1);
  auto again = limiter.Admit("10.0.0.1");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->key, "10.0.0.1");
  EXPECT_EQ(again->suppressed, 3u);
  EXPECT_FALSE(limiter.Admit("10.0.0.1").has_value());
}

TEST(RateLimiter, FloodFromManyKeysStaysBounded) {
  FakeClock clock;
  RateLimiter limiter(Opts(&clock, /*max_keys=*/8));
  int admitted = 0;
  for (int i = 0; i < 10000; ++i) {
    if (limiter.Admit(absl::StrCat("10.0.", i / 256, ".", i % 256))) {
      ++admitted;
    }
    EXPECT_LE(limiter.size(), 8u);
  }
  // 7 keys of their own, then one line for all the others.
  EXPECT_EQ(admitted, 8);
  // A minute later the stale keys make room again.
  clock.now += absl::Minutes(1);
  auto fresh = limiter.Admit("192.168.1.1");
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->key, "192.168.1.1");
  EXPECT_LE(limiter.size(), 8u);
}

TEST(RateLimiter, OverflowKeyCountsWhatItHeldBack) {
  FakeClock clock;
  RateLimiter limiter(Opts(&clock, /*max_keys=*/2));
  ASSERT_TRUE(limiter.Admit("a").has_value());
  auto b = limiter.Admit("b");  // the table is full: b shares the overflow key
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->key, RateLimiter::kOverflowKey);
  EXPECT_FALSE(limiter.Admit("c").has_value());
  EXPECT_FALSE(limiter.Admit("d").has_value());
  clock.now += absl::Minutes(2);
  auto e = limiter.Admit("e");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->key, "e");  // the stale keys were dropped
  EXPECT_EQ(limiter.size(), 1u);
}

TEST(PeerHost, StripsSchemeAndPort) {
  EXPECT_EQ(PeerHost("ipv4:127.0.0.1:58710"), "127.0.0.1");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5000"), "::1");
  EXPECT_EQ(PeerHost("10.0.0.2:7000"), "10.0.0.2");
  EXPECT_EQ(PeerHost("[fe80::1]:7000"), "fe80::1");
  EXPECT_EQ(PeerHost("fe80::1"), "fe80::1");
  EXPECT_EQ(PeerHost("unix:/tmp/x"), "unix:/tmp/x");
}

TEST(LogRefusal, DoesNotCrashOnRepeats) {
  auto log = spdlog::default_logger();
  for (int i = 0; i < 100; ++i) LogRefusal(*log, "ipv4:1.2.3.4:5", "knock");
}

}  // namespace
}  // namespace kolo
