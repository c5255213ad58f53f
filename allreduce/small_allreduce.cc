#include "allreduce/small_allreduce.h"

#include <memory>

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

absl::Status Run(Transport& t, DataType type, ReduceOp op, char* data,
                 size_t count, char* scratch) {
  const int n = t.size();
  const int rank = t.rank();
  const size_t bytes = count * DataTypeSize(type);
  const int p = FloorPowerOfTwo(n);
  const int rem = n - p;

  // Fold: among the 2*rem lowest ranks, even ranks hand their data to the
  // odd neighbour and sit out the doubling.
  int index;  // this rank's index among the p participants, -1 if folded
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      auto id = t.StartSend(rank + 1, data, bytes);
      if (!id.ok()) return id.status();
      if (absl::Status s = t.Wait(*id); !s.ok()) return s;
      index = -1;
    } else {
      auto id = t.StartRecv(rank - 1, scratch, bytes);
      if (!id.ok()) return id.status();
      if (absl::Status s = t.Wait(*id); !s.ok()) return s;
      if (absl::Status s = Reduce(type, op, data, scratch, data, count);
          !s.ok()) {
        return s;
      }
      index = rank / 2;
    }
  } else {
    index = rank - rem;
  }

  if (index >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner_index = index ^ mask;
      const int partner =
          partner_index < rem ? partner_index * 2 + 1 : partner_index + rem;
      if (absl::Status s =
              t.SendRecv(partner, data, bytes, partner, scratch, bytes);
          !s.ok()) {
        return s;
      }
      // Lower rank's data on the left, on both sides.
      const absl::Status s = partner < rank
                                 ? Reduce(type, op, data, scratch, data, count)
                                 : Reduce(type, op, data, data, scratch, count);
      if (!s.ok()) return s;
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
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(type);
  // new[] aligns to __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16), enough for every
  // DataType.
  auto scratch = std::make_unique_for_overwrite<char[]>(bytes);
  absl::Status status = Run(transport, type, op, static_cast<char*>(data),
                            static_cast<size_t>(count), scratch.get());
  if (!status.ok()) return Fail(transport, kName, status);
  return absl::OkStatus();
}

}  // namespace kolo::internal
