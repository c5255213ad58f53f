// kolo-grid-worker: the collective grid of issue 3 through real processes and
// the public API (include/kolo/kolo.h), run under kolorun once per world size
// by tests/multiprocess_grid_test.cc. Usage:
//   kolo-grid-worker allreduce|others|all [--light] [--huge-subset]
//     allreduce  every dtype x every op x counts 0, 1, 7, 4099, 1 Mi + 3, in
//                place and out of place, then one 64 MiB buffer per dtype x
//                op, with whatever algorithm KOLO_ALLREDUCE_ALGORITHM forces
//     others     allgather (uneven per-rank counts, zeros included),
//                broadcast from every root (roots 0 and n-1 for 1 Mi + 3),
//                alltoall (uneven splits, zeros included), reducescatter
//                (uneven counts, every op), each with one 64 MiB case, and
//                barriers that must hold every rank until all arrived
//     all        both
//     --light    counts up to 4099 and no 64 MiB buffers (the 7-rank pass)
//     --huge-subset  64 MiB allreduces for every dtype summed and float32
//                with every op only (14 instead of 49 cases)
//     --twice    every allreduce case (not the 64 MiB ones) by name, twice:
//                the second is a cache hit (with KOLO_FAST_PATH=1, a round
//                of the fast path); both must be exact
// Sanitizer builds (KOLO_TIMEOUT_SCALE > 1) run the subset that
// tests/testing/collective_data.h defines (Sanitized(), LargeCaseRuns()) and
// one 64 MiB case per collective.
//
// Inputs and expectations come from tests/testing/collective_data.h: small
// integers, so every partial result is exact, and expectations computed
// independently of the kernels. 64 MiB buffers repeat one period of that
// value model (kPeriod elements, a prime, so no chunk or segment boundary
// lines up with it), which keeps their generation and expectation cheap.
//
// Every rank compares its output with the expectation bit for bit
// (tests/workers/grid_check.h). The first mismatch or error prints one
// GRID_FAIL line (world size, rank, collective, dtype, op, count, first
// differing element) and exits 1 at once; kolorun then ends the job. Success
// prints
//   GRID_OK size=N rank=R mode=M algorithm=A cases=K seconds=S phases=...
// on every rank (phases: wall seconds per collective) and exits 0.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kolo/kolo.h"
#include "tests/testing/collective_data.h"
#include "tests/workers/grid_check.h"

namespace kolo::testing {
namespace {

// The period of the 64 MiB buffers, in elements (a prime).
constexpr int64_t kPeriod = 65521;
constexpr int64_t kHugeBytes = int64_t{64} << 20;

uint64_t Seed(int64_t a, int64_t b, int64_t c, int64_t d) {
  uint64_t s = 0;
  for (int64_t v : {a, b, c, d}) s = s * 1000003u + static_cast<uint64_t>(v);
  return s;
}

// The counts for this pass.
std::vector<int64_t> Counts(bool light) {
  if (!light) return {0, 1, 7, 4099, kLarge};
  return Sanitized() ? std::vector<int64_t>{0, 1, 7}
                     : std::vector<int64_t>{0, 1, 7, 4099};
}

// Which 64 MiB allreduces run: every dtype x op; with --huge-subset every
// dtype summed and float32 with every op; under sanitizers float32 sum only.
bool HugeRuns(DataType type, ReduceOp op, bool subset) {
  if (Sanitized()) return type == DataType::kFloat32 && op == ReduceOp::kSum;
  return !subset || op == ReduceOp::kSum || type == DataType::kFloat32;
}

std::string AlgorithmLabel() {
  const char* a = std::getenv("KOLO_ALLREDUCE_ALGORITHM");
  return (a != nullptr && *a != '\0') ? a : "auto";
}

// ---- allreduce --------------------------------------------------------------

// A named allreduce, waited for.
absl::Status NamedAllreduce(const std::string& name, void* input, void* output,
                            int64_t count, DataType type, ReduceOp op) {
  kolo::AllreduceOptions o;
  o.op = op;
  absl::StatusOr<kolo::Handle> h = kolo::allreduce_async(
      kolo::Tensor{type, {count}, input, kolo::kCpu},
      kolo::Tensor{type, {count}, output, kolo::kCpu}, o, name);
  if (!h.ok()) return h.status();
  return kolo::synchronize(*h, absl::Seconds(120));
}

void AllreduceGrid(Checker& ck, bool light, bool huge_subset, bool twice) {
  const int r = ck.rank(), n = ck.size();
  const std::string name = absl::StrCat("allreduce(", AlgorithmLabel(), ")");
  int index = 0;
  for (int64_t count : Counts(light)) {
    for (DataType type : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (count == kLarge && !LargeCaseRuns(type, op)) continue;
        const bool in_place = index++ % 2 == 1;
        Case c{name, type, op, count, in_place ? "in-place" : "out-of-place"};
        const Bytes input = Input(type, op, r, 0, count);
        const std::string tensor =
            absl::StrCat("grid.", index, ".", static_cast<int>(type), ".",
                         static_cast<int>(op), ".", count);
        for (int run = 0; run < (twice ? 2 : 1); ++run) {
          Bytes in = input;
          Bytes out(in.size(), '\xcd');
          void* dst = in_place ? in.data() : out.data();
          absl::Status st =
              twice ? NamedAllreduce(tensor, in.data(), dst, count, type, op)
                    : kolo::allreduce(in.data(), dst, count, type, op);
          c.extra = absl::StrCat(in_place ? "in-place" : "out-of-place",
                                 twice && run == 1 ? ", cache hit" : "");
          if (type == DataType::kBool && op == ReduceOp::kAverage) {
            ck.Refused(st, c);
            continue;
          }
          ck.Ok(st, c);
          ck.Same(in_place ? in : out, Expected(type, op, n, 0, count), c);
          if (!in_place) {
            c.extra = "out-of-place, input changed";
            ck.Same(in, input, c, /*count_case=*/false);
          }
        }
      }
    }
  }
  ck.Phase("allreduce");
  if (light) return;
  // One buffer for every 64 MiB case: fresh 64 MiB allocations cost more in
  // page faults than the allreduce itself.
  Bytes buf(kHugeBytes);
  for (DataType type : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!HugeRuns(type, op, huge_subset)) continue;
      if (type == DataType::kBool && op == ReduceOp::kAverage) continue;
      const size_t elem = DataTypeSize(type);
      const int64_t count = kHugeBytes / static_cast<int64_t>(elem);
      const Case c{name, type, op, count, "64 MiB, in-place"};
      TileInto(Input(type, op, r, 0, kPeriod), elem, 0, count, buf.data());
      ck.Ok(kolo::allreduce(buf.data(), buf.data(), count, type, op), c);
      ck.SameTiled(buf, Expected(type, op, n, 0, kPeriod), c);
    }
  }
}

// ---- allgather, broadcast, alltoall, reducescatter, barrier -----------------

void AllgatherCase(Checker& ck, DataType type, int64_t base,
                   const std::vector<int64_t>& counts) {
  const int r = ck.rank(), n = ck.size();
  const size_t elem = DataTypeSize(type);
  std::vector<Bytes> inputs(n);
  Bytes want;
  for (int p = 0; p < n; ++p) {
    inputs[p] = Pattern(Seed(1, static_cast<int>(type), base, p),
                        static_cast<size_t>(counts[p]) * elem);
    want.insert(want.end(), inputs[p].begin(), inputs[p].end());
  }
  Bytes out(want.size(), '\xcd');
  const Case c{"allgather", type, std::nullopt, base,
               absl::StrCat("own count ", counts[r])};
  ck.Ok(kolo::allgather(inputs[r].data(), counts[r], type, counts, out.data()),
        c);
  ck.Same(out, want, c);
}

void AllgatherGrid(Checker& ck, bool light) {
  const int n = ck.size();
  for (int64_t base : Counts(light)) {
    for (DataType type : kAllTypes) {
      if (base == kLarge && type != DataType::kUInt8 &&
          type != DataType::kFloat64) {
        continue;
      }
      std::vector<int64_t> counts(n);
      for (int p = 0; p < n; ++p) counts[p] = p % 3 == 1 ? 0 : base + p;
      AllgatherCase(ck, type, base, counts);
    }
  }
  if (light) return;
  std::vector<int64_t> counts(n);  // about 64 MiB in all
  for (int p = 0; p < n; ++p) counts[p] = kHugeBytes / 4 / n - 3 * p;
  AllgatherCase(ck, DataType::kFloat32, Total(counts), counts);
}

void BroadcastCase(Checker& ck, DataType type, int64_t count, int root) {
  const size_t elem = DataTypeSize(type);
  const Bytes want = Pattern(Seed(2, static_cast<int>(type), count, root),
                             static_cast<size_t>(count) * elem);
  Bytes data = ck.rank() == root ? want : Bytes(want.size(), '\xcd');
  const Case c{"broadcast", type, std::nullopt, count,
               absl::StrCat("root ", root)};
  ck.Ok(kolo::broadcast(data.data(), count, type, root), c);
  ck.Same(data, want, c);
}

void BroadcastGrid(Checker& ck, bool light) {
  const int n = ck.size();
  for (int64_t count : Counts(light)) {
    for (DataType type : kAllTypes) {
      if (count == kLarge && type != DataType::kFloat32) continue;
      for (int root = 0; root < n; ++root) {
        if (count == kLarge && root != 0 && root != n - 1) continue;
        BroadcastCase(ck, type, count, root);
      }
    }
  }
  if (!light) BroadcastCase(ck, DataType::kFloat32, kHugeBytes / 4, n / 2);
}

// send(r, p): elements rank r sends to rank p.
template <typename SendCount>
void AlltoallCase(Checker& ck, DataType type, int64_t base,
                  const SendCount& send_count) {
  const int r = ck.rank(), n = ck.size();
  const size_t elem = DataTypeSize(type);
  std::vector<int64_t> send(n), recv(n);
  Bytes in, want;
  for (int p = 0; p < n; ++p) {
    send[p] = send_count(r, p);
    recv[p] = send_count(p, r);
    const Bytes to = Pattern(Seed(3, static_cast<int>(type), base, r * n + p),
                             static_cast<size_t>(send[p]) * elem);
    in.insert(in.end(), to.begin(), to.end());
    const Bytes from = Pattern(Seed(3, static_cast<int>(type), base, p * n + r),
                               static_cast<size_t>(recv[p]) * elem);
    want.insert(want.end(), from.begin(), from.end());
  }
  Bytes out(want.size(), '\xcd');
  const Case c{"alltoall", type, std::nullopt, base,
               absl::StrCat("sends ", Total(send), " receives ", Total(recv))};
  ck.Ok(kolo::alltoall(in.data(), type, send, out.data(), recv), c);
  ck.Same(out, want, c);
}

void AlltoallGrid(Checker& ck, bool light) {
  const int n = ck.size();
  for (int64_t base : Counts(light)) {
    for (DataType type : kAllTypes) {
      if (base == kLarge && type != DataType::kInt32) continue;
      const int64_t per_pair = base == kLarge ? base / n : base;
      AlltoallCase(ck, type, base, [&](int from, int to) -> int64_t {
        return (from + 2 * to) % 3 == 0 ? 0 : per_pair + from + 2 * to;
      });
    }
  }
  if (light) return;
  const int64_t per_pair = kHugeBytes / 4 / n - 2 * n;  // about 64 MiB a rank
  AlltoallCase(
      ck, DataType::kFloat32, per_pair * n,
      [&](int from, int to) -> int64_t { return per_pair + from + 2 * to; });
}

// The input of rank `rank`: `total` elements, of the value model or (huge) of
// its period repeated.
Bytes ScatterInput(DataType type, ReduceOp op, int rank, int64_t total,
                   bool huge) {
  if (!huge) return Input(type, op, rank, 0, total);
  return Tiled(Input(type, op, rank, 0, kPeriod), DataTypeSize(type), 0, total);
}

void ReducescatterCase(Checker& ck, DataType type, ReduceOp op, int64_t base,
                       const std::vector<int64_t>& counts, bool huge) {
  const int r = ck.rank(), n = ck.size();
  const size_t elem = DataTypeSize(type);
  const int64_t total = Total(counts);
  int64_t offset = 0;
  for (int p = 0; p < r; ++p) offset += counts[p];
  const Bytes in = ScatterInput(type, op, r, total, huge);
  Bytes out(static_cast<size_t>(counts[r]) * elem, '\xcd');
  const Case c{
      "reducescatter", type, op, base,
      absl::StrCat("total ", total, ", own block ", offset, "+", counts[r])};
  absl::Status st =
      kolo::reducescatter(in.data(), total, type, counts, out.data(), op);
  if (type == DataType::kBool && op == ReduceOp::kAverage) {
    ck.Refused(st, c);
    return;
  }
  ck.Ok(st, c);
  ck.Same(
      out,
      huge ? Tiled(Expected(type, op, n, 0, kPeriod), elem, offset, counts[r])
           : Expected(type, op, n, offset, counts[r]),
      c);
}

void ReducescatterGrid(Checker& ck, bool light) {
  const int n = ck.size();
  for (int64_t base : Counts(light)) {
    for (DataType type : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (base == kLarge && !LargeCaseRuns(type, op)) continue;
        std::vector<int64_t> counts(n);
        for (int p = 0; p < n; ++p) {
          counts[p] = p % 3 == 1 ? 0 : (base == kLarge ? base / n : base) + p;
        }
        ReducescatterCase(ck, type, op, base, counts, /*huge=*/false);
      }
    }
  }
  if (light) return;
  std::vector<int64_t> counts(n);  // 64 MiB of input
  for (int p = 0; p < n; ++p) counts[p] = kHugeBytes / 4 / n + (p % 2) * 5 - 2;
  ReducescatterCase(ck, DataType::kFloat32, ReduceOp::kSum, Total(counts),
                    counts, /*huge=*/true);
}

int64_t RealtimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Ranks arrive at staggered times; every rank's exit from barrier k must come
// after every rank's entry into it (one host, so one realtime clock).
void BarrierGrid(Checker& ck) {
  const int r = ck.rank(), n = ck.size();
  constexpr int kRounds = 10;
  std::vector<int64_t> times;  // entry, exit per round
  for (int k = 0; k < kRounds; ++k) {
    usleep(static_cast<useconds_t>(((r * 7 + k * 3) % 5) * 1000));
    times.push_back(RealtimeNanos());
    ck.Ok(kolo::barrier(), {"barrier", DataType::kInt64, std::nullopt, 0,
                            absl::StrCat("round ", k)});
    times.push_back(RealtimeNanos());
  }
  const Case c{"barrier", DataType::kInt64, std::nullopt, kRounds,
               "entry/exit times"};
  std::vector<int64_t> all(static_cast<size_t>(n) * times.size());
  const std::vector<int64_t> counts(n, static_cast<int64_t>(times.size()));
  ck.Ok(kolo::allgather(times.data(), static_cast<int64_t>(times.size()),
                        DataType::kInt64, counts, all.data()),
        c);
  for (int k = 0; k < kRounds; ++k) {
    int64_t last_entry = 0, first_exit = INT64_MAX;
    for (int p = 0; p < n; ++p) {
      last_entry = std::max(last_entry, all[p * times.size() + 2 * k]);
      first_exit = std::min(first_exit, all[p * times.size() + 2 * k + 1]);
    }
    if (first_exit < last_entry) {
      ck.Fail(c, absl::StrCat("round ", k, ": a rank left the barrier ",
                              last_entry - first_exit,
                              " ns before the last rank entered it"));
    }
  }
  ck.Count(kRounds);
}

int Main(int argc, char** argv) {
  std::string mode;
  bool light = false, huge_subset = false, twice = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--light") {
      light = true;
    } else if (a == "--huge-subset") {
      huge_subset = true;
    } else if (a == "--twice") {
      twice = true;
    } else if (mode.empty() &&
               (a == "allreduce" || a == "others" || a == "all")) {
      mode = a;
    } else {
      mode.clear();
      break;
    }
  }
  if (mode.empty()) {
    std::fprintf(stderr,
                 "usage: kolo-grid-worker allreduce|others|all [--light] "
                 "[--huge-subset] [--twice]\n");
    return 2;
  }
  const absl::Time start = absl::Now();
  absl::Status st = kolo::init();
  if (!st.ok()) {
    std::printf("GRID_FAIL init: %s\n", st.ToString().c_str());
    return 1;
  }
  Checker ck(kolo::rank(), kolo::size());
  ck.Phase("init");
  if (mode == "allreduce" || mode == "all") {
    AllreduceGrid(ck, light, huge_subset, twice);
    if (!light) ck.Phase("allreduce-64MiB");
  }
  if (mode == "others" || mode == "all") {
    AllgatherGrid(ck, light);
    ck.Phase("allgather");
    BroadcastGrid(ck, light);
    ck.Phase("broadcast");
    AlltoallGrid(ck, light);
    ck.Phase("alltoall");
    ReducescatterGrid(ck, light);
    ck.Phase("reducescatter");
    BarrierGrid(ck);
    ck.Phase("barrier");
  }
  st = kolo::shutdown();
  if (!st.ok()) {
    std::printf("GRID_FAIL size=%d rank=%d shutdown: %s\n", ck.size(),
                ck.rank(), st.ToString().c_str());
    return 1;
  }
  std::printf(
      "GRID_OK size=%d rank=%d mode=%s%s algorithm=%s cases=%lld "
      "seconds=%.1f phases=%s\n",
      ck.size(), ck.rank(), mode.c_str(), light ? "-light" : "",
      AlgorithmLabel().c_str(), static_cast<long long>(ck.cases()),
      absl::ToDoubleSeconds(absl::Now() - start), ck.phases().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace kolo::testing

int main(int argc, char** argv) { return kolo::testing::Main(argc, argv); }
