// PeerChannel's encrypted path (KOLO_DATA_ENCRYPTION): frames as AEAD
// records, see peer_channel.h for the layout and record_cipher.h for the
// keys and nonces.
//
// Sending: FillSealed() seals the queued sends, in order, into out_ (header
// record, then payload records) while a whole record fits; the bytes are
// sent from there, and a send completes once the stream is sent past its
// last record. out_ holds kRecordsPerFill payload records (one send call
// each fill), so a 64 MiB frame never needs more than kOutBytes of memory.
//
// Receiving, for the front receive: the header record alone into
// in_header_, then up to kRecordsPerRead payload records per readv, their
// ciphertext straight into the user's buffer and their tags into in_tags_.
// Complete records are opened (in place) in order after each readv; the
// first that fails its tag fails the channel, and nothing after it is
// decrypted.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "allreduce/tcp/peer_channel.h"

namespace kolo::tcp {
namespace {

constexpr size_t kHeaderRecordBytes = kFrameHeaderBytes + kTagBytes;
// Payload records sealed per fill (fewer, larger send calls), and the
// buffer that holds them with their tags, plus a header record.
constexpr size_t kRecordsPerFill = 4;
constexpr size_t kOutBytes =
    kHeaderRecordBytes + kRecordsPerFill * (kRecordBytes + kTagBytes);

}  // namespace

absl::Status PeerChannel::FillSealed() {
  if (out_.empty()) out_.resize(kOutBytes);
  out_off_ = 0;
  out_len_ = 0;
  while (sealing_ < sends_.size()) {
    Op& op = sends_[sealing_];
    if (op.moved == 0) {
      if (out_len_ + kHeaderRecordBytes > out_.size()) break;
      uint8_t* dst = out_.data() + out_len_;
      absl::Status s = seal_->Seal(op.header, kFrameHeaderBytes, dst,
                                   dst + kFrameHeaderBytes);
      if (!s.ok()) return s;
      out_len_ += kHeaderRecordBytes;
      op.moved = kFrameHeaderBytes;
    }
    while (op.moved < kFrameHeaderBytes + op.len) {
      const size_t off = op.moved - kFrameHeaderBytes;
      const size_t rec = std::min(kRecordBytes, op.len - off);
      if (out_len_ + rec + kTagBytes > out_.size()) break;
      uint8_t* dst = out_.data() + out_len_;
      absl::Status s = seal_->Seal(
          reinterpret_cast<const uint8_t*>(op.data) + off, rec, dst, dst + rec);
      if (!s.ok()) return s;
      out_len_ += rec + kTagBytes;
      op.moved += rec;
    }
    if (op.moved < kFrameHeaderBytes + op.len) break;  // out_ is full
    op.wire_end = out_sealed_ + out_len_;
    ++sealing_;
  }
  out_sealed_ += out_len_;
  return absl::OkStatus();
}

size_t PeerChannel::ProgressSealedSends(
    std::vector<std::pair<OpId, absl::Status>>* done) {
  size_t total = 0;
  while (can_write_) {
    if (out_off_ == out_len_) {
      if (sealing_ == sends_.size()) break;
      if (absl::Status s = FillSealed(); !s.ok()) {
        Fail(absl::Status(s.code(), absl::StrCat(self_, ": sending to ", peer_,
                                                 ": ", s.message())),
             done);
        break;
      }
    }
    const size_t want = out_len_ - out_off_;
    ssize_t n = ::send(fd_.get(), out_.data() + out_off_, want, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        can_write_ = false;
        break;
      }
      Fail(SendError(errno), done);
      break;
    }
    out_off_ += static_cast<size_t>(n);
    out_sent_ += static_cast<uint64_t>(n);
    total += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < want) can_write_ = false;
    while (sealing_ > 0 && sends_.front().wire_end <= out_sent_) {
      done->emplace_back(sends_.front().id, absl::OkStatus());
      sends_.pop_front();
      --sealing_;
    }
  }
  return total;
}

absl::Status PeerChannel::OpenRecord(Op& op) {
  const absl::Status tampered = absl::UnavailableError(absl::StrCat(
      self_, ": a frame from ", peer_,
      " failed authentication (tampered, or not from this job); the "
      "connection is closed. Something between the two hosts altered, "
      "replayed or injected data-plane bytes, or the peer's data "
      "encryption keys differ"));
  if (op.moved < kFrameHeaderBytes) {
    if (!open_->Open(in_header_, kFrameHeaderBytes, op.header,
                     in_header_ + kFrameHeaderBytes)) {
      return tampered;
    }
    std::string mismatch =
        FrameMismatch(DecodeFrameHeader(op.header), epoch_, op.seq, op.len);
    if (!mismatch.empty()) {
      return absl::InternalError(absl::StrCat(
          self_, ": the message from ", peer_,
          " does not match the posted receive: ", mismatch,
          " (the ranks are running different operations or arguments)"));
    }
    op.moved = kFrameHeaderBytes;
    return absl::OkStatus();
  }
  const size_t off = op.moved - kFrameHeaderBytes;
  const size_t rec = std::min(kRecordBytes, op.len - off);
  uint8_t* p = reinterpret_cast<uint8_t*>(op.data) + off;
  if (!open_->Open(p, rec, p,
                   in_tags_[(off / kRecordBytes) % kRecordsPerRead])) {
    return tampered;
  }
  op.moved += rec;
  return absl::OkStatus();
}

size_t PeerChannel::ProgressSealedRecvs(
    std::vector<std::pair<OpId, absl::Status>>* done) {
  size_t total = 0;
  while (!recvs_.empty() && can_read_) {
    Op& op = recvs_.front();
    // The header record alone (it says whether the payload may follow), or
    // up to kRecordsPerRead payload records: ciphertext straight into the
    // user's buffer, tags into their slots.
    iovec iov[2 * kRecordsPerRead];
    size_t niov = 0;
    size_t want = 0;
    size_t skip = in_got_;
    auto add = [&](void* base, size_t len) {
      if (skip >= len) {
        skip -= len;
        return;
      }
      iov[niov++] = {static_cast<char*>(base) + skip, len - skip};
      want += len - skip;
      skip = 0;
    };
    if (op.moved < kFrameHeaderBytes) {
      add(in_header_, kHeaderRecordBytes);
    } else {
      size_t off = op.moved - kFrameHeaderBytes;
      for (size_t i = 0; i < kRecordsPerRead && off < op.len; ++i) {
        const size_t rec = std::min(kRecordBytes, op.len - off);
        add(op.data + off, rec);
        add(in_tags_[(off / kRecordBytes) % kRecordsPerRead], kTagBytes);
        off += rec;
      }
    }
    ssize_t n = ::readv(fd_.get(), iov, static_cast<int>(niov));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      can_read_ = false;
      break;
    }
    if (n <= 0) {
      Fail(RecvError(n, n < 0 ? errno : 0), done);
      break;
    }
    in_got_ += static_cast<size_t>(n);
    total += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < want) can_read_ = false;
    // Opens every complete record, in order.
    bool failed = false;
    while (op.moved < kFrameHeaderBytes ||
           op.moved < kFrameHeaderBytes + op.len) {
      const size_t wire =
          op.moved < kFrameHeaderBytes
              ? kHeaderRecordBytes
              : std::min(kRecordBytes,
                         op.len - (op.moved - kFrameHeaderBytes)) +
                    kTagBytes;
      if (in_got_ < wire) break;
      in_got_ -= wire;
      if (absl::Status s = OpenRecord(op); !s.ok()) {
        Fail(std::move(s), done);
        failed = true;
        break;
      }
    }
    if (failed) break;
    if (op.moved == kFrameHeaderBytes + op.len) {
      done->emplace_back(op.id, absl::OkStatus());
      recvs_.pop_front();
    }
  }
  return total;
}

}  // namespace kolo::tcp
