// CacheMirror: a worker's copy of the response cache bits (the coordinator
// side is tested in coordinator_response_cache_test).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker_lib/session/cache_mirror.h"

namespace kolo::worker {
namespace {

using ::testing::Optional;

// A float32 allreduce of `rows` elements (in place), as submitted.
PendingOp Op(const std::string& name, int64_t rows = 4) {
  static float data[64];
  PendingOp op;
  op.name = name;
  op.op = proto::ALLREDUCE;
  op.input.dtype = DataType::kFloat32;
  op.input.shape = {rows};
  op.input.data = data;
  op.output = op.input;
  return op;
}

// The Request announcing Op(name, rows) (rank 0 of 1).
proto::Request Req(const std::string& name, int64_t rows = 4) {
  PendingOp op = Op(name, rows);
  return MakeRequest(op, 0, 1);
}

// A plan with one response per (name, bit) and the given evictions.
proto::Plan Plan(uint64_t seq, std::vector<std::pair<std::string, int>> bits,
                 std::vector<uint32_t> evicted = {}) {
  proto::Plan p;
  p.set_seq(seq);
  for (auto& [name, bit] : bits) {
    proto::Response& r = *p.add_responses();
    r.add_names(name);
    r.add_cache_bits(bit);
  }
  for (uint32_t b : evicted) p.add_cache_evicted(b);
  return p;
}

// request_of for Apply: the pending Request of a name, nullptr if none.
std::function<const proto::Request*(const std::string&)> PendingLookup(
    const std::map<std::string, proto::Request>& pending) {
  return [&pending](const std::string& n) -> const proto::Request* {
    auto it = pending.find(n);
    return it == pending.end() ? nullptr : &it->second;
  };
}

TEST(CacheMirror, AssignedBitIsUsedWhileTheRequestIsUnchanged) {
  CacheMirror m;
  std::map<std::string, proto::Request> pending = {{"a", Req("a")},
                                                   {"b", Req("b")}};
  auto of = PendingLookup(pending);
  EXPECT_EQ(m.BitFor(Op("a")), std::nullopt);
  m.Apply(Plan(1, {{"a", 0}, {"b", 5}}), of);
  EXPECT_THAT(m.BitFor(Op("a")), Optional(0u));
  EXPECT_THAT(m.BitFor(Op("b")), Optional(5u));
  EXPECT_EQ(m.BitFor(Op("a", 8)), std::nullopt);  // metadata changed
  PendingOp scaled = Op("a");
  scaled.reduce.postscale = 2.0;
  EXPECT_EQ(m.BitFor(scaled), std::nullopt);
  PendingOp negative_zero = Op("a");  // bitwise: -0.0 is not 0.0
  negative_zero.reduce.prescale = 1.0;
  negative_zero.reduce.postscale = -0.0;
  EXPECT_EQ(m.BitFor(negative_zero), std::nullopt);
  EXPECT_EQ(m.size(), 2u);
}

// The runtime keeps no Request for an op announced by its bit: it gives
// Apply the mirror's own entry (RequestOf), which must survive a hit and a
// move of the name to another bit.
TEST(CacheMirror, AppliesAPlanWithTheMirrorsOwnRequests) {
  CacheMirror m;
  std::map<std::string, proto::Request> pending = {{"a", Req("a", 3)},
                                                   {"b", Req("b")}};
  m.Apply(Plan(1, {{"a", 0}, {"b", 1}}), PendingLookup(pending));
  auto own = [&](const std::string& n) { return m.RequestOf(n); };
  ASSERT_NE(m.RequestOf("a"), nullptr);
  EXPECT_EQ(m.RequestOf("z"), nullptr);
  m.Apply(Plan(2, {{"a", 0}}), own);  // a hit: unchanged
  EXPECT_THAT(m.BitFor(Op("a", 3)), Optional(0u));
  // Bit 0 evicted and "a" given bit 7 in the same plan (as announced before
  // the eviction): the entry moves with its Request.
  m.Apply(Plan(3, {{"a", 7}}, {0}), own);
  EXPECT_EQ(m.NameOf(0), nullptr);  // the eviction emptied it: skipped
  EXPECT_EQ(m.BitFor(Op("a", 3)), std::nullopt);
  // Moved while it still holds its old bit: the Request is copied first.
  m.Apply(Plan(4, {{"b", 9}}), own);
  EXPECT_THAT(m.BitFor(Op("b")), Optional(9u));
  EXPECT_EQ(m.NameOf(1), nullptr);
  ASSERT_NE(m.NameOf(9), nullptr);
  EXPECT_EQ(*m.NameOf(9), "b");
  EXPECT_EQ(m.size(), 1u);
}

TEST(CacheMirror, EvictionsAndReassignments) {
  CacheMirror m;
  std::map<std::string, proto::Request> pending = {
      {"a", Req("a")}, {"b", Req("b")}, {"c", Req("c")}};
  auto of = [&](const std::string& n) -> const proto::Request* {
    return &pending.at(n);
  };
  m.Apply(Plan(1, {{"a", 0}, {"b", 1}}), of);
  m.Apply(Plan(2, {{"c", 2}}, {0}), of);  // a evicted
  EXPECT_EQ(m.BitFor(Op("a")), std::nullopt);
  EXPECT_EQ(m.NameOf(0), nullptr);
  EXPECT_THAT(m.BitFor(Op("c")), Optional(2u));
  // A changed request reassigned to the same bit: the new request counts.
  pending["b"] = Req("b", 9);
  m.Apply(Plan(3, {{"b", 1}}), of);
  EXPECT_EQ(m.BitFor(Op("b")), std::nullopt);
  EXPECT_THAT(m.BitFor(Op("b", 9)), Optional(1u));
  // -1: the name holds no bit any more (an error response).
  m.Apply(Plan(4, {{"c", -1}}), of);
  EXPECT_EQ(m.BitFor(Op("c")), std::nullopt);
  EXPECT_EQ(m.NameOf(2), nullptr);
  // A bit reused for another name drops the old name.
  m.Apply(Plan(5, {{"a", 1}}), of);
  EXPECT_EQ(m.BitFor(Op("b", 9)), std::nullopt);
  EXPECT_THAT(m.BitFor(Op("a")), Optional(1u));
  EXPECT_EQ(m.size(), 1u);
  m.Clear();
  EXPECT_EQ(m.size(), 0u);
}

// Two ranks applying the same plans hold the same bits for the same names
// (their requests may differ: allgather's first dimension).
TEST(CacheMirror, EveryRankHoldsTheSameBits) {
  CacheMirror r0, r1;
  auto of0 = [](const std::string& n) -> const proto::Request* {
    static std::map<std::string, proto::Request> m;
    return &(m[n] = Req(n, 1));
  };
  auto of1 = [](const std::string& n) -> const proto::Request* {
    static std::map<std::string, proto::Request> m;
    return &(m[n] = Req(n, 3));
  };
  std::vector<proto::Plan> plans;
  for (uint64_t s = 1; s <= 50; ++s) {
    const std::string name = "t" + std::to_string((s * 7) % 13);
    plans.push_back(Plan(
        s, {{name, static_cast<int>(s % 5)}},
        s % 4 == 0 ? std::vector<uint32_t>{static_cast<uint32_t>((s / 4) % 5)}
                   : std::vector<uint32_t>{}));
  }
  for (const proto::Plan& p : plans) {
    r0.Apply(p, of0);
    r1.Apply(p, of1);
  }
  ASSERT_EQ(r0.size(), r1.size());
  for (uint32_t b = 0; b < 5; ++b) {
    const std::string* n0 = r0.NameOf(b);
    const std::string* n1 = r1.NameOf(b);
    ASSERT_EQ(n0 == nullptr, n1 == nullptr) << b;
    if (n0 != nullptr) {
      EXPECT_EQ(*n0, *n1);
      EXPECT_THAT(r0.BitFor(Op(*n0, 1)), Optional(b));
      EXPECT_THAT(r1.BitFor(Op(*n1, 3)), Optional(b));
    }
  }
}

TEST(CacheMirror, MismatchedBitCountIsIgnored) {
  CacheMirror m;
  proto::Plan p;
  p.set_seq(1);
  proto::Response& r = *p.add_responses();
  r.add_names("a");
  r.add_names("b");
  r.add_cache_bits(0);
  proto::Request a = Req("a");
  m.Apply(p, [&](const std::string&) { return &a; });
  EXPECT_EQ(m.size(), 0u);
}

// A by-bit response (Response.by_bit) gets the names its bits held; it
// changes no assignment; a bit the mirror does not hold gets an empty name.
TEST(CacheMirror, ByBitResponsesAreNamedFromTheMirror) {
  CacheMirror m;
  std::map<std::string, proto::Request> pending = {{"a", Req("a")},
                                                   {"b", Req("b")}};
  auto of = PendingLookup(pending);
  m.Apply(Plan(1, {{"a", 3}, {"b", 8}}), of);
  proto::Plan p;
  p.set_seq(2);
  proto::Response& r = *p.add_responses();
  r.set_by_bit(true);
  r.add_cache_bits(8);
  r.add_cache_bits(3);
  r.add_cache_bits(5);  // held by nothing here
  m.NameByBit(p);
  EXPECT_THAT(p.responses(0).names(), ::testing::ElementsAre("b", "a", ""));
  m.Apply(p, of);
  EXPECT_THAT(m.BitFor(Op("a")), Optional(3u));
  EXPECT_THAT(m.BitFor(Op("b")), Optional(8u));
  EXPECT_EQ(m.NameOf(5), nullptr);
  EXPECT_EQ(m.size(), 2u);
}

// The runtime asks the mirror with the op itself (Announces), never
// writing its Request: that must answer exactly as comparing the Request
// MakeRequest would write (SameRequest), for every kind of op and a change
// of any one field, those FillRequest leaves out when unused included.
TEST(CacheMirror, AnOpHitsExactlyWhenItsRequestWouldBeTheSame) {
  static float data[64];
  auto tensor = [](DataType dtype, std::vector<int64_t> shape) {
    Tensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data = data;
    return t;
  };
  std::vector<PendingOp> bases;
  auto add = [&](proto::OpType type, Tensor in,
                 const std::function<void(PendingOp&)>& more) {
    PendingOp op;
    op.name = "t" + std::to_string(bases.size());
    op.op = type;
    op.input = in;
    if (type == proto::ALLREDUCE || type == proto::BROADCAST) op.output = in;
    if (type == proto::ALLGATHER || type == proto::ALLTOALL) {
      op.allocator = [](absl::Span<const int64_t>) -> absl::StatusOr<void*> {
        return static_cast<void*>(data);
      };
    }
    more(op);
    bases.push_back(op);
  };
  const Tensor f32 = tensor(DataType::kFloat32, {4, 3});
  add(proto::ALLREDUCE, f32, [](PendingOp&) {});
  add(proto::ALLREDUCE, tensor(DataType::kFloat64, {8}), [](PendingOp& op) {
    op.reduce.op = ReduceOp::kAverage;
    op.reduce.prescale = 0.5;
    op.reduce.postscale = 3.0;
    op.process_set = 2;
    op.group = "g";
    op.group_size = 3;
  });
  add(proto::ALLREDUCE, f32, [](PendingOp& op) {
    op.order_stream = "c10d.0";
    op.order_slot = 5;
  });
  add(proto::ALLREDUCE, f32, [](PendingOp& op) {
    op.order_stream = "c10d.0";
    op.order_slot = 6;
    op.order_void = "refused here";
  });
  add(proto::BROADCAST, f32, [](PendingOp& op) { op.root = 1; });
  add(proto::ALLGATHER, f32, [](PendingOp& op) { op.expect = {4, 2}; });
  add(proto::ALLTOALL, tensor(DataType::kInt32, {2}), [](PendingOp& op) {
    op.splits = {1, 1};
  });
  add(proto::REDUCESCATTER, f32, [&tensor](PendingOp& op) {
    op.output = tensor(DataType::kFloat32, {2, 3});
  });
  add(proto::BARRIER, Tensor{}, [](PendingOp&) {});
  add(proto::PROCESS_SET_ADD, Tensor{}, [](PendingOp& op) {
    op.splits = {0, 1};
  });

  const std::vector<std::function<void(PendingOp&)>> changes = {
      [](PendingOp& op) { op.name += "x"; },
      [](PendingOp& op) { op.op = proto::BROADCAST; },
      [](PendingOp& op) { op.process_set += 1; },
      [](PendingOp& op) { op.group = "h"; },
      [](PendingOp& op) { op.group.clear(); },
      [](PendingOp& op) { op.group_size += 1; },
      [](PendingOp& op) { op.order_stream = "c10d.1"; },
      [](PendingOp& op) { op.order_stream.clear(); },
      [](PendingOp& op) { op.order_slot += 1; },
      [](PendingOp& op) { op.order_void = "other"; },
      [](PendingOp& op) { op.order_void.clear(); },
      [](PendingOp& op) {
        op.input.dtype = op.output.dtype = DataType::kFloat64;
      },
      [](PendingOp& op) { op.input.shape = op.output.shape = {12}; },
      [](PendingOp& op) { op.input.dtype = DataType::kInt64; },
      [](PendingOp& op) { op.reduce.op = ReduceOp::kMax; },
      [](PendingOp& op) { op.reduce.prescale = 2.0; },
      [](PendingOp& op) { op.reduce.postscale = -0.0; },
      [](PendingOp& op) { op.root = 0; },
      [](PendingOp& op) {
        op.splits = {2, 0};
      },
      [](PendingOp& op) {
        op.expect = {2, 4};
      },
      [](PendingOp& op) { op.expect.clear(); },
  };
  int hits = 0, misses = 0, refused = 0;
  for (const PendingOp& base : bases) {
    PendingOp judged = base;
    const proto::Request r = MakeRequest(judged, 0, 2);
    ASSERT_TRUE(r.invalid().empty()) << base.name << ": " << r.invalid();
    EXPECT_TRUE(Announces(judged, r)) << base.name;
    for (size_t c = 0; c < changes.size(); ++c) {
      PendingOp changed = base;
      changes[c](changed);
      if (!ValidateOp(changed, 0, 2).empty()) {
        ++refused;  // never asked: an invalid op goes in full
        continue;
      }
      PendingOp written = changed;
      const bool want = SameRequest(MakeRequest(written, 0, 2), r);
      EXPECT_EQ(Announces(changed, r), want)
          << base.name << " (op " << base.op << "), change " << c;
      ++(want ? hits : misses);
    }
  }
  // Both answers come up, and most changes are seen.
  EXPECT_GT(hits, 10);
  EXPECT_GT(misses, 100);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace kolo::worker
