// The hierarchical collectives (allreduce/hierarchical.h) and their grouping
// (allreduce/hierarchy.h). Grouping: hosts, leaders, local ranks, columns
// and host order for one host, one rank per host, 3+1, 2x2, ranks not
// numbered host by host; the KOLO_HIERARCHICAL modes. Collectives, over
// LocalFabric (ranks as threads, no buffering, so a phase order that needs
// buffering would deadlock here) for each of those layouts: allreduce for
// every dtype x op x counts 0, 1, 7, 4099 (and 1 Mi + 3 for float32/int32)
// in both shapes (sliced, leader) and out of place / in place, exact;
// random floats bitwise identical on every rank; prescale/postscale equal to
// the flat algorithm's on exact inputs; allgather with uneven counts (zeros
// included), broadcast from every root, reducescatter with uneven counts
// and every op; a rank that fails ends the others' phases with an error
// that names the phase. Sanitizer builds (KOLO_TIMEOUT_SCALE > 1) run the
// allreduce grid for float32 and int32 only, and no count above 10007.
#include <algorithm>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/collectives.h"
#include "allreduce/hierarchical.h"
#include "allreduce/hierarchy.h"
#include "gmock/gmock.h"
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
using ::kolo::testing::Input;
using ::kolo::testing::kAllOps;
using ::kolo::testing::kAllTypes;
using ::kolo::testing::kLarge;
using ::kolo::testing::Pattern;
using ::kolo::testing::RunRanks;
using ::kolo::testing::Sanitized;
using ::kolo::testing::SegmentBytesFor;
using ::kolo::testing::Total;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(std::initializer_list<const char*> names) {
  return std::vector<std::string>(names.begin(), names.end());
}

// --- Grouping -----------------------------------------------------------

TEST(Hierarchy, OneHost) {
  const Hierarchy h = GroupByHost(Names({"a", "a", "a"}));
  EXPECT_EQ(h.num_hosts(), 1);
  EXPECT_THAT(h.hosts, ElementsAre(ElementsAre(0, 1, 2)));
  EXPECT_THAT(h.Leaders(), ElementsAre(0));
  EXPECT_THAT(h.local_of, ElementsAre(0, 1, 2));
  EXPECT_EQ(h.MaxLocalSize(), 3);
  EXPECT_TRUE(h.Uniform());
  EXPECT_TRUE(h.HostMajor());
  EXPECT_THAT(h.Column(2), ElementsAre(2));
  EXPECT_FALSE(UseHierarchy(HierarchicalMode::kAuto, h));
  EXPECT_TRUE(UseHierarchy(HierarchicalMode::kOn, h));
  EXPECT_FALSE(UseHierarchy(HierarchicalMode::kOff, h));
}

TEST(Hierarchy, OneRankPerHost) {
  const Hierarchy h = GroupByHost(Names({"c", "b", "a"}));
  EXPECT_EQ(h.num_hosts(), 3);
  EXPECT_THAT(h.hosts,
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2)));
  EXPECT_THAT(h.Leaders(), ElementsAre(0, 1, 2));
  EXPECT_THAT(h.host_of, ElementsAre(0, 1, 2));
  EXPECT_EQ(h.MaxLocalSize(), 1);
  EXPECT_TRUE(h.Uniform());
  EXPECT_THAT(h.Column(0), ElementsAre(0, 1, 2));
  EXPECT_FALSE(UseHierarchy(HierarchicalMode::kAuto, h));
  EXPECT_TRUE(UseHierarchy(HierarchicalMode::kOn, h));
}

TEST(Hierarchy, ThreePlusOne) {
  const Hierarchy h = GroupByHost(Names({"a", "a", "a", "b"}));
  EXPECT_THAT(h.hosts, ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3)));
  EXPECT_THAT(h.Leaders(), ElementsAre(0, 3));
  EXPECT_THAT(h.local_of, ElementsAre(0, 1, 2, 0));
  EXPECT_EQ(h.MaxLocalSize(), 3);
  EXPECT_FALSE(h.Uniform());
  EXPECT_TRUE(h.HostMajor());
  EXPECT_TRUE(UseHierarchy(HierarchicalMode::kAuto, h));
  EXPECT_FALSE(UseHierarchy(HierarchicalMode::kOff, h));
}

TEST(Hierarchy, RanksNotNumberedHostByHost) {
  // Hosts are numbered by their lowest rank, whatever their names.
  const Hierarchy h = GroupByHost(Names({"y", "x", "y", "x"}));
  EXPECT_THAT(h.hosts, ElementsAre(ElementsAre(0, 2), ElementsAre(1, 3)));
  EXPECT_THAT(h.host_of, ElementsAre(0, 1, 0, 1));
  EXPECT_THAT(h.local_of, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(h.Leaders(), ElementsAre(0, 1));
  EXPECT_TRUE(h.Uniform());
  EXPECT_THAT(h.Column(0), ElementsAre(0, 1));
  EXPECT_THAT(h.Column(1), ElementsAre(2, 3));
  EXPECT_FALSE(h.HostMajor());
  EXPECT_THAT(h.HostMajorOrder(), ElementsAre(0, 2, 1, 3));
  EXPECT_TRUE(h.ColumnsInHostOrder());  // columns {0, 1} and {2, 3}: a, b
  // Columns {0, 1} (a, b) and {2, 3} (b, a): the hosts in another order.
  const Hierarchy m = GroupByHost(Names({"a", "b", "b", "a"}));
  EXPECT_TRUE(m.Uniform());
  EXPECT_FALSE(m.ColumnsInHostOrder());
  EXPECT_TRUE(GroupByHost(Names({"a", "a", "b", "b"})).ColumnsInHostOrder());
  EXPECT_TRUE(UseHierarchy(HierarchicalMode::kAuto, h));

  const Hierarchy u = GroupByHost(Names({"b", "c", "b", "b", "a", "c"}));
  EXPECT_THAT(u.hosts, ElementsAre(ElementsAre(0, 2, 3), ElementsAre(1, 5),
                                   ElementsAre(4)));
  EXPECT_THAT(u.Leaders(), ElementsAre(0, 1, 4));
  EXPECT_THAT(u.HostMajorOrder(), ElementsAre(0, 2, 3, 1, 5, 4));
  EXPECT_FALSE(u.Uniform());
  EXPECT_FALSE(u.ColumnsInHostOrder());
}

TEST(Hierarchy, ModeNames) {
  EXPECT_EQ(HierarchicalModeName(HierarchicalMode::kAuto), "auto");
  EXPECT_EQ(HierarchicalModeName(HierarchicalMode::kOff), "0");
  EXPECT_EQ(HierarchicalModeName(HierarchicalMode::kOn), "1");
}

// --- Collectives ----------------------------------------------------------

struct Layout {
  const char* name;
  std::vector<std::string> hosts;  // per rank
};

void PrintTo(const Layout& layout, std::ostream* os) {
  *os << layout.name << " (" << absl::StrJoin(layout.hosts, ",") << ")";
}

std::string LayoutName(const ::testing::TestParamInfo<Layout>& info) {
  return info.param.name;
}

class Hierarchical : public ::testing::TestWithParam<Layout> {
 protected:
  int n() const { return static_cast<int>(GetParam().hosts.size()); }
  Hierarchy hierarchy() const { return GroupByHost(GetParam().hosts); }
  std::string Where() const {
    return absl::StrCat("hosts ", absl::StrJoin(GetParam().hosts, ","));
  }
};

// Forcing kSmall runs the columns shape where hosts are uniform and line up
// (the leader shape with trees elsewhere), kRing the sliced shape where
// hosts are uniform (the leader shape with rings elsewhere), kAuto chooses by
// size.
HierarchicalOptions Options(Algorithm algorithm, size_t segment_bytes) {
  AlgorithmOptions a{.algorithm = algorithm, .segment_bytes = segment_bytes};
  return {a, a};
}

TEST_P(Hierarchical, AllreduceExact) {
  const int n = this->n();
  const Hierarchy h = hierarchy();
  int parity = 0;
  for (int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4099}, kLarge}) {
    for (DataType type : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        const bool common_type =
            type == DataType::kFloat32 || type == DataType::kInt32;
        // Sanitizer builds: float32 and int32 up to 4099 elements.
        if ((count == kLarge &&
             (Sanitized() || op == ReduceOp::kProduct || !common_type)) ||
            (Sanitized() && !common_type)) {
          continue;
        }
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) {
          inputs.push_back(Input(type, op, r, 0, count));
        }
        const Bytes want = Expected(type, op, n, 0, count);
        for (Algorithm algorithm :
             {Algorithm::kSmall, Algorithm::kRing, Algorithm::kAuto}) {
          const bool in_place = ++parity % 2 == 0;
          const std::string what = CaseName(
              n, type, op, count,
              absl::StrCat(Where(), ", ", AlgorithmName(algorithm),
                           in_place ? ", in place" : ", out of place"));
          std::vector<Bytes> outputs(n);
          for (int r = 0; r < n; ++r) {
            outputs[r] = in_place ? inputs[r] : Bytes(inputs[r].size(), '\xcd');
          }
          const HierarchicalOptions options =
              Options(algorithm, SegmentBytesFor(count));
          auto statuses = RunRanks(n, [&](Transport& t) {
            HierarchicalCollectives hc(&t, h);
            const int r = t.rank();
            const void* in = in_place ? outputs[r].data() : inputs[r].data();
            return hc.Allreduce(type, in, outputs[r].data(), count, {.op = op},
                                options);
          });
          if (type == DataType::kBool && op == ReduceOp::kAverage) {
            ExpectAllInvalid(statuses, "average is not defined for bool");
            continue;
          }
          ExpectAllOk(statuses, what);
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(Diff(outputs[r], want, DataTypeSize(type)), "")
                << what << ", rank " << r;
            if (!in_place) {
              ASSERT_EQ(inputs[r], Input(type, op, r, 0, count))
                  << what << ": rank " << r << "'s input changed";
            }
          }
        }
      }
    }
  }
}

TEST_P(Hierarchical, AllreduceRandomFloatsAreBitwiseIdenticalOnEveryRank) {
  const int n = this->n();
  const Hierarchy h = hierarchy();
  for (int64_t count : {int64_t{10007}, int64_t{300007}}) {
    if (Sanitized() && count > 10007) continue;
    std::mt19937 rng(static_cast<unsigned>(count));
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    std::vector<std::vector<float>> data(n, std::vector<float>(count));
    for (auto& v : data) {
      for (float& x : v) x = dist(rng);
    }
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (Algorithm algorithm :
           {Algorithm::kSmall, Algorithm::kRing, Algorithm::kAuto}) {
        auto outputs = data;
        const HierarchicalOptions options = Options(algorithm, 4096);
        ExpectAllOk(RunRanks(n,
                             [&](Transport& t) {
                               HierarchicalCollectives hc(&t, h);
                               float* d = outputs[t.rank()].data();
                               return hc.Allreduce(DataType::kFloat32, d, d,
                                                   count, {.op = op}, options);
                             }),
                    std::string(AlgorithmName(algorithm)));
        for (int r = 1; r < n; ++r) {
          ASSERT_EQ(std::memcmp(outputs[r].data(), outputs[0].data(),
                                count * sizeof(float)),
                    0)
              << Where() << ", " << AlgorithmName(algorithm) << ", count "
              << count << ": rank " << r << " differs from rank 0";
        }
      }
    }
  }
}

TEST_P(Hierarchical, ScalingAsTheFlatAllreduce) {
  const int n = this->n();
  const Hierarchy h = hierarchy();
  for (int64_t count : {int64_t{7}, int64_t{100003}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (DataType type : {DataType::kFloat32, DataType::kInt32}) {
        const ReduceOptions reduce{.op = op, .prescale = 2, .postscale = 0.25};
        std::vector<Bytes> flat(n), hier(n);
        for (int r = 0; r < n; ++r) {
          flat[r] = hier[r] = Input(type, op, r, 0, count);
        }
        ExpectAllOk(RunRanks(n,
                             [&](Transport& t) {
                               char* d = flat[t.rank()].data();
                               return Allreduce(t, type, d, d, count, reduce);
                             }),
                    "flat");
        ExpectAllOk(RunRanks(n,
                             [&](Transport& t) {
                               HierarchicalCollectives hc(&t, h);
                               char* d = hier[t.rank()].data();
                               return hc.Allreduce(
                                   type, d, d, count, reduce,
                                   Options(Algorithm::kAuto, 0));
                             }),
                    "hierarchical");
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(Diff(hier[r], flat[r], DataTypeSize(type)), "")
              << CaseName(n, type, op, count, Where()) << ", rank " << r;
        }
      }
    }
  }
}

TEST_P(Hierarchical, AllgatherWithUnevenCounts) {
  const int n = this->n();
  const Hierarchy h = hierarchy();
  for (int64_t base :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{300001}}) {
    if (Sanitized() && base > 4099) continue;
    for (DataType type : {DataType::kUInt8, DataType::kInt16,
                          DataType::kFloat32, DataType::kFloat64}) {
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
      for (bool in_place : {false, true}) {
        std::vector<Bytes> outputs(n, Bytes(total * elem, '\xcd'));
        if (in_place) outputs.assign(n, want);  // own block in place
        const HierarchicalOptions options =
            Options(Algorithm::kAuto, SegmentBytesFor(base));
        auto statuses = RunRanks(n, [&](Transport& t) {
          HierarchicalCollectives hc(&t, h);
          const int r = t.rank();
          int64_t before = 0;
          for (int p = 0; p < r; ++p) before += counts[p];
          if (in_place) {
            // Only this rank's block is known before the call.
            Bytes& out = outputs[r];
            std::fill(out.begin(), out.begin() + before * elem, '\xcd');
            std::fill(out.begin() + (before + counts[r]) * elem, out.end(),
                      '\xcd');
          }
          const void* in =
              in_place ? outputs[r].data() + before * elem : inputs[r].data();
          return hc.Allgather(type, in, counts[r], counts, outputs[r].data(),
                              options);
        });
        const std::string what =
            CaseName(n, type, ReduceOp::kSum, base,
                     absl::StrCat(Where(), in_place ? ", in place" : ""));
        ExpectAllOk(statuses, what);
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(Diff(outputs[r], want, elem), "") << what << ", rank " << r;
        }
      }
    }
  }
}

TEST_P(Hierarchical, BroadcastFromEveryRoot) {
  const int n = this->n();
  const Hierarchy h = hierarchy();
  for (int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4099}, kLarge}) {
    if (Sanitized() && count > 4099) continue;
    for (DataType type : {DataType::kUInt8, DataType::kFloat32}) {
      const size_t elem = DataTypeSize(type);
      for (int root = 0; root < n; ++root) {
        const Bytes want = Pattern(100 + root, count * elem);
        std::vector<Bytes> data(n, Bytes(count * elem, '\xcd'));
        data[root] = want;
        const HierarchicalOptions options =
            Options(Algorithm::kAuto, SegmentBytesFor(count));
        const std::string what =
            CaseName(n, type, ReduceOp::kSum, count,
                     absl::StrCat(Where(), ", root ", root));
        ExpectAllOk(RunRanks(n,
                             [&](Transport& t) {
                               HierarchicalCollectives hc(&t, h);
                               return hc.Broadcast(type, data[t.rank()].data(),
                                                   count, root, options);
                             }),
                    what);
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(Diff(data[r], want, elem), "") << what << ", rank " << r;
        }
      }
    }
  }
  ExpectAllInvalid(RunRanks(n,
                            [&](Transport& t) {
                              HierarchicalCollectives hc(&t, h);
                              char c = 0;
                              return hc.Broadcast(DataType::kUInt8, &c, 1, n,
                                                  Options(Algorithm::kAuto, 0));
                            }),
                   "out of range");
}

TEST_P(Hierarchical, ReducescatterWithUnevenCounts) {
  const int n = this->n();
  const Hierarchy h = hierarchy();
  for (int64_t base :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{200003}}) {
    if (Sanitized() && base > 4099) continue;
    for (DataType type :
         {DataType::kInt32, DataType::kFloat32, DataType::kFloat16}) {
      for (ReduceOp op : kAllOps) {
        if (base > 4099 && op == ReduceOp::kProduct) continue;
        const size_t elem = DataTypeSize(type);
        std::vector<int64_t> counts(n);
        for (int r = 0; r < n; ++r) counts[r] = r % 3 == 2 ? 0 : base + r;
        const int64_t total = Total(counts);
        std::vector<Bytes> inputs(n);
        for (int r = 0; r < n; ++r) inputs[r] = Input(type, op, r, 0, total);
        std::vector<Bytes> outputs(n);
        for (int r = 0; r < n; ++r) {
          outputs[r] = Bytes(counts[r] * elem, '\xcd');
        }
        const HierarchicalOptions options =
            Options(Algorithm::kAuto, SegmentBytesFor(base));
        const std::string what =
            CaseName(n, type, op, base, absl::StrCat(Where()));
        ExpectAllOk(RunRanks(n,
                             [&](Transport& t) {
                               HierarchicalCollectives hc(&t, h);
                               const int r = t.rank();
                               return hc.Reducescatter(
                                   type, inputs[r].data(), total, counts,
                                   outputs[r].data(), {.op = op}, options);
                             }),
                    what);
        int64_t offset = 0;
        for (int r = 0; r < n; ++r) {
          const Bytes want = Expected(type, op, n, offset, counts[r]);
          offset += counts[r];
          ASSERT_EQ(Diff(outputs[r], want, elem), "") << what << ", rank " << r;
        }
      }
    }
  }
}

TEST_P(Hierarchical, AFailedRankEndsTheOthersPhasesWithTheirName) {
  const int n = this->n();
  if (n < 2) GTEST_SKIP() << "needs a second rank";
  const Hierarchy h = hierarchy();
  std::vector<std::vector<float>> data(n, std::vector<float>(1000, 1.0f));
  auto statuses = RunRanks(n, [&](Transport& t) {
    if (t.rank() == n - 1) return absl::InternalError("rank gave up");
    HierarchicalCollectives hc(&t, h);
    float* d = data[t.rank()].data();
    return hc.Allreduce(DataType::kFloat32, d, d, 1000, {},
                        Options(Algorithm::kAuto, 0));
  });
  EXPECT_FALSE(statuses[n - 1].ok());
  // Every rank fails; those waiting in a phase say which.
  int named = 0;
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    named +=
        absl::StrContains(statuses[r].message(), "hierarchical allreduce (");
  }
  EXPECT_GE(named, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Hierarchical,
    ::testing::Values(Layout{"OneHost", Names({"a", "a", "a"})},
                      Layout{"OneRankPerHost", Names({"a", "b", "c"})},
                      Layout{"TwoByTwo", Names({"a", "a", "b", "b"})},
                      Layout{"ThreePlusOne", Names({"a", "a", "a", "b"})},
                      Layout{"Interleaved", Names({"a", "b", "a", "b"})},
                      Layout{"Mirrored", Names({"a", "b", "b", "a"})},
                      Layout{"Uneven5", Names({"b", "c", "b", "b", "c"})},
                      Layout{"ThreeByTwo",
                             Names({"a", "a", "b", "b", "c", "c"})}),
    LayoutName);

}  // namespace
}  // namespace kolo
