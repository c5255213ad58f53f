#include "tests/testing/elements.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kolo::testing {
namespace {

// float16 bits of x, or false if x is not exactly a normal float16 (or 0).
bool ToHalf(double x, uint16_t* out) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (x == 0) {
    *out = sign;
    return true;
  }
  int e = 0;
  const double m = std::frexp(std::fabs(x), &e);  // |x| = m * 2^e
  const int biased = e + 14;                      // 1.f * 2^(biased - 15)
  if (biased < 1 || biased > 30) return false;
  const double f = (m * 2 - 1) * 1024;
  if (f != std::floor(f)) return false;
  *out = static_cast<uint16_t>(sign | (biased << 10) | static_cast<int>(f));
  return true;
}

double FromHalf(uint16_t h) {
  const double sign = (h & 0x8000) ? -1 : 1;
  const int biased = (h >> 10) & 31;
  const int f = h & 1023;
  if (biased == 0) return sign * std::ldexp(f, -24);
  if (biased == 31) return f ? NAN : sign * INFINITY;
  return sign * std::ldexp(1 + f / 1024.0, biased - 15);
}

bool ToBFloat16(double x, uint16_t* out) {
  const float f = static_cast<float>(x);
  if (static_cast<double>(f) != x) return false;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (bits & 0xffff) return false;
  *out = static_cast<uint16_t>(bits >> 16);
  return true;
}

double FromBFloat16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
bool Put(T v, double x, char* dst) {
  std::memcpy(dst, &v, sizeof(T));
  return static_cast<double>(v) == x;
}

template <typename T>
double Get(const char* src) {
  T v;
  std::memcpy(&v, src, sizeof(T));
  return static_cast<double>(v);
}

}  // namespace

bool EncodeElement(DataType t, double x, char* dst) {
  uint16_t h = 0;
  switch (t) {
    case DataType::kInt8:
      return Put(static_cast<int8_t>(x), x, dst);
    case DataType::kInt16:
      return Put(static_cast<int16_t>(x), x, dst);
    case DataType::kInt32:
      return Put(static_cast<int32_t>(x), x, dst);
    case DataType::kInt64:
      return Put(static_cast<int64_t>(x), x, dst);
    case DataType::kUInt8:
      return Put(static_cast<uint8_t>(x), x, dst);
    case DataType::kBool:
      return Put(static_cast<uint8_t>(x != 0), x, dst);
    case DataType::kFloat32:
      return Put(static_cast<float>(x), x, dst);
    case DataType::kFloat64:
      return Put(x, x, dst);
    case DataType::kFloat16: {
      const bool ok = ToHalf(x, &h);
      std::memcpy(dst, &h, 2);
      return ok;
    }
    case DataType::kBFloat16: {
      const bool ok = ToBFloat16(x, &h);
      std::memcpy(dst, &h, 2);
      return ok;
    }
  }
  return false;
}

double DecodeElement(DataType t, const char* src) {
  switch (t) {
    case DataType::kInt8:
      return Get<int8_t>(src);
    case DataType::kInt16:
      return Get<int16_t>(src);
    case DataType::kInt32:
      return Get<int32_t>(src);
    case DataType::kInt64:
      return Get<int64_t>(src);
    case DataType::kUInt8:
    case DataType::kBool:
      return Get<uint8_t>(src);
    case DataType::kFloat32:
      return Get<float>(src);
    case DataType::kFloat64:
      return Get<double>(src);
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, src, 2);
      return t == DataType::kFloat16 ? FromHalf(h) : FromBFloat16(h);
    }
  }
  return NAN;
}

Bytes EncodeAll(DataType t, const std::vector<double>& values,
                std::string* bad) {
  const size_t e = DataTypeSize(t);
  Bytes out(values.size() * e);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!EncodeElement(t, values[i], out.data() + i * e) && bad->empty()) {
      *bad = absl::StrCat("test value ", values[i], " (element ", i,
                          ") is not exact in ", DataTypeName(t));
    }
  }
  return out;
}

std::string CompareElements(DataType t, absl::string_view what,
                            const Bytes& got, const Bytes& want) {
  const size_t e = DataTypeSize(t);
  if (got.size() != want.size()) {
    return absl::StrCat(what, " has ", got.size() / e, " elements, want ",
                        want.size() / e);
  }
  for (size_t i = 0; i < got.size() / e; ++i) {
    if (std::memcmp(got.data() + i * e, want.data() + i * e, e) != 0) {
      return absl::StrCat(what, " element ", i, " of ", got.size() / e, " is ",
                          DecodeElement(t, got.data() + i * e), ", want ",
                          DecodeElement(t, want.data() + i * e));
    }
  }
  return "";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string CompareShape(absl::string_view what,
                         const std::vector<int64_t>& got,
                         const std::vector<int64_t>& want) {
  if (got == want) return "";
  return absl::StrCat(what, " is ", ShapeText(got), ", want ", ShapeText(want));
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace kolo::testing
