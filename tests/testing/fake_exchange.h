// FakeExchange: the coordinator's exchange (kolo::control_allgather, as
// nccl::Exchange) among threads of one test: each key completes when all
// `n` members called it, and every member gets every value in rank order.
// Records the keys, process sets and values it saw.
//
// Thread-safety: For()'s exchanges may run on any threads at once; each
// waits at most its timeout.
#ifndef KOLO_TESTS_TESTING_FAKE_EXCHANGE_H_
#define KOLO_TESTS_TESTING_FAKE_EXCHANGE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "allreduce/nccl/communicator.h"
#include "common/mutex.h"

namespace kolo::testing {

class FakeExchange {
 public:
  explicit FakeExchange(int n) : n_(n) {}
  // Member `rank`'s exchange.
  nccl::Exchange For(int rank) {
    return [this, rank](const std::string& key, int32_t process_set,
                        const std::string& value, absl::Duration timeout)
               -> absl::StatusOr<std::vector<std::string>> {
      MutexLock lock(&mu_);
      keys_.push_back(key);
      sets_.push_back(process_set);
      auto& v = values_[key];
      v.resize(n_);
      v[rank] = value;
      ++arrived_[key];
      cv_.SignalAll();
      const absl::Time deadline = absl::Now() + timeout;
      while (arrived_[key] < n_) {
        if (cv_.WaitWithDeadline(&mu_, deadline) && arrived_[key] < n_) {
          return absl::DeadlineExceededError("exchange timed out");
        }
      }
      return v;
    };
  }
  // Every key called, in call order (once per member).
  std::vector<std::string> keys() {
    MutexLock lock(&mu_);
    return keys_;
  }
  // The process set of each call, in call order.
  std::vector<int32_t> sets() {
    MutexLock lock(&mu_);
    return sets_;
  }
  // The values exchanged under `key`, in rank order.
  std::vector<std::string> values(const std::string& key) {
    MutexLock lock(&mu_);
    return values_[key];
  }

 private:
  const int n_;
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::vector<std::string>> values_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> arrived_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> keys_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> sets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_FAKE_EXCHANGE_H_
