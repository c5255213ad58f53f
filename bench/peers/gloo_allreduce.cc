// A peer benchmark, not part of kolo: Gloo's ring allreduce (float32 sum,
// out of place) over TCP on 127.0.0.1, timed the way kolo-bench times kolo
// (each rank's median of per-iteration times, then the max over ranks), so
// that scripts/peer-bench.sh can run both side by side on the same machine.
//
// Usage: gloo_allreduce RANK SIZE STORE_DIR MIN_BYTES MAX_BYTES [SECONDS=1]
// (one process per rank; STORE_DIR: an empty directory shared by the ranks).
// Prints one line per size on rank 0: "bytes time_us" (factor 4 between
// sizes). Exits non-zero when a result is wrong.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void Allreduce(const std::shared_ptr<gloo::Context>& ctx, const float* in,
               float* out, size_t count) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setInput(const_cast<float*>(in), count);
  opts.setOutput(out, count);
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::sum<float>));
  gloo::allreduce(opts);
}

double MaxOverRanks(const std::shared_ptr<gloo::Context>& ctx, double v) {
  double out = 0;
  gloo::AllreduceOptions opts(ctx);
  opts.setInput(&v, 1);
  opts.setOutput(&out, 1);
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::max<double>));
  gloo::allreduce(opts);
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: %s RANK SIZE STORE_DIR MIN_BYTES MAX_BYTES "
                 "[SECONDS]\n",
                 argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int size = std::atoi(argv[2]);
  const long min_bytes = std::atol(argv[4]);
  const long max_bytes = std::atol(argv[5]);
  const double seconds = argc > 6 ? std::atof(argv[6]) : 1.0;
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[3]);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->connectFullMesh(store, dev);
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const size_t count = static_cast<size_t>(bytes) / sizeof(float);
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(rank + i % 7);
    std::vector<double> warm;
    for (int i = 0; i < 3; ++i) {
      const Clock::time_point t0 = Clock::now();
      Allreduce(ctx, in.data(), out.data(), count);
      warm.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    const double estimate = MaxOverRanks(ctx, Median(warm));
    const long iters = std::clamp<long>(
        static_cast<long>(seconds * 1e6 / std::max(estimate, 1.0)), 5, 1000000);
    std::vector<double> times;
    for (long i = 0; i < iters; ++i) {
      const Clock::time_point t0 = Clock::now();
      Allreduce(ctx, in.data(), out.data(), count);
      times.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    // Sum over ranks r of (r + i % 7) = n(n-1)/2 + n * (i % 7): exact.
    for (size_t i = 0; i < count; ++i) {
      const float want =
          static_cast<float>(size * (size - 1) / 2 + size * (i % 7));
      if (out[i] != want) {
        std::fprintf(stderr,
                     "gloo_allreduce: rank %d: element %zu is %g, "
                     "expected %g\n",
                     rank, i, out[i], want);
        return 1;
      }
    }
    const double time = MaxOverRanks(ctx, Median(times));
    if (rank == 0) std::printf("%ld %.1f\n", bytes, time);
    std::fflush(stdout);
  }
  return 0;
}
