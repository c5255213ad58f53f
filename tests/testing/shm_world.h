// Test helpers for the shared-memory transport: N ShmTransports over one
// Segment in one process (each with its own mapping of the memfd, as
// separate processes would have), for ranks run as threads. Messages by
// reference (cross-memory attach) then read this process's own memory.
//
// Thread-safety: MakeShmWorld runs on the test's main thread; the
// transports then follow the Transport contract.
#ifndef KOLO_TESTS_TESTING_SHM_WORLD_H_
#define KOLO_TESTS_TESTING_SHM_WORLD_H_

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "allreduce/shm/segment.h"
#include "allreduce/shm/shm_transport.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace kolo::testing {

inline constexpr uint64_t kShmTestEpoch = 7;
inline const std::string kShmTestNonce(shm::kNonceBytes, 'n');

// One segment for `n` ranks with rings of `ring_bytes` (and slots of
// `slot_bytes`, for ShmAllreduce); transport i maps it on its own. Spins only
// while the ranks do not outnumber the cores.
inline std::vector<std::unique_ptr<Transport>> MakeShmWorld(
    int n, size_t ring_bytes, absl::Duration timeout,
    size_t attach_min_bytes = ShmOptions().attach_min_bytes,
    size_t slot_bytes = 0) {
  std::vector<std::unique_ptr<Transport>> out;
  auto first = shm::Segment::Create(n, ring_bytes, kShmTestEpoch, kShmTestNonce,
                                    slot_bytes);
  EXPECT_TRUE(first.ok()) << first.status();
  if (!first.ok()) return out;
  const int fd = (*first)->fd();
  std::vector<std::unique_ptr<shm::Segment>> segments;
  segments.push_back(*std::move(first));
  for (int r = 1; r < n; ++r) {
    auto mapped = shm::Segment::Map(net::UniqueFd(::dup(fd)), n, kShmTestEpoch,
                                    kShmTestNonce);
    EXPECT_TRUE(mapped.ok()) << mapped.status();
    if (!mapped.ok()) return out;
    segments.push_back(*std::move(mapped));
  }
  segments[0]->CloseFd();
  const bool spin = static_cast<unsigned>(n) <=
                    std::max(1u, std::thread::hardware_concurrency());
  for (int r = 0; r < n; ++r) {
    ShmOptions o;
    o.rank = r;
    o.epoch = kShmTestEpoch;
    o.timeout = timeout;
    o.attach_min_bytes = attach_min_bytes;
    o.spin = spin ? absl::Microseconds(50) : absl::ZeroDuration();
    out.push_back(std::make_unique<ShmTransport>(std::move(segments[r]), o));
  }
  return out;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_SHM_WORLD_H_
