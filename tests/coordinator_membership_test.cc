// Tests of AssignRanks (coordinator/membership.h): ranks, local and cross
// ranks by launcher host name, requested ranks and the fallback order.
#include <string>
#include <vector>

#include "coordinator/membership.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

struct Topo {
  int rank, local_rank, local_size, cross_rank, cross_size;
  bool operator==(const Topo&) const = default;
};

void PrintTo(const Topo& t, std::ostream* os) {
  *os << "{rank " << t.rank << ", local " << t.local_rank << "/" << t.local_size
      << ", cross " << t.cross_rank << "/" << t.cross_size << "}";
}

// Topology of each arrival, in arrival order.
std::vector<Topo> TopoByArrival(const Assignment& a) {
  std::vector<Topo> out;
  for (int r : a.rank_of) {
    const proto::Membership& m = a.by_rank[r];
    out.push_back(Topo{m.rank(), m.local_rank(), m.local_size(), m.cross_rank(),
                       m.cross_size()});
  }
  return out;
}

std::vector<Arrival> Hosts(const std::vector<std::string>& hosts,
                           const std::vector<int>& requested = {}) {
  std::vector<Arrival> out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    out.push_back(Arrival{"w" + std::to_string(i), hosts[i],
                          "10.0.0." + std::to_string(i) + ":4000",
                          requested.empty() ? -1 : requested[i]});
  }
  return out;
}

TEST(AssignRanksTest, SingleWorker) {
  Assignment a = AssignRanks(Hosts({"a"}), "job");
  EXPECT_THAT(TopoByArrival(a), ::testing::ElementsAre(Topo{0, 0, 1, 0, 1}));
  ASSERT_EQ(a.by_rank[0].peers_size(), 1);
  EXPECT_EQ(a.by_rank[0].peers(0).worker_id(), "w0");
  EXPECT_EQ(a.by_rank[0].job_id(), "job");
  EXPECT_EQ(a.by_rank[0].size(), 1);
}

TEST(AssignRanksTest, OneHostInArrivalOrder) {
  Assignment a = AssignRanks(Hosts({"h", "h", "h", "h"}), "job");
  EXPECT_THAT(TopoByArrival(a),
              ::testing::ElementsAre(Topo{0, 0, 4, 0, 1}, Topo{1, 1, 4, 0, 1},
                                     Topo{2, 2, 4, 0, 1}, Topo{3, 3, 4, 0, 1}));
}

TEST(AssignRanksTest, UnevenHostsGroupByFirstAppearance) {
  // Arrivals interleave hosts: b, a, b, a, b -> hosts ordered b (first seen),
  // then a. b has 3 workers, a has 2.
  Assignment a = AssignRanks(Hosts({"b", "a", "b", "a", "b"}), "job");
  EXPECT_FALSE(a.used_requested_ranks);
  EXPECT_THAT(TopoByArrival(a),
              ::testing::ElementsAre(
                  Topo{0, 0, 3, 0, 2},    // b #1
                  Topo{3, 0, 2, 1, 2},    // a #1
                  Topo{1, 1, 3, 0, 2},    // b #2
                  Topo{4, 1, 2, 1, 2},    // a #2
                  Topo{2, 2, 3, 0, 1}));  // b #3: local_rank 2 only on b
}

TEST(AssignRanksTest, HostsA2B3) {
  Assignment a = AssignRanks(Hosts({"a", "a", "b", "b", "b"}), "job");
  EXPECT_THAT(TopoByArrival(a),
              ::testing::ElementsAre(Topo{0, 0, 2, 0, 2}, Topo{1, 1, 2, 0, 2},
                                     Topo{2, 0, 3, 1, 2}, Topo{3, 1, 3, 1, 2},
                                     Topo{4, 2, 3, 0, 1}));
}

TEST(AssignRanksTest, PeersIndexedByRank) {
  Assignment a = AssignRanks(Hosts({"b", "a", "b"}), "job");
  // Ranks: arrival 0 -> 0, arrival 2 -> 1, arrival 1 -> 2.
  ASSERT_EQ(a.rank_of, (std::vector<int>{0, 2, 1}));
  for (const proto::Membership& m : a.by_rank) {
    ASSERT_EQ(m.peers_size(), 3);
    EXPECT_EQ(m.peers(0).worker_id(), "w0");
    EXPECT_EQ(m.peers(1).worker_id(), "w2");
    EXPECT_EQ(m.peers(2).worker_id(), "w1");
    EXPECT_EQ(m.peers(2).host_name(), "a");
    EXPECT_EQ(m.peers(2).data_address(), "10.0.0.1:4000");
    for (int r = 0; r < 3; ++r) EXPECT_EQ(m.peers(r).rank(), r);
  }
}

TEST(AssignRanksTest, RequestedRanksHonoured) {
  // A valid permutation is used as given, even against host grouping.
  Assignment a = AssignRanks(Hosts({"a", "b", "a", "b"}, {3, 0, 1, 2}), "j");
  EXPECT_TRUE(a.used_requested_ranks);
  EXPECT_EQ(a.rank_of, (std::vector<int>{3, 0, 1, 2}));
  // Local ranks follow rank order within a host: a has ranks 1 and 3.
  EXPECT_THAT(TopoByArrival(a),
              ::testing::ElementsAre(Topo{3, 1, 2, 1, 2}, Topo{0, 0, 2, 0, 2},
                                     Topo{1, 0, 2, 1, 2}, Topo{2, 1, 2, 0, 2}));
}

TEST(AssignRanksTest, DuplicateHintsFallBack) {
  Assignment a = AssignRanks(Hosts({"a", "b", "a"}, {0, 0, 1}), "j");
  EXPECT_FALSE(a.used_requested_ranks);
  EXPECT_EQ(a.rank_of, (std::vector<int>{0, 2, 1}));
}

TEST(AssignRanksTest, OutOfRangeHintsFallBack) {
  Assignment a = AssignRanks(Hosts({"a", "a", "a"}, {1, 2, 3}), "j");
  EXPECT_FALSE(a.used_requested_ranks);
  EXPECT_EQ(a.rank_of, (std::vector<int>{0, 1, 2}));
}

TEST(AssignRanksTest, PartialHintsFallBack) {
  Assignment a = AssignRanks(Hosts({"a", "a", "a"}, {2, -1, 0}), "j");
  EXPECT_FALSE(a.used_requested_ranks);
  EXPECT_EQ(a.rank_of, (std::vector<int>{0, 1, 2}));
}

TEST(AssignRanksTest, EveryRankOnce) {
  std::vector<std::string> hosts;
  for (int i = 0; i < 17; ++i) hosts.push_back("h" + std::to_string(i % 5));
  Assignment a = AssignRanks(Hosts(hosts), "j");
  std::vector<int> seen(hosts.size(), 0);
  for (int r : a.rank_of) ++seen[r];
  for (int c : seen) EXPECT_EQ(c, 1);
  // Hosts are contiguous rank ranges.
  for (int r = 1; r < 17; ++r) {
    const auto& prev = a.by_rank[r - 1];
    const auto& cur = a.by_rank[r];
    if (cur.peers(r).host_name() == prev.peers(r - 1).host_name()) {
      EXPECT_EQ(cur.local_rank(), prev.local_rank() + 1);
    } else {
      EXPECT_EQ(cur.local_rank(), 0);
    }
  }
}

}  // namespace
}  // namespace kolo::coordinator
