// PeerChannel: one authenticated connection to one peer rank, with its FIFO
// queues of pending sends and receives (several may be pending each way).
//
// Each message is one frame (frame.h). Progress() moves as many bytes as the
// socket takes without blocking, straight between the socket and the user's
// buffers (sendmsg/readv of header + payload, several queued sends per call).
// Readiness is edge-triggered: OnEvent() records what epoll reported, and a
// short or EAGAIN transfer clears it, so Progress() never issues a syscall
// that cannot move bytes.
//
// Errors (the peer closed, a frame that does not match the posted receive, a
// socket error) fail the channel: every pending op completes with the error,
// which names this rank and the peer; later Push* complete at once with it.
// A framing error poisons the stream, since its bytes can no longer be
// trusted to start at a frame.
//
// Encrypted channels (KOLO_DATA_ENCRYPTION, given a sealing and an opening
// RecordCipher) carry each frame as records (record_cipher.h): the 32-byte
// header as one record (48 bytes with its tag), then the payload cut into
// records of kRecordBytes (the last one shorter), each followed by its tag.
// The sender seals records into a buffer of a few records (small frames
// packed together) and sends from there; the receiver reads the records'
// ciphertext straight into the user's buffer and decrypts each in place
// once its tag is in. The header is opened and checked before any
// payload is read, and a receive completes only when its last record's tag
// verified: a record that fails its tag (tampered, replayed, reordered, or
// not from this job) fails the channel like a broken peer, and the user's
// buffer then holds unspecified bytes of that frame, never a success.
// Implemented in peer_channel_sealed.cc; the plaintext path is untouched.
//
// Thread-safety: owned and used by the transport's thread only.
#ifndef KOLO_ALLREDUCE_TCP_PEER_CHANNEL_H_
#define KOLO_ALLREDUCE_TCP_PEER_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/tcp/frame.h"
#include "allreduce/tcp/record_cipher.h"
#include "allreduce/transport.h"
#include "common/unique_fd.h"

namespace kolo::tcp {

class PeerChannel {
 public:
  // `self` and `peer` name the two ends in messages, e.g. "rank 1 (worker
  // w1, 127.0.0.1:4567)". With `seal` and `open` (both or neither), frames
  // are encrypted and authenticated.
  PeerChannel(net::UniqueFd fd, uint64_t epoch, std::string self,
              std::string peer, std::unique_ptr<RecordCipher> seal = nullptr,
              std::unique_ptr<RecordCipher> open = nullptr);

  int fd() const { return fd_.get(); }
  const std::string& peer_name() const { return peer_; }
  bool has_sends() const { return !sends_.empty(); }
  bool has_recvs() const { return !recvs_.empty(); }
  const absl::Status& error() const { return error_; }

  void PushSend(OpId id, uint64_t seq, const void* data, size_t len);
  void PushRecv(OpId id, uint64_t seq, void* data, size_t len);

  // Records readiness reported by epoll.
  void OnEvent(uint32_t events);
  // Moves bytes while possible. Appends finished ops (with their status) to
  // `done` and returns the number of bytes moved.
  size_t Progress(std::vector<std::pair<OpId, absl::Status>>* done);

 private:
  struct Op {
    OpId id = 0;
    uint64_t seq = 0;
    char* data = nullptr;
    size_t len = 0;
    size_t moved = 0;  // header + payload bytes moved (sealed/opened) so far
    uint8_t header[kFrameHeaderBytes] = {};
    uint64_t wire_end = 0;  // sealed: stream offset past the op's last record
  };

  size_t ProgressSends(std::vector<std::pair<OpId, absl::Status>>* done);
  size_t ProgressRecvs(std::vector<std::pair<OpId, absl::Status>>* done);
  void Fail(absl::Status error,
            std::vector<std::pair<OpId, absl::Status>>* done);
  // The encrypted path (peer_channel_sealed.cc).
  size_t ProgressSealedSends(std::vector<std::pair<OpId, absl::Status>>* done);
  size_t ProgressSealedRecvs(std::vector<std::pair<OpId, absl::Status>>* done);
  // Seals queued sends into out_ while a whole record fits.
  absl::Status FillSealed();
  // Opens the complete record just read for the front receive.
  absl::Status OpenRecord(Op& op);
  absl::Status SendError(int err) const;
  absl::Status RecvError(ssize_t n, int err) const;

  net::UniqueFd fd_;
  const uint64_t epoch_;
  const std::string self_;
  const std::string peer_;
  std::deque<Op> sends_;
  std::deque<Op> recvs_;
  bool can_read_ = true;
  bool can_write_ = true;
  absl::Status error_;

  // Encrypted channels only.
  std::unique_ptr<RecordCipher> seal_;
  std::unique_ptr<RecordCipher> open_;
  std::vector<uint8_t> out_;  // sealed bytes; [out_off_, out_len_) unsent
  size_t out_off_ = 0;
  size_t out_len_ = 0;
  uint64_t out_sent_ = 0;    // bytes of the sealed stream sent
  uint64_t out_sealed_ = 0;  // bytes of the sealed stream produced
  size_t sealing_ = 0;       // sends_[sealing_] is the first not fully sealed
  // Receiving: the bytes read past the last opened record (of the front
  // receive), the header record, and the tags of the payload records read
  // by one readv (record i of a frame uses slot i % kRecordsPerRead).
  static constexpr size_t kRecordsPerRead = 4;
  size_t in_got_ = 0;
  uint8_t in_header_[kFrameHeaderBytes + kTagBytes] = {};
  uint8_t in_tags_[kRecordsPerRead][kTagBytes] = {};
};

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_PEER_CHANNEL_H_
