#include "kolo/types.h"

#include <array>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kolo {
namespace {

struct TypeInfo {
  DataType type;
  absl::string_view name;
  size_t size;
};

// Indexed by DataType; the order must follow the enum.
constexpr std::array<TypeInfo, kNumDataTypes> kTypes = {{
    {DataType::kUInt8, "uint8", 1},
    {DataType::kInt8, "int8", 1},
    {DataType::kInt16, "int16", 2},
    {DataType::kInt32, "int32", 4},
    {DataType::kInt64, "int64", 8},
    {DataType::kFloat16, "float16", 2},
    {DataType::kBFloat16, "bfloat16", 2},
    {DataType::kFloat32, "float32", 4},
    {DataType::kFloat64, "float64", 8},
    {DataType::kBool, "bool", 1},
}};

// Indexed by ReduceOp; the order must follow the enum.
constexpr std::array<absl::string_view, kNumReduceOps> kOpNames = {
    "sum", "average", "min", "max", "product"};

struct Alias {
  absl::string_view name;
  DataType type;
};
constexpr std::array<Alias, 5> kTypeAliases = {{
    {"float", DataType::kFloat32},
    {"double", DataType::kFloat64},
    {"half", DataType::kFloat16},
    {"bf16", DataType::kBFloat16},
    {"byte", DataType::kUInt8},
}};

constexpr bool EnumOrderMatches() {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (static_cast<int>(kTypes[i].type) != i) return false;
  }
  return true;
}
static_assert(EnumOrderMatches(), "kTypes must follow the DataType enum");

}  // namespace

size_t DataTypeSize(DataType t) {
  const auto i = static_cast<size_t>(t);
  return i < kTypes.size() ? kTypes[i].size : 0;
}

absl::string_view DataTypeName(DataType t) {
  const auto i = static_cast<size_t>(t);
  return i < kTypes.size() ? kTypes[i].name : "unknown";
}

absl::string_view ReduceOpName(ReduceOp op) {
  const auto i = static_cast<size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : "unknown";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const TypeInfo& info : kTypes) {
    if (lower == info.name) return info.type;
  }
  for (const Alias& alias : kTypeAliases) {
    if (lower == alias.name) return alias.type;
  }
  std::string valid;
  for (const TypeInfo& info : kTypes) {
    absl::StrAppend(&valid, valid.empty() ? "" : ", ", info.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data type '", name, "'; valid types are: ", valid,
                   " (aliases: float, double, half, bf16, byte)"));
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (lower == kOpNames[i]) return static_cast<ReduceOp>(i);
  }
  if (lower == "avg" || lower == "mean") return ReduceOp::kAverage;
  if (lower == "prod") return ReduceOp::kProduct;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown reduce op '", name, "'; valid ops are: ",
      absl::StrJoin(kOpNames, ", "), " (aliases: avg, mean, prod)"));
}

absl::StatusOr<int64_t> CheckedElements(absl::string_view what, DataType type,
                                        absl::Span<const int64_t> shape) {
  auto text = [&] { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); };
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " shape ", text(), " has a negative dimension"));
    }
  }
  for (int64_t d : shape) {
    if (d == 0) return int64_t{0};  // empty, whatever the other dimensions
  }
  int64_t n = 1;
  bool over = false;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxTensorElements) {
      over = true;
      break;
    }
  }
  const size_t elem = DataTypeSize(type);
  if (over || (elem > 0 && n > kMaxTensorBytes / static_cast<int64_t>(elem))) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " shape ", text(), " (", DataTypeName(type), ") is larger than ",
        "kolo takes: at most 2^44 elements and 2^47 bytes (128 TiB) per "
        "tensor; check the shape (an overflowed size computation?)"));
  }
  return n;
}

}  // namespace kolo
