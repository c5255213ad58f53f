// Element types and reduce operations of kolo's collectives.
//
// Semantics: integers are reduced in the unsigned type of their width, so
// sums and products wrap without undefined behaviour; integer average
// truncates toward zero; bool: sum and max are OR, product and min are AND,
// average is refused; float16 and bfloat16 are reduced through float32 and
// rounded to nearest even.
//
// Thread-safety: plain values and pure functions.
#ifndef KOLO_TYPES_H_
#define KOLO_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kolo {

// The element type of a tensor.
enum class DataType : uint8_t {
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kBool,
};
inline constexpr int kNumDataTypes = 10;  // the number of DataType values

// How allreduce and reducescatter combine the ranks' values.
enum class ReduceOp : uint8_t { kSum, kAverage, kMin, kMax, kProduct };
inline constexpr int kNumReduceOps = 5;  // the number of ReduceOp values

// The largest tensor kolo takes: 2^47 bytes (128 TiB, the user address space
// of x86-64 and of 4-level arm64), so no tensor that could exist is refused,
// and at most 2^44 elements, so that element counts, byte counts and sums of
// them over 2^19 ranks never overflow int64. A larger shape is a caller's
// mistake (or an overflowed computation): refused with kInvalidArgument.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 47;     // 128 TiB
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 44;  // 2^44

// Bytes per element (bool: 1); 0 for a value outside the enum.
size_t DataTypeSize(DataType t);
// "float32", "int64", "bool", ...; "unknown" outside the enum.
absl::string_view DataTypeName(DataType t);
// "sum", "average", "min", "max", "product"; "unknown" outside the enum.
absl::string_view ReduceOpName(ReduceOp op);
// Inverse of the names above, case-insensitive (also accepts "float",
// "double", "half", "bf16", "byte" and "avg", "mean", "prod");
// kInvalidArgument listing the valid names otherwise.
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
// ParseDataType's counterpart for reduce op names.
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// The element count of `shape` ({} = a scalar: 1), or kInvalidArgument
// (naming `what`, e.g. "allreduce: the input") when a dimension is negative,
// the product overflows, or the tensor is larger than kMaxTensorElements /
// kMaxTensorBytes for `type`.
absl::StatusOr<int64_t> CheckedElements(absl::string_view what, DataType type,
                                        absl::Span<const int64_t> shape);

}  // namespace kolo

#endif  // KOLO_TYPES_H_
