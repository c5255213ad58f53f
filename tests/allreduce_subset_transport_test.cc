// SubsetTransport (allreduce/subset_transport.h) over LocalFabric meshes: the
// rank mapping; every collective on a subset while the complementary subset
// (or another disjoint subset) runs a different collective over the same
// parent transports, with exact results and the same BeginOperation stamps on
// every member; peers outside the subset refused without touching the
// parent; Abort() reaching the parent; the constructor's invariants.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/collectives.h"
#include "allreduce/subset_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/local_transport.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::Bytes;
using ::kolo::testing::Diff;
using ::kolo::testing::ExpectAllOk;
using ::kolo::testing::Expected;
using ::kolo::testing::FabricTimeout;
using ::kolo::testing::Input;
using ::kolo::testing::LocalFabric;
using ::kolo::testing::Pattern;
using ::kolo::testing::SegmentBytesFor;
using ::kolo::testing::Total;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Forwards to a parent transport and records what reaches it: the
// BeginOperation stamps and the number of started ops. Used by one rank's
// thread (read by the test's thread after the fabric's Run returned).
class RecordingTransport : public Transport {
 public:
  explicit RecordingTransport(Transport* inner) : inner_(inner) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void BeginOperation(uint64_t seq) override {
    stamps_.push_back(seq);
    inner_->BeginOperation(seq);
  }
  absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                 size_t len) override {
    ++started_;
    return inner_->StartSend(peer, data, len);
  }
  absl::StatusOr<OpId> StartRecv(int peer, void* data, size_t len) override {
    ++started_;
    return inner_->StartRecv(peer, data, len);
  }
  absl::Status Wait(OpId op) override { return inner_->Wait(op); }
  void Abort(absl::Status why) override { inner_->Abort(std::move(why)); }

  const std::vector<uint64_t>& stamps() const { return stamps_; }
  int started() const { return started_; }

 private:
  Transport* const inner_;
  std::vector<uint64_t> stamps_;
  int started_ = 0;
};

// One collective on a world of n ranks (the ranks of a subset): `run` is
// called by every rank of the subset with its SubsetTransport (state indexed
// by subset rank), `check` afterwards on the test's thread.
struct Collective {
  std::string kind;  // "allreduce", "broadcast", ...
  std::string name;
  std::function<absl::Status(Transport&)> run;
  std::function<void(const std::string&)> check;
};

// `salt` makes each subset's data its own, so that bytes of one subset
// landing in another would show.
Collective AllreduceCase(int n, int64_t salt, DataType type, ReduceOp op,
                         Algorithm algorithm, int64_t count) {
  struct State {
    std::vector<Bytes> inputs, outputs;
    Bytes want;
  };
  auto st = std::make_shared<State>();
  const size_t elem = DataTypeSize(type);
  for (int r = 0; r < n; ++r) {
    st->inputs.push_back(Input(type, op, r, salt, count));
    st->outputs.emplace_back(count * elem, '\xcd');
  }
  st->want = Expected(type, op, n, salt, count);
  const bool in_place = algorithm == Algorithm::kSmall;
  if (in_place) st->outputs = st->inputs;
  const AlgorithmOptions options{.algorithm = algorithm,
                                 .segment_bytes = SegmentBytesFor(count)};
  return Collective{
      .kind = "allreduce",
      .name = absl::StrCat("allreduce ", DataTypeName(type), " ",
                           op == ReduceOp::kSum ? "sum" : "average", " ",
                           AlgorithmName(algorithm), " count ", count),
      .run =
          [st, type, op, count, options, in_place](Transport& t) {
            const int r = t.rank();
            const void* in =
                in_place ? st->outputs[r].data() : st->inputs[r].data();
            return Allreduce(t, type, in, st->outputs[r].data(), count,
                             {.op = op}, options);
          },
      .check =
          [st, n, elem](const std::string& what) {
            for (int r = 0; r < n; ++r) {
              EXPECT_EQ(Diff(st->outputs[r], st->want, elem), "")
                  << what << ", subset rank " << r;
            }
          }};
}

Collective AllgatherCase(int n, int64_t salt, int64_t base) {
  struct State {
    std::vector<int64_t> counts;
    std::vector<Bytes> inputs, outputs;
    Bytes want;
  };
  auto st = std::make_shared<State>();
  constexpr DataType type = DataType::kFloat32;
  const size_t elem = DataTypeSize(type);
  for (int r = 0; r < n; ++r) {
    st->counts.push_back(r % 3 == 1 ? 0 : base + 2 * r);
    st->inputs.push_back(Pattern(salt + 10 * r, st->counts[r] * elem));
    st->want.insert(st->want.end(), st->inputs[r].begin(), st->inputs[r].end());
  }
  st->outputs.assign(n, Bytes(Total(st->counts) * elem, '\xcd'));
  const AlgorithmOptions options{.segment_bytes = SegmentBytesFor(base)};
  return Collective{
      .kind = "allgather",
      .name = absl::StrCat("allgather counts ", absl::StrJoin(st->counts, ",")),
      .run =
          [st, options](Transport& t) {
            const int r = t.rank();
            return Allgather(t, type, st->inputs[r].data(), st->counts[r],
                             st->counts, st->outputs[r].data(), options);
          },
      .check =
          [st, n, elem](const std::string& what) {
            for (int r = 0; r < n; ++r) {
              EXPECT_EQ(Diff(st->outputs[r], st->want, elem), "")
                  << what << ", subset rank " << r;
            }
          }};
}

Collective BroadcastCase(int n, int64_t salt, int root, Algorithm algorithm,
                         int64_t count) {
  struct State {
    std::vector<Bytes> data;
    Bytes want;
  };
  auto st = std::make_shared<State>();
  constexpr DataType type = DataType::kInt16;
  const size_t elem = DataTypeSize(type);
  st->want = Pattern(salt + 100 + root, count * elem);
  st->data.assign(n, Bytes(count * elem, '\xcd'));
  st->data[root] = st->want;
  const AlgorithmOptions options{.algorithm = algorithm,
                                 .segment_bytes = SegmentBytesFor(count)};
  return Collective{
      .kind = "broadcast",
      .name = absl::StrCat("broadcast root ", root, " ",
                           AlgorithmName(algorithm), " count ", count),
      .run =
          [st, count, root, options](Transport& t) {
            return Broadcast(t, type, st->data[t.rank()].data(), count, root,
                             options);
          },
      .check =
          [st, n, elem](const std::string& what) {
            for (int r = 0; r < n; ++r) {
              EXPECT_EQ(Diff(st->data[r], st->want, elem), "")
                  << what << ", subset rank " << r;
            }
          }};
}

Collective AlltoallCase(int n, int64_t salt, int64_t base) {
  struct State {
    // send[r][p]: elements subset rank r sends to p; blocks[r][p]: the bytes.
    std::vector<std::vector<int64_t>> send, recv;
    std::vector<std::vector<Bytes>> blocks;
    std::vector<Bytes> inputs, outputs;
  };
  auto st = std::make_shared<State>();
  constexpr DataType type = DataType::kInt32;
  const size_t elem = DataTypeSize(type);
  st->send.assign(n, std::vector<int64_t>(n));
  st->recv.assign(n, std::vector<int64_t>(n));
  st->blocks.assign(n, std::vector<Bytes>(n));
  st->inputs.resize(n);
  st->outputs.resize(n);
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      st->send[r][p] = (r + 2 * p) % 3 == 0 ? 0 : base + r + 2 * p;
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      st->recv[r][p] = st->send[p][r];
      st->blocks[r][p] = Pattern(salt + 1000 * r + p, st->send[r][p] * elem);
      st->inputs[r].insert(st->inputs[r].end(), st->blocks[r][p].begin(),
                           st->blocks[r][p].end());
    }
  }
  for (int r = 0; r < n; ++r) {
    st->outputs[r] = Bytes(Total(st->recv[r]) * elem, '\xcd');
  }
  return Collective{.kind = "alltoall",
                    .name = absl::StrCat("alltoall base ", base),
                    .run =
                        [st](Transport& t) {
                          const int r = t.rank();
                          return Alltoall(t, type, st->inputs[r].data(),
                                          Total(st->send[r]), st->send[r],
                                          st->outputs[r].data(), st->recv[r]);
                        },
                    .check =
                        [st, n, elem](const std::string& what) {
                          for (int r = 0; r < n; ++r) {
                            Bytes want;
                            for (int p = 0; p < n; ++p) {
                              want.insert(want.end(), st->blocks[p][r].begin(),
                                          st->blocks[p][r].end());
                            }
                            EXPECT_EQ(Diff(st->outputs[r], want, elem), "")
                                << what << ", subset rank " << r;
                          }
                        }};
}

Collective ReducescatterCase(int n, int64_t salt, DataType type, ReduceOp op,
                             int64_t base) {
  struct State {
    std::vector<int64_t> counts;
    std::vector<Bytes> inputs, outputs;
    Bytes all;
  };
  auto st = std::make_shared<State>();
  const size_t elem = DataTypeSize(type);
  for (int r = 0; r < n; ++r) {
    st->counts.push_back(r % 3 == 1 ? 0 : base + r);
  }
  const int64_t total = Total(st->counts);
  for (int r = 0; r < n; ++r) {
    st->inputs.push_back(Input(type, op, r, salt, total));
    st->outputs.emplace_back(st->counts[r] * elem, '\xcd');
  }
  st->all = Expected(type, op, n, salt, total);
  const AlgorithmOptions options{.segment_bytes = SegmentBytesFor(base)};
  return Collective{
      .kind = "reducescatter",
      .name = absl::StrCat("reducescatter ", DataTypeName(type), " counts ",
                           absl::StrJoin(st->counts, ",")),
      .run =
          [st, type, op, total, options](Transport& t) {
            const int r = t.rank();
            return Reducescatter(t, type, st->inputs[r].data(), total,
                                 st->counts, st->outputs[r].data(), {.op = op},
                                 options);
          },
      .check =
          [st, n, elem](const std::string& what) {
            int64_t offset = 0;
            for (int r = 0; r < n; ++r) {
              const Bytes want(
                  st->all.begin() + offset * elem,
                  st->all.begin() + (offset + st->counts[r]) * elem);
              offset += st->counts[r];
              EXPECT_EQ(Diff(st->outputs[r], want, elem), "")
                  << what << ", subset rank " << r;
            }
          }};
}

Collective BarrierCase(int n, int round) {
  struct State {
    std::atomic<int> arrived{0};
    std::atomic<int> early{0};
  };
  auto st = std::make_shared<State>();
  return Collective{
      .kind = "barrier",
      .name = absl::StrCat("barrier ", round),
      .run =
          [st, n, round](Transport& t) {
            std::mt19937 rng(static_cast<unsigned>(round * 31 + t.rank()));
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
            st->arrived.fetch_add(1);
            absl::Status s = Barrier(t);
            if (st->arrived.load() != n) st->early.fetch_add(1);
            return s;
          },
      .check =
          [st](const std::string& what) {
            EXPECT_EQ(st->early.load(), 0)
                << what << ": a rank left before all arrived";
          }};
}

// Every collective, for a subset of n ranks: allreduce sum and average with
// both algorithms forced, allgather with uneven counts (zeros included),
// broadcast from every subset root with both algorithms, alltoall with
// uneven splits, reducescatter, barriers.
std::vector<Collective> Program(int n, int64_t salt) {
  std::vector<Collective> out;
  for (DataType type : {DataType::kFloat32, DataType::kInt32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
        for (int64_t count : {int64_t{1}, int64_t{4099}}) {
          out.push_back(AllreduceCase(n, salt, type, op, algorithm, count));
        }
      }
    }
  }
  for (int64_t base : {int64_t{0}, int64_t{3}, int64_t{4099}}) {
    out.push_back(AllgatherCase(n, salt, base));
  }
  for (int root = 0; root < n; ++root) {
    for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
      for (int64_t count : {int64_t{7}, int64_t{4099}}) {
        out.push_back(BroadcastCase(n, salt, root, algorithm, count));
      }
    }
  }
  for (int64_t base : {int64_t{1}, int64_t{4099}}) {
    out.push_back(AlltoallCase(n, salt, base));
  }
  for (int64_t base : {int64_t{2}, int64_t{4099}}) {
    out.push_back(
        ReducescatterCase(n, salt, DataType::kFloat32, ReduceOp::kSum, base));
    out.push_back(
        ReducescatterCase(n, salt, DataType::kInt32, ReduceOp::kAverage, base));
  }
  for (int round = 0; round < 3; ++round) out.push_back(BarrierCase(n, round));
  return out;
}

// A LocalFabric mesh whose ranks are split into disjoint subsets, each parent
// transport wrapped in a RecordingTransport and viewed through the
// SubsetTransport of its rank's subset (built once, as a data plane does).
class SplitMesh {
 public:
  SplitMesh(int size, std::vector<std::vector<int>> sets)
      : fabric_(size, FabricTimeout()),
        sets_(std::move(sets)),
        set_of_(size, -1),
        stamped_(sets_.size()) {
    for (int p = 0; p < size; ++p) {
      recorders_.push_back(
          std::make_unique<RecordingTransport>(&fabric_.transport(p)));
    }
    subsets_.resize(size);
    for (size_t k = 0; k < sets_.size(); ++k) {
      for (int p : sets_[k]) {
        set_of_[p] = static_cast<int>(k);
        subsets_[p] =
            std::make_unique<SubsetTransport>(recorders_[p].get(), sets_[k]);
      }
    }
  }

  // Runs, at once, programs[k] on subset k: each member stamps seqs[k][i]
  // before programs[k][i]. Then checks every collective's results.
  void Run(const std::vector<std::vector<const Collective*>>& programs,
           const std::vector<std::vector<uint64_t>>& seqs,
           const std::string& what) {
    std::vector<absl::Status> statuses =
        fabric_.Run([&](Transport& parent) -> absl::Status {
          const int k = set_of_[parent.rank()];
          Transport& subset = *subsets_[parent.rank()];
          for (size_t i = 0; i < programs[k].size(); ++i) {
            subset.BeginOperation(seqs[k][i]);
            absl::Status s = programs[k][i]->run(subset);
            if (!s.ok()) {
              return absl::Status(s.code(), absl::StrCat(programs[k][i]->name,
                                                         ": ", s.message()));
            }
          }
          return absl::OkStatus();
        });
    ExpectAllOk(statuses, what);
    for (size_t k = 0; k < programs.size(); ++k) {
      for (const Collective* c : programs[k]) {
        c->check(absl::StrCat(what, ", subset ", k, ": ", c->name));
      }
      stamped_[k].insert(stamped_[k].end(), seqs[k].begin(), seqs[k].end());
    }
  }

  // Every member of every subset stamped its parent with exactly the
  // subset's sequences, in order.
  void ExpectSameStampsOnEveryMember() const {
    for (size_t k = 0; k < sets_.size(); ++k) {
      for (int p : sets_[k]) {
        EXPECT_THAT(recorders_[p]->stamps(), ElementsAreArray(stamped_[k]))
            << "parent rank " << p << " of subset " << k;
      }
    }
  }

  // Runs each collective of `a` on subset 0 together with a collective of
  // another kind from `b` on subset 1 (cycling through b), each pair as one
  // fabric Run with its own plan sequences.
  void RunPairs(const std::vector<Collective>& a,
                const std::vector<Collective>& b, const std::string& what) {
    size_t j = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      while (b[j % b.size()].kind == a[i].kind) ++j;
      const Collective& other = b[j % b.size()];
      ++j;
      const uint64_t seq = next_seq_;
      next_seq_ += 2;
      Run({{&a[i]}, {&other}}, {{seq}, {seq + 1}},
          absl::StrCat(what, ": ", a[i].name, " | ", other.name));
    }
  }

  // Runs all of `a` on subset 0 and all of `b`, reversed, on subset 1, in one
  // fabric Run: the subsets drift freely against each other.
  void RunWhole(const std::vector<Collective>& a,
                const std::vector<Collective>& b, const std::string& what) {
    std::vector<std::vector<const Collective*>> programs(2);
    std::vector<std::vector<uint64_t>> seqs(2);
    for (const Collective& c : a) {
      programs[0].push_back(&c);
      seqs[0].push_back(next_seq_++);
    }
    for (auto it = b.rbegin(); it != b.rend(); ++it) {
      programs[1].push_back(&*it);
      seqs[1].push_back(next_seq_++);
    }
    Run(programs, seqs, what);
  }

 private:
  LocalFabric fabric_;
  const std::vector<std::vector<int>> sets_;
  std::vector<int> set_of_;
  std::vector<std::unique_ptr<RecordingTransport>> recorders_;
  std::vector<std::unique_ptr<SubsetTransport>> subsets_;
  std::vector<std::vector<uint64_t>> stamped_;
  uint64_t next_seq_ = 1;
};

TEST(SubsetTransportTest, RanksMapToTheMembersOfTheParent) {
  LocalFabric fabric(4, FabricTimeout());
  const std::vector<int> members = {0, 2, 3};
  std::vector<std::unique_ptr<SubsetTransport>> subs;
  for (int i = 0; i < 3; ++i) {
    subs.push_back(std::make_unique<SubsetTransport>(
        &fabric.transport(members[i]), members));
    EXPECT_EQ(subs[i]->rank(), i);
    EXPECT_EQ(subs[i]->size(), 3);
  }
  SubsetTransport alone(&fabric.transport(1), {1});
  EXPECT_EQ(alone.rank(), 0);
  EXPECT_EQ(alone.size(), 1);
  SubsetTransport everyone(&fabric.transport(3), {0, 1, 2, 3});
  EXPECT_EQ(everyone.rank(), 3);
  EXPECT_EQ(everyone.size(), 4);

  // Subset rank i sending to subset peer j reaches parent rank members[j],
  // from parent rank members[i] (received on the parent directly).
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      if (i == j) continue;
      const int sent = 10 * members[i] + members[j];
      int got = -1;
      auto send = subs[i]->StartSend(j, &sent, sizeof(sent));
      ASSERT_TRUE(send.ok()) << send.status();
      auto recv =
          fabric.transport(members[j]).StartRecv(members[i], &got, sizeof(got));
      ASSERT_TRUE(recv.ok()) << recv.status();
      ASSERT_TRUE(subs[i]->Wait(*send).ok());
      ASSERT_TRUE(fabric.transport(members[j]).Wait(*recv).ok());
      EXPECT_EQ(got, sent) << i << " -> " << j;
    }
  }
  // And the other way round: a subset receive from subset peer j takes the
  // message parent rank members[j] sent.
  const int sent = 42;
  int got = -1;
  auto send = fabric.transport(3).StartSend(0, &sent, sizeof(sent));
  ASSERT_TRUE(send.ok()) << send.status();
  auto recv = subs[0]->StartRecv(2, &got, sizeof(got));
  ASSERT_TRUE(recv.ok()) << recv.status();
  ASSERT_TRUE(fabric.transport(3).Wait(*send).ok());
  ASSERT_TRUE(subs[0]->WaitAll({*recv}).ok());
  EXPECT_EQ(got, 42);
}

// Exact values worked by hand: parent rank p contributes {3p, 1, 6p}.
TEST(SubsetTransportTest, AllreduceReducesOnlyTheMembers) {
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kSmall}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      LocalFabric fabric(4, FabricTimeout());
      std::vector<std::vector<double>> bufs(4);
      auto statuses = fabric.Run([&](Transport& parent) {
        const int p = parent.rank();
        bufs[p] = {3.0 * p, 1.0, 6.0 * p};
        std::vector<int> members = {0, 2, 3};
        if (p == 1) members = {1};
        SubsetTransport subset(&parent, members);
        subset.BeginOperation(p == 1 ? 9 : 8);
        return Allreduce(subset, DataType::kFloat64, bufs[p].data(),
                         bufs[p].data(), 3, {.op = op},
                         {.algorithm = algorithm});
      });
      const std::string what = absl::StrCat(
          AlgorithmName(algorithm), op == ReduceOp::kSum ? " sum" : " average");
      ExpectAllOk(statuses, what);
      for (int p : {0, 2, 3}) {
        if (op == ReduceOp::kSum) {
          EXPECT_THAT(bufs[p], ElementsAre(15.0, 3.0, 30.0)) << what << p;
        } else {
          EXPECT_THAT(bufs[p], ElementsAre(5.0, 1.0, 10.0)) << what << p;
        }
      }
      EXPECT_THAT(bufs[1], ElementsAre(3.0, 1.0, 6.0)) << what;
    }
  }
}

TEST(SubsetTransportTest, SubsetAndItsComplementRunDifferentCollectivesAtOnce) {
  SplitMesh mesh(4, {{0, 2, 3}, {1}});
  const std::vector<Collective> a = Program(3, /*salt=*/1);
  const std::vector<Collective> b = Program(1, /*salt=*/2);
  mesh.RunPairs(a, b, "{0,2,3} | {1}");
  // Fresh buffers, all collectives in one run.
  mesh.RunWhole(Program(3, 3), Program(1, 4), "whole {0,2,3} | {1}");
  mesh.ExpectSameStampsOnEveryMember();
}

TEST(SubsetTransportTest, DisjointPairsRunDifferentCollectivesAtOnce) {
  SplitMesh mesh(4, {{0, 1}, {2, 3}});
  const std::vector<Collective> a = Program(2, /*salt=*/5);
  const std::vector<Collective> b = Program(2, /*salt=*/6);
  mesh.RunPairs(a, b, "{0,1} | {2,3}");
  mesh.RunWhole(Program(2, 7), Program(2, 8), "whole {0,1} | {2,3}");
  mesh.ExpectSameStampsOnEveryMember();
}

TEST(SubsetTransportTest, PeersOutsideTheSubsetAreRefusedBeforeTheParent) {
  LocalFabric fabric(4, FabricTimeout());
  RecordingTransport parent(&fabric.transport(2));
  SubsetTransport subset(&parent, {0, 2, 3});  // subset rank 1 of 3
  ASSERT_EQ(subset.rank(), 1);
  char byte = 'x';
  // 1 is itself; 3 is out of range for the subset though parent rank 3
  // exists.
  for (int peer : {-1, 1, 3, 4, 1000}) {
    absl::StatusOr<OpId> send = subset.StartSend(peer, &byte, 1);
    EXPECT_EQ(send.status().code(), absl::StatusCode::kInvalidArgument)
        << "peer " << peer << ": " << send.status();
    EXPECT_THAT(std::string(send.status().message()),
                HasSubstr(absl::StrCat("peer ", peer)));
    absl::StatusOr<OpId> recv = subset.StartRecv(peer, &byte, 1);
    EXPECT_EQ(recv.status().code(), absl::StatusCode::kInvalidArgument)
        << "peer " << peer << ": " << recv.status();
  }
  EXPECT_EQ(parent.started(), 0);
  EXPECT_TRUE(parent.stamps().empty());

  // The parent is untouched: a valid exchange still works (subset peer 2 is
  // parent rank 3).
  const char sent = 's';
  char got = 0;
  auto send = subset.StartSend(2, &sent, 1);
  ASSERT_TRUE(send.ok()) << send.status();
  auto recv = fabric.transport(3).StartRecv(2, &got, 1);
  ASSERT_TRUE(recv.ok()) << recv.status();
  EXPECT_TRUE(subset.Wait(*send).ok());
  EXPECT_TRUE(fabric.transport(3).Wait(*recv).ok());
  EXPECT_EQ(got, 's');
  EXPECT_EQ(parent.started(), 1);
}

TEST(SubsetTransportTest, AbortAbortsTheParent) {
  LocalFabric fabric(4, kolo::testing::Scaled(absl::Seconds(60)));
  Transport& parent = fabric.transport(2);
  SubsetTransport subset(&parent, {1, 2});
  float x = 0;
  absl::Status blocked;
  std::thread waiter([&] {
    // Parent rank 3 never sends: only the abort ends this wait.
    absl::StatusOr<OpId> op = parent.StartRecv(3, &x, sizeof(x));
    blocked = op.ok() ? parent.Wait(*op) : op.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const absl::Time start = absl::Now();
  subset.Abort(absl::AbortedError("process set 7 broke"));
  waiter.join();
  EXPECT_LT(absl::Now() - start, kolo::testing::Scaled(absl::Seconds(5)));
  EXPECT_EQ(blocked.code(), absl::StatusCode::kAborted) << blocked;
  EXPECT_THAT(std::string(blocked.message()), HasSubstr("process set 7 broke"));
  // The parent stays aborted, for its own ops and the subset's.
  EXPECT_EQ(parent.StartSend(0, &x, sizeof(x)).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(subset.StartSend(0, &x, sizeof(x)).status().code(),
            absl::StatusCode::kAborted);
  // The other ranks of the parent mesh are not aborted.
  float y = 1;
  auto send = fabric.transport(0).StartSend(1, &y, sizeof(y));
  auto recv = fabric.transport(1).StartRecv(0, &x, sizeof(x));
  ASSERT_TRUE(send.ok() && recv.ok());
  EXPECT_TRUE(fabric.transport(0).Wait(*send).ok());
  EXPECT_TRUE(fabric.transport(1).Wait(*recv).ok());
  EXPECT_EQ(x, 1.0f);
}

TEST(SubsetTransportTest, AbortReleasesACollectiveBlockedOnTheSubset) {
  LocalFabric fabric(3, kolo::testing::Scaled(absl::Seconds(60)));
  SubsetTransport subset(&fabric.transport(0), {0, 2});
  std::vector<float> buf(100000, 1.0f);
  absl::Status result;
  std::thread worker([&] {
    // Parent rank 2 never joins.
    result =
        Allreduce(subset, DataType::kFloat32, buf.data(), buf.data(), 100000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  subset.Abort(absl::AbortedError("epoch 4 ended"));
  worker.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kAborted) << result;
  EXPECT_THAT(std::string(result.message()), HasSubstr("epoch 4 ended"));
}

void MakeSubset(Transport* parent, std::vector<int> members) {
  SubsetTransport subset(parent, std::move(members));
}

class SubsetTransportDeathTest : public ::testing::Test {
 protected:
  SubsetTransportDeathTest() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(SubsetTransportDeathTest, MembersMustAscendAndIncludeTheParentsRank) {
  LocalFabric fabric(4, FabricTimeout());
  Transport* parent = &fabric.transport(2);
  EXPECT_DEATH(MakeSubset(parent, {0, 3, 2}), "ascend without repeats");
  EXPECT_DEATH(MakeSubset(parent, {3, 2}), "ascend without repeats");
  EXPECT_DEATH(MakeSubset(parent, {0, 2, 2, 3}), "ascend without repeats");
  EXPECT_DEATH(MakeSubset(parent, {0, 1, 3}),
               "rank 2 is not a member of its subset");
  EXPECT_DEATH(MakeSubset(parent, {}), "rank 2 is not a member of its subset");
  EXPECT_DEATH(MakeSubset(parent, {2, 4}), "subset member 4 of 4 ranks");
  EXPECT_DEATH(MakeSubset(parent, {-1, 2}), "subset member -1 of 4 ranks");
  EXPECT_DEATH(MakeSubset(nullptr, {0}), "subset of no transport");
}

}  // namespace
}  // namespace kolo
