// allreduce/nccl/ around a fake NCCL (tests/testing/fake_device.h): the
// communicator's lifecycle (lazy, the unique id through the exchange, the
// all-member refusal, non-blocking creation polled with a deadline, abort
// once), the completion thread (done, error, deadline, abort), and which
// NCCL calls each collective makes.
#include <atomic>
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

namespace kolo::nccl {
namespace {

using testing::FakeNccl;

// An exchange among `n` threads (the coordinator's control_allgather).
class FakeExchange {
 public:
  explicit FakeExchange(int n) : n_(n) {}
  Exchange For(int rank) {
    return [this, rank](const std::string& key, const std::string& value,
                        absl::Duration timeout)
               -> absl::StatusOr<std::vector<std::string>> {
      MutexLock lock(&mu_);
      keys_.push_back(key);
      auto& v = values_[key];
      v.resize(n_);
      v[rank] = value;
      ++arrived_[key];
      cv_.SignalAll();
      const absl::Time deadline = absl::Now() + timeout;
      while (arrived_[key] < n_) {
        if (cv_.WaitWithDeadline(&mu_, deadline) && arrived_[key] < n_) {
          return absl::DeadlineExceededError("exchange timed out");
        }
      }
      return v;
    };
  }
  std::vector<std::string> keys() {
    MutexLock lock(&mu_);
    return keys_;
  }

 private:
  const int n_;
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::vector<std::string>> values_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> arrived_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> keys_ ABSL_GUARDED_BY(mu_);
};

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
