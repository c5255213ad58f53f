// Allreduce over LocalFabric (N ranks as N threads). The grid: world sizes
// 1-5 and 7 (lighter) x counts 0, 1, 7, 4099, 1 Mi+3 x every dtype x every
// op x both algorithms (ring, recursive doubling) forced, in place and out of
// place, plus one 64 MiB float32 allreduce, random floats bitwise identical
// on every rank, and prescale/postscale. Inputs and expectations come from
// tests/testing/collective_data.h (small integers: every partial result is
// exact); every rank's output must equal the expectation bit for bit.
//
// Sanitizer builds (KOLO_TIMEOUT_SCALE > 1, set by CTest there) run a subset
// to stay well under a minute under TSan: the 1 Mi+3 count only for float32
// sum and int8 max, no 64 MiB case, world size 7 only up to count 7.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/collectives.h"
#include "allreduce/kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::Bytes;
using ::kolo::testing::CaseName;
using ::kolo::testing::Diff;
using ::kolo::testing::ExpectAllInvalid;
using ::kolo::testing::ExpectAllOk;
using ::kolo::testing::Expected;
using ::kolo::testing::GridCounts;
using ::kolo::testing::Input;
using ::kolo::testing::kAllOps;
using ::kolo::testing::kAllTypes;
using ::kolo::testing::kLarge;
using ::kolo::testing::LargeCaseRuns;
using ::kolo::testing::RunRanks;
using ::kolo::testing::Sanitized;
using ::kolo::testing::SegmentBytesFor;
using ::testing::HasSubstr;

// One allreduce case: every rank's output must equal `want`.
void CheckAllreduce(int n, DataType type, ReduceOp op, int64_t count,
                    Algorithm algorithm, bool in_place, size_t segment_bytes,
                    const std::vector<Bytes>& inputs, const Bytes& want) {
  const std::string what =
      CaseName(n, type, op, count,
               absl::StrCat(AlgorithmName(algorithm),
                            in_place ? ", in place" : ", out of place",
                            ", segment ", segment_bytes, " B"));
  std::vector<Bytes> outputs(n);
  for (int r = 0; r < n; ++r) {
    outputs[r] = in_place ? inputs[r] : Bytes(inputs[r].size(), '\xcd');
  }
  AlgorithmOptions options;
  options.algorithm = algorithm;
  options.segment_bytes = segment_bytes;
  auto statuses = RunRanks(n, [&](Transport& t) {
    const int r = t.rank();
    const void* in = in_place ? outputs[r].data() : inputs[r].data();
    return Allreduce(t, type, in, outputs[r].data(), count, {.op = op},
                     options);
  });
  if (type == DataType::kBool && op == ReduceOp::kAverage) {
    ExpectAllInvalid(statuses, "average is not defined for bool");
    return;
  }
  ExpectAllOk(statuses, what);
  for (int r = 0; r < n; ++r) {
    const std::string diff = Diff(outputs[r], want, DataTypeSize(type));
    ASSERT_EQ(diff, "") << what << ", rank " << r;
  }
}

class WorldTest : public ::testing::TestWithParam<int> {};

TEST_P(WorldTest, AllreduceGrid) {
  const int n = GetParam();
  int parity = 0;
  for (int64_t count : GridCounts(n)) {
    for (DataType type : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (count == kLarge && !LargeCaseRuns(type, op)) continue;
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) {
          inputs.push_back(Input(type, op, r, 0, count));
        }
        const Bytes want = Expected(type, op, n, 0, count);
        for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
          // Alternate in place and out of place over (type, op) so both
          // appear for every count and algorithm.
          CheckAllreduce(n, type, op, count, algorithm, ++parity % 2 == 0,
                         SegmentBytesFor(count), inputs, want);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(WorldTest, AllreduceRandomFloatsAreBitwiseIdenticalOnEveryRank) {
  const int n = GetParam();
  const int64_t count = 10007;
  std::mt19937 rng(n);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  for (auto& v : data) {
    for (float& x : v) x = dist(rng);
  }
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
    auto outputs = data;
    AlgorithmOptions options{.algorithm = algorithm, .segment_bytes = 4096};
    ExpectAllOk(RunRanks(n,
                         [&](Transport& t) {
                           return Allreduce(
                               t, DataType::kFloat32, outputs[t.rank()].data(),
                               outputs[t.rank()].data(), count, {}, options);
                         }),
                std::string(AlgorithmName(algorithm)));
    for (int r = 1; r < n; ++r) {
      ASSERT_EQ(std::memcmp(outputs[r].data(), outputs[0].data(),
                            count * sizeof(float)),
                0)
          << AlgorithmName(algorithm) << ": rank " << r << " differs";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, WorldTest, ::testing::Values(1, 2, 3, 4, 5, 7),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return absl::StrCat(param_info.param, "ranks");
                         });

TEST(AllreduceTest, SixtyFourMiBFloat32BothAlgorithms) {
  if (Sanitized()) GTEST_SKIP() << "too slow under sanitizers";
  const int n = 3;
  const int64_t count = int64_t{16} << 20;  // 64 MiB of float32
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(Input(DataType::kFloat32, ReduceOp::kSum, r, 0, count));
  }
  const Bytes want = Expected(DataType::kFloat32, ReduceOp::kSum, n, 0, count);
  CheckAllreduce(n, DataType::kFloat32, ReduceOp::kSum, count, Algorithm::kRing,
                 /*in_place=*/false, kAutoSegmentBytes, inputs, want);
  CheckAllreduce(n, DataType::kFloat32, ReduceOp::kSum, count,
                 Algorithm::kSmall, /*in_place=*/true, kAutoSegmentBytes,
                 inputs, want);
}

TEST(AllreduceTest, PrescaleAndPostscale) {
  for (int n : {1, 3, 4}) {
    for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
      const int64_t count = 1001;
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) {
        inputs.push_back(
            Input(DataType::kFloat32, ReduceOp::kSum, r, 0, count));
      }
      const std::vector<Bytes> original = inputs;
      std::vector<Bytes> outputs(n, Bytes(count * 4));
      // sum(x * 2) * 0.25 == sum(x) / 2: exact for small integers.
      const ReduceOptions reduce{
          .op = ReduceOp::kSum, .prescale = 2.0, .postscale = 0.25};
      ExpectAllOk(RunRanks(n,
                           [&](Transport& t) {
                             const int r = t.rank();
                             return Allreduce(
                                 t, DataType::kFloat32, inputs[r].data(),
                                 outputs[r].data(), count, reduce,
                                 {.algorithm = algorithm, .segment_bytes = 64});
                           }),
                  "prescale");
      const Bytes sum =
          Expected(DataType::kFloat32, ReduceOp::kSum, n, 0, count);
      std::vector<float> want(count);
      std::memcpy(want.data(), sum.data(), sum.size());
      for (float& x : want) x /= 2;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(inputs[r], original[r]) << "input changed on rank " << r;
        ASSERT_EQ(std::memcmp(outputs[r].data(), want.data(), count * 4), 0)
            << n << " ranks, " << AlgorithmName(algorithm) << ", rank " << r;
      }
      // Reducescatter: average of int32 with postscale 3.
      std::vector<int64_t> counts(n, 5);
      std::vector<Bytes> rs_in;
      for (int r = 0; r < n; ++r) {
        rs_in.push_back(
            Input(DataType::kInt32, ReduceOp::kAverage, r, 0, 5 * n));
      }
      std::vector<Bytes> rs_out(n, Bytes(5 * 4));
      ExpectAllOk(RunRanks(n,
                           [&](Transport& t) {
                             const int r = t.rank();
                             return Reducescatter(
                                 t, DataType::kInt32, rs_in[r].data(), 5 * n,
                                 counts, rs_out[r].data(),
                                 {.op = ReduceOp::kAverage, .postscale = 3.0});
                           }),
                  "reducescatter postscale");
      const Bytes avg =
          Expected(DataType::kInt32, ReduceOp::kAverage, n, 0, 5 * n);
      for (int r = 0; r < n; ++r) {
        for (int i = 0; i < 5; ++i) {
          int32_t got, base;
          std::memcpy(&got, rs_out[r].data() + i * 4, 4);
          std::memcpy(&base, avg.data() + (5 * r + i) * 4, 4);
          EXPECT_EQ(got, base * 3) << "rank " << r << " element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kolo
