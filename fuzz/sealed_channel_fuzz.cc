// Fuzz target: the receiving side of an encrypted data-plane connection
// (KOLO_DATA_ENCRYPTION=aes-256-gcm): tcp::PeerChannel's record receiver and
// decryptor (peer_channel_sealed.cc), reading a real socket, with a fixed
// key. The input is a script read front to back (fuzz/byte_reader.h):
//
//   nframes U8 (0..4), then per frame: kind U8, low U16, post U8
//       frame k carries R * kRecordBytes + low payload bytes, R = 0, 1, 2
//       or 5 as kind % 4 (5: more records than one read takes), sealed
//       by the harness with the key (header record, payload records) at
//       seq 100 + k; post % 4 == 1 posts the receive with another seq,
//       == 2 with another length, else as sent
//   nextra U8 (0..2), then per extra receive: len U16 (% 1024), seq U8
//   chunk U16: the stream is written to the socket chunk + 1 bytes at a time
//       (at least 1/256 of it)
//   mode U8 % 3:
//     0: the sealed frames, then the rest of the input (raw bytes)
//     1: the sealed frames edited, then the rest: nedits U8 (0..4), each
//        kind U8 % 4 (flip, insert, erase, truncate), at U16 U8 (24 bits,
//        modulo the stream's size + 1), with a flip's xor U8 (made odd), an
//        insert's Blob, an erase's length U16
//     2: the rest of the input alone
//
// Every receive is posted before the first byte arrives; the writer closes
// after the last. Checked, with `m` the length of the common prefix of the
// bytes delivered and the sealed frames:
// - the channel never crashes, and every posted receive completes exactly
//   once (the end of the stream fails those left);
// - a receive succeeds if and only if it is one of the sealed frames, it
//   and every frame before it were posted as sent, and the frame ends at or
//   before `m`: bytes not sealed with the key (raw, edited, another
//   connection's) never complete a receive, and correctly sealed frames are
//   always decoded;
// - a successful receive holds exactly the payload that was sealed.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/tcp/frame.h"
#include "allreduce/tcp/peer_channel.h"
#include "allreduce/tcp/record_cipher.h"
#include "allreduce/transport.h"
#include "common/check.h"
#include "common/unique_fd.h"
#include "fuzz/byte_reader.h"

namespace {

using kolo::OpId;
using kolo::tcp::kFrameHeaderBytes;
using kolo::tcp::kRecordBytes;
using kolo::tcp::kTagBytes;
using kolo::tcp::RecordCipher;
using kolo::tcp::RecordKey;

constexpr uint64_t kEpoch = 7;
constexpr uint64_t kFirstSeq = 100;
constexpr uint8_t kPoison = 0xa5;

RecordKey Key() {
  RecordKey k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 7 + 1);
  return k;
}

// Whole records in front of a frame's `low` bytes, by kind % 4.
constexpr size_t kRecordsByKind[4] = {0, 1, 2, 5};
// Most payload bytes of one frame.
constexpr size_t kMaxPayload = 5 * kRecordBytes + 0xffff;

// The first `len` bytes of frame `frame`'s payload pattern (made once: the
// fuzzer runs each input in a fraction of a millisecond).
std::vector<uint8_t> Payload(size_t len, size_t frame) {
  static const std::vector<std::vector<uint8_t>>* const patterns = [] {
    auto* p = new std::vector<std::vector<uint8_t>>(4);
    for (size_t f = 0; f < p->size(); ++f) {
      (*p)[f].resize(kMaxPayload);
      for (size_t i = 0; i < kMaxPayload; ++i) {
        (*p)[f][i] = static_cast<uint8_t>(i * 31 + i / 253 + f * 7);
      }
    }
    return p;
  }();
  const std::vector<uint8_t>& p = (*patterns)[frame];
  return std::vector<uint8_t>(p.begin(),
                              p.begin() + static_cast<ptrdiff_t>(len));
}

// Appends frame (seq, payload) sealed by `seal` to `wire`, as a sending
// PeerChannel lays it out: the header record, then the payload records.
void AppendSealed(RecordCipher& seal, uint64_t seq,
                  const std::vector<uint8_t>& payload, std::string& wire) {
  uint8_t header[kFrameHeaderBytes];
  kolo::tcp::EncodeFrameHeader(
      {.epoch = kEpoch, .seq = seq, .length = payload.size()}, header);
  std::vector<uint8_t> record(kRecordBytes + kTagBytes);
  KOLO_CHECK(seal.Seal(header, kFrameHeaderBytes, record.data(),
                       record.data() + kFrameHeaderBytes)
                 .ok());
  wire.append(reinterpret_cast<const char*>(record.data()),
              kFrameHeaderBytes + kTagBytes);
  for (size_t off = 0; off < payload.size(); off += kRecordBytes) {
    const size_t n = std::min(kRecordBytes, payload.size() - off);
    KOLO_CHECK(
        seal.Seal(payload.data() + off, n, record.data(), record.data() + n)
            .ok());
    wire.append(reinterpret_cast<const char*>(record.data()), n + kTagBytes);
  }
}

// One posted receive.
struct Receive {
  uint64_t seq = 0;
  std::vector<uint8_t> buf;
  bool may_succeed = false;   // the oracle's verdict
  std::vector<uint8_t> sent;  // the sealed payload (may_succeed only)
  int completions = 0;
  absl::Status status;
};

// Applies mode 1's edits to `wire`.
void Edit(kolo::fuzz::ByteReader& in, std::string& wire) {
  const int edits = in.Pick(0, 4);
  for (int e = 0; e < edits; ++e) {
    const int kind = in.U8() % 4;
    const size_t at = ((size_t{in.U16()} << 8) | in.U8()) % (wire.size() + 1);
    switch (kind) {
      case 0:  // flip (odd xor: never a no-op)
        if (at < wire.size()) wire[at] ^= static_cast<char>(in.U8() | 1);
        break;
      case 1:
        wire.insert(at, in.Blob());
        break;
      case 2:
        wire.erase(at, in.U16());
        break;
      default:
        wire.resize(at);
        break;
    }
  }
}

// Writes `wire` into `writer` in chunks of `chunk` bytes while the channel
// reads, then closes the writer and lets the channel finish.
void Deliver(const std::string& wire, size_t chunk, kolo::net::UniqueFd writer,
             kolo::tcp::PeerChannel& channel,
             std::vector<std::pair<OpId, absl::Status>>& done) {
  size_t off = 0;
  while (off < wire.size() && channel.error().ok() && channel.has_recvs()) {
    const size_t n = std::min(chunk, wire.size() - off);
    const ssize_t w =
        ::send(writer.get(), wire.data() + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) off += static_cast<size_t>(w);
    channel.OnEvent(EPOLLIN);
    const size_t moved = channel.Progress(&done);
    // A full socket that a channel with pending receives does not read
    // would never drain: a hang, which is a finding.
    KOLO_CHECK(w > 0 || moved > 0 || !channel.error().ok() ||
               !channel.has_recvs());
  }
  writer.Reset();
  // What is left in the socket, then the end of the stream.
  for (int i = 0; channel.has_recvs() && i < 1 << 16; ++i) {
    channel.OnEvent(EPOLLIN | EPOLLRDHUP);
    channel.Progress(&done);
  }
  KOLO_CHECK(!channel.has_recvs());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::ByteReader in(data, size);
  RecordCipher seal(Key(), RecordCipher::Direction::kSeal);

  // The frames sealed with the key, and the receives posted for them.
  std::string sealed;
  std::vector<size_t> frame_end;
  std::vector<Receive> receives;
  const int frames = in.Pick(0, 4);
  for (int k = 0; k < frames; ++k) {
    const size_t len = kRecordsByKind[in.U8() % 4] * kRecordBytes + in.U16();
    const int post = in.U8() % 4;
    const uint64_t seq = kFirstSeq + static_cast<uint64_t>(k);
    Receive r;
    r.sent = Payload(len, static_cast<size_t>(k));
    AppendSealed(seal, seq, r.sent, sealed);
    frame_end.push_back(sealed.size());
    r.seq = post == 1 ? seq + 1000 : seq;
    r.buf.assign(post == 2 ? len + 1 : len, kPoison);
    r.may_succeed = post != 1 && post != 2;
    receives.push_back(std::move(r));
  }
  const int extras = in.Pick(0, 2);
  for (int e = 0; e < extras; ++e) {
    Receive r;
    r.buf.assign(in.U16() % 1024, kPoison);
    r.seq = in.U8();
    receives.push_back(std::move(r));
  }
  // At most about 256 writes per input, so that a large stream cut into
  // tiny chunks does not slow the fuzzer down.
  size_t chunk = size_t{in.U16()} + 1;

  std::string wire;
  switch (in.U8() % 3) {
    case 0:
      wire = sealed + in.Rest();
      break;
    case 1:
      wire = sealed;
      Edit(in, wire);
      wire += in.Rest();
      break;
    default:
      wire = in.Rest();
      break;
  }

  // The oracle: frame k may complete only if it lies within the common
  // prefix and it and every frame before it were posted as sent.
  size_t common = 0;
  while (common < wire.size() && common < sealed.size() &&
         wire[common] == sealed[common]) {
    ++common;
  }
  bool in_order = true;
  for (int k = 0; k < frames; ++k) {
    in_order = in_order && receives[k].may_succeed;
    receives[k].may_succeed = in_order && frame_end[k] <= common;
  }

  int fds[2];
  KOLO_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
  kolo::net::UniqueFd reader(fds[0]);
  kolo::net::UniqueFd writer(fds[1]);
  // The channel's own sending direction is never used here.
  RecordKey other = Key();
  other[0] ^= 1;
  kolo::tcp::PeerChannel channel(
      std::move(reader), kEpoch, "rank 0 (fuzz)", "rank 1 (fuzz)",
      std::make_unique<RecordCipher>(other, RecordCipher::Direction::kSeal),
      std::make_unique<RecordCipher>(Key(), RecordCipher::Direction::kOpen));
  for (size_t i = 0; i < receives.size(); ++i) {
    channel.PushRecv(static_cast<OpId>(i), receives[i].seq,
                     receives[i].buf.data(), receives[i].buf.size());
  }
  std::vector<std::pair<OpId, absl::Status>> done;
  chunk = std::max(chunk, wire.size() / 256);
  Deliver(wire, chunk, std::move(writer), channel, done);

  for (const auto& [id, status] : done) {
    KOLO_CHECK(id < receives.size());
    Receive& r = receives[id];
    ++r.completions;
    r.status = status;
  }
  for (const Receive& r : receives) {
    KOLO_CHECK(r.completions == 1);
    // Success exactly when the oracle allows it, with exactly the bytes
    // that were sealed.
    KOLO_CHECK(r.status.ok() == r.may_succeed);
    if (r.status.ok()) KOLO_CHECK(r.buf == r.sent);
  }
  return 0;
}
