// TcpTransport with KOLO_DATA_ENCRYPTION=aes-256-gcm: exact bytes for every
// size (record boundaries included) and an exact allreduce; ranks that
// disagree on encryption refused with both settings named; a bit flipped on
// the wire and a replayed frame (injected by a relay between two ranks) fail
// the receive with the authentication error, never a wrong result, and
// nothing hangs. N ranks = N threads on loopback.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/collectives.h"
#include "allreduce/tcp/record_cipher.h"
#include "allreduce/tcp/tcp_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allreduce_tcp_test_mesh.h"
#include "tests/allreduce_tcp_test_relay.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::ConnectorHandshakeBytes;
using ::kolo::testing::ExchangeEverySize;
using ::kolo::testing::Filled;
using ::kolo::testing::Relay;
using ::kolo::testing::RunRanks;
using ::kolo::testing::Scaled;
using ::kolo::testing::TestWorld;
using ::testing::HasSubstr;

void Encrypt(TcpOptions& o) { o.encryption = DataEncryption::kAes256Gcm; }

TEST(TcpEncryption, EverySizeIsExact) {
  TestWorld world(3);
  auto ts = world.CreateAll(Encrypt);
  ASSERT_TRUE(ts[0] && ts[1] && ts[2]);
  const size_t r = tcp::kRecordBytes;
  ExchangeEverySize(ts, {0, 1, 7, 4099, r - 1, r, r + 1, 3 * r + 5, 64u << 20});
}

TEST(TcpEncryption, ManyQueuedSmallMessagesAndAnAllreduce) {
  TestWorld world(2);
  auto ts = world.CreateAll(Encrypt);
  ASSERT_TRUE(ts[0] && ts[1]);
  constexpr int kMessages = 3000;
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    t.BeginOperation(1);
    std::vector<std::vector<uint8_t>> bufs(kMessages);
    std::vector<OpId> ops;
    for (int i = 0; i < kMessages; ++i) {
      const size_t len = static_cast<size_t>((i * 37) % 700);
      bufs[i] = rank == 0 ? Filled(len, i, 1) : std::vector<uint8_t>(len);
      auto op = rank == 0 ? t.StartSend(1, bufs[i].data(), len)
                          : t.StartRecv(0, bufs[i].data(), len);
      ASSERT_TRUE(op.ok()) << op.status();
      ops.push_back(*op);
    }
    ASSERT_TRUE(t.WaitAll(ops).ok());
    if (rank == 1) {
      for (int i = 0; i < kMessages; ++i) {
        ASSERT_TRUE(bufs[i] == Filled(bufs[i].size(), i, 1)) << i;
      }
    }
    for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{3} << 20}) {
      std::vector<float> in(count), out(count);
      for (int64_t i = 0; i < count; ++i) in[i] = float(rank + 1 + i % 7);
      t.BeginOperation(static_cast<uint64_t>(count) + 1);
      ASSERT_TRUE(Allreduce(t, DataType::kFloat32, in.data(), out.data(), count,
                            {.op = ReduceOp::kSum})
                      .ok());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[i], float(3 + 2 * (i % 7))) << count << " at " << i;
      }
    }
  });
}

TEST(TcpEncryption, RanksThatDisagreeAreRefusedNamingBothSettings) {
  TestWorld world(2);
  std::vector<absl::Status> st(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      TcpOptions o = world.Options(r);
      if (r == 0) Encrypt(o);
      o.connect_timeout = Scaled(absl::Seconds(3));
      st[r] = TcpTransport::Create(o).status();
    });
  }
  for (auto& t : threads) t.join();
  // The connector (rank 1) is told at once; the acceptor gives up at its
  // deadline, saying why it refused.
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[r].ok()) << "rank " << r;
    EXPECT_THAT(st[r].message(),
                HasSubstr("rank 1 uses KOLO_DATA_ENCRYPTION=none, rank 0 uses "
                          "aes-256-gcm"))
        << "rank " << r << ": " << st[r];
  }
}

// Rank 1 sends `frames` messages of `len` bytes to rank 0 through a relay
// that applies `tamper`; returns rank 0's receive statuses (in order) and
// checks that every successful receive is exact.
std::vector<absl::Status> ThroughRelay(int frames, size_t len,
                                       Relay::Tamper tamper) {
  TestWorld world(2);
  Relay relay(world.listener(0).address, ConnectorHandshakeBytes(world),
              std::move(tamper));
  auto ts = world.CreateAll([&](TcpOptions& o) {
    Encrypt(o);
    o.timeout = Scaled(absl::Seconds(10));
    if (o.rank == 1) o.addresses[0] = relay.address();
  });
  EXPECT_TRUE(ts[0] && ts[1]);
  if (!ts[0] || !ts[1]) return {};
  std::vector<absl::Status> got(frames);
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    t.BeginOperation(1);
    std::vector<std::vector<uint8_t>> bufs(frames);
    std::vector<OpId> ops;
    for (int i = 0; i < frames; ++i) {
      bufs[i] = rank == 1 ? Filled(len, i, 0) : std::vector<uint8_t>(len);
      auto op = rank == 1 ? t.StartSend(0, bufs[i].data(), len)
                          : t.StartRecv(1, bufs[i].data(), len);
      if (!op.ok()) {
        if (rank == 0) got[i] = op.status();
        continue;
      }
      ops.push_back(*op);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      absl::Status s = t.Wait(ops[i]);
      if (rank == 0) {
        got[i] = s;
        if (s.ok()) {
          EXPECT_TRUE(bufs[i] == Filled(len, static_cast<int>(i), 0))
              << "frame " << i << " reported success with wrong bytes";
        }
      }
    }
  });
  return got;
}

TEST(TcpEncryption, BitFlippedOnTheWireFailsTheReceive) {
  // Offsets past the handshake: in the first header record, in the first
  // payload record, in a tag, and deep in the second payload record.
  const size_t len = 2 * tcp::kRecordBytes;
  const uint64_t header = tcp::kFrameHeaderBytes + tcp::kTagBytes;
  for (uint64_t at :
       {uint64_t{5}, header + 1000, header + tcp::kRecordBytes + 3,
        header + tcp::kRecordBytes + tcp::kTagBytes + tcp::kRecordBytes / 2 +
            7}) {
    std::vector<absl::Status> got =
        ThroughRelay(1, len, [at](uint64_t offset, std::string& bytes) {
          if (at >= offset && at < offset + bytes.size()) {
            bytes[at - offset] ^= 0x10;
          }
        });
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0].ok()) << "flipped byte at " << at << " not detected";
    EXPECT_THAT(got[0].message(),
                HasSubstr("failed authentication (tampered, or not from this "
                          "job)"))
        << got[0];
    EXPECT_THAT(got[0].message(), HasSubstr("rank 0"));
    EXPECT_THAT(got[0].message(), HasSubstr("rank 1"));
  }
}

TEST(TcpEncryption, ReplayedFrameFailsTheReceive) {
  // The first frame (header record + one payload record) is sent twice.
  const size_t len = 64;
  const uint64_t frame =
      tcp::kFrameHeaderBytes + tcp::kTagBytes + len + tcp::kTagBytes;
  std::string first;
  std::vector<absl::Status> got =
      ThroughRelay(2, len, [&](uint64_t offset, std::string& bytes) {
        if (offset >= frame) return;
        first += bytes.substr(0, frame - offset);
        if (first.size() == frame) {
          bytes.insert(frame - offset, first);
        }
      });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].ok()) << got[0];
  EXPECT_FALSE(got[1].ok()) << "a replayed frame was accepted";
  EXPECT_THAT(got[1].message(), HasSubstr("failed authentication")) << got[1];
}

}  // namespace
}  // namespace kolo
