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

proto::Request Req(const std::string& name, int64_t rows = 4) {
  proto::Request r;
  r.set_name(name);
  r.set_op(proto::ALLREDUCE);
  r.set_dtype(7);
  r.add_shape(rows);
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  r.set_device(-1);
  return r;
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
  EXPECT_EQ(m.BitFor(Req("a")), std::nullopt);
  m.Apply(Plan(1, {{"a", 0}, {"b", 5}}), of);
  EXPECT_THAT(m.BitFor(Req("a")), Optional(0u));
  EXPECT_THAT(m.BitFor(Req("b")), Optional(5u));
  EXPECT_EQ(m.BitFor(Req("a", 8)), std::nullopt);  // metadata changed
  proto::Request scaled = Req("a");
  scaled.set_postscale(-0.0 + 2.0);
  EXPECT_EQ(m.BitFor(scaled), std::nullopt);
  proto::Request invalid = Req("a");
  invalid.set_invalid("bad splits");
  EXPECT_EQ(m.BitFor(invalid), std::nullopt);
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
  EXPECT_THAT(m.BitFor(Req("a", 3)), Optional(0u));
  // Bit 0 evicted and "a" given bit 7 in the same plan (as announced before
  // the eviction): the entry moves with its Request.
  m.Apply(Plan(3, {{"a", 7}}, {0}), own);
  EXPECT_EQ(m.NameOf(0), nullptr);  // the eviction emptied it: skipped
  EXPECT_EQ(m.BitFor(Req("a", 3)), std::nullopt);
  // Moved while it still holds its old bit: the Request is copied first.
  m.Apply(Plan(4, {{"b", 9}}), own);
  EXPECT_THAT(m.BitFor(Req("b")), Optional(9u));
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
  EXPECT_EQ(m.BitFor(Req("a")), std::nullopt);
  EXPECT_EQ(m.NameOf(0), nullptr);
  EXPECT_THAT(m.BitFor(Req("c")), Optional(2u));
  // A changed request reassigned to the same bit: the new request counts.
  pending["b"] = Req("b", 9);
  m.Apply(Plan(3, {{"b", 1}}), of);
  EXPECT_EQ(m.BitFor(Req("b")), std::nullopt);
  EXPECT_THAT(m.BitFor(Req("b", 9)), Optional(1u));
  // -1: the name holds no bit any more (an error response).
  m.Apply(Plan(4, {{"c", -1}}), of);
  EXPECT_EQ(m.BitFor(Req("c")), std::nullopt);
  EXPECT_EQ(m.NameOf(2), nullptr);
  // A bit reused for another name drops the old name.
  m.Apply(Plan(5, {{"a", 1}}), of);
  EXPECT_EQ(m.BitFor(Req("b", 9)), std::nullopt);
  EXPECT_THAT(m.BitFor(Req("a")), Optional(1u));
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
      EXPECT_THAT(r0.BitFor(Req(*n0, 1)), Optional(b));
      EXPECT_THAT(r1.BitFor(Req(*n1, 3)), Optional(b));
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
  EXPECT_THAT(m.BitFor(Req("a")), Optional(3u));
  EXPECT_THAT(m.BitFor(Req("b")), Optional(8u));
  EXPECT_EQ(m.NameOf(5), nullptr);
  EXPECT_EQ(m.size(), 2u);
}

}  // namespace
}  // namespace kolo::worker
