// Helpers of the Negotiator's tests for process sets, join and grouped
// ops (coordinator_negotiator_sets_test.cc, _join_test.cc, _groups_test.cc:
// one executable): request builders (a grouped request, PROCESS_SET_ADD and
// _REMOVE, JOIN, BARRIER), settings, and drivers that make every rank
// announce a request or report every plan done.
//
// Thread-safety: none needed (the tests are single-threaded).
#ifndef KOLO_TESTS_COORDINATOR_NEGOTIATOR_SETS_HELPERS_H_
#define KOLO_TESTS_COORDINATOR_NEGOTIATOR_SETS_HELPERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/negotiator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kolo.pb.h"
#include "tests/testing/negotiator_messages.h"

namespace kolo::coordinator::sets_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Req, Ann, AnnReq, OnSet, Control, Names, Opts, kT0, At.
using namespace ::kolo::testing;  // NOLINT(build/namespaces)

// `r` as a member of group `group` of `size` members.
inline proto::Request Grouped(proto::Request r, const std::string& group,
                              int32_t size) {
  r.set_group(group);
  r.set_group_size(size);
  return r;
}

inline proto::Request AddSet(const std::vector<int64_t>& ranks,
                             const std::string& name = "process_set.add.0") {
  proto::Request r = Control(name, proto::PROCESS_SET_ADD);
  for (int64_t rank : ranks) r.add_splits(rank);
  return r;
}

inline proto::Request RemoveSet(
    int32_t id, const std::string& name = "process_set.remove.0") {
  proto::Request r = Control(name, proto::PROCESS_SET_REMOVE);
  r.set_root(id);
  return r;
}

inline proto::Request JoinReq() { return Control("join", proto::JOIN); }

inline proto::Request Barrier(const std::string& name) {
  return Control(name, proto::BARRIER);
}

inline proto::Announce Bits(std::vector<uint32_t> bits) {
  proto::Announce a;
  for (uint32_t b : bits) a.add_cached(b);
  return a;
}

// The names of each response of `plan`, one list per response.
inline std::vector<std::vector<std::string>> Groups(const proto::Plan& plan) {
  std::vector<std::vector<std::string>> out;
  for (const proto::Response& r : plan.responses()) {
    out.emplace_back(r.names().begin(), r.names().end());
  }
  return out;
}

using V = std::vector<std::string>;

inline proto::Settings Set(uint64_t threshold, uint32_t capacity,
                           bool disable_group_fusion = false) {
  proto::Settings s;
  s.set_fusion_threshold(threshold);
  s.set_cache_capacity(capacity);
  s.set_fusion_direct_bytes(uint64_t{1} << 20);
  s.set_disable_group_fusion(disable_group_fusion);
  return s;
}

inline void ExpectError(const proto::Response& r, absl::StatusCode code,
                        const std::string& message) {
  EXPECT_EQ(r.error_code(), static_cast<int>(code));
  EXPECT_EQ(r.error(), message);
}

// Every rank reports every plan sent so far done (the data plane idle).
inline void DoneAll(Negotiator& n, int size, NegotiatorOutput& out) {
  for (int r = 0; r < size; ++r) n.Done(r, n.plans_sent(), kT0, out);
}

// Every rank announces `request` (rank order); the single response of the
// one new plan (empty on failure). Leaves the data plane idle.
inline proto::Response Everyone(Negotiator& n, int size,
                                const proto::Request& request,
                                NegotiatorOutput& out) {
  const size_t before = out.plans.size();
  for (int r = 0; r < size; ++r) n.Announce(r, AnnReq({request}), kT0, out);
  EXPECT_EQ(out.plans.size(), before + 1);
  DoneAll(n, size, out);
  if (out.plans.size() != before + 1 ||
      out.plans[before].responses_size() != 1) {
    ADD_FAILURE() << "expected one plan with one response";
    return {};
  }
  return out.plans[before].responses(0);
}

// Registers `ranks` as a set; its id (-1 on failure).
inline int32_t Register(Negotiator& n, int size,
                        const std::vector<int64_t>& ranks,
                        NegotiatorOutput& out) {
  const proto::Response r = Everyone(n, size, AddSet(ranks), out);
  EXPECT_EQ(r.error_code(), 0) << r.error();
  EXPECT_EQ(r.op(), proto::PROCESS_SET_ADD);
  if (r.sizes_size() != 1) return -1;
  return static_cast<int32_t>(r.sizes(0));
}

}  // namespace kolo::coordinator::sets_test

#endif  // KOLO_TESTS_COORDINATOR_NEGOTIATOR_SETS_HELPERS_H_
