#include "allreduce/small_allreduce.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "allreduce/collective_checks.h"
#include "allreduce/kernels.h"

namespace kolo::internal {
namespace {

constexpr absl::string_view kName = "allreduce (recursive doubling)";

// The largest power of two <= n. REQUIRES: n >= 1.
int FloorPowerOfTwo(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Staging for what arrives: kDepth slots of up to kSegmentBytes, so that a
// large buffer needs 128 KiB of scratch, not a copy of itself; 32 KiB
// segments also overlap receiving and reducing (measured faster than 256 KiB
// at 64 KiB-1 MiB on loopback).
constexpr size_t kSegmentBytes = 32 * 1024;
constexpr size_t kDepth = 4;

class Exchanger {
 public:
  Exchanger(Transport& t, DataType type, ReduceOp op, char* data, size_t count)
      : t_(t),
        type_(type),
        op_(op),
        data_(data),
        count_(count),
        elem_(DataTypeSize(type)),
        seg_elems_(std::max<size_t>(1, kSegmentBytes / elem_)),
        segments_((count + seg_elems_ - 1) / seg_elems_),
        slot_bytes_(std::min(count, seg_elems_) * elem_),
        slots_(std::make_unique_for_overwrite<char[]>(
            slot_bytes_ * std::min(kDepth, segments_))) {}

  // With `partner`: sends this rank's data if `send`, receives the
  // partner's if `recv` and combines it into data (lower rank's data on the
  // left). Segment k+depth is posted once segment k was combined, so sends,
  // receives and reductions overlap, and no segment is overwritten before
  // its send completed.
  absl::Status Run(int partner, bool send, bool recv) {
    const size_t depth = std::min(kDepth, segments_);
    std::vector<OpId> sends(segments_), recvs(segments_);
    auto post = [&](size_t k) -> absl::Status {
      const size_t first = k * seg_elems_;
      const size_t n = std::min(seg_elems_, count_ - first);
      if (send) {
        auto id = t_.StartSend(partner, data_ + first * elem_, n * elem_);
        if (!id.ok()) return id.status();
        sends[k] = *id;
      }
      if (recv) {
        auto id = t_.StartRecv(partner, Slot(k), n * elem_);
        if (!id.ok()) return id.status();
        recvs[k] = *id;
      }
      return absl::OkStatus();
    };
    for (size_t k = 0; k < depth; ++k) {
      if (absl::Status s = post(k); !s.ok()) return s;
    }
    for (size_t k = 0; k < segments_; ++k) {
      if (recv) {
        if (absl::Status s = t_.Wait(recvs[k]); !s.ok()) return s;
      }
      if (send) {
        if (absl::Status s = t_.Wait(sends[k]); !s.ok()) return s;
      }
      if (recv) {
        const size_t first = k * seg_elems_;
        const size_t n = std::min(seg_elems_, count_ - first);
        char* mine = data_ + first * elem_;
        const absl::Status s = partner < t_.rank()
                                   ? Reduce(type_, op_, mine, Slot(k), mine, n)
                                   : Reduce(type_, op_, mine, mine, Slot(k), n);
        if (!s.ok()) return s;
      }
      if (k + depth < segments_) {
        if (absl::Status s = post(k + depth); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  char* Slot(size_t k) { return slots_.get() + (k % kDepth) * slot_bytes_; }

  Transport& t_;
  const DataType type_;
  const ReduceOp op_;
  char* const data_;
  const size_t count_;
  const size_t elem_;
  const size_t seg_elems_;
  const size_t segments_;
  const size_t slot_bytes_;
  std::unique_ptr<char[]> slots_;
};

absl::Status Run(Transport& t, DataType type, ReduceOp op, char* data,
                 size_t count) {
  const int n = t.size();
  const int rank = t.rank();
  const size_t bytes = count * DataTypeSize(type);
  const int p = FloorPowerOfTwo(n);
  const int rem = n - p;
  Exchanger exchange(t, type, op, data, count);

  // Fold: among the 2*rem lowest ranks, even ranks hand their data to the
  // odd neighbour and sit out the doubling.
  int index;  // this rank's index among the p participants, -1 if folded
  if (rank < 2 * rem) {
    const bool even = rank % 2 == 0;
    if (absl::Status s = exchange.Run(even ? rank + 1 : rank - 1,
                                      /*send=*/even, /*recv=*/!even);
        !s.ok()) {
      return s;
    }
    index = even ? -1 : rank / 2;
  } else {
    index = rank - rem;
  }

  if (index >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner_index = index ^ mask;
      const int partner =
          partner_index < rem ? partner_index * 2 + 1 : partner_index + rem;
      if (absl::Status s = exchange.Run(partner, true, true); !s.ok()) {
        return s;
      }
    }
  }

  // Unfold: the odd ranks give the result back to their even partner.
  if (rank < 2 * rem) {
    auto id = rank % 2 == 1 ? t.StartSend(rank - 1, data, bytes)
                            : t.StartRecv(rank + 1, data, bytes);
    if (!id.ok()) return id.status();
    if (absl::Status s = t.Wait(*id); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SmallAllreduce(Transport& transport, DataType type, ReduceOp op,
                            void* data, int64_t count) {
  if (transport.size() == 1 || count == 0) return absl::OkStatus();
  absl::Status status = Run(transport, type, op, static_cast<char*>(data),
                            static_cast<size_t>(count));
  if (!status.ok()) return Fail(transport, kName, status);
  return absl::OkStatus();
}

}  // namespace kolo::internal
