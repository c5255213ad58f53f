// kolo::Mutex / CondVar and the logger's identity tag, exercised from several
// threads (run under ThreadSanitizer in CI).
#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

class Counter {
 public:
  void Add() {
    MutexLock lock(&mu_);
    ++value_;
    cv_.SignalAll();
  }
  // Returns false on timeout.
  bool WaitFor(int target, absl::Duration timeout) {
    absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mu_);
    while (value_ < target) {
      if (cv_.WaitWithDeadline(&mu_, deadline) && value_ < target) return false;
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(Sync, ManyThreadsCount) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 1000; ++i) c.Add();
    });
  }
  EXPECT_TRUE(c.WaitFor(4000, absl::Seconds(60)));
  for (auto& t : threads) t.join();
}

TEST(Sync, WaitTimesOut) {
  Counter c;
  absl::Time start = absl::Now();
  EXPECT_FALSE(c.WaitFor(1, absl::Milliseconds(50)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(45));
}

TEST(Log, IdentityFromThreads) {
  auto logger = GetLogger("test");
  EXPECT_EQ(logger, GetLogger("test"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([t, logger] {
      for (int i = 0; i < 50; ++i) {
        SetLogRank(t);
        logger->debug("line {}", i);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(SetLogLevel("warning").ok());
  EXPECT_TRUE(SetLogLevel("off").ok());
  EXPECT_FALSE(SetLogLevel("loud").ok());
  EXPECT_TRUE(SetLogLevel("warn").ok());
}

}  // namespace
}  // namespace kolo
