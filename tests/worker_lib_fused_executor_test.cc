// IsFused (worker_lib/exec/fused_executor.h): which responses run as one fused
// collective, whether they list their tensors by name or, for a plan of
// cache hits, by bit only (Response.by_bit).
#include <string>

#include "gtest/gtest.h"
#include "proto/kolo.pb.h"
#include "worker_lib/exec/fused_executor.h"

namespace kolo::worker {
namespace {

proto::Response ByName(proto::OpType op, int tensors) {
  proto::Response r;
  r.set_op(op);
  for (int i = 0; i < tensors; ++i) r.add_names("t" + std::to_string(i));
  return r;
}

proto::Response ByBit(proto::OpType op, int tensors) {
  proto::Response r;
  r.set_op(op);
  r.set_by_bit(true);
  for (int i = 0; i < tensors; ++i) r.add_cache_bits(i);
  return r;
}

TEST(IsFused, SeveralAllreducesOrAllgathersByNameOrByBit) {
  EXPECT_TRUE(IsFused(ByName(proto::ALLREDUCE, 2)));
  EXPECT_TRUE(IsFused(ByBit(proto::ALLREDUCE, 161)));
  EXPECT_TRUE(IsFused(ByBit(proto::ALLGATHER, 3)));
  EXPECT_FALSE(IsFused(ByName(proto::ALLREDUCE, 1)));
  EXPECT_FALSE(IsFused(ByBit(proto::ALLREDUCE, 1)));
  EXPECT_FALSE(IsFused(ByBit(proto::BROADCAST, 4)));
  // Bits of responses listed by name are their cache assignments, not
  // tensors of their own.
  proto::Response named = ByName(proto::ALLREDUCE, 1);
  named.add_cache_bits(7);
  named.add_cache_bits(8);
  EXPECT_FALSE(IsFused(named));
  proto::Response failed = ByBit(proto::ALLREDUCE, 4);
  failed.set_error_code(3);
  EXPECT_FALSE(IsFused(failed));
}

}  // namespace
}  // namespace kolo::worker
