// Test helpers for the hybrid transport: an N-rank TestWorld (TCP on
// loopback) whose ranks are grouped into "hosts"; the ranks of each host join
// one shared-memory segment through JoinSegment over their TCP connections
// (JoinAll), and each rank gets a HybridTransport: shared memory to the
// ranks of its host, TCP to the others (MakeHybridWorld); every rank's
// allreduces checked exact (ExpectExactAllreduces). Ranks are threads of
// this process.
//
// Thread-safety: call from the test's main thread; the transports then
// follow the Transport contract.
#ifndef KOLO_TESTS_ALLREDUCE_HYBRID_TEST_WORLD_H_
#define KOLO_TESTS_ALLREDUCE_HYBRID_TEST_WORLD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "allreduce/collectives.h"
#include "allreduce/shm/hybrid_transport.h"
#include "allreduce/shm/shm_setup.h"
#include "allreduce/shm/shm_transport.h"
#include "allreduce/tcp/tcp_transport.h"
#include "allreduce/transport.h"
#include "gtest/gtest.h"
#include "tests/allreduce_tcp_test_mesh.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {

// Every rank's TCP transport, and its JoinSegment result.
struct Joined {
  std::vector<std::unique_ptr<TcpTransport>> tcp;
  std::vector<absl::StatusOr<ShmJoin>> joins;
};

// `hosts`: the ranks of each host, ascending ({{0,1},{2,3}}: two hosts of
// two); every rank in exactly one. `tweak` may edit each rank's TCP options
// (encryption, a relay's address) before the transports are made.
inline Joined JoinAll(const TestWorld& world,
                      const std::vector<std::vector<int>>& hosts, size_t bytes,
                      const std::function<void(TcpOptions&)>& tweak = {}) {
  Joined j;
  j.tcp = world.CreateAll(tweak);
  for (int r = 0; r < world.size(); ++r) {
    j.joins.emplace_back(absl::UnknownError("not run"));
  }
  for (int r = 0; r < world.size(); ++r) {
    if (j.tcp[r] == nullptr) return j;  // CreateAll failed the test
  }
  std::vector<std::thread> threads;
  for (const auto& host : hosts) {
    for (int r : host) {
      threads.emplace_back([&, r, host] {
        ShmSetupOptions o;
        o.rank = r;
        o.local = host;
        o.epoch = 4;
        o.bytes = bytes;
        o.deadline = absl::Now() + Scaled(absl::Seconds(20));
        j.joins[r] = JoinSegment(*j.tcp[r], o);
      });
    }
  }
  for (auto& t : threads) t.join();
  return j;
}

// A HybridTransport per rank over JoinAll's transports and segments (of
// `bytes`). Empty, with the test failed, when a rank did not get its
// segment.
inline std::vector<std::unique_ptr<Transport>> MakeHybridWorld(
    const TestWorld& world, const std::vector<std::vector<int>>& hosts,
    size_t bytes, const std::function<void(TcpOptions&)>& tweak = {}) {
  Joined j = JoinAll(world, hosts, bytes, tweak);
  std::vector<std::unique_ptr<Transport>> ts(world.size());
  for (const auto& host : hosts) {
    for (int r : host) {
      EXPECT_TRUE(j.joins[r].ok())
          << "rank " << r << ": " << j.joins[r].status();
      if (!j.joins[r].ok()) return {};
      EXPECT_NE(j.joins[r]->segment, nullptr) << j.joins[r]->why;
      if (j.joins[r]->segment == nullptr) return {};
      ShmOptions o;
      o.rank = j.joins[r]->local_rank;
      o.epoch = 4;
      o.epoch_ranks = host;
      o.pids = j.joins[r]->pids;
      auto shm =
          std::make_unique<ShmTransport>(std::move(j.joins[r]->segment), o);
      ts[r] = std::make_unique<HybridTransport>(
          std::move(j.tcp[r]), std::move(shm), host, Scaled(absl::Seconds(30)),
          absl::Microseconds(50));
    }
  }
  return ts;
}

// Every rank of `ts` runs, in its own thread, float32 SUM allreduces of
// each of `counts` elements with the ring and with the latency-optimal
// algorithm (pipelined in 1000-byte segments), stamped from ++*seq on;
// every rank's output must be exact.
inline void ExpectExactAllreduces(
    const std::vector<std::unique_ptr<Transport>>& ts,
    const std::vector<int64_t>& counts, uint64_t* seq) {
  const int n = static_cast<int>(ts.size());
  for (int64_t count : counts) {
    for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
      std::vector<Bytes> in, out(ts.size());
      for (int r = 0; r < n; ++r) {
        in.push_back(Input(DataType::kFloat32, ReduceOp::kSum, r, 0, count));
        out[r].assign(in[r].size(), '\0');
      }
      const Bytes want =
          Expected(DataType::kFloat32, ReduceOp::kSum, n, 0, count);
      const uint64_t stamp = ++*seq;
      std::vector<absl::Status> st(ts.size());
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
          ts[r]->BeginOperation(stamp);
          st[r] = Allreduce(*ts[r], DataType::kFloat32, in[r].data(),
                            out[r].data(), count, {.op = ReduceOp::kSum},
                            {.algorithm = algorithm, .segment_bytes = 1000});
        });
      }
      for (auto& t : threads) t.join();
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
        ASSERT_TRUE(out[r] == want)
            << count << " elements, " << AlgorithmName(algorithm) << ", rank "
            << r;
      }
    }
  }
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_ALLREDUCE_HYBRID_TEST_WORLD_H_
