#include "allreduce/collective_checks.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace kolo::internal {

absl::Status CheckType(absl::string_view collective, DataType type) {
  if (DataTypeSize(type) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(collective, ": unknown data type ", static_cast<int>(type),
                     "; use one of kolo::DataType"));
  }
  return absl::OkStatus();
}

absl::Status CheckCount(absl::string_view collective, absl::string_view name,
                        int64_t count) {
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        collective, ": ", name, " is ", count, "; it must be >= 0"));
  }
  if (count > kMaxTensorElements) {
    return absl::InvalidArgumentError(
        absl::StrCat(collective, ": ", name, " is ", count,
                     ", more than kolo takes (2^44 elements per tensor)"));
  }
  return absl::OkStatus();
}

absl::Status CheckBuffer(absl::string_view collective, absl::string_view name,
                         const void* buffer, int64_t count) {
  if (buffer == nullptr && count > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        collective, ": ", name, " is null but must hold ", count, " elements"));
  }
  return absl::OkStatus();
}

absl::Status CheckCounts(absl::string_view collective, absl::string_view name,
                         absl::Span<const int64_t> counts, int world_size) {
  if (counts.size() != static_cast<size_t>(world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(collective, ": ", name, " has ", counts.size(),
                     " entries; it needs one per rank (", world_size, ")"));
  }
  int64_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(collective, ": ", name,
                                                     "[", i, "] is ", counts[i],
                                                     "; counts must be >= 0"));
    }
    if (counts[i] > kMaxTensorElements ||
        __builtin_add_overflow(total, counts[i], &total) ||
        total > kMaxTensorElements) {
      return absl::InvalidArgumentError(absl::StrCat(
          collective, ": ", name, " add up to more than kolo takes (2^44 ",
          "elements per tensor) by entry ", i, " (", counts[i], ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckReduce(absl::string_view collective, DataType type,
                         const ReduceOptions& reduce) {
  if (static_cast<int>(reduce.op) >= kNumReduceOps) {
    return absl::InvalidArgumentError(absl::StrCat(
        collective, ": unknown reduce op ", static_cast<int>(reduce.op),
        "; use sum, average, min, max or product"));
  }
  if (type == DataType::kBool && reduce.op == ReduceOp::kAverage) {
    return absl::InvalidArgumentError(absl::StrCat(
        collective,
        ": average is not defined for bool tensors; use sum (logical or), "
        "max, min or product (logical and)"));
  }
  for (const auto& [name, factor] :
       {std::pair<const char*, double>{"prescale", reduce.prescale},
        std::pair<const char*, double>{"postscale", reduce.postscale}}) {
    if (!std::isfinite(factor)) {
      return absl::InvalidArgumentError(absl::StrCat(collective, ": ", name,
                                                     " factor is ", factor,
                                                     "; it must be finite"));
    }
    if (type == DataType::kBool && factor != 1.0) {
      return absl::InvalidArgumentError(
          absl::StrCat(collective, ": ", name, " factor ", factor,
                       " cannot scale a bool tensor; use 1"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAllreduce(absl::string_view collective, DataType type,
                            const void* input, const void* output,
                            int64_t count, const ReduceOptions& reduce) {
  if (absl::Status s = CheckType(collective, type); !s.ok()) return s;
  if (absl::Status s = CheckCount(collective, "count", count); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckBuffer(collective, "input", input, count);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckBuffer(collective, "output", output, count);
      !s.ok()) {
    return s;
  }
  return CheckReduce(collective, type, reduce);
}

namespace {

// What allgather and reducescatter check first: the type, the input count
// and the per-rank counts.
absl::Status CheckInputCounts(absl::string_view collective, DataType type,
                              int64_t input_count,
                              absl::Span<const int64_t> counts,
                              int world_size) {
  if (absl::Status s = CheckType(collective, type); !s.ok()) return s;
  if (absl::Status s = CheckCount(collective, "input count", input_count);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCounts(collective, "counts", counts, world_size);
      !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAllgather(absl::string_view collective, DataType type,
                            const void* input, int64_t input_count,
                            absl::Span<const int64_t> counts,
                            const void* output, int rank, int world_size) {
  if (absl::Status s =
          CheckInputCounts(collective, type, input_count, counts, world_size);
      !s.ok()) {
    return s;
  }
  if (counts[rank] != input_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(collective, ": rank ", rank, " passes ", input_count,
                     " elements but counts[", rank, "] is ", counts[rank],
                     "; each rank's input must have the count listed for it"));
  }
  if (absl::Status s = CheckBuffer(collective, "input", input, input_count);
      !s.ok()) {
    return s;
  }
  const int64_t total = Total(counts);
  if (absl::Status s = CheckBuffer(collective, "output", output, total);
      !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

absl::Status CheckReducescatter(absl::string_view collective, DataType type,
                                const void* input, int64_t input_count,
                                absl::Span<const int64_t> counts,
                                const void* output, const ReduceOptions& reduce,
                                int rank, int world_size) {
  if (absl::Status s =
          CheckInputCounts(collective, type, input_count, counts, world_size);
      !s.ok()) {
    return s;
  }
  const int64_t total = Total(counts);
  if (total != input_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        collective, ": counts sum to ", total, " elements but the input has ",
        input_count, "; the per-rank counts must cover the input exactly"));
  }
  if (absl::Status s = CheckBuffer(collective, "input", input, input_count);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckBuffer(collective, "output", output, counts[rank]);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckReduce(collective, type, reduce); !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

int64_t Total(absl::Span<const int64_t> counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return total;
}

absl::Status Fail(Transport& transport, absl::string_view collective,
                  const absl::Status& status) {
  absl::Status annotated(
      status.code(),
      absl::StrCat(collective, " on rank ", transport.rank(), " of ",
                   transport.size(), ": ", status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    annotated.SetPayload(url, payload);
  });
  transport.Abort(annotated);
  return annotated;
}

}  // namespace kolo::internal
