// Tests of the length-prefixed frames of the negotiation link
// (common/framing.h): AppendFrame's wire layout, FrameDecoder round trips,
// frames split across Append calls, empty payloads, buffered(), and the
// oversize-length error that leaves the decoder broken for good.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

// Decodes every complete frame now in `d`; fails the test on an error.
std::vector<std::string> Drain(FrameDecoder& d) {
  std::vector<std::string> out;
  while (true) {
    absl::StatusOr<std::optional<std::string>> f = d.Next();
    EXPECT_TRUE(f.ok()) << f.status();
    if (!f.ok() || !f->has_value()) return out;
    out.push_back(std::move(**f));
  }
}

TEST(Framing, AppendFrameWritesBigEndianLengthThenPayload) {
  std::string out = "x";  // appends, keeps what was there
  AppendFrame("abc", &out);
  EXPECT_EQ(out, std::string("x\0\0\0\3abc", 8));
  std::string big;
  AppendFrame(std::string(0x010203, 'z'), &big);
  ASSERT_EQ(big.size(), 4u + 0x010203);
  EXPECT_EQ(big.substr(0, 4), std::string("\0\x01\x02\x03", 4));
}

TEST(Framing, RoundTripOfSeveralFrames) {
  const std::vector<std::string> payloads = {
      "hello", std::string(1, '\0'), std::string(70000, 'a'),
      std::string("\xff\x00\x7f", 3), "last"};
  std::string wire;
  for (const std::string& p : payloads) AppendFrame(p, &wire);
  FrameDecoder d;
  d.Append(wire.data(), wire.size());
  EXPECT_EQ(d.buffered(), wire.size());
  EXPECT_EQ(Drain(d), payloads);
  EXPECT_EQ(d.buffered(), 0u);
  // The decoder goes on after being drained.
  std::string more;
  AppendFrame("again", &more);
  d.Append(more.data(), more.size());
  EXPECT_EQ(Drain(d), std::vector<std::string>{"again"});
}

TEST(Framing, FrameSplitByteByByte) {
  const std::vector<std::string> payloads = {"first frame", "", "third"};
  std::string wire;
  for (const std::string& p : payloads) AppendFrame(p, &wire);
  FrameDecoder d;
  std::vector<std::string> got;
  for (size_t i = 0; i < wire.size(); ++i) {
    d.Append(&wire[i], 1);
    std::vector<std::string> now = Drain(d);
    got.insert(got.end(), now.begin(), now.end());
    // Nothing decoded is still counted; the rest is.
    size_t consumed = 0;
    for (const std::string& p : got) consumed += 4 + p.size();
    EXPECT_EQ(d.buffered(), i + 1 - consumed) << "after byte " << i;
  }
  EXPECT_EQ(got, payloads);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(Framing, EmptyPayload) {
  std::string wire;
  AppendFrame("", &wire);
  EXPECT_EQ(wire, std::string(4, '\0'));
  FrameDecoder d;
  d.Append(wire.data(), 3);
  absl::StatusOr<std::optional<std::string>> f = d.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->has_value()) << "3 of 4 length bytes are not a frame";
  d.Append(wire.data() + 3, 1);
  f = d.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ(**f, "");
  EXPECT_EQ(d.buffered(), 0u);
  f = d.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->has_value());
}

TEST(Framing, BufferedCountsUnreturnedBytes) {
  FrameDecoder d;
  EXPECT_EQ(d.buffered(), 0u);
  std::string wire;
  AppendFrame("abcdef", &wire);  // 10 bytes
  AppendFrame("gh", &wire);      // 6 bytes
  d.Append(wire.data(), 13);     // first frame whole, 3 bytes of the second
  EXPECT_EQ(d.buffered(), 13u);
  absl::StatusOr<std::optional<std::string>> f = d.Next();
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ(**f, "abcdef");
  EXPECT_EQ(d.buffered(), 3u);
  f = d.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->has_value());
  EXPECT_EQ(d.buffered(), 3u) << "a partial frame stays buffered";
  d.Append(wire.data() + 13, wire.size() - 13);
  EXPECT_EQ(d.buffered(), 6u);
  f = d.Next();
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ(**f, "gh");
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(Framing, LengthAtTheLimitIsAcceptedAndWaitsForItsBytes) {
  const uint32_t n = static_cast<uint32_t>(kMaxFrameBytes);
  const char len[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
  FrameDecoder d;
  d.Append(len, 4);
  absl::StatusOr<std::optional<std::string>> f = d.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->has_value());
}

TEST(Framing, LengthOverTheLimitIsDataLossAndStaysBroken) {
  const uint32_t n = static_cast<uint32_t>(kMaxFrameBytes + 1);
  const char len[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
  FrameDecoder d;
  std::string good;
  AppendFrame("ok", &good);
  d.Append(good.data(), good.size());
  d.Append(len, 4);
  absl::StatusOr<std::optional<std::string>> f = d.Next();
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value()) << "frames before the bad length still decode";
  EXPECT_EQ(**f, "ok");

  f = d.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(f.status().message(), HasSubstr(std::to_string(n)));
  EXPECT_THAT(f.status().message(), HasSubstr(std::to_string(kMaxFrameBytes)));

  // Valid frames after it do not repair the stream.
  std::string after;
  AppendFrame("later", &after);
  d.Append(after.data(), after.size());
  for (int i = 0; i < 3; ++i) {
    f = d.Next();
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(Framing, HugeLengthIsDataLoss) {
  FrameDecoder d;
  const char len[4] = {'\xff', '\xff', '\xff', '\xff'};
  d.Append(len, 4);
  absl::StatusOr<std::optional<std::string>> f = d.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
}

TEST(Framing, ManyFramesThroughOneDecoderInChunks) {
  // Enough traffic to pass the decoder's 1 MiB compaction point, fed in
  // chunks that do not line up with frame boundaries.
  std::vector<std::string> payloads;
  std::string wire;
  for (int i = 0; i < 3000; ++i) {
    payloads.push_back(std::string(static_cast<size_t>(i % 1500),
                                   static_cast<char>('a' + i % 26)) +
                       std::to_string(i));
    AppendFrame(payloads.back(), &wire);
  }
  FrameDecoder d;
  std::vector<std::string> got;
  size_t off = 0, chunk = 1;
  while (off < wire.size()) {
    const size_t n = std::min(chunk, wire.size() - off);
    d.Append(wire.data() + off, n);
    off += n;
    chunk = chunk * 7 % 4099 + 1;
    std::vector<std::string> now = Drain(d);
    got.insert(got.end(), now.begin(), now.end());
  }
  EXPECT_EQ(got, payloads);
  EXPECT_EQ(d.buffered(), 0u);
}

}  // namespace
}  // namespace kolo
