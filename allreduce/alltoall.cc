// Alltoall with per-peer splits: pairwise exchange. The own block is copied
// locally; then in step i = 1..size-1 a rank sends its block for rank+i and
// receives the block of rank-i, both started before either is waited for.
// Every step pairs each rank with exactly one sender and one receiver, so no
// rank is flooded by all the others at once, and no order of waits can
// deadlock even on a transport that does not buffer. Zero-sized blocks are
// still exchanged (as empty messages) so that the message streams stay in
// step whatever the splits.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/collectives.h"

namespace kolo {

absl::Status Alltoall(Transport& transport, DataType type, const void* input,
                      int64_t input_count,
                      absl::Span<const int64_t> send_splits, void* output,
                      absl::Span<const int64_t> recv_splits) {
  constexpr absl::string_view kName = "alltoall";
  const int n = transport.size();
  const int rank = transport.rank();
  if (absl::Status s = internal::CheckType(kName, type); !s.ok()) return s;
  if (absl::Status s = internal::CheckCount(kName, "input count", input_count);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          internal::CheckCounts(kName, "send splits", send_splits, n);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          internal::CheckCounts(kName, "receive splits", recv_splits, n);
      !s.ok()) {
    return s;
  }
  const int64_t send_total = internal::Total(send_splits);
  if (send_total != input_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": send splits sum to ", send_total,
                     " elements but the input has ", input_count,
                     "; the splits must cover the input exactly"));
  }
  const int64_t recv_total = internal::Total(recv_splits);
  if (absl::Status s =
          internal::CheckBuffer(kName, "input", input, input_count);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          internal::CheckBuffer(kName, "output", output, recv_total);
      !s.ok()) {
    return s;
  }

  const size_t elem = DataTypeSize(type);
  const std::vector<ElementRange> send_at = PartitionBySizes(send_splits);
  const std::vector<ElementRange> recv_at = PartitionBySizes(recv_splits);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (send_splits[rank] != recv_splits[rank]) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": rank ", rank, " sends itself ", send_splits[rank],
        " elements but expects ", recv_splits[rank], " from itself"));
  }
  if (send_splits[rank] > 0) {
    std::memcpy(out + recv_at[rank].offset * elem,
                in + send_at[rank].offset * elem,
                static_cast<size_t>(send_splits[rank]) * elem);
  }
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n;
    const int from = (rank + n - i) % n;
    absl::Status s =
        transport.SendRecv(to, in + send_at[to].offset * elem,
                           static_cast<size_t>(send_at[to].count) * elem, from,
                           out + recv_at[from].offset * elem,
                           static_cast<size_t>(recv_at[from].count) * elem);
    if (!s.ok()) return internal::Fail(transport, kName, s);
  }
  return absl::OkStatus();
}

}  // namespace kolo
