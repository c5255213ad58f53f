// Reduction kernels and element types: every dtype x op on exact values,
// at lengths that exercise the vector tails, plus wrap, NaN/inf, bool,
// float16/bfloat16 conversions, DivideBy, Scale and FillIdentity.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "allreduce/kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/types.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

constexpr DataType kAllTypes[] = {DataType::kUInt8,    DataType::kInt8,
                                  DataType::kInt16,    DataType::kInt32,
                                  DataType::kInt64,    DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kFloat32,
                                  DataType::kFloat64,  DataType::kBool};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage,
                                ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kProduct};
constexpr size_t kLengths[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 33, 64, 1027};

// Byte buffers of `count` elements of `type` built from small integers.
// Integers wrap to their width (so uint8 -5 is 251), floats hold the value
// exactly, bool holds v & 1.
class Buffer {
 public:
  Buffer(DataType type, size_t count)
      : type_(type), bytes_(DataTypeSize(type) * count) {}
  DataType type() const { return type_; }
  size_t count() const { return bytes_.size() / DataTypeSize(type_); }
  uint8_t* data() { return bytes_.data(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  void Set(size_t i, int64_t v) {
    uint8_t* p = bytes_.data() + i * DataTypeSize(type_);
    switch (type_) {
      case DataType::kUInt8:
      case DataType::kInt8:
        *p = static_cast<uint8_t>(v);
        break;
      case DataType::kInt16:
        Store(p, static_cast<uint16_t>(v));
        break;
      case DataType::kInt32:
        Store(p, static_cast<uint32_t>(v));
        break;
      case DataType::kInt64:
        Store(p, static_cast<uint64_t>(v));
        break;
      case DataType::kFloat16:
        Store(p, FloatToHalf(static_cast<float>(v)));
        break;
      case DataType::kBFloat16:
        Store(p, FloatToBFloat16(static_cast<float>(v)));
        break;
      case DataType::kFloat32:
        Store(p, static_cast<float>(v));
        break;
      case DataType::kFloat64:
        Store(p, static_cast<double>(v));
        break;
      case DataType::kBool:
        *p = static_cast<uint8_t>(v & 1);
        break;
    }
  }
  // Floating types only: stores v (exactly representable) with its sign,
  // so that a product like 0 * -3 gives -0 as IEEE does.
  void SetFloat(size_t i, double v) {
    uint8_t* p = bytes_.data() + i * DataTypeSize(type_);
    if (type_ == DataType::kFloat16) {
      Store(p, FloatToHalf(static_cast<float>(v)));
    } else if (type_ == DataType::kBFloat16) {
      Store(p, FloatToBFloat16(static_cast<float>(v)));
    } else if (type_ == DataType::kFloat32) {
      Store(p, static_cast<float>(v));
    } else {
      Store(p, v);
    }
  }
  // The value of element i as an integer in the type's own interpretation.
  int64_t Get(size_t i) const {
    const uint8_t* p = bytes_.data() + i * DataTypeSize(type_);
    switch (type_) {
      case DataType::kUInt8:
      case DataType::kBool:
        return *p;
      case DataType::kInt8:
        return static_cast<int8_t>(*p);
      case DataType::kInt16:
        return Load<int16_t>(p);
      case DataType::kInt32:
        return Load<int32_t>(p);
      case DataType::kInt64:
        return Load<int64_t>(p);
      case DataType::kFloat16:
        return static_cast<int64_t>(HalfToFloat(Load<uint16_t>(p)));
      case DataType::kBFloat16:
        return static_cast<int64_t>(BFloat16ToFloat(Load<uint16_t>(p)));
      case DataType::kFloat32:
        return static_cast<int64_t>(Load<float>(p));
      case DataType::kFloat64:
        return static_cast<int64_t>(Load<double>(p));
    }
    return 0;
  }

 private:
  template <typename T>
  static void Store(uint8_t* p, T v) {
    std::memcpy(p, &v, sizeof(T));
  }
  template <typename T>
  static T Load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  DataType type_;
  std::vector<uint8_t> bytes_;
};

bool IsInteger(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8 ||
         t == DataType::kInt16 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

// The expected element for inputs a, b as stored (Get() values); wrapping
// is applied by Buffer::Set when the result is stored.
int64_t Expected(DataType t, ReduceOp op, int64_t a, int64_t b) {
  if (t == DataType::kBool) {
    const bool x = a != 0, y = b != 0;
    return (op == ReduceOp::kSum || op == ReduceOp::kMax) ? (x || y) : (x && y);
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return static_cast<int64_t>(static_cast<uint64_t>(a) +
                                  static_cast<uint64_t>(b));
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kProduct:
      return static_cast<int64_t>(static_cast<uint64_t>(a) *
                                  static_cast<uint64_t>(b));
  }
  return 0;
}

// Inputs: small integers in [-6, 6], so float results are exact; for
// integer types also values near the limits so sums and products wrap.
int64_t InputA(DataType t, size_t i) {
  if (IsInteger(t) && i % 5 == 4) return (int64_t{1} << 62) + 100;  // wraps
  return static_cast<int64_t>(i * 7 % 13) - 6;
}
int64_t InputB(DataType t, size_t i) {
  if (IsInteger(t) && i % 3 == 2) return -(int64_t{1} << 61) - 3;
  return static_cast<int64_t>(i * 5 % 11) - 5;
}

enum class Mode { kReduceInto, kOutOfPlace, kOutIsA, kOutIsB, kAllSame };

TEST(Kernels, EveryTypeOpLengthAndAliasing) {
  for (DataType t : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (t == DataType::kBool && op == ReduceOp::kAverage) continue;
      for (size_t n : kLengths) {
        Buffer a(t, n), b(t, n), expected(t, n), expected_same(t, n);
        for (size_t i = 0; i < n; ++i) {
          a.Set(i, InputA(t, i));
          b.Set(i, InputB(t, i));
        }
        for (size_t i = 0; i < n; ++i) {
          if (IsInteger(t) || t == DataType::kBool ||
              op != ReduceOp::kProduct) {
            expected.Set(i, Expected(t, op, a.Get(i), b.Get(i)));
            expected_same.Set(i, Expected(t, op, a.Get(i), a.Get(i)));
          } else {  // IEEE product: the sign of a zero result matters
            const auto x = static_cast<double>(a.Get(i));
            const auto y = static_cast<double>(b.Get(i));
            expected.SetFloat(i, x * y);
            expected_same.SetFloat(i, x * x);
          }
        }
        for (Mode mode : {Mode::kReduceInto, Mode::kOutOfPlace, Mode::kOutIsA,
                          Mode::kOutIsB, Mode::kAllSame}) {
          Buffer x = a, y = b, out(t, n);
          absl::Status s;
          uint8_t* result = nullptr;
          switch (mode) {
            case Mode::kReduceInto:
              s = ReduceInto(t, op, x.data(), y.data(), n);
              result = x.data();
              break;
            case Mode::kOutOfPlace:
              s = Reduce(t, op, out.data(), x.data(), y.data(), n);
              result = out.data();
              EXPECT_EQ(x.bytes(), a.bytes()) << "input a modified";
              EXPECT_EQ(y.bytes(), b.bytes()) << "input b modified";
              break;
            case Mode::kOutIsA:
              s = Reduce(t, op, x.data(), x.data(), y.data(), n);
              result = x.data();
              break;
            case Mode::kOutIsB:
              s = Reduce(t, op, y.data(), x.data(), y.data(), n);
              result = y.data();
              break;
            case Mode::kAllSame:
              s = Reduce(t, op, x.data(), x.data(), x.data(), n);
              result = x.data();
              break;
          }
          ASSERT_TRUE(s.ok()) << s;
          const Buffer& want =
              mode == Mode::kAllSame ? expected_same : expected;
          ASSERT_EQ(0, n == 0 ? 0
                              : std::memcmp(result, want.bytes().data(),
                                            want.bytes().size()))
              << DataTypeName(t) << " " << ReduceOpName(op) << " n=" << n
              << " mode=" << static_cast<int>(mode);
        }
      }
    }
  }
}

TEST(Kernels, DoesNotWritePastTheEnd) {
  for (DataType t : kAllTypes) {
    for (size_t n : kLengths) {
      const size_t size = DataTypeSize(t);
      std::vector<uint8_t> a(size * (n + 1), 0x5a), b(size * (n + 1), 0);
      ASSERT_TRUE(ReduceInto(t, ReduceOp::kMax, a.data(), b.data(), n).ok());
      for (size_t i = size * n; i < a.size(); ++i) ASSERT_EQ(a[i], 0x5a);
      std::vector<uint8_t> out(size * (n + 1), 0x5a);
      ASSERT_TRUE(
          Reduce(t, ReduceOp::kMin, out.data(), a.data(), b.data(), n).ok());
      for (size_t i = size * n; i < out.size(); ++i) ASSERT_EQ(out[i], 0x5a);
    }
  }
}

// Reduces one pair of T values with ReduceInto and returns the result.
template <typename T>
T ReduceOne(DataType t, ReduceOp op, T a, T b) {
  absl::Status s = ReduceInto(t, op, &a, &b, 1);
  EXPECT_TRUE(s.ok()) << s;
  return a;
}

TEST(Kernels, IntegerSumsAndProductsWrap) {
  EXPECT_EQ(ReduceOne<int8_t>(DataType::kInt8, ReduceOp::kSum, 127, 1), -128);
  EXPECT_EQ(ReduceOne<int8_t>(DataType::kInt8, ReduceOp::kSum, -128, -1), 127);
  EXPECT_EQ(ReduceOne<uint8_t>(DataType::kUInt8, ReduceOp::kSum, 255, 1), 0);
  EXPECT_EQ(ReduceOne<int16_t>(DataType::kInt16, ReduceOp::kSum, 32767, 1),
            -32768);
  EXPECT_EQ(ReduceOne<int32_t>(DataType::kInt32, ReduceOp::kSum,
                               std::numeric_limits<int32_t>::max(), 1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ReduceOne<int64_t>(DataType::kInt64, ReduceOp::kAverage,
                               std::numeric_limits<int64_t>::max(), 1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ReduceOne<uint8_t>(DataType::kUInt8, ReduceOp::kProduct, 16, 16),
            0);
  EXPECT_EQ(ReduceOne<int8_t>(DataType::kInt8, ReduceOp::kProduct, 64, 2),
            -128);
  EXPECT_EQ(ReduceOne<int8_t>(DataType::kInt8, ReduceOp::kProduct, -128, -1),
            -128);
  // 65535 * 65535 overflows a signed int if computed naively.
  EXPECT_EQ(ReduceOne<int16_t>(DataType::kInt16, ReduceOp::kProduct, -1, -1),
            1);
  EXPECT_EQ(ReduceOne<int16_t>(DataType::kInt16, ReduceOp::kProduct, 256, 256),
            0);
  EXPECT_EQ(
      ReduceOne<int32_t>(DataType::kInt32, ReduceOp::kProduct, 65536, 65536),
      0);
  EXPECT_EQ(ReduceOne<int32_t>(DataType::kInt32, ReduceOp::kProduct,
                               std::numeric_limits<int32_t>::min(), -1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ReduceOne<int64_t>(DataType::kInt64, ReduceOp::kProduct,
                               int64_t{1} << 32, int64_t{1} << 32),
            0);
  EXPECT_EQ(ReduceOne<int64_t>(DataType::kInt64, ReduceOp::kProduct,
                               std::numeric_limits<int64_t>::min(), -1),
            std::numeric_limits<int64_t>::min());
}

TEST(Kernels, MinMaxCompareSignedOrUnsignedByType) {
  EXPECT_EQ(ReduceOne<int8_t>(DataType::kInt8, ReduceOp::kMin, -128, 127),
            -128);
  EXPECT_EQ(ReduceOne<int8_t>(DataType::kInt8, ReduceOp::kMax, -1, -2), -1);
  EXPECT_EQ(ReduceOne<uint8_t>(DataType::kUInt8, ReduceOp::kMax, 200, 100),
            200);
  EXPECT_EQ(ReduceOne<uint8_t>(DataType::kUInt8, ReduceOp::kMin, 200, 100),
            100);
  EXPECT_EQ(ReduceOne<int16_t>(DataType::kInt16, ReduceOp::kMin, -5, 3), -5);
  EXPECT_EQ(ReduceOne<int32_t>(DataType::kInt32, ReduceOp::kMax, -5, -30), -5);
  EXPECT_EQ(ReduceOne<int64_t>(DataType::kInt64, ReduceOp::kMin,
                               std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ReduceOne<int64_t>(DataType::kInt64, ReduceOp::kMax, -1,
                               std::numeric_limits<int64_t>::min()),
            -1);
}

TEST(Kernels, BoolIsLogicalAndAnyNonZeroIsTrue) {
  const std::vector<uint8_t> a = {0, 0, 1, 1, 2, 255, 0, 128, 7};
  const std::vector<uint8_t> b = {0, 1, 0, 1, 0, 0, 254, 64, 9};
  const std::vector<uint8_t> want_or = {0, 1, 1, 1, 1, 1, 1, 1, 1};
  const std::vector<uint8_t> want_and = {0, 0, 0, 1, 0, 0, 0, 1, 1};
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct}) {
    std::vector<uint8_t> out(a.size(), 0x77);
    ASSERT_TRUE(
        Reduce(DataType::kBool, op, out.data(), a.data(), b.data(), a.size())
            .ok());
    const bool is_or = op == ReduceOp::kSum || op == ReduceOp::kMax;
    EXPECT_EQ(out, is_or ? want_or : want_and) << ReduceOpName(op);
  }
}

TEST(Kernels, BoolAverageIsRefused) {
  uint8_t a[2] = {1, 0}, b[2] = {1, 1};
  for (absl::Status s :
       {ReduceInto(DataType::kBool, ReduceOp::kAverage, a, b, 2),
        Reduce(DataType::kBool, ReduceOp::kAverage, a, a, b, 2),
        DivideBy(DataType::kBool, a, 2, 2),
        FillIdentity(DataType::kBool, ReduceOp::kAverage, a, 2)}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("average is not defined for bool tensors; use sum "
                          "(logical or) or min (logical and)"));
  }
  EXPECT_EQ(a[0], 1);  // untouched
  EXPECT_EQ(Scale(DataType::kBool, a, 2, 2.0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Kernels, UnknownEnumValuesAreRefused) {
  uint8_t a[1] = {0}, b[1] = {0};
  EXPECT_EQ(
      ReduceInto(static_cast<DataType>(42), ReduceOp::kSum, a, b, 1).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ReduceInto(DataType::kUInt8, static_cast<ReduceOp>(9), a, b, 1).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DivideBy(static_cast<DataType>(42), a, 1, 2).code(),
            absl::StatusCode::kInvalidArgument);
}

// Special float values through one dtype, as float in and float out.
struct FloatCodec {
  DataType type;
  std::vector<uint8_t> (*encode)(float);
  float (*decode)(const std::vector<uint8_t>&);
};

template <typename T>
std::vector<uint8_t> Bytes(T v) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}
template <typename T>
T FromBytes(const std::vector<uint8_t>& b) {
  T v;
  std::memcpy(&v, b.data(), sizeof(T));
  return v;
}

const FloatCodec kFloatCodecs[] = {
    {DataType::kFloat32, [](float f) { return Bytes(f); },
     [](const std::vector<uint8_t>& b) { return FromBytes<float>(b); }},
    {DataType::kFloat64, [](float f) { return Bytes(static_cast<double>(f)); },
     [](const std::vector<uint8_t>& b) {
       return static_cast<float>(FromBytes<double>(b));
     }},
    {DataType::kFloat16, [](float f) { return Bytes(FloatToHalf(f)); },
     [](const std::vector<uint8_t>& b) {
       return HalfToFloat(FromBytes<uint16_t>(b));
     }},
    {DataType::kBFloat16, [](float f) { return Bytes(FloatToBFloat16(f)); },
     [](const std::vector<uint8_t>& b) {
       return BFloat16ToFloat(FromBytes<uint16_t>(b));
     }},
};

TEST(Kernels, NaNAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const FloatCodec& c : kFloatCodecs) {
    auto apply = [&](ReduceOp op, float a, float b) {
      std::vector<uint8_t> x = c.encode(a), y = c.encode(b);
      EXPECT_TRUE(ReduceInto(c.type, op, x.data(), y.data(), 1).ok());
      return c.decode(x);
    };
    SCOPED_TRACE(std::string(DataTypeName(c.type)));
    // min and max propagate NaN from either side.
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kMin, nan, 1)));
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kMin, 1, nan)));
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kMax, nan, 1)));
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kMax, 1, nan)));
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kMax, -inf, nan)));
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kMin, nan, inf)));
    // sum and product follow IEEE.
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kSum, nan, 1)));
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kSum, inf, -inf)));
    EXPECT_TRUE(std::isnan(apply(ReduceOp::kProduct, 0, inf)));
    EXPECT_EQ(apply(ReduceOp::kSum, inf, 1), inf);
    EXPECT_EQ(apply(ReduceOp::kAverage, -inf, -1), -inf);
    EXPECT_EQ(apply(ReduceOp::kProduct, -inf, -2), inf);
    EXPECT_EQ(apply(ReduceOp::kMin, -inf, 1), -inf);
    EXPECT_EQ(apply(ReduceOp::kMax, inf, 1), inf);
    EXPECT_EQ(apply(ReduceOp::kMin, inf, 1), 1);
    EXPECT_EQ(apply(ReduceOp::kMax, -inf, -1), -1);
    EXPECT_EQ(apply(ReduceOp::kMin, -2.5f, 3), -2.5f);
    EXPECT_EQ(apply(ReduceOp::kMax, -2.5f, -3), -2.5f);
  }
  // Overflow to inf in the narrow types: rounded after the float sum.
  EXPECT_EQ(
      HalfToFloat(ReduceOne<uint16_t>(DataType::kFloat16, ReduceOp::kSum,
                                      FloatToHalf(65504), FloatToHalf(32))),
      inf);
  EXPECT_EQ(ReduceOne<uint16_t>(DataType::kBFloat16, ReduceOp::kProduct,
                                FloatToBFloat16(1e38f), FloatToBFloat16(10)),
            FloatToBFloat16(inf));
}

TEST(Kernels, DivideByTruncatesIntegersTowardZero) {
  std::vector<int32_t> i32 = {-7, 7, -8, 0, -1, 1};
  ASSERT_TRUE(DivideBy(DataType::kInt32, i32.data(), i32.size(), 2).ok());
  EXPECT_EQ(i32, (std::vector<int32_t>{-3, 3, -4, 0, 0, 0}));
  std::vector<int8_t> i8 = {-128, 127, -7};
  ASSERT_TRUE(DivideBy(DataType::kInt8, i8.data(), i8.size(), 3).ok());
  EXPECT_EQ(i8, (std::vector<int8_t>{-42, 42, -2}));
  std::vector<uint8_t> u8 = {255, 7};
  ASSERT_TRUE(DivideBy(DataType::kUInt8, u8.data(), u8.size(), 2).ok());
  EXPECT_EQ(u8, (std::vector<uint8_t>{127, 3}));
  std::vector<int16_t> i16 = {-32768, 9};
  ASSERT_TRUE(DivideBy(DataType::kInt16, i16.data(), i16.size(), 4).ok());
  EXPECT_EQ(i16, (std::vector<int16_t>{-8192, 2}));
  std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), -9};
  ASSERT_TRUE(DivideBy(DataType::kInt64, i64.data(), i64.size(), 2).ok());
  EXPECT_EQ(
      i64, (std::vector<int64_t>{std::numeric_limits<int64_t>::min() / 2, -4}));
  std::vector<float> f32 = {7, -3};
  ASSERT_TRUE(DivideBy(DataType::kFloat32, f32.data(), f32.size(), 2).ok());
  EXPECT_EQ(f32, (std::vector<float>{3.5f, -1.5f}));
  std::vector<double> f64 = {1, 10};
  ASSERT_TRUE(DivideBy(DataType::kFloat64, f64.data(), f64.size(), 3).ok());
  EXPECT_EQ(f64, (std::vector<double>{1.0 / 3, 10.0 / 3}));
  std::vector<uint16_t> f16 = {FloatToHalf(3), FloatToHalf(-5)};
  ASSERT_TRUE(DivideBy(DataType::kFloat16, f16.data(), f16.size(), 2).ok());
  EXPECT_EQ(HalfToFloat(f16[0]), 1.5f);
  EXPECT_EQ(HalfToFloat(f16[1]), -2.5f);
  std::vector<uint16_t> bf = {FloatToBFloat16(3), FloatToBFloat16(1)};
  ASSERT_TRUE(DivideBy(DataType::kBFloat16, bf.data(), bf.size(), 4).ok());
  EXPECT_EQ(BFloat16ToFloat(bf[0]), 0.75f);
  EXPECT_EQ(BFloat16ToFloat(bf[1]), 0.25f);
  // n = 1 is a no-op, n < 1 is refused.
  ASSERT_TRUE(DivideBy(DataType::kInt32, i32.data(), i32.size(), 1).ok());
  EXPECT_EQ(i32[0], -3);
  EXPECT_EQ(DivideBy(DataType::kInt32, i32.data(), i32.size(), 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DivideBy(DataType::kFloat32, f32.data(), f32.size(), -2).code(),
            absl::StatusCode::kInvalidArgument);
  // Odd lengths through the vector loops.
  for (size_t n : kLengths) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i) - 500;
    ASSERT_TRUE(DivideBy(DataType::kInt32, v.data(), n, 3).ok());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(v[i], (static_cast<int32_t>(i) - 500) / 3);
    }
  }
}

TEST(Kernels, Scale) {
  std::vector<float> f32 = {1, -2.5f, 0};
  ASSERT_TRUE(Scale(DataType::kFloat32, f32.data(), f32.size(), 2.0).ok());
  EXPECT_EQ(f32, (std::vector<float>{2, -5, 0}));
  std::vector<double> f64 = {3};
  ASSERT_TRUE(Scale(DataType::kFloat64, f64.data(), f64.size(), 0.1).ok());
  EXPECT_EQ(f64[0], 3 * 0.1);
  std::vector<int32_t> i32 = {7, -7, 100};
  ASSERT_TRUE(Scale(DataType::kInt32, i32.data(), i32.size(), 0.5).ok());
  EXPECT_EQ(i32, (std::vector<int32_t>{3, -3, 50}));  // toward zero
  std::vector<uint8_t> u8 = {200, 3};
  ASSERT_TRUE(Scale(DataType::kUInt8, u8.data(), u8.size(), 2.0).ok());
  EXPECT_EQ(u8, (std::vector<uint8_t>{144, 6}));  // 400 wraps to 144
  std::vector<int8_t> i8 = {100, -3};
  ASSERT_TRUE(Scale(DataType::kInt8, i8.data(), i8.size(), 2.0).ok());
  EXPECT_EQ(i8, (std::vector<int8_t>{-56, -6}));
  std::vector<int64_t> i64 = {int64_t{1} << 62, -(int64_t{1} << 62), 5};
  ASSERT_TRUE(Scale(DataType::kInt64, i64.data(), i64.size(), 4.0).ok());
  EXPECT_EQ(i64, (std::vector<int64_t>{0, 0, 20}));  // 2^64 wraps to 0
  std::vector<int16_t> i16 = {1, 2};
  ASSERT_TRUE(Scale(DataType::kInt16, i16.data(), i16.size(),
                    std::numeric_limits<double>::quiet_NaN())
                  .ok());
  EXPECT_EQ(i16, (std::vector<int16_t>{0, 0}));  // NaN gives 0, no UB
  std::vector<uint16_t> f16 = {FloatToHalf(1.5f)};
  ASSERT_TRUE(Scale(DataType::kFloat16, f16.data(), f16.size(), 2.0).ok());
  EXPECT_EQ(HalfToFloat(f16[0]), 3.0f);
  std::vector<uint16_t> bf = {FloatToBFloat16(-1.5f)};
  ASSERT_TRUE(Scale(DataType::kBFloat16, bf.data(), bf.size(), -0.5).ok());
  EXPECT_EQ(BFloat16ToFloat(bf[0]), 0.75f);
}

TEST(Kernels, FillIdentity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> f32(5);
  ASSERT_TRUE(
      FillIdentity(DataType::kFloat32, ReduceOp::kMin, f32.data(), 5).ok());
  EXPECT_EQ(f32, std::vector<float>(5, inf));
  ASSERT_TRUE(
      FillIdentity(DataType::kFloat32, ReduceOp::kMax, f32.data(), 5).ok());
  EXPECT_EQ(f32, std::vector<float>(5, -inf));
  std::vector<int8_t> i8(3);
  ASSERT_TRUE(FillIdentity(DataType::kInt8, ReduceOp::kMax, i8.data(), 3).ok());
  EXPECT_EQ(i8, std::vector<int8_t>(3, -128));
  ASSERT_TRUE(FillIdentity(DataType::kInt8, ReduceOp::kMin, i8.data(), 3).ok());
  EXPECT_EQ(i8, std::vector<int8_t>(3, 127));
  std::vector<uint8_t> u8(2);
  ASSERT_TRUE(
      FillIdentity(DataType::kUInt8, ReduceOp::kMin, u8.data(), 2).ok());
  EXPECT_EQ(u8, std::vector<uint8_t>(2, 255));
  std::vector<uint16_t> h(2);
  ASSERT_TRUE(
      FillIdentity(DataType::kFloat16, ReduceOp::kProduct, h.data(), 2).ok());
  EXPECT_EQ(h, std::vector<uint16_t>(2, 0x3c00));
  ASSERT_TRUE(
      FillIdentity(DataType::kBFloat16, ReduceOp::kMin, h.data(), 2).ok());
  EXPECT_EQ(h, std::vector<uint16_t>(2, 0x7f80));
  ASSERT_TRUE(
      FillIdentity(DataType::kFloat16, ReduceOp::kMax, h.data(), 2).ok());
  EXPECT_EQ(h, std::vector<uint16_t>(2, 0xfc00));
  std::vector<double> f64(1);
  ASSERT_TRUE(
      FillIdentity(DataType::kFloat64, ReduceOp::kProduct, f64.data(), 1).ok());
  EXPECT_EQ(f64[0], 1.0);
  std::vector<uint8_t> b(1);
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kMin}) {
    ASSERT_TRUE(FillIdentity(DataType::kBool, op, b.data(), 1).ok());
    EXPECT_EQ(b[0], op == ReduceOp::kProduct || op == ReduceOp::kMin)
        << ReduceOpName(op);
  }
  // The identity really is one: identity op x == x for every type and op.
  for (DataType t : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (t == DataType::kBool && op == ReduceOp::kAverage) continue;
      Buffer x(t, 33), id(t, 33);
      for (size_t i = 0; i < 33; ++i) x.Set(i, InputA(t, i));
      ASSERT_TRUE(FillIdentity(t, op, id.data(), 33).ok());
      ASSERT_TRUE(ReduceInto(t, op, id.data(), x.data(), 33).ok());
      EXPECT_EQ(id.bytes(), x.bytes())
          << DataTypeName(t) << " " << ReduceOpName(op);
    }
  }
}

// Fusion's one-pass pack and unpack give bitwise what the two passes give,
// for every numeric dtype, with and without division and scaling, in place
// and out of place.
TEST(Kernels, ScaleCopyAndFinishCopyMatchThePasses) {
  const DataType types[] = {
      DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
      DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
      DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
  constexpr size_t kCount = 37;
  for (DataType t : types) {
    const size_t elem = DataTypeSize(t);
    // Bytes that are valid values of every type: small integers, some
    // negative, written through the float32 -> type conversion of a sum.
    std::vector<unsigned char> in(kCount * elem);
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = static_cast<unsigned char>((i * 37 + 11) % 97);
    }
    for (int64_t n : {1, 2, 3, 7}) {
      for (double post : {1.0, 0.5, 3.0, -0.25}) {
        SCOPED_TRACE(std::string(DataTypeName(t)) + " n=" + std::to_string(n) +
                     " post=" + std::to_string(post));
        std::vector<unsigned char> two = in, one(in.size(), 0xEE);
        // As allreduce.cc: each pass only when it changes something (a
        // factor of 1 is not an identity for int64 values above 2^53).
        if (n != 1) {
          ASSERT_TRUE(DivideBy(t, two.data(), kCount, n).ok());
        }
        if (post != 1.0) {
          ASSERT_TRUE(Scale(t, two.data(), kCount, post).ok());
        }
        ASSERT_TRUE(FinishCopy(t, in.data(), one.data(), kCount, n, post).ok());
        EXPECT_EQ(one, two);
        std::vector<unsigned char> same = in;  // in place
        ASSERT_TRUE(
            FinishCopy(t, same.data(), same.data(), kCount, n, post).ok());
        EXPECT_EQ(same, two);
      }
    }
    for (double pre : {1.0, 2.0, 0.5, -3.0}) {
      std::vector<unsigned char> two = in, one(in.size(), 0xEE);
      if (pre != 1.0) {
        ASSERT_TRUE(Scale(t, two.data(), kCount, pre).ok());
      }
      ASSERT_TRUE(ScaleCopy(t, in.data(), one.data(), kCount, pre).ok());
      EXPECT_EQ(one, two) << DataTypeName(t) << " pre=" << pre;
    }
  }
}

// x / n of every float bit pattern class (subnormals, the largest values,
// zeros, infinities, NaN and random ones), computed here by a division:
// DivideBy and FinishCopy give it bit for bit, whether n is a power of two
// (then they multiply by 1/n) or not.
template <typename F, typename Bits>
void ExpectQuotientsBitForBit(DataType type) {
  std::vector<F> in = {F{0},
                       -F{0},
                       std::numeric_limits<F>::denorm_min(),
                       -std::numeric_limits<F>::denorm_min() * F{3},
                       std::numeric_limits<F>::min(),
                       std::numeric_limits<F>::min() * F{1.5},
                       std::numeric_limits<F>::max(),
                       std::numeric_limits<F>::lowest(),
                       std::numeric_limits<F>::infinity(),
                       -std::numeric_limits<F>::infinity(),
                       std::numeric_limits<F>::quiet_NaN(),
                       F{1} / F{3},
                       F{-7.25}};
  uint64_t state = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 4096; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    in.push_back(std::bit_cast<F>(static_cast<Bits>(state >> 7)));
  }
  auto bits = [](const std::vector<F>& v) {
    std::vector<Bits> out;
    for (F x : v) out.push_back(std::bit_cast<Bits>(x));
    return out;
  };
  for (int64_t n : {2, 3, 4, 6, 8, 1024, 1000}) {
    SCOPED_TRACE(std::string(DataTypeName(type)) + " n=" + std::to_string(n));
    std::vector<F> want = in;
    volatile F divisor = static_cast<F>(n);  // a division, at run time
    for (F& x : want) x = x / divisor;
    std::vector<F> got = in;
    ASSERT_TRUE(DivideBy(type, got.data(), got.size(), n).ok());
    EXPECT_EQ(bits(got), bits(want));
    std::vector<F> copied(in.size());
    ASSERT_TRUE(
        FinishCopy(type, in.data(), copied.data(), in.size(), n, 1.0).ok());
    EXPECT_EQ(bits(copied), bits(want));
    std::vector<F> scaled_want = want;
    for (F& x : scaled_want) x = x * static_cast<F>(0.75);
    ASSERT_TRUE(
        FinishCopy(type, in.data(), copied.data(), in.size(), n, 0.75).ok());
    EXPECT_EQ(bits(copied), bits(scaled_want));
  }
}

TEST(Kernels, AverageOfFloatsIsTheQuotientBitForBit) {
  ExpectQuotientsBitForBit<float, uint32_t>(DataType::kFloat32);
  ExpectQuotientsBitForBit<double, uint64_t>(DataType::kFloat64);
}

TEST(Kernels, ScaleCopyAndFinishCopyOnBool) {
  const unsigned char in[3] = {0, 1, 1};
  unsigned char out[3] = {9, 9, 9};
  ASSERT_TRUE(ScaleCopy(DataType::kBool, in, out, 3, 1.0).ok());
  EXPECT_EQ(std::memcmp(in, out, 3), 0);
  ASSERT_TRUE(FinishCopy(DataType::kBool, in, out, 3, 1, 1.0).ok());
  EXPECT_THAT(ScaleCopy(DataType::kBool, in, out, 3, 2.0).message(),
              HasSubstr("bool tensors cannot be scaled"));
  EXPECT_THAT(FinishCopy(DataType::kBool, in, out, 3, 2, 1.0).message(),
              HasSubstr("average is not defined for bool"));
  EXPECT_FALSE(FinishCopy(DataType::kFloat32, in, out, 0, 0, 1.0).ok());
}

}  // namespace
}  // namespace kolo
