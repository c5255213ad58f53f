// worker_lib/exec/cuda_executor.h on fake devices (host memory that plays
// device memory and records every copy; tests/testing/fake_device.h): the
// staging path with 2 ranks over real TCP gives exactly the host path's results
// and moves a fused group in one copy each way; the backend choice (NCCL for
// what it computes as kolo does, staging otherwise or when forced); ready
// and done events; an abort, also while an NCCL collective is in flight.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "allreduce/data_plane.h"
#include "allreduce/tcp/tcp_transport.h"
#include "allreduce_tcp_test_mesh.h"
#include "gtest/gtest.h"
#include "proto/kolo.pb.h"
#include "testing/fake_device.h"
#include "testing/fake_exchange.h"
#include "tests/testing/solo_transport.h"
#include "worker_lib/exec/cuda_executor.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/op_request.h"

namespace kolo::worker {
namespace {

using testing::FakeDeviceOps;
using testing::FakeExchange;
using testing::FakeNccl;

// One rank's executor with its fake device (kept by the test to inspect).
struct Rank {
  FakeDeviceOps* device = nullptr;
  FakeNccl* nccl = nullptr;
  std::unique_ptr<CudaExecutor> exec;
};

Rank MakeRank(bool force_staging, bool with_nccl, int size) {
  Rank r;
  CudaOptions o;
  o.epoch = 3;
  o.force_staging = force_staging;
  o.timeout = absl::Seconds(20);
  auto device = std::make_unique<FakeDeviceOps>(0);
  r.device = device.get();
  auto holder =
      std::make_shared<std::unique_ptr<FakeDeviceOps>>(std::move(device));
  o.open = [holder](int) -> absl::StatusOr<std::unique_ptr<cuda::DeviceOps>> {
    if (*holder == nullptr) return absl::InternalError("opened twice");
    return std::unique_ptr<cuda::DeviceOps>(std::move(*holder));
  };
  if (with_nccl) {
    auto api = std::make_unique<FakeNccl>();
    r.nccl = api.get();
    o.nccl = std::move(api);
  }
  o.exchange = [size](
                   const std::string&, int32_t, const std::string& value,
                   absl::Duration) -> absl::StatusOr<std::vector<std::string>> {
    // Every rank says what this one says (the tests' ranks are alike).
    return std::vector<std::string>(static_cast<size_t>(size), value);
  };
  r.exec = std::make_unique<CudaExecutor>(std::move(o));
  return r;
}

proto::Response Allreduces(int n) {
  proto::Response r;
  r.set_op(proto::ALLREDUCE);
  for (int i = 0; i < n; ++i) r.add_names("t" + std::to_string(i));
  return r;
}

proto::Response One(proto::OpType type, const std::string& name) {
  proto::Response r;
  r.set_op(type);
  r.add_names(name);
  return r;
}

// An op on "device" 0 (host memory here).
std::shared_ptr<PendingOp> Op(const std::string& name, proto::OpType type,
                              DataType dtype, std::vector<int64_t> shape,
                              void* in, void* out) {
  auto op = std::make_shared<PendingOp>();
  op->name = name;
  op->op = type;
  op->input = Tensor{dtype, shape, in, 0};
  op->output = Tensor{dtype, shape, out, 0};
  return op;
}

std::vector<PendingOp*> Raw(const std::vector<std::shared_ptr<PendingOp>>& v) {
  std::vector<PendingOp*> out;
  for (const auto& p : v) out.push_back(p.get());
  return out;
}

// Two ranks over TCP, each running `fn(rank, plane)` in its own thread.
void TwoRanks(const std::function<void(int, DataPlane&)>& fn) {
  kolo::testing::TestWorld world(2);
  auto transports = world.CreateAll();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      DataPlane plane(std::move(transports[r]), AlgorithmOptions{});
      fn(r, plane);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(CudaExecutorStaging, FusedAllreduceIsExactAndCrossesOnceEachWay) {
  TwoRanks([](int rank, DataPlane& plane) {
    Rank r = MakeRank(/*force_staging=*/true, /*with_nccl=*/false, 2);
    // Three float32 tensors, averaged with pre/post scale: what the host
    // path computes from the same values, bitwise.
    std::vector<std::vector<float>> in = {
        {1.5f + rank, 2.25f, -3.f}, {10.f * (rank + 1)}, {0.1f, 0.2f}};
    std::vector<std::vector<float>> out = {
        std::vector<float>(3), std::vector<float>(1), std::vector<float>(2)};
    std::vector<std::shared_ptr<PendingOp>> ops;
    for (int i = 0; i < 3; ++i) {
      ops.push_back(Op("t" + std::to_string(i), proto::ALLREDUCE,
                       DataType::kFloat32, {static_cast<int64_t>(in[i].size())},
                       in[i].data(), out[i].data()));
      ops.back()->reduce.op = ReduceOp::kAverage;
      ops.back()->reduce.prescale = 2.0;
      ops.back()->reduce.postscale = 0.5;
    }
    int ready = 0, done = 0;
    ops[1]->input.ready_event = &ready;
    ops[2]->input.done_event = &done;
    FusionBuffer buffer;
    std::vector<absl::Status> s =
        r.exec->Run(Allreduces(3), Raw(ops), plane, rank, 2, buffer, nullptr);
    ASSERT_EQ(s.size(), 3u);
    for (const auto& st : s) EXPECT_TRUE(st.ok()) << st;
    EXPECT_STREQ(r.exec->last_backend(), "staging");
    // (2a + 2b) / 2 * 0.5 for each element, in float.
    const float want0 = (2.f * 1.5f + 2.f * 2.5f) / 2.f * 0.5f;
    EXPECT_EQ(out[0][0], want0);
    EXPECT_EQ(out[0][1], (2.f * 2.25f + 2.f * 2.25f) / 2.f * 0.5f);
    EXPECT_EQ(out[1][0], (2.f * 10.f + 2.f * 20.f) / 2.f * 0.5f);
    EXPECT_EQ(out[2][1], (2.f * 0.2f + 2.f * 0.2f) / 2.f * 0.5f);
    // One crossing each way; the packing on the device.
    EXPECT_EQ(r.device->Count(cuda::CopyKind::kDeviceToHost), 1);
    EXPECT_EQ(r.device->Count(cuda::CopyKind::kHostToDevice), 1);
    EXPECT_EQ(r.device->Count(cuda::CopyKind::kDeviceToDevice), 6);
    EXPECT_EQ(r.device->waited, (std::vector<void*>{&ready}));
    EXPECT_EQ(r.device->recorded, (std::vector<void*>{&done}));
  });
}

TEST(CudaExecutorStaging, AllgatherBroadcastAndInt32AverageMatchTheHostPath) {
  TwoRanks([](int rank, DataPlane& plane) {
    Rank r = MakeRank(false, /*with_nccl=*/false, 2);
    FusionBuffer buffer;
    // allgather: rank 0 has 1 row, rank 1 has 2 rows of 2 int32.
    std::vector<int32_t> in(static_cast<size_t>(2 * (rank + 1)));
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = static_cast<int32_t>(100 * rank + i);
    }
    std::vector<int32_t> gathered;
    auto g = Op("g", proto::ALLGATHER, DataType::kInt32, {rank + 1, 2},
                in.data(), nullptr);
    g->allocator =
        [&](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
      gathered.resize(static_cast<size_t>(shape[0] * shape[1]));
      return static_cast<void*>(gathered.data());
    };
    proto::Response gr;
    gr.set_op(proto::ALLGATHER);
    gr.add_names("g");
    gr.add_sizes(1);
    gr.add_sizes(2);
    auto s = r.exec->Run(gr, {g.get()}, plane, rank, 2, buffer, nullptr);
    ASSERT_TRUE(s[0].ok()) << s[0];
    EXPECT_EQ(gathered, (std::vector<int32_t>{0, 1, 100, 101, 102, 103}));
    EXPECT_EQ(g->result.shape, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(g->result.splits, (std::vector<int64_t>{1, 2}));

    // broadcast from rank 1, in place.
    std::vector<int64_t> b = {rank == 1 ? 7 : 0, rank == 1 ? -9 : 0};
    auto bc =
        Op("b", proto::BROADCAST, DataType::kInt64, {2}, b.data(), b.data());
    bc->set_root = 1;
    proto::Response br;
    br.set_op(proto::BROADCAST);
    br.add_names("b");
    s = r.exec->Run(br, {bc.get()}, plane, rank, 2, buffer, nullptr);
    ASSERT_TRUE(s[0].ok()) << s[0];
    EXPECT_EQ(b, (std::vector<int64_t>{7, -9}));

    // int32 average truncates toward zero (staged even with NCCL absent).
    std::vector<int32_t> x = {rank == 0 ? -3 : 0, 5}, y(2);
    auto a =
        Op("a", proto::ALLREDUCE, DataType::kInt32, {2}, x.data(), y.data());
    a->reduce.op = ReduceOp::kAverage;
    s = r.exec->Run(One(proto::ALLREDUCE, "a"), {a.get()}, plane, rank, 2,
                    buffer, nullptr);
    ASSERT_TRUE(s[0].ok()) << s[0];
    EXPECT_EQ(y, (std::vector<int32_t>{-1, 5}));
  });
}

TEST(CudaExecutorStaging, AlltoallAndUnevenReducescatterMatchTheHostPath) {
  TwoRanks([](int rank, DataPlane& plane) {
    Rank r = MakeRank(false, /*with_nccl=*/false, 2);
    FusionBuffer buffer;
    // alltoall: rank r sends r + d + 1 rows of 1 int64 to rank d.
    std::vector<int64_t> splits = {rank + 1, rank + 2}, in;
    for (int d = 0; d < 2; ++d) {
      for (int64_t k = 0; k < splits[d]; ++k)
        in.push_back(rank * 100 + d * 10 + k);
    }
    std::vector<int64_t> got;
    auto t = Op("x", proto::ALLTOALL, DataType::kInt64,
                {static_cast<int64_t>(in.size())}, in.data(), nullptr);
    t->splits = splits;
    t->allocator =
        [&](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
      got.resize(static_cast<size_t>(shape[0]));
      return static_cast<void*>(got.data());
    };
    proto::Response tr = One(proto::ALLTOALL, "x");
    for (int64_t v : {1, 2, 2, 3}) tr.add_sizes(v);  // [src * 2 + dst]
    auto s = r.exec->Run(tr, {t.get()}, plane, rank, 2, buffer, nullptr);
    ASSERT_TRUE(s[0].ok()) << s[0];
    std::vector<int64_t> want;
    for (int src = 0; src < 2; ++src) {
      for (int64_t k = 0; k < src + rank + 1; ++k) {
        want.push_back(src * 100 + rank * 10 + k);
      }
    }
    EXPECT_EQ(got, want);

    // reducescatter: 5 rows of 2 float, rank 0 gets 3 rows, rank 1 gets 2.
    std::vector<float> x(10), y(static_cast<size_t>(rank == 0 ? 6 : 4));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + rank);
    auto rs = Op("r", proto::REDUCESCATTER, DataType::kFloat32, {5, 2},
                 x.data(), y.data());
    rs->output.shape = {rank == 0 ? 3 : 2, 2};
    rs->splits = {3, 2};
    s = r.exec->Run(One(proto::REDUCESCATTER, "r"), {rs.get()}, plane, rank, 2,
                    buffer, nullptr);
    ASSERT_TRUE(s[0].ok()) << s[0];
    for (size_t i = 0; i < y.size(); ++i) {
      const size_t at = i + (rank == 0 ? 0 : 6);
      EXPECT_EQ(y[i], static_cast<float>(2 * at + 1)) << i;
    }
  });
}

using ::kolo::testing::SoloTransport;

TEST(CudaExecutorBackend, NcclForWhatItComputesStagingForTheRest) {
  Rank r = MakeRank(false, /*with_nccl=*/true, 1);
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::vector<float> a = {1, 2, 3}, b = {4}, oa(3), ob(1);
  std::vector<std::shared_ptr<PendingOp>> ops = {
      Op("t0", proto::ALLREDUCE, DataType::kFloat32, {3}, a.data(), oa.data()),
      Op("t1", proto::ALLREDUCE, DataType::kFloat32, {1}, b.data(), ob.data())};
  auto s = r.exec->Run(Allreduces(2), Raw(ops), plane, 0, 1, buffer, nullptr);
  for (const auto& st : s) ASSERT_TRUE(st.ok()) << st;
  EXPECT_STREQ(r.exec->last_backend(), "nccl");
  EXPECT_EQ(oa, a);
  EXPECT_EQ(ob, b);
  // Fused: packed into the device fusion buffer, one ncclAllReduce over
  // both (3 floats, padding to 64 bytes, then 1: 17 elements).
  EXPECT_EQ(r.nccl->calls(), (std::vector<std::string>{"allreduce(17,op0)"}));
  EXPECT_EQ(r.nccl->inits.load(), 1);

  // int32 average: kolo truncates; staged even though NCCL is up.
  std::vector<int32_t> x = {-3}, y(1);
  auto avg =
      Op("a", proto::ALLREDUCE, DataType::kInt32, {1}, x.data(), y.data());
  avg->reduce.op = ReduceOp::kAverage;
  s = r.exec->Run(One(proto::ALLREDUCE, "a"), {avg.get()}, plane, 0, 1, buffer,
                  nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  EXPECT_STREQ(r.exec->last_backend(), "staging");
  EXPECT_EQ(y[0], -3);

  // Process set 0's communicator is made once.
  s = r.exec->Run(Allreduces(2), Raw(ops), plane, 0, 1, buffer, nullptr);
  for (const auto& st : s) ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(r.nccl->inits.load(), 1) << "the communicator is made once";

  // Another process set: its own communicator, on NCCL too.
  proto::Response set1 = One(proto::ALLREDUCE, "t0");
  set1.set_process_set(1);
  s = r.exec->Run(set1, {ops[0].get()}, plane, 0, 1, buffer, nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  EXPECT_STREQ(r.exec->last_backend(), "nccl");
  EXPECT_EQ(r.nccl->inits.load(), 2);

  // Abort (the epoch ended): the next run fails at once with its status;
  // both communicators are aborted.
  r.exec->Abort(absl::AbortedError("epoch 3 ended"));
  s = r.exec->Run(Allreduces(2), Raw(ops), plane, 0, 1, buffer, nullptr);
  EXPECT_EQ(s[0].code(), absl::StatusCode::kAborted) << s[0];
  EXPECT_TRUE(absl::StrContains(s[0].message(), "epoch 3 ended")) << s[0];
  for (int32_t set : {0, 1}) {
    ASSERT_NE(r.exec->communicator(set), nullptr) << set;
    EXPECT_TRUE(
        r.exec->communicator(set)->Reaped(absl::Now() + absl::Seconds(10)));
  }
  EXPECT_EQ(r.nccl->aborts.load(), 2);
}

// The epoch ends (OpRuntime's teardown calls Abort from another thread)
// while an NCCL allreduce is in flight: the fake stream never reaches its
// marker (`hold`), so RunNccl sits in the completion watcher's Await. Run
// must return the abort's status (kAborted, its payload kept) within
// seconds and abort the communicator; the next epoch's executor starts
// clean. Every wait is bounded: the hold is released on every path (then
// Await finishes on its own), before the runner thread is joined.
TEST(CudaExecutorBackend, AbortWhileAnNcclAllreduceIsInFlightEndsTheRun) {
  Rank r = MakeRank(false, /*with_nccl=*/true, 1);
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::vector<float> a = {1, 2, 3}, oa(3);
  auto op =
      Op("t0", proto::ALLREDUCE, DataType::kFloat32, {3}, a.data(), oa.data());
  // The communicator first (its creation is not what is aborted here).
  auto s = r.exec->Run(One(proto::ALLREDUCE, "t0"), {op.get()}, plane, 0, 1,
                       buffer, nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  ASSERT_STREQ(r.exec->last_backend(), "nccl");
  const int enqueued_before = r.nccl->collectives.load();

  r.device->hold = true;
  std::promise<std::vector<absl::Status>> result;
  std::future<std::vector<absl::Status>> got = result.get_future();
  std::thread runner([&] {
    result.set_value(r.exec->Run(One(proto::ALLREDUCE, "t0"), {op.get()}, plane,
                                 0, 1, buffer, nullptr));
  });
  struct Release {  // on every path, before the join
    FakeDeviceOps* device;
    std::thread* runner;
    ~Release() {
      device->hold = false;
      runner->join();
    }
  } release{r.device, &runner};

  // In flight: enqueued, and the watcher polls a stream that is not there.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  const int polls_before = r.device->reached_polls.load();
  while ((r.nccl->collectives.load() == enqueued_before ||
          r.device->reached_polls.load() < polls_before + 3) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_GT(r.nccl->collectives.load(), enqueued_before);
  ASSERT_GE(r.device->reached_polls.load(), polls_before + 3);
  ASSERT_EQ(got.wait_for(std::chrono::milliseconds(50)),
            std::future_status::timeout)
      << "Run returned while its collective was in flight";

  absl::Status why = absl::AbortedError("epoch 3 ended: worker w1 was lost");
  why.SetPayload("type.kolo.dev/test", absl::Cord("lost w1"));
  r.exec->Abort(why);
  ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "Run did not return within 10 s of the abort";
  s = got.get();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].code(), absl::StatusCode::kAborted) << s[0];
  EXPECT_TRUE(absl::StrContains(s[0].message(), "epoch 3 ended")) << s[0];
  EXPECT_TRUE(s[0].GetPayload("type.kolo.dev/test").has_value()) << s[0];
  ASSERT_NE(r.exec->communicator(0), nullptr);
  EXPECT_TRUE(r.exec->communicator(0)->Reaped(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(r.nccl->aborts.load(), 1);

  // The next epoch: a fresh executor and communicator, exact results.
  Rank next = MakeRank(false, /*with_nccl=*/true, 1);
  std::vector<float> b = {4, -5, 6.5f}, ob(3);
  auto op2 =
      Op("t1", proto::ALLREDUCE, DataType::kFloat32, {3}, b.data(), ob.data());
  s = next.exec->Run(One(proto::ALLREDUCE, "t1"), {op2.get()}, plane, 0, 1,
                     buffer, nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  EXPECT_STREQ(next.exec->last_backend(), "nccl");
  EXPECT_EQ(ob, b);
  EXPECT_EQ(next.nccl->inits.load(), 1);
}

TEST(CudaExecutorBackend, ForcedStagingNeverCreatesACommunicator) {
  Rank r = MakeRank(/*force_staging=*/true, /*with_nccl=*/true, 1);
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::vector<float> a = {1, 2, 3}, oa(3);
  auto op =
      Op("t0", proto::ALLREDUCE, DataType::kFloat32, {3}, a.data(), oa.data());
  auto s = r.exec->Run(One(proto::ALLREDUCE, "t0"), {op.get()}, plane, 0, 1,
                       buffer, nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  EXPECT_STREQ(r.exec->last_backend(), "staging");
  EXPECT_EQ(oa, a);
  EXPECT_EQ(r.nccl->inits.load(), 0);
}

TEST(CudaExecutorBackend, NcclAllgatherAlltoallReducescatterBroadcast) {
  Rank r = MakeRank(false, /*with_nccl=*/true, 1);
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::vector<int64_t> in = {1, 2, 3, 4}, out;
  auto alloc = [&](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    out.assign(static_cast<size_t>(shape[0] * shape[1]), 0);
    return static_cast<void*>(out.data());
  };
  auto g =
      Op("g", proto::ALLGATHER, DataType::kInt64, {2, 2}, in.data(), nullptr);
  g->allocator = alloc;
  proto::Response gr = One(proto::ALLGATHER, "g");
  gr.add_sizes(2);
  auto s = r.exec->Run(gr, {g.get()}, plane, 0, 1, buffer, nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  EXPECT_STREQ(r.exec->last_backend(), "nccl");
  EXPECT_EQ(out, in);
  EXPECT_EQ(g->result.shape, (std::vector<int64_t>{2, 2}));

  auto t =
      Op("x", proto::ALLTOALL, DataType::kInt64, {2, 2}, in.data(), nullptr);
  t->allocator = alloc;
  t->splits = {2};
  proto::Response tr = One(proto::ALLTOALL, "x");
  tr.add_sizes(2);
  out.clear();
  s = r.exec->Run(tr, {t.get()}, plane, 0, 1, buffer, nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  EXPECT_EQ(out, in);

  std::vector<int64_t> rs(4);
  auto red = Op("r", proto::REDUCESCATTER, DataType::kInt64, {2, 2}, in.data(),
                rs.data());
  red->splits = {2};
  s = r.exec->Run(One(proto::REDUCESCATTER, "r"), {red.get()}, plane, 0, 1,
                  buffer, nullptr);
  ASSERT_TRUE(s[0].ok()) << s[0];
  EXPECT_EQ(rs, in);
  EXPECT_EQ(r.nccl->calls(),
            (std::vector<std::string>{
                "group{", "bcast(32,root0)", "}", "group{", "send(32,peer0)",
                "recv(32,peer0)", "}", "reducescatter(4)"}));
}

// One rank of a multi-rank job on a fake device (PCI bus id `pci_bus_id`
// on host `host`) and a fake NCCL, exchanging through `exchange` with the
// other ranks (each rank on its own thread).
Rank MakeMember(nccl::Exchange exchange, const std::string& host,
                const std::string& pci_bus_id) {
  Rank r;
  CudaOptions o;
  o.epoch = 3;
  o.timeout = absl::Seconds(20);
  o.host_name = host;
  auto holder = std::make_shared<std::unique_ptr<FakeDeviceOps>>(
      std::make_unique<FakeDeviceOps>(0));
  r.device = holder->get();
  r.device->pci_bus_id = pci_bus_id;
  o.open = [holder](int) -> absl::StatusOr<std::unique_ptr<cuda::DeviceOps>> {
    if (*holder == nullptr) return absl::InternalError("opened twice");
    return std::unique_ptr<cuda::DeviceOps>(std::move(*holder));
  };
  auto api = std::make_unique<FakeNccl>();
  r.nccl = api.get();
  o.nccl = std::move(api);
  o.exchange = std::move(exchange);
  r.exec = std::make_unique<CudaExecutor>(std::move(o));
  return r;
}

TEST(CudaExecutorBackend, EveryProcessSetGetsItsOwnCommunicator) {
  // Three ranks on three GPUs. Process set 0 is all of them; process set 1
  // is global ranks {0, 2}, which are ranks 0 and 1 of 2 in it.
  constexpr int kRanks = 3;
  FakeExchange set0(kRanks), set1(2);
  std::vector<Rank> ranks;
  // As the coordinator's: each set's exchange among the set's members.
  for (int g = 0; g < kRanks; ++g) {
    nccl::Exchange in0 = set0.For(g), in1 = set1.For(g / 2);
    nccl::Exchange exchange = [in0, in1](const std::string& key, int32_t set,
                                         const std::string& value,
                                         absl::Duration timeout) {
      return set == 1 ? in1(key, set, value, timeout)
                      : in0(key, set, value, timeout);
    };
    ranks.push_back(
        MakeMember(exchange, "host", "0000:0" + std::to_string(g) + ":00.0"));
  }
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> backends(kRanks);
  std::vector<float> in[kRanks], out[kRanks];
  for (int g = 0; g < kRanks; ++g) {
    threads.emplace_back([&, g] {
      DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
      FusionBuffer buffer;
      in[g] = {1.f + g, 2.f};
      out[g] = {0, 0};
      auto op = Op("t", proto::ALLREDUCE, DataType::kFloat32, {2}, in[g].data(),
                   out[g].data());
      auto s = ranks[g].exec->Run(One(proto::ALLREDUCE, "t"), {op.get()}, plane,
                                  g, kRanks, buffer, nullptr);
      EXPECT_TRUE(s[0].ok()) << g << ": " << s[0];
      backends[g].push_back(ranks[g].exec->last_backend());
      if (g == 1) return;
      proto::Response r1 = One(proto::ALLREDUCE, "t");
      r1.set_process_set(1);
      s = ranks[g].exec->Run(r1, {op.get()}, plane, g / 2, 2, buffer, nullptr);
      EXPECT_TRUE(s[0].ok()) << g << ": " << s[0];
      backends[g].push_back(ranks[g].exec->last_backend());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(backends[0], (std::vector<std::string>{"nccl", "nccl"}));
  EXPECT_EQ(backends[1], (std::vector<std::string>{"nccl"}));
  EXPECT_EQ(backends[2], (std::vector<std::string>{"nccl", "nccl"}));
  // Each set's communicator was made with the rank and size in that set,
  // under that set's key.
  EXPECT_EQ(ranks[0].nccl->init_args(),
            (std::vector<std::pair<int, int>>{{0, 3}, {0, 2}}));
  EXPECT_EQ(ranks[1].nccl->init_args(),
            (std::vector<std::pair<int, int>>{{1, 3}}));
  EXPECT_EQ(ranks[2].nccl->init_args(),
            (std::vector<std::pair<int, int>>{{2, 3}, {1, 2}}));
  EXPECT_EQ(set0.keys(), std::vector<std::string>(3, nccl::ExchangeKey(3, 0)));
  EXPECT_EQ(set1.keys(), std::vector<std::string>(2, nccl::ExchangeKey(3, 1)));
  EXPECT_EQ(set0.sets(), std::vector<int32_t>(3, 0));
  for (int g : {0, 2}) {
    auto c0 = ranks[g].exec->communicator(0);
    auto c1 = ranks[g].exec->communicator(1);
    ASSERT_NE(c0, nullptr);
    ASSERT_NE(c1, nullptr);
    EXPECT_NE(c0, c1);
    EXPECT_EQ(c1->options().process_set, 1);
    EXPECT_EQ(c1->options().rank, g / 2);
    EXPECT_EQ(c1->options().size, 2);
    EXPECT_EQ(c0->options().size, 3);
    // Abort ends both.
    ranks[g].exec->Abort(absl::AbortedError("epoch 3 ended"));
    EXPECT_TRUE(c0->aborted());
    EXPECT_TRUE(c1->aborted());
    EXPECT_TRUE(c0->Reaped(absl::Now() + absl::Seconds(10)));
    EXPECT_TRUE(c1->Reaped(absl::Now() + absl::Seconds(10)));
    EXPECT_EQ(ranks[g].nccl->aborts.load(), 2);
  }
  EXPECT_EQ(ranks[1].exec->communicator(1), nullptr);
}

// Two ranks over TCP whose fake devices are `bus0` and `bus1` on one host.
struct TwoMembers {
  TwoMembers(const std::string& bus0, const std::string& bus1) {
    ranks.push_back(MakeMember(exchange.For(0), "host", bus0));
    ranks.push_back(MakeMember(exchange.For(1), "host", bus1));
  }
  // An allreduce of {1 + rank, 2} on each; each rank's backend. Checks the
  // sum where it is computed (staging: the fake NCCL is one rank's).
  std::vector<std::string> Sum() {
    std::vector<std::string> backends(2);
    TwoRanks([&](int rank, DataPlane& plane) {
      FusionBuffer buffer;
      std::vector<float> in = {1.f + rank, 2.f}, out(2);
      auto op = Op("t", proto::ALLREDUCE, DataType::kFloat32, {2}, in.data(),
                   out.data());
      auto s = ranks[rank].exec->Run(One(proto::ALLREDUCE, "t"), {op.get()},
                                     plane, rank, 2, buffer, nullptr);
      EXPECT_TRUE(s[0].ok()) << rank << ": " << s[0];
      backends[rank] = ranks[rank].exec->last_backend();
      if (backends[rank] == "staging") {
        EXPECT_EQ(out, (std::vector<float>{3.f, 4.f})) << rank;
      }
    });
    return backends;
  }
  FakeExchange exchange{2};
  std::vector<Rank> ranks;
};

TEST(CudaExecutorBackend, TwoRanksOnOneGpuGoThroughHostMemory) {
  // NCCL 2.28 (the fake's version) refuses two ranks on one GPU: both
  // ranks stage, without KOLO_CUDA_STAGING, and no rank inits NCCL.
  TwoMembers job("0000:3b:00.0", "0000:3B:00.0");
  EXPECT_EQ(job.Sum(), (std::vector<std::string>{"staging", "staging"}));
  for (Rank& r : job.ranks) {
    EXPECT_EQ(r.nccl->inits.load(), 0);
    EXPECT_EQ(r.exec->communicator(0), nullptr);
  }
  // The decision holds for the epoch: no second exchange.
  EXPECT_EQ(job.Sum(), (std::vector<std::string>{"staging", "staging"}));
  EXPECT_EQ(job.exchange.keys().size(), 2u);
}

TEST(CudaExecutorBackend, TwoRanksOnTwoGpusRunOnNccl) {
  TwoMembers job("0000:3b:00.0", "0000:86:00.0");
  EXPECT_EQ(job.Sum(), (std::vector<std::string>{"nccl", "nccl"}));
  for (Rank& r : job.ranks) EXPECT_EQ(r.nccl->inits.load(), 1);
}

}  // namespace
}  // namespace kolo::worker
