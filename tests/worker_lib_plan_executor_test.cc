// Execute (worker_lib/exec/plan_executor.h) and ExecuteFused
// (worker_lib/exec/fused_executor.h) on a plan that disagrees with this rank's
// ops: an error for those ops, never undefined behaviour or a huge
// allocation. Found by fuzz/plan_applier_fuzz.cc: an allgather plan for a
// scalar wrote shape[0] of an empty shape; negative or huge per-rank rows
// went unchecked into the output's byte count; a fused allreduce naming an
// op of another kind copied through its null output.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/data_plane.h"
#include "allreduce/transport.h"
#include "gtest/gtest.h"
#include "proto/kolo.pb.h"
#include "tests/testing/solo_transport.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/exec/plan_executor.h"
#include "worker_lib/op_request.h"

namespace kolo::worker {
namespace {

using ::kolo::testing::SoloTransport;

struct Fixture {
  Fixture(proto::OpType type, std::vector<int64_t> shape) {
    op.name = "t";
    op.op = type;
    op.input.dtype = DataType::kFloat32;
    op.input.shape = std::move(shape);
    input.resize(static_cast<size_t>(op.input.num_elements()));
    op.input.data = input.data();
    op.allocator =
        [this](absl::Span<const int64_t> s) -> absl::StatusOr<void*> {
      int64_t n = 1;
      for (int64_t d : s) n *= d;
      output.assign(static_cast<size_t>(n), 0);
      return static_cast<void*>(output.data());
    };
    op.request = MakeRequest(op, 0, 1);
  }
  absl::Status Run(const proto::Response& r) {
    DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
    OpResult result;
    return Execute(r, op, plane, 0, 1, &result);
  }
  PendingOp op;
  std::vector<float> input, output;
};

proto::Response Plan(proto::OpType type, std::vector<int64_t> sizes) {
  proto::Response r;
  r.set_op(type);
  r.add_names("t");
  for (int64_t s : sizes) r.add_sizes(s);
  return r;
}

TEST(ExecuteTest, AgreeingPlanRuns) {
  Fixture f(proto::ALLGATHER, {2, 3});
  EXPECT_TRUE(f.Run(Plan(proto::ALLGATHER, {2})).ok());
  Fixture a(proto::ALLTOALL, {4});
  EXPECT_TRUE(a.Run(Plan(proto::ALLTOALL, {4})).ok());
}

TEST(ExecuteTest, PlanForAnInvalidOpWithoutErrorIsAnError) {
  Fixture f(proto::ALLGATHER, {});  // a scalar: MakeRequest flags it
  ASSERT_FALSE(f.op.request.invalid().empty());
  absl::Status s = f.Run(Plan(proto::ALLGATHER, {1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("announced it invalid"), std::string::npos) << s;
  // Even with the request looking valid, a scalar is refused.
  f.op.request.clear_invalid();
  s = f.Run(Plan(proto::ALLTOALL, {1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
}

TEST(ExecuteTest, NegativeHugeOrWrongRowsAreAnError) {
  // 5: not the rows this rank announced (an 8 GB output once).
  for (int64_t rows : {int64_t{-1}, int64_t{5}, int64_t{1} << 62, INT64_MAX}) {
    Fixture g(proto::ALLGATHER, {2, 3});
    absl::Status s = g.Run(Plan(proto::ALLGATHER, {rows}));
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << rows << ": " << s;
    Fixture a(proto::ALLTOALL, {4});
    s = a.Run(Plan(proto::ALLTOALL, {rows}));
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << rows << ": " << s;
  }
}

TEST(ExecuteFusedTest, GroupOfMismatchedOpsIsAnErrorForAll) {
  Fixture sum(proto::ALLREDUCE, {3});
  sum.output.resize(3);
  sum.op.output = sum.op.input;
  sum.op.output.data = sum.output.data();
  Fixture gather(proto::ALLGATHER, {2});  // no output buffer: an allocator
  proto::Response r;
  r.set_op(proto::ALLREDUCE);
  r.add_names("t");
  r.add_names("t");
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::vector<PendingOp*> ops = {&sum.op, &gather.op};
  std::vector<absl::Status> out =
      ExecuteFused(r, ops, plane, 0, 1, buffer, nullptr);
  ASSERT_EQ(out.size(), 2u);
  for (const absl::Status& s : out) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  }
  // Another dtype in the group.
  Fixture other(proto::ALLREDUCE, {3});
  other.op.input.dtype = DataType::kFloat64;
  other.op.output = other.op.input;
  ops = {&sum.op, &other.op};
  out = ExecuteFused(r, ops, plane, 0, 1, buffer, nullptr);
  EXPECT_EQ(out[0].code(), absl::StatusCode::kInternal) << out[0];
}

TEST(ExecuteFusedTest, AllgatherWithNegativeRowsIsAnError) {
  Fixture a(proto::ALLGATHER, {2});
  Fixture b(proto::ALLGATHER, {0, 5});  // no rows here
  proto::Response r;
  r.set_op(proto::ALLGATHER);
  r.add_names("t");
  r.add_names("t");
  r.add_sizes(2);
  r.add_sizes(-7);
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::vector<PendingOp*> ops = {&a.op, &b.op};
  std::vector<absl::Status> out =
      ExecuteFused(r, ops, plane, 0, 1, buffer, nullptr);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].code(), absl::StatusCode::kInternal) << out[1];
  r.set_sizes(1, 0);
  out = ExecuteFused(r, ops, plane, 0, 1, buffer, nullptr);
  EXPECT_TRUE(out[0].ok()) << out[0];
  EXPECT_TRUE(out[1].ok()) << out[1];
}

// An allocator that fails for an output no scratch memory can hold either:
// this rank cannot take part, and says so with kResourceExhausted (it used
// to abort the process with std::bad_alloc).
TEST(AllocateOutputTest, NoScratchForAHugeOutputIsResourceExhausted) {
  PendingOp op;
  op.name = "huge";
  op.op = proto::ALLGATHER;
  op.allocator = [](absl::Span<const int64_t>) -> absl::StatusOr<void*> {
    return absl::ResourceExhaustedError("the caller's pool is empty");
  };
  std::unique_ptr<char[]> scratch;
  absl::Status problem;
  const int64_t bytes = int64_t{1} << 46;  // 64 TiB
  EXPECT_EQ(AllocateOutput(op, {bytes / 4}, bytes, scratch, problem), nullptr);
  EXPECT_EQ(problem.code(), absl::StatusCode::kResourceExhausted) << problem;
  EXPECT_NE(problem.message().find("scratch memory could not be allocated"),
            std::string::npos)
      << problem;
  // A small output still runs into scratch memory.
  absl::Status small;
  EXPECT_NE(AllocateOutput(op, {4}, 16, scratch, small), nullptr);
  EXPECT_EQ(small.code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace kolo::worker
