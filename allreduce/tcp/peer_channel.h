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
// Thread-safety: owned and used by the transport's thread only.
#ifndef KOLO_ALLREDUCE_TCP_PEER_CHANNEL_H_
#define KOLO_ALLREDUCE_TCP_PEER_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/tcp/frame.h"
#include "allreduce/transport.h"
#include "common/unique_fd.h"

namespace kolo::tcp {

class PeerChannel {
 public:
  // `self` and `peer` name the two ends in messages, e.g. "rank 1 (worker
  // w1, 127.0.0.1:4567)".
  PeerChannel(net::UniqueFd fd, uint64_t epoch, std::string self,
              std::string peer);

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
    size_t moved = 0;  // header + payload bytes moved so far
    uint8_t header[kFrameHeaderBytes] = {};
  };

  size_t ProgressSends(std::vector<std::pair<OpId, absl::Status>>* done);
  size_t ProgressRecvs(std::vector<std::pair<OpId, absl::Status>>* done);
  void Fail(absl::Status error,
            std::vector<std::pair<OpId, absl::Status>>* done);

  net::UniqueFd fd_;
  const uint64_t epoch_;
  const std::string self_;
  const std::string peer_;
  std::deque<Op> sends_;
  std::deque<Op> recvs_;
  bool can_read_ = true;
  bool can_write_ = true;
  absl::Status error_;
};

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_PEER_CHANNEL_H_
