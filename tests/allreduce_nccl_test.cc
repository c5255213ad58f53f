// allreduce/nccl/ around a fake NCCL (tests/testing/fake_device.h): the
// communicator's lifecycle (lazy, the unique id through the exchange, the
// all-member refusal, non-blocking creation polled with a deadline, abort
// once), the completion thread (done, error, deadline, abort), and which
// NCCL calls each collective makes.
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "allreduce/nccl/communicator.h"
#include "allreduce/nccl/completion.h"
#include "allreduce/nccl/nccl_ops.h"
#include "common/mutex.h"
#include "gtest/gtest.h"
#include "testing/fake_device.h"
#include "testing/fake_exchange.h"

namespace kolo::nccl {
namespace {

using testing::FakeExchange;
using testing::FakeNccl;

CommOptions Opts(int rank, int size) {
  CommOptions o;
  o.epoch = 7;
  o.process_set = 0;
  o.rank = rank;
  o.size = size;
  o.device = 0;
  o.timeout = absl::Seconds(10);
  return o;
}

TEST(Communicator, UniqueIdFromRankZeroThroughTheExchange) {
  constexpr int kRanks = 3;
  FakeExchange exchange(kRanks);
  std::vector<std::unique_ptr<FakeNccl>> apis;
  for (int r = 0; r < kRanks; ++r) apis.push_back(std::make_unique<FakeNccl>());
  CompletionWatcher watchers[kRanks];
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> comms(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      comms[r] = Communicator::Create(apis[r].get(), &watchers[r],
                                      exchange.For(r), Opts(r, kRanks));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(comms[r].ok()) << r << ": " << comms[r].status();
    EXPECT_EQ(apis[r]->unique_ids.load(), r == 0 ? 1 : 0);
    EXPECT_EQ(apis[r]->inits.load(), 1);
    // Rank 0's id reached every rank.
    EXPECT_EQ(apis[r]->last_id.size(), 128u);
    EXPECT_EQ(apis[r]->last_id[0], 'x');
    // Initialisation was polled until it left "in progress".
    EXPECT_EQ(apis[r]->init_polls.load(), 0);
  }
  EXPECT_EQ(exchange.keys()[0], ExchangeKey(7, 0));
  for (int r = 0; r < kRanks; ++r) {
    comms[r]->reset();
    EXPECT_EQ(apis[r]->aborts.load(), 1) << "destroyed = aborted, once";
  }
}

TEST(Communicator, OneRankRefusingSendsEveryRankToStaging) {
  constexpr int kRanks = 2;
  FakeExchange exchange(kRanks);
  FakeNccl api0, api1;
  CompletionWatcher w0, w1;
  absl::StatusOr<std::unique_ptr<Communicator>> c0, c1;
  std::thread t([&] {
    CommOptions o = Opts(1, kRanks);
    o.local_problem = "KOLO_CUDA_STAGING=1";
    c1 = Communicator::Create(&api1, &w1, exchange.For(1), o);
  });
  c0 = Communicator::Create(&api0, &w0, exchange.For(0), Opts(0, kRanks));
  t.join();
  for (auto* c : {&c0, &c1}) {
    ASSERT_FALSE(c->ok());
    EXPECT_EQ(c->status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(
        absl::StrContains(c->status().message(), "rank 1: KOLO_CUDA_STAGING=1"))
        << c->status();
    EXPECT_TRUE(absl::StrContains(c->status().message(), "host memory"));
  }
  EXPECT_EQ(api0.inits.load() + api1.inits.load(), 0);
}

// Creates the communicators of `options.size()` members (one thread each,
// FakeNccl `apis[r]`, CompletionWatcher `watchers[r]`) through one exchange.
std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> CreateAll(
    const std::vector<CommOptions>& options,
    std::vector<std::unique_ptr<FakeNccl>>& apis, CompletionWatcher* watchers,
    FakeExchange& exchange) {
  const size_t n = options.size();
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> comms(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      comms[r] =
          Communicator::Create(apis[r].get(), &watchers[r],
                               exchange.For(static_cast<int>(r)), options[r]);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

std::vector<std::unique_ptr<FakeNccl>> Apis(std::vector<int> versions) {
  std::vector<std::unique_ptr<FakeNccl>> apis;
  for (int v : versions) {
    apis.push_back(std::make_unique<FakeNccl>());
    apis.back()->version = v;
  }
  return apis;
}

TEST(Communicator, RanksSharingAGpuGoToStagingBeforeNccl230) {
  // Ranks 0 and 2 on one GPU of host "a"; rank 1 on another. NCCL 2.28
  // would fail ncclCommInitRank ("Duplicate GPU detected"): every member
  // refuses instead, with the same status, and inits nothing.
  std::vector<CommOptions> o = {Opts(0, 3), Opts(1, 3), Opts(2, 3)};
  o[0].device_identity = DeviceIdentity("a", "0000:3B:00.0");
  o[1].device_identity = DeviceIdentity("a", "0000:86:00.0");
  o[2].device_identity = DeviceIdentity("a", "0000:3b:00.0");
  auto apis = Apis({22809, 22809, 22809});
  FakeExchange exchange(3);
  CompletionWatcher w[3];
  auto comms = CreateAll(o, apis, w, exchange);
  for (int r = 0; r < 3; ++r) {
    ASSERT_FALSE(comms[r].ok()) << r;
    EXPECT_EQ(comms[r].status(), comms[0].status()) << "the same on every rank";
    EXPECT_EQ(apis[r]->inits.load(), 0) << r;
  }
  const absl::Status& s = comms[0].status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(
      absl::StrContains(s.message(), "ranks 0, 2 share CUDA device a/0000:3b"))
      << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "ranks 0, 1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "NCCL 2.28.9")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "host memory (staging)")) << s;
  // Each member told the others its device.
  const std::vector<std::string> values = exchange.values(ExchangeKey(7, 0));
  ASSERT_EQ(values.size(), 3u);
  EXPECT_TRUE(absl::StrContains(values[1], "a/0000:86:00.0")) << values[1];
}

TEST(Communicator, TheOldestNcclOfTheMembersDecides) {
  // One member's NCCL is 2.30, the other's 2.28: they cannot share.
  std::vector<CommOptions> o = {Opts(0, 2), Opts(1, 2)};
  for (auto& x : o) x.device_identity = DeviceIdentity("a", "0000:3b:00.0");
  auto apis = Apis({kMultiRankGpuVersion, 22809});
  FakeExchange exchange(2);
  CompletionWatcher w[3];
  auto comms = CreateAll(o, apis, w, exchange);
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(comms[r].ok()) << r;
    EXPECT_EQ(comms[r].status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(comms[r].status(), comms[0].status());
  }
}

TEST(Communicator, DifferentDevicesOrHostsUseNccl) {
  // Same host, other GPUs; and the same bus id on another host.
  std::vector<CommOptions> o = {Opts(0, 3), Opts(1, 3), Opts(2, 3)};
  o[0].device_identity = DeviceIdentity("a", "0000:3b:00.0");
  o[1].device_identity = DeviceIdentity("a", "0000:86:00.0");
  o[2].device_identity = DeviceIdentity("b", "0000:3b:00.0");
  auto apis = Apis({22809, 22809, 22809});
  FakeExchange exchange(3);
  CompletionWatcher w[3];
  auto comms = CreateAll(o, apis, w, exchange);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(comms[r].ok()) << r << ": " << comms[r].status();
    EXPECT_EQ(apis[r]->inits.load(), 1);
    EXPECT_EQ(apis[r]->last_id.size(), 128u) << "the id survives the value";
    EXPECT_EQ(apis[r]->last_id[0], 'x');
  }
}

TEST(Communicator, FromNccl230RanksShareAGpuWithMultiRankGpuEnable) {
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
  std::vector<CommOptions> o = {Opts(0, 2), Opts(1, 2)};
  for (auto& x : o) x.device_identity = DeviceIdentity("a", "0000:3b:00.0");
  {
    auto apis = Apis({kMultiRankGpuVersion, kMultiRankGpuVersion});
    FakeExchange exchange(2);
    CompletionWatcher w[3];
    auto comms = CreateAll(o, apis, w, exchange);
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(comms[r].ok()) << r << ": " << comms[r].status();
    }
    const char* v = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    ASSERT_NE(v, nullptr);
    EXPECT_STREQ(v, "1");
  }
  // The user's own value stays.
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "0", 1);
  {
    auto apis = Apis({kMultiRankGpuVersion, kMultiRankGpuVersion});
    FakeExchange exchange(2);
    CompletionWatcher w[3];
    auto comms = CreateAll(o, apis, w, exchange);
    EXPECT_STREQ(getenv("NCCL_MULTI_RANK_GPU_ENABLE"), "0");
  }
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
}

TEST(Communicator, CreationThatNeverFinishesHitsTheDeadlineAndAborts) {
  FakeExchange exchange(1);
  FakeNccl api;
  api.init_polls = 1 << 30;
  CompletionWatcher w;
  CommOptions o = Opts(0, 1);
  o.timeout = absl::Milliseconds(200);
  auto c = Communicator::Create(&api, &w, exchange.For(0), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded)
      << c.status();
  EXPECT_EQ(api.aborts.load(), 1);
}

TEST(Communicator, AsyncErrorNamesTheRankAndAbortIsFinal) {
  FakeExchange exchange(1);
  FakeNccl api;
  CompletionWatcher w;
  auto c = Communicator::Create(&api, &w, exchange.For(0), Opts(0, 1));
  ASSERT_TRUE(c.ok()) << c.status();
  Communicator& comm = **c;
  EXPECT_TRUE(comm.AsyncError().ok());
  api.fail_async = true;
  absl::Status s = comm.AsyncError();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 0 of 1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "unhandled system error")) << s;
  comm.Abort(absl::AbortedError("epoch 7 ended"));
  comm.Abort(absl::AbortedError("again"));
  EXPECT_TRUE(comm.aborted());  // at once; ncclCommAbort on the reaper
  EXPECT_TRUE(comm.Reaped(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(api.aborts.load(), 1);
  EXPECT_TRUE(comm.aborted());
  int x = 0;
  absl::Status after =
      Allreduce(comm, nullptr, DataType::kInt32, ReduceOptions{}, &x, &x, 1);
  EXPECT_EQ(after.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(after.message(), "epoch 7 ended"));
}

TEST(CompletionWatcher, DoneErrorDeadlineAndAbort) {
  CompletionWatcher w;
  std::atomic<int> calls{0};
  EXPECT_TRUE(w.Await([&]() -> absl::StatusOr<bool> { return ++calls >= 3; },
                      absl::Now() + absl::Seconds(10), "three polls")
                  .ok());
  EXPECT_EQ(calls.load(), 3);
  absl::Status e = w.Await(
      []() -> absl::StatusOr<bool> { return absl::InternalError("boom"); },
      absl::Now() + absl::Seconds(10), "x");
  EXPECT_EQ(e.code(), absl::StatusCode::kInternal);
  absl::Status d = w.Await([]() -> absl::StatusOr<bool> { return false; },
                           absl::Now() + absl::Milliseconds(50), "never");
  EXPECT_EQ(d.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(d.message(), "never")) << d;
  // Abort wakes a waiter at once, long before its deadline.
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    w.Abort(absl::AbortedError("epoch ended"));
  });
  const absl::Time start = absl::Now();
  absl::Status a = w.Await([]() -> absl::StatusOr<bool> { return false; },
                           absl::Now() + absl::Seconds(60), "forever");
  aborter.join();
  EXPECT_EQ(a.code(), absl::StatusCode::kAborted);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  // And every later wait.
  EXPECT_EQ(w.Await([]() -> absl::StatusOr<bool> { return true; },
                    absl::Now() + absl::Seconds(1), "after")
                .code(),
            absl::StatusCode::kAborted);
}

class NcclOps : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c =
        Communicator::Create(&api_, &watcher_, exchange_.For(0), Opts(0, 1));
    ASSERT_TRUE(c.ok()) << c.status();
    comm_ = *std::move(c);
  }
  FakeExchange exchange_{1};
  FakeNccl api_;
  CompletionWatcher watcher_;
  std::unique_ptr<Communicator> comm_;
};

TEST_F(NcclOps, CallsPerCollective) {
  std::vector<int32_t> in = {1, 2, 3, 4, 5, 6}, out(6);
  ReduceOptions avg;
  avg.op = ReduceOp::kAverage;
  ASSERT_TRUE(Allreduce(*comm_, nullptr, DataType::kFloat32, avg, in.data(),
                        out.data(), 6)
                  .ok());
  // Allgather of 24 bytes from the one rank: one broadcast in a group.
  ASSERT_TRUE(Allgatherv(*comm_, nullptr, in.data(), {24}, out.data()).ok());
  ASSERT_TRUE(
      Alltoallv(*comm_, nullptr, in.data(), {24}, out.data(), {24}).ok());
  ASSERT_TRUE(Reducescatter(*comm_, nullptr, DataType::kInt32, ReduceOptions{},
                            in.data(), {6}, out.data())
                  .ok());
  EXPECT_EQ(out, in);
  EXPECT_EQ(api_.calls(),
            (std::vector<std::string>{
                "allreduce(6,op4)", "group{", "bcast(24,root0)", "}", "group{",
                "send(24,peer0)", "recv(24,peer0)", "}", "reducescatter(6)"}));
}

// ncclGroupEnd on a non-blocking communicator may answer "in progress":
// the state is polled until it leaves that before the next call.
TEST_F(NcclOps, InProgressIsPolledUntilDone) {
  std::vector<char> in(8, 'a'), out(8);
  api_.group_in_progress = true;
  api_.init_polls = 3;
  ASSERT_TRUE(Allgatherv(*comm_, nullptr, in.data(), {8}, out.data()).ok());
  EXPECT_EQ(api_.init_polls.load(), 0);
  EXPECT_EQ(out, in);
}

TEST(NcclCanReduce, WhatNcclComputesAsKoloDoes) {
  ReduceOptions sum, avg, scaled;
  avg.op = ReduceOp::kAverage;
  scaled.prescale = 0.5;
  EXPECT_EQ(NcclCanReduce(DataType::kFloat32, sum), "");
  EXPECT_EQ(NcclCanReduce(DataType::kBFloat16, avg), "");
  EXPECT_EQ(NcclCanReduce(DataType::kInt64, sum), "");
  EXPECT_NE(NcclCanReduce(DataType::kInt32, avg), "");
  EXPECT_NE(NcclCanReduce(DataType::kBool, sum), "");
  EXPECT_NE(NcclCanReduce(DataType::kInt16, sum), "");
  EXPECT_NE(NcclCanReduce(DataType::kFloat32, scaled), "");
}

}  // namespace
}  // namespace kolo::nccl
