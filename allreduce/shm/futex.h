// Futex helpers for waiting on a 32-bit word in a MAP_SHARED segment that
// several processes map (so the shared, not the private, futex operations).
//
// Thread-safety: free functions; the word is accessed atomically.
#ifndef KOLO_ALLREDUCE_SHM_FUTEX_H_
#define KOLO_ALLREDUCE_SHM_FUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>

#include "absl/time/time.h"

namespace kolo::shm {

// Sleeps while *word == expected, at most `timeout` (a wake, a changed word,
// a signal or the timeout end it; the caller re-checks its condition).
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                      absl::Duration timeout) {
  timespec ts = absl::ToTimespec(timeout);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
            &ts, nullptr, 0);
}

// Wakes every thread sleeping on `word`, in any process.
inline void FutexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
            nullptr, nullptr, 0);
}

}  // namespace kolo::shm

#endif  // KOLO_ALLREDUCE_SHM_FUTEX_H_
