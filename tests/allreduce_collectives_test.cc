// Allgather, broadcast (every root, both algorithms), alltoall and
// reducescatter with uneven counts including zeros, and the barrier, over
// LocalFabric (N ranks as N threads) for world sizes 1-5 and 7. Counts and
// dtypes follow the grid of tests/testing/collective_data.h; every rank's
// output must match the expectation bit for bit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/collectives.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_data.h"

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
using ::kolo::testing::Pattern;
using ::kolo::testing::RunRanks;
using ::kolo::testing::SegmentBytesFor;
using ::kolo::testing::Total;

class WorldTest : public ::testing::TestWithParam<int> {};

TEST_P(WorldTest, AllgatherWithUnevenCounts) {
  const int n = GetParam();
  for (int64_t base : GridCounts(n)) {
    for (DataType type : kAllTypes) {
      if (base == kLarge && type != DataType::kUInt8 &&
          type != DataType::kFloat64) {
        continue;
      }
      const size_t elem = DataTypeSize(type);
      std::vector<int64_t> counts(n);
      for (int r = 0; r < n; ++r) counts[r] = r % 3 == 1 ? 0 : base + r;
      const int64_t total = Total(counts);
      std::vector<Bytes> inputs(n);
      Bytes want;
      for (int r = 0; r < n; ++r) {
        inputs[r] = Pattern(r, counts[r] * elem);
        want.insert(want.end(), inputs[r].begin(), inputs[r].end());
      }
      std::vector<Bytes> outputs(n, Bytes(total * elem, '\xcd'));
      const AlgorithmOptions options{.segment_bytes = SegmentBytesFor(base)};
      const std::string what =
          absl::StrCat(n, " ranks, ", DataTypeName(type), ", base ", base);
      ExpectAllOk(RunRanks(n,
                           [&](Transport& t) {
                             const int r = t.rank();
                             return Allgather(t, type, inputs[r].data(),
                                              counts[r], counts,
                                              outputs[r].data(), options);
                           }),
                  what);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(Diff(outputs[r], want, elem), "") << what << ", rank " << r;
      }
    }
  }
}

TEST_P(WorldTest, BroadcastFromEveryRoot) {
  const int n = GetParam();
  for (int64_t count : GridCounts(n)) {
    for (DataType type : kAllTypes) {
      if (count == kLarge && type != DataType::kFloat32) continue;
      const size_t elem = DataTypeSize(type);
      for (int root = 0; root < n; ++root) {
        for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
          const Bytes want = Pattern(100 + root, count * elem);
          std::vector<Bytes> data(n, Bytes(count * elem, '\xcd'));
          data[root] = want;
          const AlgorithmOptions options{
              .algorithm = algorithm, .segment_bytes = SegmentBytesFor(count)};
          const std::string what =
              absl::StrCat(n, " ranks, ", DataTypeName(type), ", count ", count,
                           ", root ", root, ", ", AlgorithmName(algorithm));
          ExpectAllOk(RunRanks(n,
                               [&](Transport& t) {
                                 return Broadcast(t, type,
                                                  data[t.rank()].data(), count,
                                                  root, options);
                               }),
                      what);
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(Diff(data[r], want, elem), "") << what << ", rank " << r;
          }
        }
      }
    }
  }
}

TEST_P(WorldTest, AlltoallWithUnevenSplits) {
  const int n = GetParam();
  for (int64_t base : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4099}}) {
    for (DataType type : kAllTypes) {
      const size_t elem = DataTypeSize(type);
      // send[r][p]: elements rank r sends to rank p, zero for some pairs.
      std::vector<std::vector<int64_t>> send(n, std::vector<int64_t>(n));
      std::vector<std::vector<int64_t>> recv(n, std::vector<int64_t>(n));
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) {
          send[r][p] = (r + 2 * p) % 3 == 0 ? 0 : base + r + 2 * p;
        }
      }
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) recv[r][p] = send[p][r];
      }
      // blocks[r][p]: the bytes rank r sends to rank p.
      std::vector<std::vector<Bytes>> blocks(n, std::vector<Bytes>(n));
      std::vector<Bytes> inputs(n);
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) {
          blocks[r][p] = Pattern(1000 * r + p, send[r][p] * elem);
          inputs[r].insert(inputs[r].end(), blocks[r][p].begin(),
                           blocks[r][p].end());
        }
      }
      std::vector<Bytes> outputs(n);
      for (int r = 0; r < n; ++r) {
        outputs[r] = Bytes(Total(recv[r]) * elem, '\xcd');
      }
      const std::string what =
          absl::StrCat(n, " ranks, ", DataTypeName(type), ", base ", base);
      ExpectAllOk(RunRanks(n,
                           [&](Transport& t) {
                             const int r = t.rank();
                             return Alltoall(t, type, inputs[r].data(),
                                             Total(send[r]), send[r],
                                             outputs[r].data(), recv[r]);
                           }),
                  what);
      for (int r = 0; r < n; ++r) {
        Bytes want;
        for (int p = 0; p < n; ++p) {
          want.insert(want.end(), blocks[p][r].begin(), blocks[p][r].end());
        }
        ASSERT_EQ(Diff(outputs[r], want, elem), "") << what << ", rank " << r;
      }
    }
  }
}

TEST_P(WorldTest, ReducescatterWithUnevenCounts) {
  const int n = GetParam();
  for (int64_t base : GridCounts(n)) {
    for (DataType type : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (base == kLarge && !LargeCaseRuns(type, op)) continue;
        const size_t elem = DataTypeSize(type);
        std::vector<int64_t> counts(n);
        for (int r = 0; r < n; ++r) {
          counts[r] = r % 3 == 1 ? 0 : (base == kLarge ? base / n : base) + r;
        }
        const int64_t total = Total(counts);
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) {
          inputs.push_back(Input(type, op, r, 0, total));
        }
        const Bytes all = Expected(type, op, n, 0, total);
        std::vector<Bytes> outputs(n);
        for (int r = 0; r < n; ++r) {
          outputs[r] = Bytes(counts[r] * elem, '\xcd');
        }
        const AlgorithmOptions options{.segment_bytes = SegmentBytesFor(base)};
        const std::string what = CaseName(n, type, op, base, "reducescatter");
        auto statuses = RunRanks(n, [&](Transport& t) {
          const int r = t.rank();
          return Reducescatter(t, type, inputs[r].data(), total, counts,
                               outputs[r].data(), {.op = op}, options);
        });
        if (type == DataType::kBool && op == ReduceOp::kAverage) {
          ExpectAllInvalid(statuses, "average is not defined for bool");
          continue;
        }
        ExpectAllOk(statuses, what);
        int64_t offset = 0;
        for (int r = 0; r < n; ++r) {
          const Bytes want(all.begin() + offset * elem,
                           all.begin() + (offset + counts[r]) * elem);
          offset += counts[r];
          ASSERT_EQ(Diff(outputs[r], want, elem), "") << what << ", rank " << r;
        }
      }
    }
  }
}

TEST_P(WorldTest, BarrierHoldsEveryRankUntilAllArrive) {
  const int n = GetParam();
  constexpr int kRounds = 20;
  std::vector<std::atomic<int>> arrived(kRounds);
  std::atomic<int> early{0};
  ExpectAllOk(RunRanks(n,
                       [&](Transport& t) {
                         std::mt19937 rng(t.rank());
                         for (int k = 0; k < kRounds; ++k) {
                           std::this_thread::sleep_for(
                               std::chrono::microseconds(rng() % 300));
                           arrived[k].fetch_add(1);
                           if (absl::Status s = Barrier(t); !s.ok()) return s;
                           if (arrived[k].load() != n) early.fetch_add(1);
                         }
                         return absl::OkStatus();
                       }),
              "barrier");
  EXPECT_EQ(early.load(), 0) << "a rank left a barrier before all arrived";
}

INSTANTIATE_TEST_SUITE_P(Worlds, WorldTest, ::testing::Values(1, 2, 3, 4, 5, 7),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return absl::StrCat(param_info.param, "ranks");
                         });

}  // namespace
}  // namespace kolo
