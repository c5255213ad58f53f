// Failure paths of the collectives: argument errors refused alike on every
// rank, the inactivity deadline naming the silent peer, Abort() releasing a
// blocked collective, ranks out of step failing instead of mixing bytes;
// and the chunk arithmetic (allreduce/chunking.h).
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/local_transport.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::ExpectAllInvalid;
using ::kolo::testing::FabricTimeout;
using ::kolo::testing::LocalFabric;
using ::kolo::testing::RunRanks;
using ::testing::HasSubstr;

TEST(CollectivesTest, InvalidArgumentsAreRefusedOnEveryRank) {
  constexpr int n = 2;
  std::vector<float> buf(16);
  auto all = [&](const std::function<absl::Status(Transport&)>& fn,
                 absl::string_view message) {
    SCOPED_TRACE(std::string(message));
    ExpectAllInvalid(RunRanks(n, fn), message);
  };
  const DataType f32 = DataType::kFloat32;
  all(
      [&](Transport& t) {
        return Allreduce(t, f32, buf.data(), buf.data(), -1);
      },
      "count is -1");
  all([&](Transport& t) { return Allreduce(t, f32, nullptr, buf.data(), 4); },
      "input is null");
  all(
      [&](Transport& t) {
        return Allreduce(t, DataType::kBool, buf.data(), buf.data(), 4,
                         {.op = ReduceOp::kAverage});
      },
      "average is not defined for bool");
  all(
      [&](Transport& t) {
        return Allreduce(t, DataType::kBool, buf.data(), buf.data(), 4,
                         {.prescale = 2});
      },
      "cannot scale a bool");
  all(
      [&](Transport& t) {
        return Allreduce(t, static_cast<DataType>(42), buf.data(), buf.data(),
                         4);
      },
      "unknown data type");
  all(
      [&](Transport& t) {
        return Broadcast(t, f32, buf.data(), 4, /*root=*/2);
      },
      "root 2 is out of range for 2 ranks");
  all(
      [&](Transport& t) {
        return Broadcast(t, f32, buf.data(), 4, /*root=*/-1);
      },
      "root -1 is out of range");
  all(
      [&](Transport& t) {
        const std::vector<int64_t> counts = {4, 4, 4};
        return Allgather(t, f32, buf.data(), 4, counts, buf.data());
      },
      "counts has 3 entries");
  all(
      [&](Transport& t) {
        const std::vector<int64_t> counts = {4, 5};
        return Allgather(t, f32, buf.data(), 3, counts, buf.data());
      },
      "passes 3 elements but counts");
  all(
      [&](Transport& t) {
        const std::vector<int64_t> counts = {4, -1};
        return Allgather(t, f32, buf.data(), 4, counts, buf.data());
      },
      "counts[1] is -1");
  all(
      [&](Transport& t) {
        const std::vector<int64_t> splits = {2, 3};
        return Alltoall(t, f32, buf.data(), 6, splits, buf.data(), splits);
      },
      "send splits sum to 5 elements but the input has 6");
  all(
      [&](Transport& t) {
        const std::vector<int64_t> splits = {2, 3};
        return Reducescatter(t, f32, buf.data(), 4, splits, buf.data());
      },
      "counts sum to 5 elements but the input has 4");
}

TEST(CollectivesTest, DeadlineNamesTheSilentPeer) {
  LocalFabric fabric(2, absl::Milliseconds(200));
  std::vector<float> buf(1000, 1.0f);
  const absl::Time start = absl::Now();
  absl::Status s = Allreduce(fabric.transport(0), DataType::kFloat32,
                             buf.data(), buf.data(), 1000);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1"));
  EXPECT_LT(absl::Now() - start, kolo::testing::Scaled(absl::Seconds(5)));
  // The failed collective left the transport aborted.
  absl::Status again = Barrier(fabric.transport(0));
  EXPECT_FALSE(again.ok());
}

TEST(CollectivesTest, AbortReleasesABlockedCollective) {
  LocalFabric fabric(3, absl::Seconds(60));
  std::vector<float> buf(100000, 1.0f);
  absl::Status result;
  std::thread worker([&] {
    result = Allreduce(fabric.transport(0), DataType::kFloat32, buf.data(),
                       buf.data(), 100000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const absl::Time start = absl::Now();
  fabric.transport(0).Abort(absl::AbortedError("epoch 3 ended"));
  worker.join();
  EXPECT_LT(absl::Now() - start, kolo::testing::Scaled(absl::Seconds(5)));
  EXPECT_EQ(result.code(), absl::StatusCode::kAborted) << result;
  EXPECT_THAT(std::string(result.message()), HasSubstr("epoch 3 ended"));
}

TEST(CollectivesTest, RanksOutOfStepFailInsteadOfMixingBytes) {
  LocalFabric fabric(2, FabricTimeout());
  std::vector<std::vector<float>> bufs(2, std::vector<float>(10, 1.0f));
  auto statuses = fabric.Run([&](Transport& t) {
    t.BeginOperation(t.rank() == 0 ? 7 : 8);
    return Allreduce(t, DataType::kFloat32, bufs[t.rank()].data(),
                     bufs[t.rank()].data(), 10);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("operation"));
  }
  // Different counts on two ranks: a length mismatch, not a silent mix.
  LocalFabric fabric2(2, FabricTimeout());
  statuses = fabric2.Run([&](Transport& t) {
    return Allreduce(t, DataType::kFloat32, bufs[t.rank()].data(),
                     bufs[t.rank()].data(), t.rank() == 0 ? 9 : 10, {},
                     {.algorithm = Algorithm::kSmall});
  });
  for (const absl::Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("bytes"));
  }
}

TEST(ChunkingTest, EvenPartitionsAndSegments) {
  EXPECT_THAT(PartitionEvenly(7, 3),
              ::testing::ElementsAre(ElementRange{0, 3}, ElementRange{3, 2},
                                     ElementRange{5, 2}));
  EXPECT_THAT(PartitionEvenly(2, 4),
              ::testing::ElementsAre(ElementRange{0, 1}, ElementRange{1, 1},
                                     ElementRange{2, 0}, ElementRange{2, 0}));
  EXPECT_THAT(PartitionEvenly(0, 2),
              ::testing::ElementsAre(ElementRange{0, 0}, ElementRange{0, 0}));
  const std::vector<int64_t> sizes = {3, 0, 2};
  EXPECT_THAT(PartitionBySizes(sizes),
              ::testing::ElementsAre(ElementRange{0, 3}, ElementRange{3, 0},
                                     ElementRange{3, 2}));
  EXPECT_EQ(SegmentElements(1000, 8), 125);
  EXPECT_EQ(SegmentElements(3, 8), 1);
  EXPECT_EQ(SegmentElements(0, 2), 1);
  EXPECT_EQ(NumSegments(0, 4), 0);
  EXPECT_EQ(NumSegments(8, 4), 2);
  EXPECT_EQ(NumSegments(9, 4), 3);
  EXPECT_EQ(Segment(9, 4, 2), (ElementRange{8, 1}));
  EXPECT_EQ(Segment(9, 4, 1), (ElementRange{4, 4}));
  EXPECT_EQ(PositiveMod(-1, 5), 4);
  EXPECT_EQ(PositiveMod(-6, 5), 4);
  EXPECT_EQ(PositiveMod(7, 5), 2);
}

TEST(ChunkingTest, PipelineSegmentIsForcedOrAQuarterOfTheChunkWithinBounds) {
  // Forced: as given, at least one element.
  EXPECT_EQ(PipelineSegmentElements(1000, 1 << 20, 8), 125);
  EXPECT_EQ(PipelineSegmentElements(3, 1 << 20, 8), 1);
  // Auto: a quarter of the largest chunk, in [64 KiB, 1 MiB].
  EXPECT_EQ(PipelineSegmentElements(0, 1 << 20, 4), (1 << 20) / 4);  // 1 MiB
  EXPECT_EQ(PipelineSegmentElements(0, 1 << 18, 4), (1 << 18) / 4);  // 256 KiB
  EXPECT_EQ(PipelineSegmentElements(0, 100, 4), kMinAutoSegmentBytes / 4);
  EXPECT_EQ(PipelineSegmentElements(0, int64_t{1} << 30, 8),
            kMaxAutoSegmentBytes / 8);
  EXPECT_EQ(PipelineSegmentElements(0, 0, 2), kMinAutoSegmentBytes / 2);
}

TEST(ChunkingTest, DefaultSmallThresholdGrowsWithTheWorld) {
  EXPECT_EQ(DefaultSmallBytes(1), 64u * 1024);
  EXPECT_EQ(DefaultSmallBytes(2), 64u * 1024);
  EXPECT_EQ(DefaultSmallBytes(3), 128u * 1024);
  EXPECT_EQ(DefaultSmallBytes(4), 256u * 1024);
  EXPECT_EQ(DefaultSmallBytes(64), 256u * 1024);
}

TEST(ChunkingTest, AutoPicksTheSmallAlgorithmUpToTheThreshold) {
  AlgorithmOptions options{.small_bytes = 1024};
  EXPECT_EQ(ChooseAlgorithm(1024, options), Algorithm::kSmall);
  EXPECT_EQ(ChooseAlgorithm(1025, options), Algorithm::kRing);
  options.algorithm = Algorithm::kRing;
  EXPECT_EQ(ChooseAlgorithm(4, options), Algorithm::kRing);
  options.algorithm = Algorithm::kSmall;
  EXPECT_EQ(ChooseAlgorithm(1 << 30, options), Algorithm::kSmall);
}

}  // namespace
}  // namespace kolo
