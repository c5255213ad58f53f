// Reduction kernels. How they are built, and why:
//
// Each (DataType, ReduceOp) pair maps to one instantiation of a loop
// template over a storage type T and an element functor Op, looked up once
// per call in a table: there is no per-element dispatch. The loops are
// plain counted loops over __restrict pointers, so the compiler vectorises
// them without runtime alias checks; the aliasing the contract allows
// (dst == src, out == a or out == b) is resolved before the loop by picking
// the in-place, swapped or self variant. The loop templates are kept out of
// line (ABSL_ATTRIBUTE_NOINLINE) so that the compiler's vectorisation report
// names each instantiation (scripts/vectorization-report.sh).
//
// Integer sums and products run on the unsigned type of the width, widened
// to at least `unsigned` so that uint16 * uint16 never overflows a signed
// int; min and max compare in the signed type for signed integers. float16
// and bfloat16 are decoded to float, reduced, and rounded back to nearest
// even with the inline conversions of allreduce/kernels_half.h.
#include "allreduce/kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "allreduce/kernels_half.h"

namespace kolo {
namespace {

using kernels_internal::BFloat16BitsToFloat;
using kernels_internal::FloatToBFloat16Bits;
using kernels_internal::FloatToHalfBits;
using kernels_internal::HalfBitsToFloat;

constexpr absl::string_view kBoolAverageError =
    "average is not defined for bool tensors; use sum (logical or) or min "
    "(logical and)";

// ---- Element functors: static T Apply(T a, T b) on the storage type. ----

// Unsigned integers narrower than `unsigned` promote to (signed) int, where
// uint16 * uint16 can overflow: compute in `unsigned` instead.
template <typename T>
using Widened =
    std::conditional_t<std::is_integral_v<T> && (sizeof(T) < sizeof(unsigned)),
                       unsigned, T>;

template <typename T>
struct AddOp {
  static_assert(!std::is_signed_v<T> || std::is_floating_point_v<T>,
                "integer sums run on the unsigned type");
  static T Apply(T a, T b) {
    return static_cast<T>(static_cast<Widened<T>>(a) +
                          static_cast<Widened<T>>(b));
  }
};

template <typename T>
struct MulOp {
  static_assert(!std::is_signed_v<T> || std::is_floating_point_v<T>,
                "integer products run on the unsigned type");
  static T Apply(T a, T b) {
    return static_cast<T>(static_cast<Widened<T>>(a) *
                          static_cast<Widened<T>>(b));
  }
};

// min/max: for floating point a NaN in either operand gives NaN (a != a is
// the NaN test; written as a select so that it vectorises).
template <typename T>
struct MinOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || a != a) ? a : b;
    } else {
      return b < a ? b : a;
    }
  }
};

template <typename T>
struct MaxOp {
  static T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a < b ? b : a;
    }
  }
};

// bool as bytes: any non-zero byte is true; results are 0 or 1.
struct OrOp {
  static uint8_t Apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a | b) != 0);
  }
};
struct AndOp {
  static uint8_t Apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) & (b != 0));
  }
};

struct HalfCodec {
  static float Decode(uint16_t h) { return HalfBitsToFloat(h); }
  static uint16_t Encode(float f) { return FloatToHalfBits(f); }
};
struct BFloat16Codec {
  static float Decode(uint16_t b) { return BFloat16BitsToFloat(b); }
  static uint16_t Encode(float f) { return FloatToBFloat16Bits(f); }
};

// 16-bit floats: decode both operands, apply the float op, round back.
template <typename Codec, template <typename> class FloatOp>
struct ViaFloat {
  static uint16_t Apply(uint16_t a, uint16_t b) {
    return Codec::Encode(
        FloatOp<float>::Apply(Codec::Decode(a), Codec::Decode(b)));
  }
};

// ---- Loops. ----

template <typename T, typename Op>
ABSL_ATTRIBUTE_NOINLINE void InPlaceLoop(T* __restrict dst,
                                         const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::Apply(dst[i], src[i]);
}

// dst[i] = src[i] op dst[i]: Reduce with out == b keeps the operand order.
template <typename T, typename Op>
ABSL_ATTRIBUTE_NOINLINE void SwappedInPlaceLoop(T* __restrict dst,
                                                const T* __restrict src,
                                                size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::Apply(src[i], dst[i]);
}

template <typename T, typename Op>
ABSL_ATTRIBUTE_NOINLINE void OutOfPlaceLoop(T* __restrict out,
                                            const T* __restrict a,
                                            const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], b[i]);
}

template <typename T, typename Op>
ABSL_ATTRIBUTE_NOINLINE void SelfLoop(T* data, size_t n) {
  for (size_t i = 0; i < n; ++i) data[i] = Op::Apply(data[i], data[i]);
}

using Kernel = void (*)(void* out, const void* a, const void* b, size_t n);

// out = a op b, for every aliasing the contract allows.
template <typename T, typename Op>
void RunKernel(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (o == x && o == y) {
    SelfLoop<T, Op>(o, n);
  } else if (o == x) {
    InPlaceLoop<T, Op>(o, y, n);
  } else if (o == y) {
    SwappedInPlaceLoop<T, Op>(o, x, n);
  } else {
    OutOfPlaceLoop<T, Op>(o, x, y, n);
  }
}

// Indexed by ReduceOp; average reduces like sum, nullptr = not defined.
using KernelRow = std::array<Kernel, kNumReduceOps>;

// U: the unsigned type of the width, S: the type min/max compare in.
template <typename U, typename S>
constexpr KernelRow IntegerRow() {
  return {&RunKernel<U, AddOp<U>>, &RunKernel<U, AddOp<U>>,
          &RunKernel<S, MinOp<S>>, &RunKernel<S, MaxOp<S>>,
          &RunKernel<U, MulOp<U>>};
}

template <typename F>
constexpr KernelRow FloatRow() {
  return {&RunKernel<F, AddOp<F>>, &RunKernel<F, AddOp<F>>,
          &RunKernel<F, MinOp<F>>, &RunKernel<F, MaxOp<F>>,
          &RunKernel<F, MulOp<F>>};
}

template <typename Codec>
constexpr KernelRow HalfRow() {
  return {&RunKernel<uint16_t, ViaFloat<Codec, AddOp>>,
          &RunKernel<uint16_t, ViaFloat<Codec, AddOp>>,
          &RunKernel<uint16_t, ViaFloat<Codec, MinOp>>,
          &RunKernel<uint16_t, ViaFloat<Codec, MaxOp>>,
          &RunKernel<uint16_t, ViaFloat<Codec, MulOp>>};
}

constexpr KernelRow BoolRow() {
  return {&RunKernel<uint8_t, OrOp>, nullptr, &RunKernel<uint8_t, AndOp>,
          &RunKernel<uint8_t, OrOp>, &RunKernel<uint8_t, AndOp>};
}

// Indexed by DataType.
constexpr std::array<KernelRow, kNumDataTypes> kKernels = {
    IntegerRow<uint8_t, uint8_t>(),
    IntegerRow<uint8_t, int8_t>(),
    IntegerRow<uint16_t, int16_t>(),
    IntegerRow<uint32_t, int32_t>(),
    IntegerRow<uint64_t, int64_t>(),
    HalfRow<HalfCodec>(),
    HalfRow<BFloat16Codec>(),
    FloatRow<float>(),
    FloatRow<double>(),
    BoolRow(),
};

absl::Status CheckType(DataType type, absl::string_view what) {
  if (static_cast<int>(type) >= kNumDataTypes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": unknown data type ", static_cast<int>(type),
        " (a value outside kolo::DataType; caller bug or corrupted request)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Kernel> LookupKernel(DataType type, ReduceOp op) {
  if (absl::Status s = CheckType(type, "reduce"); !s.ok()) return s;
  if (static_cast<int>(op) >= kNumReduceOps) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce: unknown reduce op ", static_cast<int>(op),
                     " (a value outside kolo::ReduceOp)"));
  }
  Kernel k = kKernels[static_cast<int>(type)][static_cast<int>(op)];
  if (k == nullptr) return absl::InvalidArgumentError(kBoolAverageError);
  return k;
}

// ---- Unary maps (DivideBy, Scale). ----

// data[i] = f(data[i]). A function of its own: inlined into MapInto, GCC 12
// merged it with the loop below and ran it as that loop's scalar fallback
// for overlapping buffers, never vectorised.
template <typename T, typename F>
__attribute__((noinline)) void MapEachInPlace(T* data, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) data[i] = f(data[i]);
}

// out[i] = f(in[i]); in == out (in place) or no overlap.
template <typename T, typename F>
void MapInto(const void* in, void* out, size_t n, F f) {
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  if (src == dst) {
    MapEachInPlace(dst, n, f);
    return;
  }
  const T* __restrict a = src;
  T* __restrict b = dst;
  for (size_t i = 0; i < n; ++i) b[i] = f(a[i]);
}

template <typename T, typename F>
void MapInPlace(void* data, size_t n, F f) {
  MapInto<T>(data, data, n, f);
}

// The 16-bit floats: decode, map in float, round back.
template <typename Codec, typename F>
void MapHalfInto(const void* in, void* out, size_t n, F f) {
  MapInto<uint16_t>(in, out, n, [f](uint16_t h) {
    return Codec::Encode(f(Codec::Decode(h)));
  });
}
template <typename Codec, typename F>
void MapHalfInPlace(void* data, size_t n, F f) {
  MapHalfInto<Codec>(data, data, n, f);
}

// double -> integer of width T: truncate toward zero, then wrap modulo
// 2^bits (NaN and inf give 0). No undefined conversions.
template <typename T>
T TruncateAndWrap(double x) {
  using U = std::make_unsigned_t<T>;
  constexpr double kTwo63 = 9223372036854775808.0;
  if (std::fabs(x) < kTwo63) {
    return static_cast<T>(static_cast<U>(static_cast<int64_t>(x)));
  }
  if (!std::isfinite(x)) return T{0};
  // |x| >= 2^63 is an integer: reduce it modulo 2^64 into [0, 2^64).
  constexpr double kTwo64 = 18446744073709551616.0;
  double r = std::fmod(x, kTwo64);
  if (r < 0) r += kTwo64;
  const uint64_t bits = r >= kTwo64 ? 0 : static_cast<uint64_t>(r);
  return static_cast<T>(static_cast<U>(bits));
}

// Calls `f` with a functor x -> x / n for T: a multiplication by 1/n when n
// is a power of two, a division otherwise. 1/n is then exact, so both round
// the same real x/n: the bits are the same, and a multiply costs half a
// divide or less. (n is a rank count: 1/n stays a normal number.)
template <typename T, typename F>
void WithDivider(int64_t n, F f) {
  const auto tn = static_cast<T>(n);
  if (n > 0 && n <= (int64_t{1} << 20) && (n & (n - 1)) == 0) {
    const T r = T{1} / tn;
    f([r](T x) { return x * r; });
  } else {
    f([tn](T x) { return x / tn; });
  }
}

}  // namespace

absl::Status ReduceInto(DataType type, ReduceOp op, void* dst, const void* src,
                        size_t count) {
  return Reduce(type, op, dst, dst, src, count);
}

absl::Status Reduce(DataType type, ReduceOp op, void* out, const void* a,
                    const void* b, size_t count) {
  absl::StatusOr<Kernel> kernel = LookupKernel(type, op);
  if (!kernel.ok()) return kernel.status();
  if (count > 0) (*kernel)(out, a, b, count);
  return absl::OkStatus();
}

absl::Status DivideBy(DataType type, void* data, size_t count, int64_t n) {
  if (absl::Status s = CheckType(type, "average"); !s.ok()) return s;
  if (type == DataType::kBool) {
    return absl::InvalidArgumentError(kBoolAverageError);
  }
  if (n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "average: cannot divide by ", n, " ranks; the count must be >= 1"));
  }
  if (n == 1 || count == 0) return absl::OkStatus();
  // Integers: C++ division truncates toward zero; |x / n| <= |x| fits.
  auto int_div = [n](auto x) {
    return static_cast<decltype(x)>(static_cast<int64_t>(x) / n);
  };
  switch (type) {
    case DataType::kUInt8:
      MapInPlace<uint8_t>(data, count, int_div);
      break;
    case DataType::kInt8:
      MapInPlace<int8_t>(data, count, int_div);
      break;
    case DataType::kInt16:
      MapInPlace<int16_t>(data, count, int_div);
      break;
    case DataType::kInt32:
      MapInPlace<int32_t>(data, count, int_div);
      break;
    case DataType::kInt64:
      MapInPlace<int64_t>(data, count, int_div);
      break;
    case DataType::kFloat16:
      WithDivider<float>(
          n, [&](auto div) { MapHalfInPlace<HalfCodec>(data, count, div); });
      break;
    case DataType::kBFloat16:
      WithDivider<float>(n, [&](auto div) {
        MapHalfInPlace<BFloat16Codec>(data, count, div);
      });
      break;
    case DataType::kFloat32:
      WithDivider<float>(
          n, [&](auto div) { MapInPlace<float>(data, count, div); });
      break;
    case DataType::kFloat64:
      WithDivider<double>(
          n, [&](auto div) { MapInPlace<double>(data, count, div); });
      break;
    case DataType::kBool:
      break;  // refused above
  }
  return absl::OkStatus();
}

absl::Status Scale(DataType type, void* data, size_t count, double factor) {
  if (absl::Status s = CheckType(type, "scale"); !s.ok()) return s;
  if (type == DataType::kBool) {
    return absl::InvalidArgumentError(
        "scale: bool tensors cannot be scaled (prescale/postscale factors "
        "apply to numeric tensors only)");
  }
  if (count == 0) return absl::OkStatus();
  const auto ff = static_cast<float>(factor);
  auto int_scale = [factor](auto x) {
    return TruncateAndWrap<decltype(x)>(static_cast<double>(x) * factor);
  };
  switch (type) {
    case DataType::kUInt8:
      MapInPlace<uint8_t>(data, count, int_scale);
      break;
    case DataType::kInt8:
      MapInPlace<int8_t>(data, count, int_scale);
      break;
    case DataType::kInt16:
      MapInPlace<int16_t>(data, count, int_scale);
      break;
    case DataType::kInt32:
      MapInPlace<int32_t>(data, count, int_scale);
      break;
    case DataType::kInt64:
      MapInPlace<int64_t>(data, count, int_scale);
      break;
    case DataType::kFloat16:
      MapHalfInPlace<HalfCodec>(data, count, [ff](float x) { return x * ff; });
      break;
    case DataType::kBFloat16:
      MapHalfInPlace<BFloat16Codec>(data, count,
                                    [ff](float x) { return x * ff; });
      break;
    case DataType::kFloat32:
      MapInPlace<float>(data, count, [ff](float x) { return x * ff; });
      break;
    case DataType::kFloat64:
      MapInPlace<double>(data, count,
                         [factor](double x) { return x * factor; });
      break;
    case DataType::kBool:
      break;  // refused above
  }
  return absl::OkStatus();
}

absl::Status ScaleCopy(DataType type, const void* in, void* out, size_t count,
                       double factor) {
  if (factor == 1.0) {
    if (absl::Status s = CheckType(type, "scale"); !s.ok()) return s;
    if (in != out && count > 0) {
      std::memcpy(out, in, count * DataTypeSize(type));
    }
    return absl::OkStatus();
  }
  return FinishCopy(type, in, out, count, 1, factor);
}

absl::Status FinishCopy(DataType type, const void* in, void* out, size_t count,
                        int64_t n, double postscale) {
  if (absl::Status s = CheckType(type, "scale"); !s.ok()) return s;
  const bool divide = n != 1, scale = postscale != 1.0;
  if (type == DataType::kBool && (divide || scale)) {
    return absl::InvalidArgumentError(
        divide ? std::string(kBoolAverageError)
               : "scale: bool tensors cannot be scaled (prescale/postscale "
                 "factors apply to numeric tensors only)");
  }
  if (n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "average: cannot divide by ", n, " ranks; the count must be >= 1"));
  }
  if (count == 0) return absl::OkStatus();
  if (!divide && !scale) {
    if (in != out) std::memcpy(out, in, count * DataTypeSize(type));
    return absl::OkStatus();
  }
  // The same arithmetic as DivideBy followed by Scale, element by element,
  // so that a fused op's result is bitwise the unfused one's.
  const auto ff = static_cast<float>(postscale);
  auto as_int = [&](auto zero) {
    using T = decltype(zero);
    if (!scale) {
      MapInto<T>(in, out, count, [n](T x) {
        return static_cast<T>(static_cast<int64_t>(x) / n);
      });
    } else if (!divide) {
      MapInto<T>(in, out, count, [postscale](T x) {
        return TruncateAndWrap<T>(static_cast<double>(x) * postscale);
      });
    } else {
      MapInto<T>(in, out, count, [n, postscale](T x) {
        const auto q = static_cast<T>(static_cast<int64_t>(x) / n);
        return TruncateAndWrap<T>(static_cast<double>(q) * postscale);
      });
    }
  };
  // 16-bit floats round to their width between the two steps, as the two
  // passes do.
  auto half = [&](auto codec) {
    using Codec = decltype(codec);
    WithDivider<float>(n, [&](auto div) {
      MapHalfInto<Codec>(in, out, count, [&](float x) {
        if (divide) x = div(x);
        if (divide && scale) x = Codec::Decode(Codec::Encode(x));
        if (scale) x = x * ff;
        return x;
      });
    });
  };
  switch (type) {
    case DataType::kUInt8:
      as_int(uint8_t{0});
      break;
    case DataType::kInt8:
      as_int(int8_t{0});
      break;
    case DataType::kInt16:
      as_int(int16_t{0});
      break;
    case DataType::kInt32:
      as_int(int32_t{0});
      break;
    case DataType::kInt64:
      as_int(int64_t{0});
      break;
    case DataType::kFloat16:
      half(HalfCodec{});
      break;
    case DataType::kBFloat16:
      half(BFloat16Codec{});
      break;
    case DataType::kFloat32:
      if (!divide) {
        MapInto<float>(in, out, count, [ff](float x) { return x * ff; });
        break;
      }
      WithDivider<float>(n, [&](auto div) {
        if (!scale) {
          MapInto<float>(in, out, count, div);
        } else {
          MapInto<float>(in, out, count,
                         [div, ff](float x) { return div(x) * ff; });
        }
      });
      break;
    case DataType::kFloat64:
      WithDivider<double>(n, [&](auto div) {
        MapInto<double>(in, out, count, [&](double x) {
          if (divide) x = div(x);
          if (scale) x = x * postscale;
          return x;
        });
      });
      break;
    case DataType::kBool:
      break;  // refused above
  }
  return absl::OkStatus();
}

absl::Status FillIdentity(DataType type, ReduceOp op, void* data,
                          size_t count) {
  absl::StatusOr<Kernel> kernel = LookupKernel(type, op);  // validates both
  if (!kernel.ok()) return kernel.status();
  const bool is_sum = op == ReduceOp::kSum || op == ReduceOp::kAverage;
  auto fill = [&](auto zero, auto one, auto lowest, auto highest) {
    using T = decltype(zero);
    T value = is_sum                     ? zero
              : op == ReduceOp::kProduct ? one
              : op == ReduceOp::kMin     ? highest
                                         : lowest;
    std::fill_n(static_cast<T*>(data), count, value);
  };
  auto fill_int = [&](auto zero) {
    using T = decltype(zero);
    fill(T{0}, T{1}, std::numeric_limits<T>::min(),
         std::numeric_limits<T>::max());
  };
  constexpr float kInf = std::numeric_limits<float>::infinity();
  switch (type) {
    case DataType::kUInt8:
      fill_int(uint8_t{});
      break;
    case DataType::kInt8:
      fill_int(int8_t{});
      break;
    case DataType::kInt16:
      fill_int(int16_t{});
      break;
    case DataType::kInt32:
      fill_int(int32_t{});
      break;
    case DataType::kInt64:
      fill_int(int64_t{});
      break;
    case DataType::kFloat16:
      fill(FloatToHalfBits(0.0f), FloatToHalfBits(1.0f), FloatToHalfBits(-kInf),
           FloatToHalfBits(kInf));
      break;
    case DataType::kBFloat16:
      fill(FloatToBFloat16Bits(0.0f), FloatToBFloat16Bits(1.0f),
           FloatToBFloat16Bits(-kInf), FloatToBFloat16Bits(kInf));
      break;
    case DataType::kFloat32:
      fill(0.0f, 1.0f, -kInf, kInf);
      break;
    case DataType::kFloat64:
      fill(0.0, 1.0, -std::numeric_limits<double>::infinity(),
           std::numeric_limits<double>::infinity());
      break;
    case DataType::kBool:
      // false for sum/max (OR), true for product/min (AND).
      fill(uint8_t{0}, uint8_t{1}, uint8_t{0}, uint8_t{1});
      break;
  }
  return absl::OkStatus();
}

float HalfToFloat(uint16_t h) { return HalfBitsToFloat(h); }
uint16_t FloatToHalf(float f) { return FloatToHalfBits(f); }
float BFloat16ToFloat(uint16_t b) { return BFloat16BitsToFloat(b); }
uint16_t FloatToBFloat16(float f) { return FloatToBFloat16Bits(f); }

}  // namespace kolo
