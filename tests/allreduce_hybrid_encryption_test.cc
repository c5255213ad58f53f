// The hybrid transport with KOLO_DATA_ENCRYPTION=aes-256-gcm: two "hosts" of
// two ranks (threads of this process on loopback), shared memory within each
// host and encrypted TCP across. The collectives are exact on every rank;
// point-to-point messages across hosts are exact for sizes around the record
// boundaries; a bit flipped on a TCP connection across hosts (by a relay
// between rank 2 and rank 0) fails the receive with the authentication
// error, never a wrong result, while the same relay untouched passes the
// message exactly. Nothing hangs: every wait has a deadline.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/collectives.h"
#include "allreduce/tcp/record_cipher.h"
#include "allreduce/tcp/tcp_transport.h"
#include "allreduce/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allreduce_hybrid_test_world.h"
#include "tests/allreduce_tcp_test_mesh.h"
#include "tests/allreduce_tcp_test_relay.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::ConnectorHandshakeBytes;
using ::kolo::testing::Filled;
using ::kolo::testing::MakeHybridWorld;
using ::kolo::testing::Relay;
using ::kolo::testing::Scaled;
using ::kolo::testing::TestWorld;
using ::testing::HasSubstr;

using Transports = std::vector<std::unique_ptr<Transport>>;

const std::vector<std::vector<int>> kHosts = {{0, 1}, {2, 3}};

void Encrypt(TcpOptions& o) {
  o.encryption = DataEncryption::kAes256Gcm;
  o.timeout = Scaled(absl::Seconds(10));
}

// Runs fn(rank) for every rank in its own thread.
void OnEveryRank(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

TEST(HybridEncryption, CollectivesAreExactAcrossEncryptedHosts) {
  TestWorld world(4);
  Transports ts = MakeHybridWorld(world, kHosts, 1 << 20, Encrypt);
  ASSERT_EQ(ts.size(), 4u);
  uint64_t seq = 10;
  testing::ExpectExactAllreduces(
      ts,
      {0, 1, 4099, static_cast<int64_t>(tcp::kRecordBytes / 4 + 1),
       (1 << 20) + 3},
      &seq);
}

TEST(HybridEncryption, MessagesAcrossHostsAreExactAroundRecordBoundaries) {
  TestWorld world(4);
  Transports ts = MakeHybridWorld(world, kHosts, 1 << 20, Encrypt);
  ASSERT_EQ(ts.size(), 4u);
  const size_t r = tcp::kRecordBytes;
  uint64_t seq = 100;
  for (size_t len : {size_t{0}, size_t{1}, r - 1, r, r + 1, 3 * r + 5}) {
    // Every rank sends to the rank of the same local index on the other host
    // (across TCP) and to its local peer (shared memory), and receives both.
    ++seq;
    std::vector<absl::Status> st(4);
    std::vector<std::vector<uint8_t>> remote_in(4), local_in(4);
    OnEveryRank(4, [&](int me) {
      const int remote = (me + 2) % 4;
      const int local = me ^ 1;
      const std::vector<uint8_t> to_remote = Filled(len, me, remote);
      const std::vector<uint8_t> to_local = Filled(len, me, local);
      remote_in[me].assign(len, 0);
      local_in[me].assign(len, 0);
      ts[me]->BeginOperation(seq);
      std::vector<OpId> ops;
      for (absl::StatusOr<OpId> op :
           {ts[me]->StartRecv(remote, remote_in[me].data(), len),
            ts[me]->StartRecv(local, local_in[me].data(), len),
            ts[me]->StartSend(remote, to_remote.data(), len),
            ts[me]->StartSend(local, to_local.data(), len)}) {
        if (!op.ok()) {
          st[me] = op.status();
          return;
        }
        ops.push_back(*op);
      }
      for (OpId op : ops) {
        if (absl::Status s = ts[me]->Wait(op); !s.ok()) st[me] = s;
      }
    });
    for (int me = 0; me < 4; ++me) {
      ASSERT_TRUE(st[me].ok())
          << "rank " << me << ", " << len << " B: " << st[me];
      EXPECT_TRUE(remote_in[me] == Filled(len, (me + 2) % 4, me))
          << "rank " << me << " from its remote peer, " << len << " B";
      EXPECT_TRUE(local_in[me] == Filled(len, me ^ 1, me))
          << "rank " << me << " from its local peer, " << len << " B";
    }
  }
}

// Rank 2 (host 2) sends one message of `len` bytes to rank 0 (host 1) over
// a relay that flips one bit of the first record after the handshake when
// `tamper`; returns rank 0's receive status, and checks that a successful
// receive is exact.
absl::Status AcrossTheRelay(bool tamper, size_t len) {
  TestWorld world(4);
  Relay relay(world.listener(0).address, ConnectorHandshakeBytes(world, 2, 0),
              [tamper](uint64_t offset, std::string& bytes) {
                // Byte 5 of the data: inside the frame header's record.
                constexpr uint64_t kAt = 5;
                if (tamper && kAt >= offset && kAt < offset + bytes.size()) {
                  bytes[kAt - offset] ^= 0x10;
                }
              });
  Transports ts =
      MakeHybridWorld(world, kHosts, 1 << 20, [&relay](TcpOptions& o) {
        Encrypt(o);
        if (o.rank == 2) o.addresses[0] = relay.address();
      });
  EXPECT_EQ(ts.size(), 4u);
  if (ts.size() != 4u) return absl::InternalError("no hybrid world");
  const std::vector<uint8_t> sent = Filled(len, 2, 0);
  std::vector<uint8_t> got(len);
  absl::Status received = absl::UnknownError("not run");
  std::thread sender([&] {
    ts[2]->BeginOperation(1);
    absl::StatusOr<OpId> op = ts[2]->StartSend(0, sent.data(), len);
    if (op.ok()) (void)ts[2]->Wait(*op);  // fails when rank 0 closes
  });
  ts[0]->BeginOperation(1);
  absl::StatusOr<OpId> op = ts[0]->StartRecv(2, got.data(), len);
  received = op.ok() ? ts[0]->Wait(*op) : op.status();
  sender.join();
  if (received.ok()) {
    EXPECT_TRUE(got == sent) << "a receive reported success with wrong bytes";
  }
  return received;
}

TEST(HybridEncryption, ATamperedFrameAcrossHostsFailsTheReceive) {
  const size_t len = 2 * tcp::kRecordBytes + 9;
  // The relay itself changes nothing: untouched, the message is exact.
  absl::Status clean = AcrossTheRelay(/*tamper=*/false, len);
  EXPECT_TRUE(clean.ok()) << clean;
  absl::Status tampered = AcrossTheRelay(/*tamper=*/true, len);
  ASSERT_FALSE(tampered.ok()) << "a flipped bit across hosts was accepted";
  EXPECT_THAT(tampered.message(),
              HasSubstr("failed authentication (tampered, or not from this "
                        "job)"))
      << tampered;
  EXPECT_THAT(tampered.message(), HasSubstr("rank 0"));
  EXPECT_THAT(tampered.message(), HasSubstr("rank 2"));
}

}  // namespace
}  // namespace kolo
