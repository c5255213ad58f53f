#include "allreduce/shm/hybrid_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo {
namespace {

constexpr absl::Duration kFirstSlice = absl::Microseconds(20);
constexpr absl::Duration kMaxSlice = absl::Milliseconds(1);

}  // namespace

HybridTransport::HybridTransport(std::unique_ptr<TcpTransport> tcp,
                                 std::unique_ptr<ShmTransport> shm,
                                 std::vector<int> local, absl::Duration timeout,
                                 absl::Duration spin)
    : tcp_(std::move(tcp)),
      shm_(std::move(shm)),
      local_of_(static_cast<size_t>(tcp_->size()), -1),
      timeout_(timeout),
      spin_(spin) {
  KOLO_CHECK(static_cast<int>(local.size()) == shm_->size());
  for (size_t i = 0; i < local.size(); ++i) {
    KOLO_CHECK(local[i] >= 0 && local[i] < tcp_->size());
    local_of_[local[i]] = static_cast<int>(i);
  }
  KOLO_CHECK(local_of_[tcp_->rank()] == shm_->rank());
}

absl::StatusOr<OpId> HybridTransport::StartSend(int peer, const void* data,
                                                size_t len) {
  if (peer >= 0 && peer < size() && local_of_[peer] >= 0) {
    absl::StatusOr<OpId> id = shm_->StartSend(local_of_[peer], data, len);
    if (!id.ok()) return id.status();
    return Shm(*id);
  }
  absl::StatusOr<OpId> id = tcp_->StartSend(peer, data, len);
  if (!id.ok()) return id.status();
  return Tcp(*id);
}

absl::StatusOr<OpId> HybridTransport::StartRecv(int peer, void* data,
                                                size_t len) {
  if (peer >= 0 && peer < size() && local_of_[peer] >= 0) {
    absl::StatusOr<OpId> id = shm_->StartRecv(local_of_[peer], data, len);
    if (!id.ok()) return id.status();
    return Shm(*id);
  }
  absl::StatusOr<OpId> id = tcp_->StartRecv(peer, data, len);
  if (!id.ok()) return id.status();
  return Tcp(*id);
}

absl::Status HybridTransport::Wait(OpId op) {
  const bool on_shm = op % 2 == 1;
  const OpId inner = op / 2;
  absl::Time last_progress = absl::Now();
  const absl::Time spin_until = last_progress + spin_;
  absl::Duration slice = kFirstSlice;
  while (true) {
    // Whatever is pending on one side only: that side's own Wait sleeps
    // best (futex or epoll) and keeps its own deadline.
    const bool shm_busy = shm_->HasPending();
    const bool tcp_busy = tcp_->HasPending();
    if (on_shm && !tcp_busy) return shm_->Wait(inner);
    if (!on_shm && !shm_busy) return tcp_->Wait(inner);
    if (on_shm ? shm_->Completed(inner) : tcp_->Completed(inner)) {
      return on_shm ? shm_->Wait(inner) : tcp_->Wait(inner);
    }
    const absl::Time now = absl::Now();
    const absl::Duration idle = now - last_progress;
    if (idle >= timeout_) {
      return on_shm ? shm_->InactivityError(idle) : tcp_->InactivityError(idle);
    }
    absl::StatusOr<size_t> a = shm_->Drive(absl::ZeroDuration());
    if (!a.ok()) return a.status();
    absl::StatusOr<size_t> b = tcp_->Drive(
        now < spin_until || *a > 0 ? absl::ZeroDuration()
                                   : std::min(slice, timeout_ - idle));
    if (!b.ok()) return b.status();
    if (*a + *b > 0) {
      last_progress = absl::Now();
      slice = kFirstSlice;
    } else if (now >= spin_until) {
      slice = std::min(slice * 2, kMaxSlice);
    }
  }
}

void HybridTransport::Abort(absl::Status why) {
  shm_->Abort(why);
  tcp_->Abort(std::move(why));
}

absl::Status HybridTransport::CutForFault(int peer) {
  if (peer < 0) {
    absl::Status tcp = tcp_->CutForFault(-1);
    absl::Status shm = shm_->CutForFault(-1);
    return tcp.ok() || shm.ok() ? absl::OkStatus() : tcp;
  }
  if (peer < static_cast<int>(local_of_.size()) && local_of_[peer] >= 0) {
    return shm_->CutForFault(local_of_[peer]);
  }
  return tcp_->CutForFault(peer);
}

}  // namespace kolo
