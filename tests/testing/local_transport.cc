#include "tests/testing/local_transport.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo::testing {

struct LocalFabric::Op {
  int owner = 0;
  int peer = 0;
  bool send = false;
  uint64_t seq = 0;
  const void* send_data = nullptr;
  void* recv_data = nullptr;
  size_t len = 0;
  bool queued = true;  // still in a mailbox
  bool done = false;
  absl::Status status;

  std::string Describe() const {
    return absl::StrCat(send ? "sending " : "receiving ", len,
                        send ? " bytes to rank " : " bytes from rank ", peer,
                        " (operation ", seq, ")");
  }
};

class LocalFabric::RankTransport : public Transport {
 public:
  RankTransport(LocalFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return fabric_->size_; }

  void BeginOperation(uint64_t seq) override {
    MutexLock lock(&fabric_->mu_);
    if (aborted_.ok()) {
      for (const auto& [id, op] : ops_) {
        KOLO_CHECK(op->done) << "rank " << rank_ << " began operation " << seq
                             << " while still " << op->Describe();
      }
    }
    seq_ = seq;
  }

  absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                 size_t len) override {
    return Start(peer, /*send=*/true, const_cast<void*>(data), len);
  }

  absl::StatusOr<OpId> StartRecv(int peer, void* data, size_t len) override {
    return Start(peer, /*send=*/false, data, len);
  }

  absl::Status Wait(OpId id) override {
    MutexLock lock(&fabric_->mu_);
    auto it = ops_.find(id);
    if (it == ops_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": Wait on unknown op ", id));
    }
    Op* op = it->second.get();
    const absl::Time start = absl::Now();
    for (;;) {
      if (!aborted_.ok()) return aborted_;
      if (op->done) {
        absl::Status status = op->status;
        ops_.erase(it);
        return status;
      }
      const absl::Time deadline =
          std::max(last_progress_, start) + fabric_->timeout_;
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", rank_, ": no byte moved for ",
            absl::FormatDuration(fabric_->timeout_), " while ", op->Describe(),
            "; is rank ", op->peer, " alive and running the same collective?"));
      }
      fabric_->cv_.WaitWithDeadline(&fabric_->mu_, deadline);
    }
  }

  void Abort(absl::Status why) override {
    MutexLock lock(&fabric_->mu_);
    if (!aborted_.ok()) return;
    aborted_ = why.ok() ? absl::AbortedError("aborted") : why;
    // Withdraw the unmatched ops: no peer may copy into or out of this rank's
    // buffers any more.
    for (auto& [id, op] : ops_) {
      if (!op->queued) continue;
      Mailbox& box = op->send ? fabric_->BoxLocked(rank_, op->peer)
                              : fabric_->BoxLocked(op->peer, rank_);
      std::deque<Op*>& queue = op->send ? box.sends : box.recvs;
      std::erase(queue, op.get());
      op->queued = false;
      fabric_->CompleteLocked(op.get(), aborted_);
    }
    fabric_->cv_.SignalAll();
  }

  // Ops started and not waited for (after a successful run: a leak).
  size_t Unwaited() {
    MutexLock lock(&fabric_->mu_);
    return aborted_.ok() ? ops_.size() : 0;
  }

  // REQUIRES: fabric_->mu_ held (the caller holds it as LocalFabric::mu_).
  void NoteProgressLocked() {
    fabric_->mu_.AssertHeld();
    last_progress_ = absl::Now();
  }

 private:
  absl::StatusOr<OpId> Start(int peer, bool send, void* data, size_t len) {
    if (peer < 0 || peer >= fabric_->size_ || peer == rank_) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": invalid peer ", peer, " for ",
                       fabric_->size_, " ranks"));
    }
    MutexLock lock(&fabric_->mu_);
    if (!aborted_.ok()) return aborted_;
    auto op = std::make_unique<Op>();
    op->owner = rank_;
    op->peer = peer;
    op->send = send;
    op->seq = seq_;
    op->len = len;
    if (send) {
      op->send_data = data;
    } else {
      op->recv_data = data;
    }
    const OpId id = next_id_++;
    Op* raw = op.get();
    ops_.emplace(id, std::move(op));
    if (send) {
      fabric_->BoxLocked(rank_, peer).sends.push_back(raw);
      fabric_->MatchLocked(rank_, peer);
    } else {
      fabric_->BoxLocked(peer, rank_).recvs.push_back(raw);
      fabric_->MatchLocked(peer, rank_);
    }
    return id;
  }

  LocalFabric* const fabric_;
  const int rank_;
  uint64_t seq_ = 0;  // only the rank's thread
  OpId next_id_ = 1;  // only the rank's thread
  std::map<OpId, std::unique_ptr<Op>> ops_ ABSL_GUARDED_BY(fabric_->mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(fabric_->mu_);
  absl::Time last_progress_ ABSL_GUARDED_BY(fabric_->mu_) =
      absl::InfinitePast();
};

LocalFabric::LocalFabric(int size, absl::Duration inactivity_timeout)
    : size_(size), timeout_(inactivity_timeout) {
  KOLO_CHECK(size >= 1);
  KOLO_CHECK(inactivity_timeout > absl::ZeroDuration());
  {
    MutexLock lock(&mu_);
    boxes_.resize(static_cast<size_t>(size) * size);
  }
  for (int r = 0; r < size; ++r) {
    ranks_.push_back(std::make_unique<RankTransport>(this, r));
  }
}

LocalFabric::LocalFabric(std::vector<std::unique_ptr<Transport>> transports)
    : size_(static_cast<int>(transports.size())),
      timeout_(absl::Seconds(1)),
      external_(std::move(transports)) {
  KOLO_CHECK(size_ >= 1);
  for (int r = 0; r < size_; ++r) {
    KOLO_CHECK(external_[r] != nullptr && external_[r]->rank() == r &&
               external_[r]->size() == size_);
  }
}

LocalFabric::~LocalFabric() {
  {
    MutexLock lock(&run_mu_);
    stopping_ = true;
    run_cv_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

Transport& LocalFabric::transport(int rank) {
  KOLO_CHECK(rank >= 0 && rank < size_);
  if (!external_.empty()) return *external_[rank];
  return *ranks_[rank];
}

void LocalFabric::AbortAll(const absl::Status& why) {
  for (auto& rank : ranks_) rank->Abort(why);
  for (auto& t : external_) t->Abort(why);
}

void LocalFabric::CompleteLocked(Op* op, const absl::Status& status) {
  op->done = true;
  op->status = status;
  if (status.ok()) ranks_[op->owner]->NoteProgressLocked();
}

void LocalFabric::MatchLocked(int src, int dst) {
  Mailbox& box = BoxLocked(src, dst);
  while (!box.sends.empty() && !box.recvs.empty()) {
    Op* send = box.sends.front();
    Op* recv = box.recvs.front();
    box.sends.pop_front();
    box.recvs.pop_front();
    send->queued = false;
    recv->queued = false;
    if (send->seq != recv->seq) {
      CompleteLocked(send, absl::FailedPreconditionError(absl::StrCat(
                               "rank ", src, " sent a message of operation ",
                               send->seq, " to rank ", dst,
                               ", which expected operation ", recv->seq)));
      CompleteLocked(recv, absl::FailedPreconditionError(absl::StrCat(
                               "rank ", dst, " got a message of operation ",
                               send->seq, " from rank ", src,
                               " while expecting operation ", recv->seq)));
    } else if (send->len != recv->len) {
      CompleteLocked(send, absl::FailedPreconditionError(absl::StrCat(
                               "rank ", src, " sent ", send->len,
                               " bytes to rank ", dst, ", which expected ",
                               recv->len, " (operation ", send->seq, ")")));
      CompleteLocked(recv, absl::FailedPreconditionError(absl::StrCat(
                               "rank ", dst, " expected ", recv->len,
                               " bytes from rank ", src, ", which sent ",
                               send->len, " (operation ", send->seq, ")")));
    } else {
      if (send->len > 0)
        std::memcpy(recv->recv_data, send->send_data, send->len);
      CompleteLocked(send, absl::OkStatus());
      CompleteLocked(recv, absl::OkStatus());
    }
  }
  cv_.SignalAll();
}

std::vector<absl::Status> LocalFabric::Run(const Job& fn) {
  if (threads_.empty()) {
    for (int r = 0; r < size_; ++r) {
      threads_.emplace_back([this, r] { RankThread(r); });
    }
  }
  MutexLock lock(&run_mu_);
  job_ = &fn;
  results_.assign(static_cast<size_t>(size_), absl::OkStatus());
  running_ = size_;
  ++generation_;
  run_cv_.SignalAll();
  // Bounded: every wait inside fn has the inactivity deadline.
  while (running_ > 0) run_cv_.Wait(&run_mu_);
  job_ = nullptr;
  return results_;
}

void LocalFabric::RankThread(int rank) {
  uint64_t seen = 0;
  for (;;) {
    const Job* job;
    {
      MutexLock lock(&run_mu_);
      while (!stopping_ && generation_ == seen) run_cv_.Wait(&run_mu_);
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    absl::Status status = (*job)(transport(rank));
    if (status.ok() && external_.empty() && ranks_[rank]->Unwaited() > 0) {
      status = absl::InternalError(
          absl::StrCat("rank ", rank, " returned with ",
                       ranks_[rank]->Unwaited(), " ops not waited for"));
    }
    if (!status.ok()) {
      AbortAll(absl::AbortedError(
          absl::StrCat("rank ", rank, " failed: ", status.message())));
    }
    MutexLock lock(&run_mu_);
    results_[rank] = std::move(status);
    if (--running_ == 0) run_cv_.SignalAll();
  }
}

}  // namespace kolo::testing
