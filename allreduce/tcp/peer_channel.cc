#include "allreduce/tcp/peer_channel.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kolo::tcp {
namespace {

// Queued sends gathered into one sendmsg (two iovecs each).
constexpr size_t kMaxSendBatch = 32;

}  // namespace

PeerChannel::PeerChannel(net::UniqueFd fd, uint64_t epoch, std::string self,
                         std::string peer, std::unique_ptr<RecordCipher> seal,
                         std::unique_ptr<RecordCipher> open)
    : fd_(std::move(fd)),
      epoch_(epoch),
      self_(std::move(self)),
      peer_(std::move(peer)),
      seal_(std::move(seal)),
      open_(std::move(open)) {}

void PeerChannel::PushSend(OpId id, uint64_t seq, const void* data,
                           size_t len) {
  Op op;
  op.id = id;
  op.seq = seq;
  // Never written through: the op only reads from a send buffer.
  op.data = static_cast<char*>(const_cast<void*>(data));
  op.len = len;
  EncodeFrameHeader(FrameHeader{kFrameMagic, 0, epoch_, seq, len}, op.header);
  sends_.push_back(op);
}

void PeerChannel::PushRecv(OpId id, uint64_t seq, void* data, size_t len) {
  Op op;
  op.id = id;
  op.seq = seq;
  op.data = static_cast<char*>(data);
  op.len = len;
  recvs_.push_back(op);
}

void PeerChannel::OnEvent(uint32_t events) {
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) can_read_ = true;
  if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) can_write_ = true;
}

size_t PeerChannel::Progress(std::vector<std::pair<OpId, absl::Status>>* done) {
  size_t moved = 0;
  if (seal_ != nullptr) {
    if (!sends_.empty() && can_write_) moved += ProgressSealedSends(done);
    if (!recvs_.empty() && can_read_) moved += ProgressSealedRecvs(done);
    return moved;
  }
  if (!sends_.empty() && can_write_) moved += ProgressSends(done);
  if (!recvs_.empty() && can_read_) moved += ProgressRecvs(done);
  return moved;
}

void PeerChannel::Fail(absl::Status error,
                       std::vector<std::pair<OpId, absl::Status>>* done) {
  if (error_.ok()) error_ = std::move(error);
  for (const Op& op : sends_) done->emplace_back(op.id, error_);
  for (const Op& op : recvs_) done->emplace_back(op.id, error_);
  sends_.clear();
  recvs_.clear();
  sealing_ = 0;
  fd_.Reset();
}

absl::Status PeerChannel::SendError(int err) const {
  return absl::UnavailableError(absl::StrCat(
      self_, ": sending to ", peer_, " failed: ", std::strerror(err),
      err == EPIPE || err == ECONNRESET
          ? " (the peer closed the connection: did it exit or fail?)"
          : ""));
}

absl::Status PeerChannel::RecvError(ssize_t n, int err) const {
  if (n == 0) {
    return absl::UnavailableError(
        absl::StrCat(peer_, " closed the connection while ", self_,
                     " was receiving from it (did it exit or fail?)"));
  }
  return absl::UnavailableError(absl::StrCat(self_, ": receiving from ", peer_,
                                             " failed: ", std::strerror(err)));
}

size_t PeerChannel::ProgressSends(
    std::vector<std::pair<OpId, absl::Status>>* done) {
  size_t total = 0;
  iovec iov[2 * kMaxSendBatch];
  while (!sends_.empty() && can_write_) {
    size_t niov = 0;
    size_t want = 0;
    for (size_t i = 0; i < sends_.size() && i < kMaxSendBatch; ++i) {
      Op& op = sends_[i];
      if (op.moved < kFrameHeaderBytes) {
        iov[niov++] = {op.header + op.moved, kFrameHeaderBytes - op.moved};
      }
      size_t off =
          op.moved > kFrameHeaderBytes ? op.moved - kFrameHeaderBytes : 0;
      if (off < op.len) iov[niov++] = {op.data + off, op.len - off};
    }
    for (size_t i = 0; i < niov; ++i) want += iov[i].iov_len;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = niov;
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        can_write_ = false;
        break;
      }
      Fail(SendError(errno), done);
      break;
    }
    size_t left = static_cast<size_t>(n);
    total += left;
    if (left < want) can_write_ = false;
    while (left > 0) {  // left <= the bytes the queued sends still need
      Op& op = sends_.front();
      size_t take = std::min(left, kFrameHeaderBytes + op.len - op.moved);
      op.moved += take;
      left -= take;
      if (op.moved == kFrameHeaderBytes + op.len) {
        done->emplace_back(op.id, absl::OkStatus());
        sends_.pop_front();
      } else {
        break;
      }
    }
  }
  return total;
}

size_t PeerChannel::ProgressRecvs(
    std::vector<std::pair<OpId, absl::Status>>* done) {
  size_t total = 0;
  while (!recvs_.empty() && can_read_) {
    Op& op = recvs_.front();
    iovec iov[2];
    size_t niov = 0;
    if (op.moved < kFrameHeaderBytes) {
      iov[niov++] = {op.header + op.moved, kFrameHeaderBytes - op.moved};
    }
    size_t off =
        op.moved > kFrameHeaderBytes ? op.moved - kFrameHeaderBytes : 0;
    if (off < op.len) iov[niov++] = {op.data + off, op.len - off};
    size_t want = kFrameHeaderBytes + op.len - op.moved;
    ssize_t n = ::readv(fd_.get(), iov, static_cast<int>(niov));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        can_read_ = false;
        break;
      }
      Fail(RecvError(n, errno), done);
      break;
    }
    if (n == 0) {
      Fail(RecvError(n, 0), done);
      break;
    }
    bool had_header = op.moved >= kFrameHeaderBytes;
    op.moved += static_cast<size_t>(n);
    total += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < want) can_read_ = false;
    if (!had_header && op.moved >= kFrameHeaderBytes) {
      std::string mismatch =
          FrameMismatch(DecodeFrameHeader(op.header), epoch_, op.seq, op.len);
      if (!mismatch.empty()) {
        Fail(absl::InternalError(
                 absl::StrCat(self_, ": the message from ", peer_,
                              " does not match the posted receive: ", mismatch,
                              " (the ranks are running different operations or "
                              "arguments)")),
             done);
        break;
      }
    }
    if (op.moved == kFrameHeaderBytes + op.len) {
      done->emplace_back(op.id, absl::OkStatus());
      recvs_.pop_front();
    }
  }
  return total;
}

}  // namespace kolo::tcp
