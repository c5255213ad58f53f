// ShmAllreduce (allreduce/shm/shm_allreduce.h), ranks as threads over one
// segment: the grid (world sizes 2-5 and 7 x counts 0, 1, 7, 4099, 1 Mi+3 x
// every dtype x every op, in place and out of place) run back to back on one
// world, so both forms and the slot halves alternate; slots of 64 KiB make
// the large counts run through many chunks (the large count for four
// dtype x op pairs only, float32 sum alone under sanitizers: the ranks of
// the larger worlds sleep at every synchronisation on 2 cores). Every rank's
// output must equal the expectation bit for bit. Then: random floats bitwise
// identical on every rank, prescale/postscale, a size mismatch refused on every
// rank, and the fault paths (abort, deadline, a cut peer).
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/kernels.h"
#include "allreduce/shm/shm_allreduce.h"
#include "allreduce/shm/shm_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/shm_world.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::Bytes;
using ::kolo::testing::CaseName;
using ::kolo::testing::Diff;
using ::kolo::testing::Expected;
using ::kolo::testing::GridCounts;
using ::kolo::testing::Input;
using ::kolo::testing::kAllOps;
using ::kolo::testing::kAllTypes;
using ::kolo::testing::kLarge;
using ::kolo::testing::MakeShmWorld;
using ::kolo::testing::Pattern;
using ::kolo::testing::Scaled;
using ::testing::HasSubstr;

constexpr size_t kSlotBytes = 64 * 1024;

bool LargeRuns(DataType type, ReduceOp op) {
  if (type == DataType::kFloat32 && op == ReduceOp::kSum) return true;
  if (::kolo::testing::Sanitized()) return false;
  return (type == DataType::kInt8 && op == ReduceOp::kMax) ||
         (type == DataType::kFloat16 && op == ReduceOp::kProduct) ||
         (type == DataType::kFloat64 && op == ReduceOp::kAverage);
}

// n ShmTransports over one segment with slots, an ShmAllreduce on each, kept
// for a whole test as the ranks of a job keep theirs.
class World {
 public:
  explicit World(int n, absl::Duration timeout = Scaled(absl::Seconds(30)))
      : transports_(MakeShmWorld(n, 64 * 1024, timeout,
                                 ShmOptions().attach_min_bytes, kSlotBytes)) {
    for (auto& t : transports_) {
      auto* shm = static_cast<ShmTransport*>(t.get());
      allreduces_.push_back(std::make_unique<ShmAllreduce>(shm, shm));
    }
  }
  int size() const { return static_cast<int>(transports_.size()); }
  ShmTransport& transport(int r) {
    return *static_cast<ShmTransport*>(transports_[r].get());
  }

  // Runs fn(rank, allreduce) on every rank at once (one op: sequence seq).
  std::vector<absl::Status> Run(
      const std::function<absl::Status(int, ShmAllreduce&)>& fn) {
    ++seq_;
    std::vector<absl::Status> out(transports_.size());
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        transports_[r]->BeginOperation(seq_);
        out[r] = fn(r, *allreduces_[r]);
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

 private:
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<ShmAllreduce>> allreduces_;
  uint64_t seq_ = 0;
};

void ExpectOk(const std::vector<absl::Status>& statuses,
              const std::string& what) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok())
        << what << ", rank " << r << ": " << statuses[r];
  }
}

class ShmAllreduceGrid : public ::testing::TestWithParam<int> {};

TEST_P(ShmAllreduceGrid, EveryDtypeOpCountInAndOutOfPlace) {
  const int n = GetParam();
  World world(n);
  for (DataType type : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (type == DataType::kBool && op == ReduceOp::kAverage) continue;
      for (int64_t count : GridCounts(n)) {
        if (count == kLarge && !LargeRuns(type, op)) continue;
        const Bytes want = Expected(type, op, n, 0, count);
        for (bool in_place : {true, false}) {
          const std::string what = CaseName(
              n, type, op, count, in_place ? "in place" : "out of place");
          std::vector<Bytes> inputs, outputs;
          for (int r = 0; r < n; ++r) {
            inputs.push_back(Input(type, op, r, 0, count));
            outputs.push_back(in_place ? inputs.back()
                                       : Bytes(want.size(), '\x5a'));
          }
          ReduceOptions reduce;
          reduce.op = op;
          ExpectOk(world.Run([&](int r, ShmAllreduce& a) {
            return a.Allreduce(type, inputs[r].data(), outputs[r].data(), count,
                               reduce);
          }),
                   what);
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(Diff(outputs[r], want, DataTypeSize(type)), "")
                << what << ", rank " << r;
            if (!in_place) {
              ASSERT_EQ(inputs[r], Input(type, op, r, 0, count))
                  << what << ": the input changed";
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmAllreduceGrid,
                         ::testing::Values(2, 3, 4, 5, 7), [](const auto& p) {
                           return absl::StrCat(p.param, "ranks");
                         });

TEST(ShmAllreduce, RandomFloatsAreBitwiseIdenticalOnEveryRank) {
  for (int n : {2, 3, 5}) {
    World world(n);
    // Direct (small) and sliced (several chunks, uneven slices).
    for (int64_t count : {int64_t{3}, int64_t{1000}, int64_t{100003}}) {
      std::vector<Bytes> bufs;
      for (int r = 0; r < n; ++r) {
        bufs.push_back(Pattern(1000 * r + count, count * sizeof(float)));
        // Finite floats: clear the top exponent bit.
        for (int64_t i = 0; i < count; ++i) bufs[r][i * 4 + 3] &= 0x3f;
      }
      ExpectOk(world.Run([&](int r, ShmAllreduce& a) {
        return a.Allreduce(DataType::kFloat32, bufs[r].data(), bufs[r].data(),
                           count, {});
      }),
               absl::StrCat(n, " ranks, ", count, " random floats"));
      for (int r = 1; r < n; ++r) {
        EXPECT_EQ(bufs[r], bufs[0])
            << n << " ranks, count " << count << ": rank " << r << " differs";
      }
    }
  }
}

TEST(ShmAllreduce, PrescalePostscaleAndAverage) {
  World world(3);
  for (int64_t count : {int64_t{5}, int64_t{50001}}) {
    std::vector<std::vector<double>> bufs(3, std::vector<double>(count));
    for (int r = 0; r < 3; ++r) {
      for (int64_t i = 0; i < count; ++i) bufs[r][i] = r + 1 + (i % 7);
    }
    ReduceOptions reduce;
    reduce.op = ReduceOp::kAverage;
    reduce.prescale = 2.0;
    reduce.postscale = 0.5;
    ExpectOk(world.Run([&](int r, ShmAllreduce& a) {
      return a.Allreduce(DataType::kFloat64, bufs[r].data(), bufs[r].data(),
                         count, reduce);
    }),
             "average with scaling");
    for (int r = 0; r < 3; ++r) {
      for (int64_t i = 0; i < count; ++i) {
        // (2(1+k) + 2(2+k) + 2(3+k)) / 3 * 0.5 = 2 + k
        ASSERT_EQ(bufs[r][i], 2.0 + (i % 7)) << "rank " << r << " at " << i;
      }
    }
  }
}

// AllreducePieces against Allreduce of the same pieces laid end to end, bit
// for bit: pieces that cross slices and chunks (slots of 64 KiB: chunks of
// 32 KiB), empty ones, in place and out of place, with the scale factors
// and the average, at 2, 3 and 4 ranks (ranks 2 and up reduce from a copy of
// their slice).
TEST(ShmAllreduce, PiecesGiveWhatTheirConcatenationGives) {
  struct Case {
    DataType type;
    ReduceOp op;
    double prescale, postscale;
  };
  const Case cases[] = {{DataType::kFloat32, ReduceOp::kSum, 1.0, 1.0},
                        {DataType::kFloat32, ReduceOp::kAverage, 1.0, 1.0},
                        {DataType::kFloat64, ReduceOp::kSum, 0.5, 3.0},
                        {DataType::kFloat16, ReduceOp::kAverage, 1.0, 0.25},
                        {DataType::kInt8, ReduceOp::kMax, 1.0, 1.0},
                        {DataType::kInt32, ReduceOp::kProduct, 1.0, 1.0}};
  // Piece counts: one piece; 161 small ones; uneven ones with empty ones
  // among them, over many chunks.
  const std::vector<std::vector<int64_t>> layouts = {
      {20000},
      std::vector<int64_t>(161, 256),
      {0, 3, 7000, 0, 1, 12345, 4099, 0, 30001, 5}};
  for (int n : {2, 3, 4}) {
    World world(n);
    for (const Case& c : cases) {
      const size_t elem = DataTypeSize(c.type);
      for (const std::vector<int64_t>& counts : layouts) {
        int64_t total = 0;
        for (int64_t k : counts) total += k;
        if (static_cast<size_t>(total) * elem <= 16 * 1024) continue;
        for (bool in_place : {true, false}) {
          const std::string what = absl::StrCat(
              CaseName(n, c.type, c.op, total, in_place ? "in place" : "out"),
              ", ", counts.size(), " pieces");
          ReduceOptions reduce;
          reduce.op = c.op;
          reduce.prescale = c.prescale;
          reduce.postscale = c.postscale;
          // The concatenation, reduced as one buffer.
          std::vector<Bytes> whole;
          for (int r = 0; r < n; ++r) {
            whole.push_back(Input(c.type, c.op, r, 0, total));
          }
          const std::vector<Bytes> inputs = whole;
          ExpectOk(world.Run([&](int r, ShmAllreduce& a) {
            return a.Allreduce(c.type, whole[r].data(), whole[r].data(), total,
                               reduce);
          }),
                   what + ", whole");
          // The same elements in pieces of their own memory.
          std::vector<std::vector<Bytes>> ins(n), outs(n);
          std::vector<std::vector<AllreducePiece>> pieces(n);
          for (int r = 0; r < n; ++r) {
            int64_t at = 0;
            for (int64_t k : counts) {
              const char* from = inputs[r].data() + at * elem;
              ins[r].emplace_back(from, from + k * elem);
              outs[r].emplace_back(k * elem, '\x5a');
              at += k;
            }
            for (size_t i = 0; i < counts.size(); ++i) {
              Bytes& out = in_place ? ins[r][i] : outs[r][i];
              pieces[r].push_back({ins[r][i].data(), out.data(), counts[i]});
            }
          }
          ExpectOk(world.Run([&](int r, ShmAllreduce& a) {
            return a.AllreducePieces(c.type, pieces[r], reduce);
          }),
                   what + ", pieces");
          for (int r = 0; r < n; ++r) {
            Bytes got;
            for (size_t i = 0; i < counts.size(); ++i) {
              const Bytes& out = in_place ? ins[r][i] : outs[r][i];
              got.insert(got.end(), out.begin(), out.end());
            }
            ASSERT_EQ(Diff(got, whole[r], elem), "") << what << ", rank " << r;
            if (!in_place) {
              int64_t at = 0;
              for (size_t i = 0; i < counts.size(); ++i) {
                ASSERT_TRUE(std::equal(ins[r][i].begin(), ins[r][i].end(),
                                       inputs[r].begin() + at * elem))
                    << what << ": input " << i << " changed";
                at += counts[i];
              }
            }
          }
        }
      }
    }
  }
}

TEST(ShmAllreduce, RanksDisagreeingOnTheSizeAreRefusedOnEveryRank) {
  World world(2);
  std::vector<float> a(1000, 1.0f), b(1000, 1.0f);
  std::vector<absl::Status> statuses = world.Run([&](int r, ShmAllreduce& ar) {
    return ar.Allreduce(DataType::kFloat32, r == 0 ? a.data() : b.data(),
                        r == 0 ? a.data() : b.data(), r == 0 ? 10 : 20, {});
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument)
        << statuses[r];
    EXPECT_THAT(statuses[r].message(), HasSubstr("not running the same"));
  }
}

TEST(ShmAllreduce, AbortEndsAWaitAtOnce) {
  World world(2);
  float x = 1.0f;
  absl::Status status;
  const absl::Time start = absl::Now();
  std::thread waiter([&] {
    world.transport(0).BeginOperation(1);
    ShmAllreduce a(&world.transport(0), &world.transport(0));
    status = a.Allreduce(DataType::kFloat32, &x, &x, 1, {});
  });
  absl::SleepFor(absl::Milliseconds(100));
  world.transport(0).Abort(absl::AbortedError("epoch 3 ended"));
  waiter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(status.message(), HasSubstr("epoch 3 ended"));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(5)));
}

TEST(ShmAllreduce, AMissingPeerFailsAfterTheDeadlineNamingIt) {
  World world(3, absl::Milliseconds(300));
  float x = 1.0f;
  std::vector<absl::Status> statuses = world.Run([&](int r, ShmAllreduce& a) {
    if (r == 2) return absl::OkStatus();  // never comes
    float mine = x;
    return a.Allreduce(DataType::kFloat32, &mine, &mine, 1, {});
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDeadlineExceeded)
        << statuses[r];
    EXPECT_THAT(statuses[r].message(), HasSubstr("rank 2"));
    EXPECT_THAT(PeersOf(statuses[r]), ::testing::ElementsAre(2));
  }
}

TEST(ShmAllreduce, APeerCutForAFaultFailsTheNextCall) {
  World world(2);
  ASSERT_TRUE(world.transport(0).CutForFault(1).ok());
  float x = 1.0f;
  absl::Status status = world.Run([&](int r, ShmAllreduce& a) {
    if (r == 1) return absl::OkStatus();
    return a.Allreduce(DataType::kFloat32, &x, &x, 1, {});
  })[0];
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("cut"));
}

}  // namespace
}  // namespace kolo
