// kolo-cuda-worker: CUDA tensors through the public API, under kolorun, for
// tests/multiprocess_cuda_test.cc and scripts/gpu-check.sh.
// Usage: kolo-cuda-worker kinds|gpu|abort DIR
//
// kinds (any machine): the device-kind checks across ranks. 1) The last
//   rank submits an allreduce on CUDA device 0, the others on the host:
//   every rank must get an error (kFailedPrecondition "device kind" where
//   the last rank has a device; kInvalidArgument naming why it has none
//   otherwise), and a host allreduce right after must work. 2) Where no
//   device is usable (no GPU, or kolo built without CUDA), every rank
//   submits a CUDA tensor: each must be refused with kInvalidArgument
//   saying why and what to do.
// gpu (a CUDA device needed; "CUDA_SKIP" otherwise): every collective over
//   CUDA tensors with exact values compared on the host — allreduce (sum,
//   average, min, max, product; int32, int64, float32, float64, float16
//   by bits; several in flight so that they fuse), grouped allreduce,
//   allgather with a different row count per rank, broadcast from every
//   root, alltoall with per-rank splits, reducescatter with uneven counts,
//   a ready_event and a done_event, with 2 ranks or more an allreduce on
//   each rank's own one-rank process set — then an allreduce of 64 MiB
//   submitted right before shutdown(): shutdown must end in bounded time
//   (the op completes or fails with kAborted, never hangs).
//   Rank r uses device local_rank % device count (two ranks may share one).
// abort DIR (a CUDA device needed; "CUDA_SKIP" otherwise; an elastic job
//   under kolorun --min-np 1 --max-np 2 whose discovery script offers a
//   second slot once DIR/grow exists): an epoch ends while an NCCL
//   allreduce is in flight (issue 23 point 5). Worker w0, alone in epoch 1
//   (NCCL, 1 rank): an exact allreduce, then an allreduce whose ready_event
//   is recorded on its stream behind a host function (the gate) that blocks
//   until the worker opens it, so kolo's stream cannot reach the NCCL
//   kernel. It creates DIR/grow; the newcomer w1 (which sets
//   KOLO_CUDA_STAGING=1 before init: NCCL < 2.30 refuses two ranks on one
//   GPU) creates DIR/newcomer and waits to be admitted; 5 s later w0's
//   membership check ends the epoch (hosts-updated). The gated allreduce
//   must fail with the membership error within 20 s (CUDA_ABORTED line),
//   the gate opens, and in epoch 2 (2 ranks, staged) both ranks' CUDA
//   allreduces are exact (CUDA_OK case=abort/next/...). The gate opens on
//   every path, itself after 90 s at most.
//
// Prints per rank: CUDA_INFO ..., CUDA_OK case=C rank=R, CUDA_FAIL case=C
// rank=R <why>, CUDA_ERR case=C rank=R code=K next=0|1 msg=..., CUDA_DONE
// rank=R fails=F. Exit code 4 when anything failed. Every wait is bounded.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"

#if KOLO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

const absl::Duration kWait = absl::Seconds(60);
int fails = 0;

[[maybe_unused]] void Ok(const std::string& c) {  // the gpu mode only
  std::printf("CUDA_OK case=%s rank=%d\n", c.c_str(), kolo::rank());
}
void Fail(const std::string& c, const std::string& why) {
  ++fails;
  std::printf("CUDA_FAIL case=%s rank=%d %s\n", c.c_str(), kolo::rank(),
              why.c_str());
}

// A host allreduce that must work (after an error case).
bool NextWorks(const std::string& name) {
  std::vector<int32_t> in = {kolo::rank() + 1}, out(1);
  kolo::Tensor t{kolo::DataType::kInt32, {1}, in.data(), kolo::kCpu};
  kolo::Tensor o{kolo::DataType::kInt32, {1}, out.data(), kolo::kCpu};
  auto h = kolo::allreduce_async(t, o, {}, name);
  if (!h.ok() || !kolo::synchronize(*h, kWait).ok()) return false;
  const int n = kolo::size();
  return out[0] == n * (n + 1) / 2;
}

void ErrCase(const std::string& c, const absl::Status& s) {
  std::string msg(s.message());
  for (char& ch : msg) {
    if (ch == '\n') ch = ' ';
  }
  std::printf("CUDA_ERR case=%s rank=%d code=%d next=%d msg=%s\n", c.c_str(),
              kolo::rank(), static_cast<int>(s.code()),
              NextWorks(c + "/next") ? 1 : 0, msg.c_str());
}

int Kinds() {
  float x[4] = {1, 2, 3, 4}, y[4];
  void* data = x;
  void* out = y;
  const bool cuda_here = kolo::cuda_device_count() > 0;
#if KOLO_HAVE_CUDA
  void* dev = nullptr;
  if (cuda_here && kolo::rank() == kolo::size() - 1) {
    if (cudaMalloc(&dev, 2 * sizeof(x)) != cudaSuccess) {
      Fail("kinds", "cudaMalloc");
      return 4;
    }
    data = dev;
    out = static_cast<char*>(dev) + sizeof(x);
  }
#endif
  const bool last = kolo::rank() == kolo::size() - 1;
  kolo::Tensor in{kolo::DataType::kFloat32, {4}, data, last ? 0 : kolo::kCpu};
  kolo::Tensor o{kolo::DataType::kFloat32, {4}, out, last ? 0 : kolo::kCpu};
  auto h = kolo::allreduce_async(in, o, {}, "kinds/mixed");
  absl::Status s = h.ok() ? kolo::synchronize(*h, kWait) : h.status();
  if (s.ok()) Fail("kinds/mixed", "a cpu/cuda mix succeeded");
  ErrCase("kinds/mixed", s);
#if KOLO_HAVE_CUDA
  if (dev != nullptr) cudaFree(dev);
#endif
  if (!cuda_here) {
    kolo::Tensor all{kolo::DataType::kFloat32, {4}, x, 0};
    kolo::Tensor allo{kolo::DataType::kFloat32, {4}, y, 0};
    h = kolo::allreduce_async(all, allo, {}, "kinds/refused");
    s = h.ok() ? kolo::synchronize(*h, kWait) : h.status();
    if (s.ok()) Fail("kinds/refused", "a CUDA tensor without a device ran");
    ErrCase("kinds/refused", s);
  }
  return 0;
}

#if KOLO_HAVE_CUDA

// Device memory freed at scope end.
class DevBuf {
 public:
  explicit DevBuf(size_t bytes) {
    if (cudaMalloc(&p_, bytes == 0 ? 1 : bytes) != cudaSuccess) p_ = nullptr;
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

template <typename T>
std::vector<T> Read(const void* dev, size_t n) {
  std::vector<T> v(n);
  if (n > 0) cudaMemcpy(v.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

template <typename T>
void Write(void* dev, const std::vector<T>& v) {
  if (!v.empty()) {
    cudaMemcpy(dev, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  // A pageable cudaMemcpy may return before its copy lands; kolo's stream
  // does not wait for this one (no ready_event given): synchronise.
  cudaDeviceSynchronize();
}

template <typename T>
kolo::DataType TypeOf();
template <>
kolo::DataType TypeOf<int32_t>() {
  return kolo::DataType::kInt32;
}
template <>
kolo::DataType TypeOf<int64_t>() {
  return kolo::DataType::kInt64;
}
template <>
kolo::DataType TypeOf<float>() {
  return kolo::DataType::kFloat32;
}
template <>
kolo::DataType TypeOf<double>() {
  return kolo::DataType::kFloat64;
}

// Rank r's element i: small integers, exact in every reduction order.
template <typename T>
T Value(int r, size_t i) {
  return static_cast<T>(static_cast<int>((i * 7 + r * 3) % 11) - 4);
}

template <typename T>
T Expect(kolo::ReduceOp op, size_t i) {
  const int n = kolo::size();
  T acc = Value<T>(0, i);
  for (int r = 1; r < n; ++r) {
    const T v = Value<T>(r, i);
    switch (op) {
      case kolo::ReduceOp::kSum:
      case kolo::ReduceOp::kAverage:
        acc = static_cast<T>(acc + v);
        break;
      case kolo::ReduceOp::kMin:
        acc = v < acc ? v : acc;
        break;
      case kolo::ReduceOp::kMax:
        acc = v > acc ? v : acc;
        break;
      case kolo::ReduceOp::kProduct:
        acc = static_cast<T>(acc * v);
        break;
    }
  }
  if (op == kolo::ReduceOp::kAverage) acc = static_cast<T>(acc / n);
  return acc;
}

struct Pending {
  std::string name;
  kolo::Handle handle;
  std::function<std::string()> check;  // "" when right
  std::shared_ptr<DevBuf> in, out;
};

// Submits an allreduce of `count` T with `op`; its check compares bitwise.
template <typename T>
Pending SubmitAllreduce(const std::string& name, kolo::ReduceOp op,
                        size_t count) {
  Pending p;
  p.name = name;
  p.in = std::make_shared<DevBuf>(count * sizeof(T));
  p.out = std::make_shared<DevBuf>(count * sizeof(T));
  std::vector<T> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = Value<T>(kolo::rank(), i);
  Write(p.in->get(), host);
  const int dev = kolo::local_rank() % kolo::cuda_device_count();
  kolo::Tensor in{TypeOf<T>(), {static_cast<int64_t>(count)}, p.in->get(), dev};
  kolo::Tensor out{
      TypeOf<T>(), {static_cast<int64_t>(count)}, p.out->get(), dev};
  kolo::AllreduceOptions o;
  o.op = op;
  auto h = kolo::allreduce_async(in, out, o, name);
  p.handle = h.ok() ? *h : -1;
  void* outp = p.out->get();
  p.check = [outp, count, op]() -> std::string {
    std::vector<T> got = Read<T>(outp, count);
    for (size_t i = 0; i < count; ++i) {
      const T want = Expect<T>(op, i);
      if (std::memcmp(&got[i], &want, sizeof(T)) != 0) {
        return absl::StrCat("element ", i, ": got ",
                            static_cast<double>(got[i]), " want ",
                            static_cast<double>(want));
      }
    }
    return "";
  };
  return p;
}

void Finish(std::vector<Pending>& ps) {
  for (Pending& p : ps) {
    if (p.handle < 0) {
      Fail(p.name, "submission failed");
      continue;
    }
    absl::Status s = kolo::synchronize(p.handle, kWait);
    if (!s.ok()) {
      Fail(p.name, std::string(s.message()));
      continue;
    }
    std::string bad = p.check();
    if (bad.empty()) {
      Ok(p.name);
    } else {
      Fail(p.name, bad);
    }
  }
  ps.clear();
}

int Gpu() {
  const int devices = kolo::cuda_device_count();
  if (devices == 0) {
    std::printf("CUDA_SKIP rank=%d %s\n", kolo::rank(),
                kolo::cuda_status().c_str());
    return 0;
  }
  const int dev = kolo::local_rank() % devices;
  cudaSetDevice(dev);
  const int n = kolo::size(), me = kolo::rank();
  std::vector<Pending> ps;
  // 1. Allreduce: every op and dtype, all in flight at once (they fuse).
  using R = kolo::ReduceOp;
  for (R op : {R::kSum, R::kAverage, R::kMin, R::kMax, R::kProduct}) {
    const std::string o = absl::StrCat(static_cast<int>(op));
    ps.push_back(SubmitAllreduce<int32_t>("ar/i32/" + o, op, 1000));
    ps.push_back(SubmitAllreduce<int64_t>("ar/i64/" + o, op, 17));
    ps.push_back(SubmitAllreduce<float>("ar/f32/" + o, op, 4099));
    ps.push_back(SubmitAllreduce<double>("ar/f64/" + o, op, 3));
  }
  Finish(ps);
  // One at a time, large (not fused; NCCL's ring or the host ring).
  ps.push_back(SubmitAllreduce<float>("ar/f32/big", R::kSum, 1 << 22));
  Finish(ps);

  // 2. Allgather: rank r has r + 1 rows of 3 int32.
  {
    const int64_t rows = me + 1;
    std::vector<int32_t> host(static_cast<size_t>(rows * 3));
    for (size_t i = 0; i < host.size(); ++i) {
      host[i] = static_cast<int32_t>(me * 100 + i);
    }
    DevBuf in(host.size() * 4);
    Write(in.get(), host);
    std::shared_ptr<DevBuf> out;
    kolo::Tensor t{kolo::DataType::kInt32, {rows, 3}, in.get(), dev};
    auto h = kolo::allgather_async(
        t,
        [&](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
          out = std::make_shared<DevBuf>(
              static_cast<size_t>(shape[0] * shape[1]) * 4);
          return out->get();
        },
        "ag/i32");
    kolo::OpResult result;
    absl::Status s =
        h.ok() ? kolo::synchronize(*h, kWait, &result) : h.status();
    std::vector<int32_t> want;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < (r + 1) * 3; ++i) want.push_back(r * 100 + i);
    }
    if (!s.ok()) {
      Fail("ag/i32", std::string(s.message()));
    } else if (Read<int32_t>(out->get(), want.size()) != want) {
      Fail("ag/i32", "wrong values");
    } else {
      Ok("ag/i32");
    }
  }
  // 3. Broadcast from every root, with a ready and a done event.
  for (int root = 0; root < n; ++root) {
    std::vector<double> host = {me * 1.5, -2.0 * me, 7.0};
    DevBuf buf(host.size() * 8);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaEvent_t ready, done;
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaMemcpyAsync(buf.get(), host.data(), 24, cudaMemcpyHostToDevice, stream);
    cudaEventRecord(ready, stream);
    kolo::Tensor t{kolo::DataType::kFloat64, {3}, buf.get(), dev};
    t.ready_event = ready;
    t.done_event = done;
    const std::string name = absl::StrCat("bc/root", root);
    auto h = kolo::broadcast_async(t, root, name);
    absl::Status s = h.ok() ? kolo::synchronize(*h, kWait) : h.status();
    const bool event_done = cudaEventQuery(done) == cudaSuccess;
    std::vector<double> got = Read<double>(buf.get(), 3);
    const std::vector<double> want = {root * 1.5, -2.0 * root, 7.0};
    if (!s.ok()) {
      Fail(name, std::string(s.message()));
    } else if (got != want) {
      Fail(name, "wrong values");
    } else if (!event_done) {
      Fail(name, "done_event not complete after synchronize");
    } else {
      Ok(name);
    }
    cudaEventDestroy(ready);
    cudaEventDestroy(done);
    cudaStreamDestroy(stream);
  }
  // 4. Alltoall: rank r sends (r + d) % 3 + 1 rows of 2 int64 to rank d.
  {
    std::vector<int64_t> splits;
    std::vector<int64_t> host;
    for (int d = 0; d < n; ++d) {
      splits.push_back((me + d) % 3 + 1);
      for (int64_t k = 0; k < splits.back() * 2; ++k) {
        host.push_back(me * 1000 + d * 10 + k);
      }
    }
    DevBuf in(host.size() * 8);
    Write(in.get(), host);
    std::shared_ptr<DevBuf> out;
    int64_t total = 0;
    kolo::Tensor t{kolo::DataType::kInt64,
                   {static_cast<int64_t>(host.size() / 2), 2},
                   in.get(),
                   dev};
    auto h = kolo::alltoall_async(
        t,
        [&](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
          total = shape[0] * shape[1];
          out = std::make_shared<DevBuf>(static_cast<size_t>(total) * 8);
          return out->get();
        },
        splits, "a2a/i64");
    absl::Status s = h.ok() ? kolo::synchronize(*h, kWait) : h.status();
    std::vector<int64_t> want;
    for (int src = 0; src < n; ++src) {
      for (int64_t k = 0; k < ((src + me) % 3 + 1) * 2; ++k) {
        want.push_back(src * 1000 + me * 10 + k);
      }
    }
    if (!s.ok()) {
      Fail("a2a/i64", std::string(s.message()));
    } else if (Read<int64_t>(out->get(), want.size()) != want) {
      Fail("a2a/i64", "wrong values");
    } else {
      Ok("a2a/i64");
    }
  }
  // 5. Reducescatter, 2n + 1 rows of 4 float (uneven: the first rank gets
  // one more).
  {
    const int64_t rows = 2 * n + 1;
    std::vector<float> host(static_cast<size_t>(rows * 4));
    for (size_t i = 0; i < host.size(); ++i) host[i] = Value<float>(me, i);
    DevBuf in(host.size() * 4);
    Write(in.get(), host);
    const int64_t mine = rows / n + (me < rows % n ? 1 : 0);
    int64_t start = 0;
    for (int r = 0; r < me; ++r) start += rows / n + (r < rows % n ? 1 : 0);
    DevBuf out(static_cast<size_t>(mine * 4) * 4);
    kolo::Tensor t{kolo::DataType::kFloat32, {rows, 4}, in.get(), dev};
    kolo::Tensor o{kolo::DataType::kFloat32, {mine, 4}, out.get(), dev};
    auto h = kolo::reducescatter_async(t, o, {}, {}, "rs/f32");
    absl::Status s = h.ok() ? kolo::synchronize(*h, kWait) : h.status();
    std::vector<float> got =
        Read<float>(out.get(), static_cast<size_t>(mine * 4));
    bool right = true;
    for (int64_t i = 0; i < mine * 4; ++i) {
      right = right &&
              got[static_cast<size_t>(i)] ==
                  Expect<float>(R::kSum, static_cast<size_t>(start * 4 + i));
    }
    if (!s.ok()) {
      Fail("rs/f32", std::string(s.message()));
    } else if (!right) {
      Fail("rs/f32", "wrong values");
    } else {
      Ok("rs/f32");
    }
  }
  // 6. Grouped allreduce of three tensors.
  {
    std::vector<std::shared_ptr<DevBuf>> bufs;
    std::vector<kolo::Tensor> ins, outs;
    for (int k = 0; k < 3; ++k) {
      const size_t count = static_cast<size_t>(5 + k * 100);
      std::vector<int32_t> host(count);
      for (size_t i = 0; i < count; ++i) host[i] = Value<int32_t>(me, i + k);
      auto in = std::make_shared<DevBuf>(count * 4);
      auto out = std::make_shared<DevBuf>(count * 4);
      Write(in->get(), host);
      ins.push_back({kolo::DataType::kInt32,
                     {static_cast<int64_t>(count)},
                     in->get(),
                     dev});
      outs.push_back({kolo::DataType::kInt32,
                      {static_cast<int64_t>(count)},
                      out->get(),
                      dev});
      bufs.push_back(in);
      bufs.push_back(out);
    }
    auto h = kolo::grouped_allreduce_async(ins, outs, {}, "grouped");
    absl::Status s = h.ok() ? kolo::synchronize(*h, kWait) : h.status();
    bool right = s.ok();
    for (int k = 0; k < 3 && right; ++k) {
      const size_t count = static_cast<size_t>(5 + k * 100);
      std::vector<int32_t> got = Read<int32_t>(outs[k].data, count);
      for (size_t i = 0; i < count; ++i) {
        right = right && got[i] == Expect<int32_t>(R::kSum, i + k);
      }
    }
    if (right) {
      Ok("grouped");
    } else {
      Fail("grouped", s.ok() ? "wrong values" : std::string(s.message()));
    }
  }
  // 6b. Process sets (2 ranks or more): {r} for every rank r, and each
  // rank's allreduce on its own one-rank set — a communicator of its own,
  // besides set 0's (which ranks sharing a GPU may have refused).
  if (n >= 2) {
    std::vector<kolo::ProcessSet> sets;
    absl::Status s;
    for (int r = 0; r < n && s.ok(); ++r) {
      auto set = kolo::add_process_set(std::vector<int>{r});
      if (set.ok()) sets.push_back(*set);
      s = set.status();
    }
    const size_t count = 1000;
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = Value<float>(me, i);
    DevBuf in(count * 4), out(count * 4);
    Write(in.get(), host);
    kolo::Tensor ti{
        kolo::DataType::kFloat32, {static_cast<int64_t>(count)}, in.get(), dev};
    kolo::Tensor to{kolo::DataType::kFloat32,
                    {static_cast<int64_t>(count)},
                    out.get(),
                    dev};
    if (s.ok()) {
      auto h = kolo::allreduce_async(ti, to, {}, "set/own", sets[me]);
      s = h.ok() ? kolo::synchronize(*h, kWait) : h.status();
    }
    if (!s.ok()) {
      Fail("set/own", std::string(s.message()));
    } else if (Read<float>(out.get(), count) != host) {
      Fail("set/own", "wrong values");
    } else {
      Ok("set/own");
    }
  }
  // 7. A large allreduce in flight when shutdown() comes: bounded.
  {
    const size_t count = size_t{16} << 20;  // 64 MiB of float
    auto in = std::make_shared<DevBuf>(count * 4);
    cudaMemset(in->get(), 0, count * 4);
    cudaDeviceSynchronize();
    kolo::Tensor t{kolo::DataType::kFloat32,
                   {static_cast<int64_t>(count)},
                   in->get(),
                   dev};
    auto h = kolo::allreduce_async(t, t, {}, "abort/big");
    absl::SleepFor(absl::Milliseconds(2));  // negotiated: likely running
    const absl::Time start = absl::Now();
    absl::Status sd = kolo::shutdown();
    const double secs = absl::ToDoubleSeconds(absl::Now() - start);
    std::printf("CUDA_SHUTDOWN rank=%d submitted=%d seconds=%.3f status=%s\n",
                me, h.ok() ? 1 : 0, secs, std::string(sd.message()).c_str());
    if (secs > 60) {
      Fail("abort/big", "shutdown took over 60 s");
    } else {
      Ok("abort/big");
    }
  }
  return 0;
}

// The gate of the abort mode: a host function on the caller's stream that
// blocks until Open() (or its own 90 s limit); work enqueued after it waits.
struct GateState {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
};

void CUDART_CB HoldGate(void* arg) {
  std::unique_ptr<std::shared_ptr<GateState>> holder(
      static_cast<std::shared_ptr<GateState>*>(arg));
  GateState& g = **holder;
  std::unique_lock<std::mutex> lock(g.mu);
  g.cv.wait_for(lock, std::chrono::seconds(90), [&] { return g.open; });
}

class Gate {
 public:
  Gate() = default;
  ~Gate() { Open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  bool Close(cudaStream_t stream) {
    auto holder = std::make_unique<std::shared_ptr<GateState>>(state_);
    if (cudaLaunchHostFunc(stream, HoldGate, holder.get()) != cudaSuccess) {
      return false;
    }
    (void)holder.release();  // HoldGate's now
    return true;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->open = true;
    state_->cv.notify_all();
  }

 private:
  std::shared_ptr<GateState> state_ = std::make_shared<GateState>();
};

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Polls `event` until it completed, at most `within`.
bool EventDone(cudaEvent_t event, absl::Duration within) {
  const absl::Time deadline = absl::Now() + within;
  while (true) {
    cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady || absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// Epoch 1 on w0 alone: the gated NCCL allreduce, aborted by the epoch's end.
// Returns the membership error that ended the epoch (run() regroups), or
// OK after a failure (printed).
absl::Status GatedAllreduceAborted(const std::string& dir) {
  // The communicator first, and an exact result on NCCL.
  std::vector<Pending> ps;
  ps.push_back(
      SubmitAllreduce<float>("abort/warm", kolo::ReduceOp::kSum, 4099));
  Finish(ps);
  if (fails > 0) return absl::OkStatus();

  const size_t count = size_t{1} << 20;
  DevBuf in(count * 4), out(count * 4);
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  if (in.get() == nullptr || out.get() == nullptr ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
          cudaSuccess ||
      cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
      cudaMemset(in.get(), 0, count * 4) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    Fail("abort/setup", "cannot set up the device buffers, stream, events");
    return absl::OkStatus();
  }
  absl::Status got = absl::UnknownError("not submitted");
  absl::Status check = absl::UnknownError("not run");
  double seconds = -1;
  {
    Gate gate;  // opens on every path out of this block
    if (!gate.Close(stream) || cudaEventRecord(ready, stream) != cudaSuccess) {
      Fail("abort/setup", "cudaLaunchHostFunc / cudaEventRecord failed");
      return absl::OkStatus();
    }
    kolo::Tensor t{
        kolo::DataType::kFloat32, {static_cast<int64_t>(count)}, in.get(), 0};
    kolo::Tensor o{
        kolo::DataType::kFloat32, {static_cast<int64_t>(count)}, out.get(), 0};
    t.ready_event = ready;
    t.done_event = done;
    auto h = kolo::allreduce_async(t, o, {}, "abort/gated");
    if (!h.ok()) {
      Fail("abort/gated",
           "submission failed: " + std::string(h.status().message()));
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Seconds(1));
    absl::StatusOr<bool> finished = kolo::poll(*h);
    if (!finished.ok() || *finished) {
      Fail("abort/gated", "finished while its ready event was gated");
    }
    // Grow: the discovery script offers the second slot; the newcomer says
    // it started, then waits to be admitted at this worker's next check.
    std::ofstream(dir + "/grow") << "1\n";
    const absl::Time until = absl::Now() + absl::Seconds(60);
    while (!Exists(dir + "/newcomer") && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (!Exists(dir + "/newcomer")) Fail("abort/grow", "no newcomer in 60 s");
    absl::SleepFor(absl::Seconds(5));  // its init reaches the coordinator
    const absl::Time start = absl::Now();
    check = kolo::elastic::check_host_updates();
    got = kolo::synchronize(*h, absl::Seconds(20));
    seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (absl::IsDeadlineExceeded(got)) {
      // Still in flight 20 s on: open the gate, then collect it.
      gate.Open();
      got = kolo::synchronize(*h, absl::Seconds(60));
      Fail("abort/gated", "not ended by the epoch's end within 20 s");
    }
  }
  std::string msg(got.message());
  for (char& ch : msg) {
    if (ch == '\n') ch = ' ';
  }
  std::printf(
      "CUDA_ABORTED rank=%d code=%d membership=%d hosts_updated=%d "
      "check_hosts_updated=%d seconds=%.3f msg=%s\n",
      kolo::rank(), static_cast<int>(got.code()),
      kolo::elastic::is_membership_error(got) ? 1 : 0,
      kolo::elastic::is_hosts_updated(got) ? 1 : 0,
      kolo::elastic::is_hosts_updated(check) ? 1 : 0, seconds, msg.c_str());
  // The gate is open: kolo's stream drains (the aborted collective's work,
  // then the done event) before the buffers go.
  if (!EventDone(ready, absl::Seconds(30)) ||
      !EventDone(done, absl::Seconds(30))) {
    Fail("abort/drain", "the streams did not drain after the gate opened");
    std::fflush(stdout);
    std::_Exit(4);  // the buffers may still be in use: never free them
  }
  cudaEventDestroy(ready);
  cudaEventDestroy(done);
  cudaStreamDestroy(stream);
  if (!got.ok() && got.code() == absl::StatusCode::kAborted &&
      kolo::elastic::is_membership_error(got)) {
    Ok("abort/gated");
    return got;
  }
  Fail("abort/gated", "not the membership error: " + got.ToString());
  return kolo::elastic::is_membership_error(check) ? check : absl::OkStatus();
}

int AbortMode(const std::string& dir) {
  if (kolo::cuda_device_count() == 0) {
    std::printf("CUDA_SKIP rank=%d %s\n", kolo::rank(),
                kolo::cuda_status().c_str());
    return 0;
  }
  cudaSetDevice(0);
  const bool original = kolo::worker_id() == "w0";
  bool gated = false;
  kolo::elastic::State state;
  std::string blob = "abort";
  (void)state.add_blob("blob", &blob);
  absl::Status s = kolo::elastic::run(state, [&]() -> absl::Status {
    if (original && !gated) {
      gated = true;
      return GatedAllreduceAborted(dir);
    }
    // Epoch 2: both ranks, exact (staged: the newcomer forced staging).
    std::printf("CUDA_INFO rank=%d size=%d epoch2\n", kolo::rank(),
                kolo::size());
    std::vector<Pending> ps;
    ps.push_back(
        SubmitAllreduce<float>("abort/next/f32", kolo::ReduceOp::kSum, 4099));
    ps.push_back(
        SubmitAllreduce<int32_t>("abort/next/i32", kolo::ReduceOp::kMax, 1000));
    Finish(ps);
    return absl::OkStatus();
  });
  if (!s.ok()) Fail("abort/run", std::string(s.message()));
  return 0;
}

#else

int AbortMode(const std::string&) {
  std::printf("CUDA_SKIP rank=%d %s\n", kolo::rank(),
              kolo::cuda_status().c_str());
  return 0;
}

int Gpu() {
  std::printf("CUDA_SKIP rank=%d %s\n", kolo::rank(),
              kolo::cuda_status().c_str());
  return 0;
}

#endif

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "kinds";
  const std::string dir = argc > 2 ? argv[2] : "";
  if (mode == "abort") {
    const char* id = std::getenv("KOLO_WORKER_ID");
    if (id != nullptr && std::string(id) != "w0") {
      // The newcomer: staging (2 ranks on the one GPU), and says it started.
      setenv("KOLO_CUDA_STAGING", "1", 1);
      std::ofstream(dir + "/newcomer") << "1\n";
    }
  }
  if (absl::Status s = kolo::init(); !s.ok()) {
    std::printf("CUDA_FAIL case=init rank=-1 %s\n",
                std::string(s.message()).c_str());
    return 4;
  }
  std::printf(
      "CUDA_INFO rank=%d size=%d built=%d nccl=%d devices=%d "
      "status=%s\n",
      kolo::rank(), kolo::size(), kolo::cuda_built() ? 1 : 0,
      kolo::nccl_built(), kolo::cuda_device_count(),
      kolo::cuda_status().c_str());
  const int me = kolo::rank();
  int rc = mode == "gpu" ? Gpu() : mode == "abort" ? AbortMode(dir) : Kinds();
  if (kolo::is_initialized()) (void)kolo::shutdown();
  std::printf("CUDA_DONE rank=%d fails=%d\n", me, fails);
  std::fflush(stdout);
  return rc != 0 ? rc : (fails > 0 ? 4 : 0);
}
