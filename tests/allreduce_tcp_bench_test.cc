// Loopback throughput of the TCP transport: one-way 64 MiB messages and a
// small-message ping-pong. Not a test (speed is never asserted): the cases
// are DISABLED_; run them with
//   build/bin/kolo-tcp-throughput --gtest_also_run_disabled_tests
#include <cstdio>
#include <vector>

#include "absl/time/clock.h"
#include "allreduce/tcp/tcp_transport.h"
#include "gtest/gtest.h"
#include "tests/allreduce_tcp_test_mesh.h"

namespace kolo {
namespace {

using ::kolo::testing::RunRanks;
using ::kolo::testing::TestWorld;

TEST(TcpTransportBench, DISABLED_OneWay64MiB) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  const size_t len = 64u << 20;
  constexpr int kIters = 20;
  std::vector<uint8_t> buf0(len, 1), buf1(len, 0);
  absl::Duration took;
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    absl::Time start;
    for (int i = -2; i < kIters; ++i) {  // two warm-up rounds
      if (i == 0) start = absl::Now();
      absl::Status s = rank == 0
                           ? t.SendRecv(1, buf0.data(), len, 1, buf0.data(), 0)
                           : t.SendRecv(0, buf1.data(), 0, 0, buf1.data(), len);
      ASSERT_TRUE(s.ok()) << s;
    }
    if (rank == 1) took = absl::Now() - start;
  });
  double gbs =
      static_cast<double>(len) * kIters / absl::ToDoubleSeconds(took) / 1e9;
  std::printf("one-way 64 MiB over loopback: %.2f GB/s (%.1f ms per message)\n",
              gbs, absl::ToDoubleMilliseconds(took) / kIters);
}

TEST(TcpTransportBench, DISABLED_PingPong4B) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  constexpr int kIters = 20000;
  absl::Duration took;
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    int v = 0;
    absl::Time start = absl::Now();
    auto send = [&] {
      auto op = t.StartSend(1 - rank, &v, sizeof(v));
      return op.ok() ? t.Wait(*op) : op.status();
    };
    auto recv = [&] {
      auto op = t.StartRecv(1 - rank, &v, sizeof(v));
      return op.ok() ? t.Wait(*op) : op.status();
    };
    for (int i = 0; i < kIters; ++i) {
      if (rank == 0) {
        ASSERT_TRUE(send().ok());
        ASSERT_TRUE(recv().ok());
      } else {
        ASSERT_TRUE(recv().ok());
        ASSERT_TRUE(send().ok());
      }
    }
    if (rank == 0) took = absl::Now() - start;
  });
  std::printf("4-byte ping-pong over loopback: %.1f us round trip\n",
              absl::ToDoubleMicroseconds(took) / kIters);
}

}  // namespace
}  // namespace kolo
