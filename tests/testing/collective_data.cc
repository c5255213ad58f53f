#include "tests/testing/collective_data.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/collectives.h"
#include "allreduce/kernels.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_transport.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ull + b * 0xBF58476D1CE4E5B9ull + 1;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

// Mix(i, rank) % 60 for i < count (60 is divisible by 2, 3, 4 and 5),
// cached: the grid asks for the same ranks and counts many times.
const std::vector<uint8_t>& Hashes(int rank, int64_t count) {
  static Mutex mu;
  static std::map<std::pair<int, int64_t>,
                  std::unique_ptr<std::vector<uint8_t>>>
      cache;
  MutexLock lock(&mu);
  auto& entry = cache[{rank, count}];
  if (entry == nullptr) {
    entry = std::make_unique<std::vector<uint8_t>>(count);
    for (int64_t i = 0; i < count; ++i) {
      (*entry)[i] = static_cast<uint8_t>(
          Mix(static_cast<uint64_t>(i), static_cast<uint64_t>(rank)) % 60);
    }
  }
  return *entry;
}

// The small integer a rank contributes at an element whose hash is h.
int64_t Value(DataType type, ReduceOp op, int rank, uint8_t h) {
  if (type == DataType::kBool) {
    const bool and_like = op == ReduceOp::kProduct || op == ReduceOp::kMin;
    return and_like ? (h % 4 != 0) : (h % 2);
  }
  const bool is_unsigned = type == DataType::kUInt8;
  if (op == ReduceOp::kProduct) {
    // At most three factors of 2: |product| <= 8 fits every type.
    int64_t v =
        is_unsigned ? 1 + (h % 2) : std::array<int64_t, 3>{-1, 1, 2}[h % 3];
    return (rank >= 3 && v == 2) ? 1 : v;
  }
  return is_unsigned ? (h % 4) : (h % 5) - 2;
}

int64_t Combine(DataType type, ReduceOp op, int64_t a, int64_t b) {
  if (type == DataType::kBool) {
    return (op == ReduceOp::kProduct || op == ReduceOp::kMin) ? std::min(a, b)
                                                              : std::max(a, b);
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return a + b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kProduct:
      return a * b;
  }
  return 0;
}

// Stores small integers (and averages of them) in each dtype's encoding.
template <typename T>
struct IntCodec {
  using Storage = T;
  static T Of(int64_t v) { return static_cast<T>(v); }
  static T Average(int64_t sum, int n) { return static_cast<T>(sum / n); }
};
struct BoolCodec {
  using Storage = uint8_t;
  static uint8_t Of(int64_t v) { return v != 0; }
  static uint8_t Average(int64_t, int) { return 0; }  // refused
};
template <typename T>
struct FloatCodec {
  using Storage = T;
  static T Of(int64_t v) { return static_cast<T>(v); }
  static T Average(int64_t sum, int n) {
    return static_cast<T>(sum) / static_cast<T>(n);
  }
};
template <uint16_t (*kFromFloat)(float)>
struct HalfCodec {
  using Storage = uint16_t;
  static uint16_t Of(int64_t v) { return kFromFloat(static_cast<float>(v)); }
  static uint16_t Average(int64_t sum, int n) {
    return kFromFloat(static_cast<float>(sum) / static_cast<float>(n));
  }
};

template <typename F>
void WithCodec(DataType type, F&& f) {
  switch (type) {
    case DataType::kUInt8:
      return f(IntCodec<uint8_t>{});
    case DataType::kInt8:
      return f(IntCodec<int8_t>{});
    case DataType::kInt16:
      return f(IntCodec<int16_t>{});
    case DataType::kInt32:
      return f(IntCodec<int32_t>{});
    case DataType::kInt64:
      return f(IntCodec<int64_t>{});
    case DataType::kFloat16:
      return f(HalfCodec<FloatToHalf>{});
    case DataType::kBFloat16:
      return f(HalfCodec<FloatToBFloat16>{});
    case DataType::kFloat32:
      return f(FloatCodec<float>{});
    case DataType::kFloat64:
      return f(FloatCodec<double>{});
    case DataType::kBool:
      return f(BoolCodec{});
  }
}

}  // namespace

bool Sanitized() { return TimeoutScale() > 1; }
absl::Duration FabricTimeout() { return Scaled(absl::Seconds(30)); }

// Rank `rank`'s input: elements [first, first + count) of the value model.
Bytes Input(DataType type, ReduceOp op, int rank, int64_t first,
            int64_t count) {
  Bytes out(static_cast<size_t>(count) * DataTypeSize(type));
  WithCodec(type, [&](auto codec) {
    using S = typename decltype(codec)::Storage;
    auto* p = reinterpret_cast<S*>(out.data());
    const std::vector<uint8_t>& h = Hashes(rank, first + count);
    for (int64_t i = 0; i < count; ++i) {
      p[i] = codec.Of(Value(type, op, rank, h[first + i]));
    }
  });
  return out;
}

// The reduction over n ranks of elements [first, first + count).
Bytes Expected(DataType type, ReduceOp op, int n, int64_t first,
               int64_t count) {
  Bytes out(static_cast<size_t>(count) * DataTypeSize(type));
  WithCodec(type, [&](auto codec) {
    using S = typename decltype(codec)::Storage;
    auto* p = reinterpret_cast<S*>(out.data());
    std::vector<const uint8_t*> h(n);
    for (int r = 0; r < n; ++r) h[r] = Hashes(r, first + count).data() + first;
    for (int64_t i = 0; i < count; ++i) {
      int64_t acc = Value(type, op, 0, h[0][i]);
      for (int r = 1; r < n; ++r) {
        acc = Combine(type, op, acc, Value(type, op, r, h[r][i]));
      }
      p[i] = op == ReduceOp::kAverage ? codec.Average(acc, n) : codec.Of(acc);
    }
  });
  return out;
}

int64_t Total(const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return total;
}

// Pseudo-random bytes for the data-movement collectives.
Bytes Pattern(uint64_t seed, size_t bytes) {
  Bytes out(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t h = Mix(seed, i);
    std::memcpy(out.data() + i, &h, std::min<size_t>(8, bytes - i));
  }
  return out;
}

// "" when equal, else where and how `got` differs.
std::string Diff(const Bytes& got, const Bytes& want, size_t elem) {
  if (got.size() != want.size()) {
    return absl::StrCat("size ", got.size(), " != ", want.size());
  }
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0) {
    return "";
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      const size_t e = i / elem;
      std::string g, w;
      for (size_t b = e * elem; b < (e + 1) * elem; ++b) {
        absl::StrAppend(&g, static_cast<int>(static_cast<uint8_t>(got[b])),
                        " ");
        absl::StrAppend(&w, static_cast<int>(static_cast<uint8_t>(want[b])),
                        " ");
      }
      return absl::StrCat("element ", e, " of ", got.size() / elem, ": bytes [",
                          g, "], expected [", w, "]");
    }
  }
  return "";
}

std::string CaseName(int n, DataType type, ReduceOp op, int64_t count,
                     absl::string_view extra) {
  return absl::StrCat(n, " ranks, ", DataTypeName(type), " ", ReduceOpName(op),
                      ", count ", count, ", ", extra);
}

namespace {
TransportMaker& Maker() {
  static TransportMaker make;
  return make;
}
}  // namespace

void SetTransportMaker(TransportMaker make) { Maker() = std::move(make); }

std::vector<absl::Status> RunRanks(
    int n, const std::function<absl::Status(Transport&)>& fn) {
  struct World {
    std::unique_ptr<LocalFabric> fabric;
    uint64_t seq = 0;
  };
  static std::map<int, World> worlds;
  World& world = worlds[n];
  if (world.fabric == nullptr) {
    world.fabric = Maker() ? std::make_unique<LocalFabric>(Maker()(n))
                           : std::make_unique<LocalFabric>(n, FabricTimeout());
  }
  const uint64_t seq = ++world.seq;
  std::vector<absl::Status> statuses = world.fabric->Run([&](Transport& t) {
    t.BeginOperation(seq);
    return fn(t);
  });
  for (const absl::Status& s : statuses) {
    if (!s.ok()) world.fabric.reset();
  }
  return statuses;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses,
                 const std::string& what) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok())
        << what << ": rank " << r << ": " << statuses[r];
  }
}

void ExpectAllInvalid(const std::vector<absl::Status>& statuses,
                      absl::string_view message) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument)
        << "rank " << r << ": " << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()),
                ::testing::HasSubstr(std::string(message)));
  }
}

std::vector<int64_t> GridCounts(int n) {
  if (n == 7) {
    return Sanitized() ? std::vector<int64_t>{0, 1, 7}
                       : std::vector<int64_t>{0, 1, 7, 4099};
  }
  return {0, 1, 7, 4099, kLarge};
}

bool LargeCaseRuns(DataType type, ReduceOp op) {
  if (!Sanitized()) return true;
  return (type == DataType::kFloat32 && op == ReduceOp::kSum) ||
         (type == DataType::kInt8 && op == ReduceOp::kMax);
}

// Segments of 1000 bytes (not a multiple of 8) make the 4099-element cases
// pipeline over many uneven segments.
size_t SegmentBytesFor(int64_t count) {
  return count == 4099 ? 1000 : kAutoSegmentBytes;
}

}  // namespace kolo::testing
