#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "allreduce/kernels.h"

namespace kolo::bench {
namespace {

// Elements per tile: a multiple of kPeriod, large enough that Fill/Check
// work in memcpy-sized pieces.
constexpr int64_t kTile = kPeriod * 512;

void Encode(DataType type, double v, void* dst) {
  const auto i = static_cast<uint64_t>(static_cast<int64_t>(std::llround(v)));
  switch (type) {
    case DataType::kUInt8:
    case DataType::kInt8: {
      const auto b = static_cast<uint8_t>(i);
      std::memcpy(dst, &b, 1);
      return;
    }
    case DataType::kBool: {
      const uint8_t b = v != 0 ? 1 : 0;
      std::memcpy(dst, &b, 1);
      return;
    }
    case DataType::kInt16: {
      const auto h = static_cast<uint16_t>(i);
      std::memcpy(dst, &h, 2);
      return;
    }
    case DataType::kInt32: {
      const auto w = static_cast<uint32_t>(i);
      std::memcpy(dst, &w, 4);
      return;
    }
    case DataType::kInt64:
      std::memcpy(dst, &i, 8);
      return;
    case DataType::kFloat16: {
      const uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(dst, &h, 2);
      return;
    }
    case DataType::kBFloat16: {
      const uint16_t h = FloatToBFloat16(static_cast<float>(v));
      std::memcpy(dst, &h, 2);
      return;
    }
    case DataType::kFloat32: {
      const auto f = static_cast<float>(v);
      std::memcpy(dst, &f, 4);
      return;
    }
    case DataType::kFloat64:
      std::memcpy(dst, &v, 8);
      return;
  }
}

bool IsFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         t == DataType::kFloat32 || t == DataType::kFloat64;
}

// Input value of position k (0 <= k < kPeriod) for op.
int64_t InputValue(DataType type, ReduceOp op, int64_t k) {
  if (type == DataType::kBool) return k % 3 != 0 ? 1 : 0;
  if (op == ReduceOp::kProduct) {
    if (k % 3 != 0) return 1;
    return type == DataType::kUInt8 ? 2 : -1;
  }
  return type == DataType::kUInt8 ? k % 7 : k % 7 - 3;
}

}  // namespace

double Decode(DataType type, const void* e) {
  switch (type) {
    case DataType::kUInt8: {
      uint8_t v;
      std::memcpy(&v, e, 1);
      return v;
    }
    case DataType::kBool: {
      uint8_t v;
      std::memcpy(&v, e, 1);
      return v;
    }
    case DataType::kInt8: {
      int8_t v;
      std::memcpy(&v, e, 1);
      return v;
    }
    case DataType::kInt16: {
      int16_t v;
      std::memcpy(&v, e, 2);
      return v;
    }
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, e, 4);
      return v;
    }
    case DataType::kInt64: {
      int64_t v;
      std::memcpy(&v, e, 8);
      return static_cast<double>(v);
    }
    case DataType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, e, 2);
      return HalfToFloat(v);
    }
    case DataType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, e, 2);
      return BFloat16ToFloat(v);
    }
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, e, 4);
      return v;
    }
    case DataType::kFloat64: {
      double v;
      std::memcpy(&v, e, 8);
      return v;
    }
  }
  return 0;
}

Periodic::Periodic(DataType type, const std::vector<double>& values,
                   double tolerance)
    : type_(type),
      elem_(DataTypeSize(type)),
      tolerance_(tolerance),
      values_(values),
      tile_(2 * kTile * elem_) {
  for (int64_t i = 0; i < 2 * kTile; ++i) {
    Encode(type, values_[i % kPeriod], tile_.data() + i * elem_);
  }
}

void Periodic::Fill(int64_t first, int64_t count, void* dst) const {
  const char* src = tile_.data() + (first % kPeriod) * elem_;
  char* out = static_cast<char*>(dst);
  for (int64_t done = 0; done < count; done += kTile) {
    const int64_t n = std::min(kTile, count - done);
    std::memcpy(out + done * elem_, src, n * elem_);
  }
}

absl::Status Periodic::Check(int64_t first, int64_t count, const void* got,
                             const std::string& what) const {
  const char* want = tile_.data() + (first % kPeriod) * elem_;
  const char* in = static_cast<const char*>(got);
  for (int64_t done = 0; done < count; done += kTile) {
    const int64_t n = std::min(kTile, count - done);
    const char* g = in + done * elem_;
    if (tolerance_ == 0 && std::memcmp(g, want, n * elem_) == 0) continue;
    for (int64_t j = 0; j < n; ++j) {
      const double w = Decode(type_, want + j * elem_);
      const double v = Decode(type_, g + j * elem_);
      const bool ok =
          tolerance_ == 0
              ? std::memcmp(g + j * elem_, want + j * elem_, elem_) == 0
              : std::fabs(v - w) <= tolerance_ * std::max(1.0, std::fabs(w));
      if (!ok) {
        return absl::DataLossError(
            absl::StrCat(what, ": element ", done + j, " is ", v, ", expected ",
                         w, " (", DataTypeName(type_), ")"));
      }
    }
  }
  return absl::OkStatus();
}

Periodic InputStream(DataType type, ReduceOp op, int64_t s) {
  std::vector<double> values(kPeriod);
  for (int64_t k = 0; k < kPeriod; ++k) {
    values[k] = static_cast<double>(InputValue(type, op, (k + s) % kPeriod));
  }
  return Periodic(type, values);
}

Periodic ExpectedReduction(DataType type, ReduceOp op, int n) {
  std::vector<double> values(kPeriod);
  double tolerance = 0;
  for (int64_t k = 0; k < kPeriod; ++k) {
    // Sums and products in uint64 wrap exactly like the kernels' unsigned
    // arithmetic once truncated to the dtype's width by Encode.
    uint64_t sum = 0, product = 1;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int r = 0; r < n; ++r) {
      const int64_t v = InputValue(type, op, (k + r) % kPeriod);
      sum += static_cast<uint64_t>(v);
      product *= static_cast<uint64_t>(v);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const auto ssum = static_cast<int64_t>(sum);
    switch (op) {
      case ReduceOp::kSum:
        values[k] = type == DataType::kBool ? (hi != 0) : ssum;
        break;
      case ReduceOp::kAverage:
        if (IsFloat(type)) {
          values[k] = static_cast<double>(ssum) / n;
        } else {
          values[k] = static_cast<double>(ssum / n);  // truncates toward 0
        }
        break;
      case ReduceOp::kMin:
        values[k] = static_cast<double>(lo);
        break;
      case ReduceOp::kMax:
        values[k] = static_cast<double>(hi);
        break;
      case ReduceOp::kProduct:
        values[k] = type == DataType::kBool
                        ? (lo != 0)
                        : static_cast<double>(static_cast<int64_t>(product));
        break;
    }
  }
  if (op == ReduceOp::kAverage && IsFloat(type)) {
    switch (type) {
      case DataType::kFloat16:
        tolerance = 1.0 / 512;
        break;
      case DataType::kBFloat16:
        tolerance = 1.0 / 64;
        break;
      case DataType::kFloat32:
        tolerance = 1e-6;
        break;
      default:
        tolerance = 1e-14;
        break;
    }
  }
  return Periodic(type, values, tolerance);
}

Periodic ExactFloat32Average(int n) {
  std::vector<double> values(kPeriod);
  for (int64_t k = 0; k < kPeriod; ++k) {
    float sum = 0;  // |sum| <= 3n: exact in float for any plausible n
    for (int r = 0; r < n; ++r) {
      sum += static_cast<float>(
          InputValue(DataType::kFloat32, ReduceOp::kSum, (k + r) % kPeriod));
    }
    values[k] = sum / static_cast<float>(n);  // one float rounding, as kolo
  }
  return Periodic(DataType::kFloat32, values);
}

void Poison(void* data, size_t bytes) {
  if (bytes > 0) std::memset(data, 0x5a, bytes);
}

}  // namespace kolo::bench
