#include "allreduce/ring.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/kernels.h"
#include "common/check.h"

namespace kolo::internal {
namespace {

// A started op that has not been waited for yet.
struct PendingOp {
  OpId id = 0;
  bool pending = false;
};

// One (step, segment) unit of the pass, in the order units are received.
struct Unit {
  int step = 0;
  int64_t segment = 0;
};

// Staging memory for the reduce steps, kept per thread across passes: a
// fresh allocation of up to kRingRecvDepth x 1 MiB per collective costs page
// faults on every call. Grows only; at most 4 MiB per thread that runs rings.
char* StagingBuffer(size_t bytes) {
  thread_local std::unique_ptr<char[]> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    buffer = std::make_unique_for_overwrite<char[]>(bytes);
    capacity = bytes;
  }
  return buffer.get();
}

absl::Status WaitOnce(Transport& t, PendingOp& op) {
  if (!op.pending) return absl::OkStatus();
  op.pending = false;
  return t.Wait(op.id);
}

class RingRunner {
 public:
  RingRunner(Transport& t, const RingPass& pass)
      : t_(t),
        pass_(pass),
        n_(t.size()),
        right_((t.rank() + 1) % n_),
        left_((t.rank() + n_ - 1) % n_),
        elem_(DataTypeSize(pass.type)),
        steps_(pass.reduce_steps + pass.copy_steps) {}

  absl::Status Run() {
    KOLO_CHECK(pass_.blocks.size() == static_cast<size_t>(n_));
    KOLO_CHECK(pass_.segment_elems >= 1);
    // More steps would reduce into or overwrite chunks still being sent.
    KOLO_CHECK(pass_.reduce_steps >= 0 && pass_.reduce_steps < n_ &&
               pass_.copy_steps >= 0 && pass_.copy_steps < n_);
    if (n_ == 1 || steps_ == 0) return absl::OkStatus();
    Plan();
    // Step 0: the first chunk leaves from its source, all segments at once.
    const RingBlock& first = pass_.blocks[SendChunk(0)];
    for (int64_t k = 0; k < NumSegs(first.count); ++k) {
      const ElementRange seg = Segment(first.count, pass_.segment_elems, k);
      auto id =
          t_.StartSend(right_, first.src + seg.offset * elem_, Bytes(seg));
      if (!id.ok()) return id.status();
      sends_[0][k] = PendingOp{*id, true};
    }
    const size_t ahead = std::min<size_t>(kRingRecvDepth, units_.size());
    for (size_t i = 0; i < ahead; ++i) {
      if (absl::Status s = PostRecv(i); !s.ok()) return s;
    }
    for (size_t i = 0; i < units_.size(); ++i) {
      const Unit u = units_[i];
      const RingBlock& block = pass_.blocks[RecvChunk(u.step)];
      const ElementRange seg =
          Segment(block.count, pass_.segment_elems, u.segment);
      if (absl::Status s = WaitOnce(t_, recvs_[i]); !s.ok()) return s;
      char* dst = block.dst + seg.offset * elem_;
      if (u.step < pass_.reduce_steps) {
        if (absl::Status s = Reduce(pass_.type, pass_.op, dst,
                                    block.src + seg.offset * elem_, Slot(i),
                                    static_cast<size_t>(seg.count));
            !s.ok()) {
          return s;
        }
      }
      if (u.step + 1 < steps_) {
        auto id = t_.StartSend(right_, dst, Bytes(seg));
        if (!id.ok()) return id.status();
        sends_[u.step + 1][u.segment] = PendingOp{*id, true};
      }
      if (i + ahead < units_.size()) {
        if (absl::Status s = PostRecv(i + ahead); !s.ok()) return s;
      }
    }
    for (auto& step : sends_) {
      for (PendingOp& op : step) {
        if (absl::Status s = WaitOnce(t_, op); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  int SendChunk(int step) const { return PositiveMod(pass_.first - step, n_); }
  int RecvChunk(int step) const {
    return PositiveMod(pass_.first - step - 1, n_);
  }
  int64_t NumSegs(int64_t count) const {
    return NumSegments(count, pass_.segment_elems);
  }
  size_t Bytes(const ElementRange& seg) const {
    return static_cast<size_t>(seg.count) * elem_;
  }
  char* Slot(size_t unit) {
    return slots_ + (unit % kRingRecvDepth) * slot_bytes_;
  }

  // Lists the units, sizes the op tables and the staging slots.
  void Plan() {
    sends_.resize(static_cast<size_t>(steps_));
    int64_t largest_reduced = 0;
    for (int g = 0; g < steps_; ++g) {
      sends_[g].resize(NumSegs(pass_.blocks[SendChunk(g)].count));
      const int64_t count = pass_.blocks[RecvChunk(g)].count;
      for (int64_t k = 0; k < NumSegs(count); ++k) units_.push_back({g, k});
      if (g < pass_.reduce_steps) {
        largest_reduced = std::max(largest_reduced, count);
      }
    }
    recvs_.resize(units_.size());
    // Slots are rounded to 64 bytes so that each starts aligned for any type.
    slot_bytes_ =
        (static_cast<size_t>(std::min(largest_reduced, pass_.segment_elems)) *
             elem_ +
         63) /
        64 * 64;
    if (slot_bytes_ > 0) slots_ = StagingBuffer(slot_bytes_ * kRingRecvDepth);
  }

  // Starts the receive of unit i: into a staging slot for reduce steps
  // (slot i % depth, freed by the reduce of unit i - depth), else straight
  // into the destination, once the send that read that region (size-1
  // steps earlier: send chunk first-g' == recv chunk first-g-1 <=> g' = g+1-n)
  // has completed.
  absl::Status PostRecv(size_t i) {
    const Unit u = units_[i];
    const RingBlock& block = pass_.blocks[RecvChunk(u.step)];
    const ElementRange seg =
        Segment(block.count, pass_.segment_elems, u.segment);
    void* into;
    if (u.step < pass_.reduce_steps) {
      into = Slot(i);
    } else {
      const int older = u.step + 1 - n_;
      if (older >= 0) {
        if (absl::Status s = WaitOnce(t_, sends_[older][u.segment]); !s.ok()) {
          return s;
        }
      }
      into = block.dst + seg.offset * elem_;
    }
    auto id = t_.StartRecv(left_, into, Bytes(seg));
    if (!id.ok()) return id.status();
    recvs_[i] = PendingOp{*id, true};
    return absl::OkStatus();
  }

  Transport& t_;
  const RingPass& pass_;
  const int n_;
  const int right_;
  const int left_;
  const size_t elem_;
  const int steps_;
  std::vector<Unit> units_;
  std::vector<PendingOp> recvs_;               // per unit
  std::vector<std::vector<PendingOp>> sends_;  // per step, per segment
  size_t slot_bytes_ = 0;
  char* slots_ = nullptr;  // StagingBuffer(): this thread's, reused
};

}  // namespace

int64_t RingSegmentElements(const RingPass& pass, size_t segment_bytes) {
  int64_t largest = 0;
  for (const RingBlock& block : pass.blocks) {
    largest = std::max(largest, block.count);
  }
  return PipelineSegmentElements(segment_bytes, largest,
                                 DataTypeSize(pass.type));
}

absl::Status RunRing(Transport& transport, const RingPass& pass,
                     absl::string_view collective) {
  RingRunner runner(transport, pass);
  absl::Status status = runner.Run();
  if (!status.ok()) return Fail(transport, collective, status);
  return absl::OkStatus();
}

}  // namespace kolo::internal
