// TcpTransport data path: exact content for every size between every pair,
// FIFO queues, simultaneous large exchanges, framing checks, the inactivity
// deadline, Abort() and a peer that closes. N ranks = N threads on loopback.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "allreduce/tcp/tcp_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allreduce_tcp_test_mesh.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::ExchangeEverySize;
using ::kolo::testing::Filled;
using ::kolo::testing::FirstWrong;
using ::kolo::testing::RunRanks;
using ::kolo::testing::Scaled;
using ::kolo::testing::TestWorld;
using ::testing::HasSubstr;

TEST(TcpTransport, EverySizeBetweenEveryPair) {
  TestWorld world(3);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1] && ts[2]);
  ExchangeEverySize(ts, {0, 1, 7, 4099, (1u << 20) + 3, 64u << 20});
}

TEST(TcpTransport, ManyQueuedMessagesAreFifo) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  constexpr int kMessages = 2000;
  auto len_of = [](int i) { return static_cast<size_t>((i * 37) % 5000); };
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    t.BeginOperation(1);
    std::vector<std::vector<uint8_t>> bufs(kMessages);
    std::vector<OpId> ops;
    for (int i = 0; i < kMessages; ++i) {
      if (rank == 0) {
        bufs[i] = Filled(len_of(i), i, 1);
        auto s = t.StartSend(1, bufs[i].data(), bufs[i].size());
        ASSERT_TRUE(s.ok());
        ops.push_back(*s);
      } else {
        bufs[i].assign(len_of(i), 0);
        auto r = t.StartRecv(0, bufs[i].data(), bufs[i].size());
        ASSERT_TRUE(r.ok());
        ops.push_back(*r);
      }
    }
    // Waiting in reverse order still completes everything.
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      ASSERT_TRUE(t.Wait(*it).ok());
    }
    if (rank == 1) {
      for (int i = 0; i < kMessages; ++i) {
        ASSERT_EQ(FirstWrong(bufs[i], i, 1), -1) << "message " << i;
      }
    }
  });
}

TEST(TcpTransport, SimultaneousLargeSendRecvDoesNotDeadlock) {
  TestWorld world(4);
  auto ts = world.CreateAll();
  for (auto& t : ts) ASSERT_TRUE(t);
  const size_t len = 24u << 20;
  // A ring: everyone sends right and receives from the left at once, then
  // pairs (0,1), (2,3) swap both ways.
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    t.BeginOperation(1);
    int right = (rank + 1) % 4, left = (rank + 3) % 4;
    std::vector<uint8_t> out = Filled(len, rank, right), in(len);
    ASSERT_TRUE(t.SendRecv(right, out.data(), len, left, in.data(), len).ok());
    EXPECT_EQ(FirstWrong(in, left, rank), -1);
    t.BeginOperation(2);
    int partner = rank ^ 1;
    out = Filled(len, rank, partner);
    ASSERT_TRUE(
        t.SendRecv(partner, out.data(), len, partner, in.data(), len).ok());
    EXPECT_EQ(FirstWrong(in, partner, rank), -1);
  });
}

TEST(TcpTransport, LengthMismatchNamesThePeer) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  std::vector<uint8_t> out(100, 1), in(99);
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    t.BeginOperation(7);
    if (rank == 0) {
      auto s = t.StartSend(1, out.data(), out.size());
      ASSERT_TRUE(s.ok());
      EXPECT_TRUE(t.Wait(*s).ok());
    } else {
      auto r = t.StartRecv(0, in.data(), in.size());
      ASSERT_TRUE(r.ok());
      absl::Status s = t.Wait(*r);
      EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
      EXPECT_THAT(s.message(), HasSubstr("rank 0 (worker w0, 127.0.0.1:"));
      EXPECT_THAT(s.message(), HasSubstr("rank 1 (worker w1"));
      EXPECT_THAT(s.message(), HasSubstr("expected epoch 4 seq 7 of 99 bytes, "
                                         "got epoch 4 seq 7 of 100 bytes"));
      // The stream is poisoned: later receives from rank 0 fail at once.
      EXPECT_FALSE(t.StartRecv(0, in.data(), 1).ok());
    }
  });
}

TEST(TcpTransport, SeqMismatchNamesThePeer) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    std::vector<uint8_t> buf(16);
    t.BeginOperation(rank == 0 ? 5 : 6);
    if (rank == 0) {
      auto s = t.StartSend(1, buf.data(), buf.size());
      ASSERT_TRUE(s.ok());
      EXPECT_TRUE(t.Wait(*s).ok());
    } else {
      auto r = t.StartRecv(0, buf.data(), buf.size());
      ASSERT_TRUE(r.ok());
      absl::Status s = t.Wait(*r);
      EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
      EXPECT_THAT(s.message(), HasSubstr("expected epoch 4 seq 6 of 16 bytes, "
                                         "got epoch 4 seq 5 of 16 bytes"));
      EXPECT_THAT(s.message(), HasSubstr("rank 0 (worker w0"));
    }
  });
}

TEST(TcpTransport, InactivityDeadlineNamesThePeer) {
  TestWorld world(2);
  const absl::Duration timeout = absl::Milliseconds(400);
  auto ts = world.CreateAll([&](TcpOptions& o) { o.timeout = timeout; });
  ASSERT_TRUE(ts[0] && ts[1]);
  std::vector<uint8_t> buf(8);
  auto r = ts[1]->StartRecv(0, buf.data(), buf.size());
  ASSERT_TRUE(r.ok());
  absl::Time start = absl::Now();
  absl::Status s = ts[1]->Wait(*r);
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("no data from rank 0 (worker w0, " +
                                     world.listener(0).address +
                                     ") for 0.4 s "
                                     "(KOLO_TIMEOUT_SECONDS)"));
  EXPECT_GE(took, timeout);
  EXPECT_LT(took, timeout + Scaled(absl::Seconds(3)));
}

TEST(TcpTransport, ProgressResetsTheInactivityDeadline) {
  TestWorld world(2);
  const absl::Duration timeout = Scaled(absl::Milliseconds(600));
  auto ts = world.CreateAll([&](TcpOptions& o) { o.timeout = timeout; });
  ASSERT_TRUE(ts[0] && ts[1]);
  constexpr int kMessages = 4;  // together longer than the timeout
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    std::vector<uint8_t> buf(1000, 3);
    if (rank == 0) {
      for (int i = 0; i < kMessages; ++i) {
        absl::SleepFor(timeout / 3);
        auto s = t.StartSend(1, buf.data(), buf.size());
        ASSERT_TRUE(s.ok());
        ASSERT_TRUE(t.Wait(*s).ok());
      }
    } else {
      std::vector<std::vector<uint8_t>> in(kMessages,
                                           std::vector<uint8_t>(1000));
      OpId last = 0;
      for (auto& b : in) {
        auto r = t.StartRecv(0, b.data(), b.size());
        ASSERT_TRUE(r.ok());
        last = *r;
      }
      EXPECT_TRUE(t.Wait(last).ok());
    }
  });
}

TEST(TcpTransport, AbortReleasesABlockedWaitAtOnce) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  std::vector<uint8_t> buf(8);
  auto r = ts[1]->StartRecv(0, buf.data(), buf.size());
  ASSERT_TRUE(r.ok());
  std::atomic<bool> waiting{false};
  absl::Time aborted_at;
  std::thread aborter([&] {
    while (!waiting.load()) absl::SleepFor(absl::Milliseconds(1));
    absl::SleepFor(absl::Milliseconds(100));
    aborted_at = absl::Now();
    ts[1]->Abort(absl::AbortedError("epoch 4 ended: rank 0 left"));
  });
  waiting.store(true);
  absl::Status s = ts[1]->Wait(*r);
  absl::Time returned = absl::Now();
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("epoch 4 ended: rank 0 left"));
  EXPECT_LT(returned - aborted_at, Scaled(absl::Seconds(1)));
  // Later calls fail fast too, with the first reason.
  ts[1]->Abort(absl::AbortedError("second"));
  auto again = ts[1]->StartSend(0, buf.data(), buf.size());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(again.status().message(), HasSubstr("rank 0 left"));
}

TEST(TcpTransport, PeerClosingIsAClearError) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  std::vector<uint8_t> buf(1 << 20);
  auto r = ts[1]->StartRecv(0, buf.data(), buf.size());
  ASSERT_TRUE(r.ok());
  ts[0].reset();  // closes rank 0's connections
  absl::Status s = ts[1]->Wait(*r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("rank 0 (worker w0, " + world.listener(0).address +
                        ") closed the connection"));
  EXPECT_THAT(s.message(), HasSubstr("rank 1 (worker w1"));
}

TEST(TcpTransport, SendToAClosedPeerFails) {
  TestWorld world(2);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0] && ts[1]);
  ts[0].reset();
  std::vector<uint8_t> buf(8 << 20);
  absl::Status s;
  // The first bytes may still be accepted by the kernel; keep sending.
  for (int i = 0; i < 20 && s.ok(); ++i) {
    auto op = ts[1]->StartSend(0, buf.data(), buf.size());
    s = op.ok() ? ts[1]->Wait(*op) : op.status();
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 0 (worker w0"));
}

TEST(TcpTransport, SingleRankAndBadArguments) {
  TestWorld world(1);
  auto ts = world.CreateAll();
  ASSERT_TRUE(ts[0]);
  uint8_t b = 0;
  EXPECT_EQ(ts[0]->StartSend(0, &b, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ts[0]->Wait(12345).code(), absl::StatusCode::kInvalidArgument);
  TcpOptions o = world.Options(0);
  o.secret.clear();
  EXPECT_EQ(TcpTransport::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpTransport, MissingPeerFailsAtTheConnectDeadline) {
  TestWorld world(2);
  TcpOptions o = world.Options(0);
  o.connect_timeout = absl::Milliseconds(300);
  absl::Time start = absl::Now();
  auto t = TcpTransport::Create(o);
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(3)));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(t.status().message(),
              HasSubstr("rank 1 (worker w1 at " + world.listener(1).address +
                        ") (it never connected)"));
  // Rank 1 dialling a rank 0 that never accepts (nobody listening there).
  TestWorld other(2);
  TcpOptions o1 = other.Options(1);
  o1.addresses[0] = "127.0.0.1:1";
  o1.connect_timeout = absl::Milliseconds(300);
  auto t1 = TcpTransport::Create(o1);
  EXPECT_EQ(t1.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(t1.status().message(), HasSubstr("Connection refused"));
}

}  // namespace
}  // namespace kolo
