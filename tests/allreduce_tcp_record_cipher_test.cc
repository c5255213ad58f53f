// RecordCipher and DeriveDirectionKey (allreduce/tcp/record_cipher.h): a
// round trip, a bit flipped anywhere (header, payload, tag) refused, a
// replayed or reordered record refused, keys distinct per direction, epoch
// and connection, the nonce layout and the record limit.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "allreduce/tcp/frame.h"
#include "allreduce/tcp/record_cipher.h"
#include "gtest/gtest.h"

namespace kolo::tcp {
namespace {

constexpr char kSecret[] = "s3cret";
const std::string kNonceC(32, 'c');
const std::string kNonceA(32, 'a');

RecordKey Key(uint32_t from = 1, uint32_t to = 0, uint64_t epoch = 4,
              const std::string& nonce_c = kNonceC,
              const std::string& nonce_a = kNonceA,
              const std::string& secret = kSecret) {
  return DeriveDirectionKey(secret, "job-1", epoch, from, to, nonce_c, nonce_a);
}

struct Sealed {
  std::vector<uint8_t> bytes;
  uint8_t tag[kTagBytes];
};

Sealed SealOne(RecordCipher& c, const std::vector<uint8_t>& plain) {
  Sealed s;
  s.bytes.resize(plain.size());
  EXPECT_TRUE(c.Seal(plain.data(), plain.size(), s.bytes.data(), s.tag).ok());
  return s;
}

std::vector<uint8_t> Bytes(size_t n, int salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + salt);
  return v;
}

TEST(RecordCipher, RoundTripInPlaceAndOutOfPlace) {
  RecordCipher seal(Key(), RecordCipher::Direction::kSeal);
  RecordCipher open(Key(), RecordCipher::Direction::kOpen);
  for (size_t len :
       {size_t{0}, size_t{1}, size_t{32}, size_t{4099}, kRecordBytes}) {
    std::vector<uint8_t> plain = Bytes(len, static_cast<int>(len));
    Sealed s = SealOne(seal, plain);
    if (len >= 16) {
      EXPECT_NE(s.bytes, plain) << "not encrypted, len " << len;
    }
    std::vector<uint8_t> out(len);
    ASSERT_TRUE(open.Open(s.bytes.data(), len, out.data(), s.tag)) << len;
    EXPECT_EQ(out, plain);
  }
  // In place, as the channel decrypts in the user's buffer.
  std::vector<uint8_t> plain = Bytes(1000, 9);
  Sealed s = SealOne(seal, plain);
  ASSERT_TRUE(open.Open(s.bytes.data(), 1000, s.bytes.data(), s.tag));
  EXPECT_EQ(s.bytes, plain);
  EXPECT_EQ(seal.records(), 6u);
  EXPECT_EQ(open.records(), 6u);
}

// A bit flipped in a header record, a payload record or a tag: refused.
TEST(RecordCipher, AnyFlippedBitIsRefused) {
  uint8_t header[kFrameHeaderBytes];
  EncodeFrameHeader(FrameHeader{kFrameMagic, 0, 4, 7, 100}, header);
  const std::vector<uint8_t> records[] = {
      std::vector<uint8_t>(header, header + kFrameHeaderBytes), Bytes(4099, 3)};
  for (const auto& plain : records) {
    const size_t len = plain.size();
    for (size_t bit : {size_t{0}, size_t{13}, len * 8 - 1, len * 8,
                       len * 8 + 77, (len + kTagBytes) * 8 - 1}) {
      RecordCipher seal(Key(), RecordCipher::Direction::kSeal);
      RecordCipher open(Key(), RecordCipher::Direction::kOpen);
      Sealed s = SealOne(seal, plain);
      if (bit < len * 8) {
        s.bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      } else {
        size_t t = bit - len * 8;
        s.tag[t / 8] ^= static_cast<uint8_t>(1u << (t % 8));
      }
      std::vector<uint8_t> out(len);
      EXPECT_FALSE(open.Open(s.bytes.data(), len, out.data(), s.tag))
          << "record of " << len << " bytes, bit " << bit;
    }
  }
}

// The receiver's counter moves on: the same record again (a replay) or
// the records swapped (a reorder) fail.
TEST(RecordCipher, ReplayedAndReorderedRecordsAreRefused) {
  RecordCipher seal(Key(), RecordCipher::Direction::kSeal);
  Sealed first = SealOne(seal, Bytes(64, 1));
  Sealed second = SealOne(seal, Bytes(64, 2));
  std::vector<uint8_t> out(64);
  {
    RecordCipher open(Key(), RecordCipher::Direction::kOpen);
    ASSERT_TRUE(open.Open(first.bytes.data(), 64, out.data(), first.tag));
    EXPECT_FALSE(open.Open(first.bytes.data(), 64, out.data(), first.tag))
        << "a replayed record was accepted";
  }
  {
    RecordCipher open(Key(), RecordCipher::Direction::kOpen);
    EXPECT_FALSE(open.Open(second.bytes.data(), 64, out.data(), second.tag))
        << "a reordered record was accepted";
  }
}

TEST(RecordCipher, KeysDifferPerDirectionEpochConnectionAndSecret) {
  const RecordKey base = Key();
  EXPECT_EQ(base, Key()) << "derivation is not deterministic";
  EXPECT_NE(base, Key(0, 1)) << "both directions share a key";
  EXPECT_NE(base, Key(1, 0, 5)) << "two epochs share a key";
  EXPECT_NE(base, Key(1, 0, 4, std::string(32, 'd'))) << "connector nonce";
  EXPECT_NE(base, Key(1, 0, 4, kNonceC, std::string(32, 'b')))
      << "acceptor nonce";
  EXPECT_NE(base, Key(2, 0)) << "two connections share a key";
  EXPECT_NE(base, Key(1, 0, 4, kNonceC, kNonceA, "other")) << "secret";
  EXPECT_NE(base,
            DeriveDirectionKey(kSecret, "job-2", 4, 1, 0, kNonceC, kNonceA))
      << "job";
  // A record sealed with the other direction's key does not open.
  RecordCipher seal(Key(0, 1), RecordCipher::Direction::kSeal);
  RecordCipher open(Key(1, 0), RecordCipher::Direction::kOpen);
  Sealed s = SealOne(seal, Bytes(64, 5));
  std::vector<uint8_t> out(64);
  EXPECT_FALSE(open.Open(s.bytes.data(), 64, out.data(), s.tag));
}

TEST(RecordCipher, NonceIsTheCounterAndTheLimitHolds) {
  auto n = RecordNonce(0x0102030405060708ull);
  const uint8_t want[kRecordNonceBytes] = {0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_TRUE(std::equal(n.begin(), n.end(), want));
  RecordCipher seal(Key(), RecordCipher::Direction::kSeal);
  RecordCipher open(Key(), RecordCipher::Direction::kOpen);
  seal.SetCounterForTest(kMaxRecords - 1);
  open.SetCounterForTest(kMaxRecords - 1);
  Sealed s = SealOne(seal, Bytes(8, 1));
  std::vector<uint8_t> out(8);
  EXPECT_TRUE(open.Open(s.bytes.data(), 8, out.data(), s.tag));
  uint8_t tag[kTagBytes];
  absl::Status st = seal.Seal(out.data(), 8, out.data(), tag);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_FALSE(open.Open(s.bytes.data(), 8, out.data(), s.tag));
}

}  // namespace
}  // namespace kolo::tcp
