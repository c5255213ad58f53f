// DataPlane's switch between flat and two-level collectives (autotune's
// "hierarchical" dimension; allreduce/data_plane.h SetHierarchical), over
// LocalFabric (ranks as threads): which layouts and KOLO_HIERARCHICAL modes
// make the hierarchy tunable (auto, several hosts, some with several ranks)
// and what is in force; a forced mode that a switch does not move; allreduce
// and allgather exact before and after each switch, with the switch seen in
// the traffic (on 3 + 1 ranks, rank 2 sends to rank 3 only when flat); and
// subsets that follow the switch made before them.
#include <cstdint>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "allreduce/collectives.h"
#include "allreduce/data_plane.h"
#include "allreduce/hierarchy.h"
#include "allreduce/subset_transport.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/local_transport.h"

namespace kolo {
namespace {

using ::kolo::testing::Bytes;
using ::kolo::testing::Diff;
using ::kolo::testing::ExpectAllOk;
using ::kolo::testing::Expected;
using ::kolo::testing::FabricTimeout;
using ::kolo::testing::Input;
using ::kolo::testing::LocalFabric;

// The whole of a fabric rank's transport, recording the peers it sends to.
// Used by that rank's thread; read by the test's thread between Runs.
class PeerRecorder : public SubsetTransport {
 public:
  PeerRecorder(Transport* parent, std::vector<int> members, std::set<int>* to)
      : SubsetTransport(parent, std::move(members)), to_(to) {}
  absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                 size_t len) override {
    to_->insert(peer);
    return SubsetTransport::StartSend(peer, data, len);
  }

 private:
  std::set<int>* const to_;
};

std::vector<int> Everyone(int n) {
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

DataPlaneHosts HostsOf(std::vector<std::string> names, HierarchicalMode mode) {
  return {.mode = mode, .names = std::move(names)};
}

TEST(DataPlaneHierarchy, TunableOnlyUnderAutoWhereTwoLevelsCanPay) {
  LocalFabric fabric(4, FabricTimeout());
  struct Case {
    std::vector<std::string> names;
    HierarchicalMode mode;
    bool tunable;
    bool in_force;
  };
  const HierarchicalMode kAuto = HierarchicalMode::kAuto;
  const Case cases[] = {
      {{"a", "a", "b", "b"}, kAuto, true, true},
      {{"a", "a", "a", "b"}, kAuto, true, true},
      {{"a", "a", "a", "a"}, kAuto, false, false},  // one host
      {{"a", "b", "c", "d"}, kAuto, false, false},  // one rank per host
      {{"a", "a", "b", "b"}, HierarchicalMode::kOff, false, false},
      {{"a", "a", "b", "b"}, HierarchicalMode::kOn, false, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(
        c.names[0], c.names[1], c.names[2], c.names[3],
        " KOLO_HIERARCHICAL=", std::string(HierarchicalModeName(c.mode))));
    DataPlane plane(
        std::make_unique<SubsetTransport>(&fabric.transport(0), Everyone(4)),
        AlgorithmOptions{}, HostsOf(c.names, c.mode));
    EXPECT_EQ(plane.tunables().hierarchical_tunable, c.tunable);
    EXPECT_EQ(plane.tunables().hierarchical, c.in_force);
    // A switch moves only a tunable hierarchy: a forced mode stays.
    plane.SetHierarchical(!c.in_force);
    EXPECT_EQ(plane.tunables().hierarchical,
              c.tunable ? !c.in_force : c.in_force);
  }
}

class DataPlaneSwitch : public ::testing::Test {
 protected:
  static constexpr int kRanks = 4;

  void SetUp() override {
    for (int r = 0; r < kRanks; ++r) {
      planes_.push_back(std::make_unique<DataPlane>(
          std::make_unique<PeerRecorder>(&fabric_.transport(r),
                                         Everyone(kRanks), &sent_to_[r]),
          AlgorithmOptions{},
          HostsOf({"a", "a", "a", "b"}, HierarchicalMode::kAuto)));
    }
  }

  // Every rank switches, as after a plan that carries the switch.
  void SwitchAll(bool on) {
    for (auto& plane : planes_) plane->SetHierarchical(on);
  }

  // Allreduces (sum) and allgathers float32 of each count on every rank;
  // every result must be exact.
  void ExpectExact(const std::string& what) {
    for (auto& to : sent_to_) to.clear();
    for (int64_t count : {int64_t{7}, int64_t{4099}}) {
      std::vector<Bytes> in, out(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        in.push_back(Input(DataType::kFloat32, ReduceOp::kSum, r, 0, count));
        out[r].assign(in[r].size(), '\0');
      }
      ExpectAllOk(fabric_.Run([&](Transport& t) {
        const int r = t.rank();
        return planes_[r]->Allreduce(DataType::kFloat32, in[r].data(),
                                     out[r].data(), count, {});
      }),
                  what);
      const Bytes want =
          Expected(DataType::kFloat32, ReduceOp::kSum, kRanks, 0, count);
      for (int r = 0; r < kRanks; ++r) {
        EXPECT_EQ(Diff(out[r], want, 4), "")
            << what << ", count " << count << ", rank " << r;
      }
      // Allgather: every rank's input, in rank order.
      const std::vector<int64_t> counts(kRanks, count);
      std::vector<Bytes> gathered(kRanks, Bytes(in[0].size() * kRanks, '\0'));
      ExpectAllOk(fabric_.Run([&](Transport& t) {
        const int r = t.rank();
        return planes_[r]->Allgather(DataType::kFloat32, in[r].data(), count,
                                     counts, gathered[r].data());
      }),
                  what);
      Bytes all;
      for (const Bytes& b : in) all.insert(all.end(), b.begin(), b.end());
      for (int r = 0; r < kRanks; ++r) {
        EXPECT_EQ(gathered[r], all)
            << what << ", allgather count " << count << ", rank " << r;
      }
    }
  }

  // Whether rank 2 (host a, not its leader) sent to rank 3 (host b): only
  // the flat collectives do.
  bool CrossedHostsFromRank2() const { return sent_to_[2].contains(3); }

  LocalFabric fabric_{kRanks, FabricTimeout()};
  std::set<int> sent_to_[kRanks];
  std::vector<std::unique_ptr<DataPlane>> planes_;
};

TEST_F(DataPlaneSwitch, FlatAndTwoLevelsAreBothExact) {
  ASSERT_TRUE(planes_[0]->tunables().hierarchical_tunable);
  ExpectExact("two levels (auto)");
  EXPECT_FALSE(CrossedHostsFromRank2());
  SwitchAll(false);
  EXPECT_FALSE(planes_[2]->tunables().hierarchical);
  ExpectExact("switched flat");
  EXPECT_TRUE(CrossedHostsFromRank2());
  SwitchAll(true);
  EXPECT_TRUE(planes_[2]->tunables().hierarchical);
  ExpectExact("switched back to two levels");
  EXPECT_FALSE(CrossedHostsFromRank2());
}

// A process set's data plane made after a switch follows it where its own
// hierarchy is tunable; one made before keeps its own.
TEST_F(DataPlaneSwitch, SubsetsMadeAfterASwitchFollowIt) {
  std::unique_ptr<DataPlane> before = planes_[0]->Subset({0, 1, 3});
  SwitchAll(false);
  std::unique_ptr<DataPlane> after = planes_[0]->Subset({0, 1, 3});
  std::unique_ptr<DataPlane> one_host = planes_[0]->Subset({0, 1});
  EXPECT_TRUE(before->tunables().hierarchical_tunable);
  EXPECT_TRUE(before->tunables().hierarchical);
  EXPECT_TRUE(after->tunables().hierarchical_tunable);
  EXPECT_FALSE(after->tunables().hierarchical);
  EXPECT_FALSE(one_host->tunables().hierarchical_tunable);
  EXPECT_FALSE(one_host->tunables().hierarchical);
  SwitchAll(true);
  std::unique_ptr<DataPlane> again = planes_[0]->Subset({0, 1, 3});
  EXPECT_TRUE(again->tunables().hierarchical);
}

}  // namespace
}  // namespace kolo
