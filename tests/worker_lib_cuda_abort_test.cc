// worker_lib/exec/cuda_executor.h on a real GPU with real NCCL, one rank (issue
// 23 point 5): the epoch ends (CudaExecutor::Abort, as OpRuntime's teardown
// calls it, from another thread) while an NCCL allreduce is genuinely in
// flight. The caller's ready_event is recorded on the caller's stream
// behind a host function (the "gate") that blocks until the test opens it,
// so kolo's stream, which waits for that event, cannot reach the NCCL
// kernel's completion. Then:
//   - Run returns the abort's status (kAborted, its payload kept) within
//     kBound while the gate is still closed;
//   - Abort itself does not wait for the gate (returns within kBound); how
//     long the epoch's teardown (the executor's destructor) takes with the
//     gate closed is printed (CUDA_ABORT_INFO), not required;
//   - once the gate opens, both streams drain and the next epoch's fresh
//     CudaExecutor (a new communicator) gives exact results, one tensor and
//     a fused group.
// A second case aborts a fused group in flight (the device fusion buffer in
// use when the executor goes).
// Skips with the reason where no CUDA device is usable, NCCL is absent, or
// kolo was built without CUDA.
//
// Every wait is bounded: the gate opens itself after kGateLimit, it is
// opened on every exit path (a failing ASSERT too) before any thread is
// joined (Background's destructor opens it first), a thread still running
// kJoinLimit after that ends the process (a failure, not a hang), and device
// work is waited for by polling events against a deadline.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "allreduce/cuda/cuda_info.h"
#include "allreduce/data_plane.h"
#include "allreduce/nccl/nccl_api.h"
#include "common/mutex.h"
#include "gtest/gtest.h"
#include "proto/kolo.pb.h"
#include "tests/testing/solo_transport.h"
#include "worker_lib/exec/cuda_executor.h"
#include "worker_lib/exec/fused_executor.h"
#include "worker_lib/op_request.h"

#if KOLO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kolo::worker {
namespace {

#if KOLO_HAVE_CUDA

// Run and Abort must each end within this while the gate is closed (a
// 1-rank NCCL allreduce takes microseconds; this only catches a wait for
// the gate); the teardown's time is reported against it.
constexpr absl::Duration kBound = absl::Seconds(10);
// The gate opens itself after this, whatever happens to the test.
constexpr absl::Duration kGateLimit = absl::Seconds(60);
// A background thread not done this long after the gate opened ends the
// process.
constexpr absl::Duration kJoinLimit = absl::Seconds(60);
constexpr char kPayloadUrl[] = "type.kolo.dev/test-epoch";

// Why this process cannot run the test ("" when it can).
std::string Unusable() {
  if (std::string why = cuda::Unusable(0); !why.empty()) return why;
  if (nccl::RealNcclApi() == nullptr) return "kolo was built without NCCL";
  return "";
}

// The gate's state, shared with the host function (which may outlive the
// test's scope by up to kGateLimit).
struct GateState {
  Mutex mu;
  CondVar cv;
  bool open ABSL_GUARDED_BY(mu) = false;
  bool entered ABSL_GUARDED_BY(mu) = false;
};

void CUDART_CB HoldGate(void* arg) {
  std::unique_ptr<std::shared_ptr<GateState>> holder(
      static_cast<std::shared_ptr<GateState>*>(arg));
  GateState& g = **holder;
  const absl::Time deadline = absl::Now() + kGateLimit;
  MutexLock lock(&g.mu);
  g.entered = true;
  g.cv.SignalAll();
  while (!g.open && absl::Now() < deadline) {
    g.cv.WaitWithDeadline(&g.mu, deadline);
  }
}

// Work enqueued on a stream after Close() waits until Open() (or the
// destructor: the gate is open on every path out of a test).
class Gate {
 public:
  Gate() = default;
  ~Gate() { Open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  cudaError_t Close(cudaStream_t stream) {
    auto holder = std::make_unique<std::shared_ptr<GateState>>(state_);
    cudaError_t e = cudaLaunchHostFunc(stream, HoldGate, holder.get());
    if (e == cudaSuccess) (void)holder.release();  // HoldGate's now
    return e;
  }
  // Whether the stream reached the gate within `within`.
  bool Entered(absl::Duration within) {
    const absl::Time deadline = absl::Now() + within;
    MutexLock lock(&state_->mu);
    while (!state_->entered && absl::Now() < deadline) {
      state_->cv.WaitWithDeadline(&state_->mu, deadline);
    }
    return state_->entered;
  }
  void Open() {
    MutexLock lock(&state_->mu);
    state_->open = true;
    state_->cv.SignalAll();
  }

 private:
  std::shared_ptr<GateState> state_ = std::make_shared<GateState>();
};

// `fn` on its own thread. The destructor opens `gate` (when given) and
// then joins the thread, ending the process if it is still running
// kJoinLimit later.
class Background {
 public:
  Background(Gate* gate, std::function<void()> fn)
      : gate_(gate),
        done_(finished_.get_future()),
        thread_([this, fn = std::move(fn)] {
          fn();
          finished_.set_value();
        }) {}
  ~Background() {
    if (gate_ != nullptr) gate_->Open();
    if (!Finished(kJoinLimit)) {
      std::fprintf(stderr,
                   "worker_lib_cuda_abort_test: a background thread still "
                   "runs %s after the gate opened; exiting\n",
                   absl::FormatDuration(kJoinLimit).c_str());
      std::fflush(stderr);
      std::_Exit(3);
    }
    thread_.join();
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  bool Finished(absl::Duration within) {
    return done_.wait_for(absl::ToChronoNanoseconds(within)) ==
           std::future_status::ready;
  }

 private:
  Gate* const gate_;
  std::promise<void> finished_;
  std::future<void> done_;
  std::thread thread_;
};

// Device memory freed at scope end (cudaFree waits for the device: only
// after the gate opened, which the declaration order ensures).
class DevBuf {
 public:
  explicit DevBuf(size_t bytes) {
    if (cudaMalloc(&p_, bytes) != cudaSuccess) p_ = nullptr;
  }
  ~DevBuf() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

// Polls `event` until it completed (true) or `within` passed or it reports
// an error (false; `*error` says which).
bool EventDone(cudaEvent_t event, absl::Duration within,
               cudaError_t* error = nullptr) {
  const absl::Time deadline = absl::Now() + within;
  while (true) {
    cudaError_t e = cudaEventQuery(event);
    if (error != nullptr) *error = e;
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady || absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

using ::kolo::testing::SoloTransport;

// One epoch's executor on the real device and NCCL; the exchange of a
// one-rank job returns this rank's own value.
std::unique_ptr<CudaExecutor> Epoch(uint64_t epoch) {
  CudaOptions o;
  o.epoch = epoch;
  o.timeout = absl::Seconds(20);
  o.nccl = nccl::RealNcclApi();
  o.exchange = [](const std::string&, int32_t, const std::string& value,
                  absl::Duration) -> absl::StatusOr<std::vector<std::string>> {
    return std::vector<std::string>{value};
  };
  return std::make_unique<CudaExecutor>(std::move(o));
}

proto::Response Allreduces(const std::vector<std::string>& names) {
  proto::Response r;
  r.set_op(proto::ALLREDUCE);
  for (const std::string& n : names) r.add_names(n);
  return r;
}

// Rank 0's element i of tensor `t` in round `round`: small integers as
// float, exact under any summation.
float Value(int t, int round, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + t * 5 + round) % 23) -
                            11);
}

// A float32 allreduce (sum) of `count` elements on device 0, its buffers,
// and the caller's events (the first tensor of a response carries them).
struct DeviceOp {
  DeviceOp(std::string name, size_t n)
      : count(n), in(n * sizeof(float)), out(n * sizeof(float)) {
    op.name = std::move(name);
    op.op = proto::ALLREDUCE;
    const std::vector<int64_t> shape = {static_cast<int64_t>(count)};
    op.input = Tensor{DataType::kFloat32, shape, in.get(), 0};
    op.output = Tensor{DataType::kFloat32, shape, out.get(), 0};
  }
  // Uploads round `round`'s values and clears the output (synchronously:
  // nothing is gated yet).
  bool Fill(int t, int round) {
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = Value(t, round, i);
    return in.get() != nullptr && out.get() != nullptr &&
           cudaMemcpy(in.get(), host.data(), count * sizeof(float),
                      cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemset(out.get(), 0xff, count * sizeof(float)) == cudaSuccess &&
           cudaDeviceSynchronize() == cudaSuccess;
  }
  // "" when the output holds round `round`'s values bitwise (one rank: the
  // sum is the input).
  std::string Check(int t, int round) const {
    std::vector<float> got(count);
    if (cudaError_t e = cudaMemcpy(got.data(), out.get(), count * sizeof(float),
                                   cudaMemcpyDeviceToHost);
        e != cudaSuccess) {
      return std::string("cudaMemcpy: ") + cudaGetErrorString(e);
    }
    for (size_t i = 0; i < count; ++i) {
      const float want = Value(t, round, i);
      if (std::memcmp(&got[i], &want, sizeof(float)) != 0) {
        return op.name + " element " + std::to_string(i) + ": got " +
               std::to_string(got[i]) + " want " + std::to_string(want);
      }
    }
    return "";
  }
  size_t count;
  DevBuf in, out;
  PendingOp op;
};

// The caller's stream and events.
struct Caller {
  Caller() {
    ok = cudaSetDevice(0) == cudaSuccess &&
         cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
             cudaSuccess &&
         cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) ==
             cudaSuccess &&
         cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess;
  }
  ~Caller() {
    // Only reached once the gate opened; the events and the stream may
    // still be in use by queued work, which CUDA allows (released after).
    if (done != nullptr) cudaEventDestroy(done);
    if (ready != nullptr) cudaEventDestroy(ready);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  Caller(const Caller&) = delete;
  Caller& operator=(const Caller&) = delete;
  bool ok = false;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
};

// Runs `names` (ops[i] for names[i]) on `exec` ungated and checks round
// `round`'s values exactly.
void RunExact(CudaExecutor& exec, std::vector<DeviceOp*> ops, int round,
              Caller& caller, const char* what) {
  std::vector<std::string> names;
  std::vector<PendingOp*> raw;
  for (size_t t = 0; t < ops.size(); ++t) {
    ASSERT_TRUE(ops[t]->Fill(static_cast<int>(t), round)) << what;
    names.push_back(ops[t]->op.name);
    raw.push_back(&ops[t]->op);
  }
  ASSERT_EQ(cudaEventRecord(caller.ready, caller.stream), cudaSuccess);
  ops[0]->op.input.ready_event = caller.ready;
  ops[0]->op.input.done_event = caller.done;
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::vector<absl::Status> s =
      exec.Run(Allreduces(names), raw, plane, 0, 1, buffer, nullptr);
  ASSERT_EQ(s.size(), ops.size()) << what;
  for (const absl::Status& st : s) ASSERT_TRUE(st.ok()) << what << ": " << st;
  EXPECT_STREQ(exec.last_backend(), "nccl") << what;
  // Run returned once kolo's stream got past the done event.
  EXPECT_EQ(cudaEventQuery(caller.done), cudaSuccess) << what;
  for (size_t t = 0; t < ops.size(); ++t) {
    EXPECT_EQ(ops[t]->Check(static_cast<int>(t), round), "") << what;
  }
}

// The scenario, for one tensor or a fused group of `counts.size()`.
void AbortInFlight(const std::vector<size_t>& counts) {
  if (std::string why = Unusable(); !why.empty()) {
    GTEST_SKIP() << "no usable CUDA device with NCCL: " << why;
  }
  // Declaration order is teardown order, reversed: the gate opens first,
  // then background threads are joined, then executors go, then the
  // buffers and the caller's stream.
  Caller caller;
  ASSERT_TRUE(caller.ok) << "cannot create a stream and events on device 0";
  std::vector<std::unique_ptr<DeviceOp>> storage;
  std::vector<DeviceOp*> ops;
  std::vector<std::string> names;
  std::vector<PendingOp*> raw;
  for (size_t t = 0; t < counts.size(); ++t) {
    storage.push_back(
        std::make_unique<DeviceOp>("grad/" + std::to_string(t), counts[t]));
    ops.push_back(storage.back().get());
    names.push_back(ops.back()->op.name);
    raw.push_back(&ops.back()->op);
  }
  DataPlane plane(std::make_unique<SoloTransport>(), AlgorithmOptions{});
  FusionBuffer buffer;
  std::unique_ptr<CudaExecutor> epoch1 = Epoch(1);

  // Epoch 1's communicator, and an exact result first.
  RunExact(*epoch1, ops, /*round=*/1, caller, "epoch 1, before the abort");
  if (::testing::Test::HasFatalFailure()) return;

  // The gated allreduce: the caller's ready event waits behind the gate.
  for (size_t t = 0; t < ops.size(); ++t) {
    ASSERT_TRUE(ops[t]->Fill(static_cast<int>(t), 2));
  }
  std::vector<absl::Status> result;
  absl::Time aborted_at;
  {
    Gate gate;
    ASSERT_EQ(gate.Close(caller.stream), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(caller.ready, caller.stream), cudaSuccess);
    ASSERT_TRUE(gate.Entered(kBound)) << "the caller's stream never reached "
                                         "the gate";
    {
      Background run(&gate, [&] {
        result =
            epoch1->Run(Allreduces(names), raw, plane, 0, 1, buffer, nullptr);
      });
      // In flight: Run enqueued everything (done_event recorded on kolo's
      // stream after the NCCL call) and waits for the stream.
      ASSERT_FALSE(run.Finished(absl::Seconds(1)))
          << "Run returned while its ready event was gated: "
          << (result.empty() ? std::string("?") : result[0].ToString());
      EXPECT_EQ(cudaEventQuery(caller.done), cudaErrorNotReady)
          << "kolo's stream got past the collective with the gate closed";

      absl::Status why = absl::AbortedError(
          "epoch 1 ended: worker w1 (rank 1) was lost (the test's abort)");
      why.SetPayload(kPayloadUrl, absl::Cord("epoch=1"));
      aborted_at = absl::Now();
      Background abort(&gate, [&] { epoch1->Abort(why); });
      EXPECT_TRUE(abort.Finished(kBound))
          << "CudaExecutor::Abort did not return within "
          << absl::FormatDuration(kBound) << " with the gate closed";
      ASSERT_TRUE(run.Finished(kBound))
          << "Run did not return within " << absl::FormatDuration(kBound)
          << " of the abort with the gate closed";
      std::printf("CUDA_ABORT_INFO tensors=%zu run_returned_after=%s\n",
                  ops.size(),
                  absl::FormatDuration(absl::Now() - aborted_at).c_str());
      ASSERT_EQ(result.size(), ops.size());
      for (const absl::Status& s : result) {
        EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
        EXPECT_TRUE(absl::StrContains(s.message(), "epoch 1 ended")) << s;
        EXPECT_TRUE(s.GetPayload(kPayloadUrl).has_value())
            << "the abort's payload was lost: " << s;
      }
      // The epoch's teardown, the gate still closed. Reported, not
      // required: freeing device memory (cudaFree of the NCCL fusion buffer)
      // may wait for the device, so for the caller's stream to get past the
      // gate — a delay until the caller's own work is done, not a hang.
      const absl::Time teardown_at = absl::Now();
      Background teardown(&gate, [&] { epoch1.reset(); });
      const bool torn_down = teardown.Finished(kBound);
      std::printf("CUDA_ABORT_INFO tensors=%zu teardown_before_gate=%s%s\n",
                  ops.size(),
                  torn_down ? "done after " : "still waiting after ",
                  absl::FormatDuration(absl::Now() - teardown_at).c_str());
    }
  }
  // Both streams drain: the gate's host function, then what kolo's stream
  // had queued behind the ready event (the aborted communicator's work).
  cudaError_t e = cudaSuccess;
  EXPECT_TRUE(EventDone(caller.ready, absl::Seconds(20), &e))
      << "the caller's stream did not get past the gate: "
      << cudaGetErrorString(e);
  EXPECT_TRUE(EventDone(caller.done, absl::Seconds(20), &e))
      << "kolo's (aborted) stream did not drain after the gate opened: "
      << cudaGetErrorString(e);
  if (::testing::Test::HasFailure()) return;

  // The next epoch: a fresh executor and communicator, exact results, the
  // same group and then a single tensor.
  std::unique_ptr<CudaExecutor> epoch2 = Epoch(2);
  RunExact(*epoch2, ops, /*round=*/3, caller, "epoch 2, after the abort");
  if (::testing::Test::HasFatalFailure()) return;
  DeviceOp single("after/single", 4099);
  RunExact(*epoch2, {&single}, /*round=*/4, caller, "epoch 2, single");
  std::printf("CUDA_ABORT_OK tensors=%zu\n", ops.size());
}

TEST(CudaExecutorAbortGpu, AbortWhileAnNcclAllreduceIsInFlight) {
  AbortInFlight({size_t{1} << 20});
}

TEST(CudaExecutorAbortGpu, AbortWhileAFusedNcclAllreduceIsInFlight) {
  AbortInFlight({1000, 4099, 3});
}

#else

TEST(CudaExecutorAbortGpu, AbortWhileAnNcclAllreduceIsInFlight) {
  GTEST_SKIP() << "kolo was built without CUDA (KOLO_WITH_CUDA)";
}

#endif

}  // namespace
}  // namespace kolo::worker
