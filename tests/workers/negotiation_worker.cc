// kolo-negotiation-worker: the program the negotiation tests run under
// kolorun (tests/multiprocess_negotiation_test.cc). One mode per behaviour:
//   orders: 48 named tensors (every collective) submitted asynchronously in a
//     different order on every rank; exact results. Prints NEG_OK.
//   mismatch: one tensor per kind of disagreement (the last rank differs),
//     each must fail on every rank with kFailedPrecondition (an invalid
//     request: kInvalidArgument); prints "NEG_ERR kind=K code=C" and
//     "NEG_MSG K: <message>" per case; after each, a good allreduce must work.
//   duplicate: a name submitted twice on rank 0 fails at once there only;
//     the first op still completes everywhere.
//   try: kolo::try_synchronize: false on rank 0 before the others
//     submitted (they wait for it), true once done with the exact sum, then
//     kNotFound for the released handle; a dtype mismatch comes back
//     through it on every rank (NEG_TRY bad code=C), and the next op works.
//   stall SECONDS: the last rank submits 'late' SECONDS after the others
//     (printing NEG_STALL_BEGIN when it starts to wait); every rank then
//     gets the right result.
//   stall-shutdown: the last rank submits 'only-last', the others 'not-last';
//     nobody completes: the coordinator's stall shutdown must fail both,
//     printing NEG_STALL_FAILED with the error.
//   kill VICTIM: every rank but VICTIM submits three tensors; VICTIM kills
//     itself (SIGKILL); the others (ignoring kolorun's SIGTERM meanwhile)
//     print NEG_KILLED with each handle's error.
// NEG_WARM=STEPS (environment): stall and early-exit first run STEPS steps
// of their tensors on every rank, so that they are cache hits (on the fast
// path, KOLO_FAST_PATH=1, when the scenario starts).
// Every wait is bounded; nothing here can hang a test run.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kolo/kolo.h"

namespace {

using kolo::DataType;
using kolo::Handle;
using kolo::Tensor;

const absl::Duration kWait = absl::Seconds(60);

int Fail(const std::string& what, const absl::Status& st) {
  std::printf("NEG_FAIL %s: %s\n", what.c_str(), st.ToString().c_str());
  std::fflush(stdout);
  (void)kolo::shutdown();
  return 4;
}

template <typename T>
Tensor T1(DataType type, std::vector<T>& v, std::vector<int64_t> shape) {
  return Tensor{type, std::move(shape), v.data(), kolo::kCpu};
}

// One tensor of the `orders` mode: its input, output and expected output.
struct Case {
  std::string name;
  int kind = 0;  // i % 6
  std::vector<int64_t> in, out, want;
  std::vector<int64_t> splits;
  Handle handle = 0;
};

// Builds case i for `rank` of `n` (int64 everywhere: exact).
Case MakeCase(int i, int rank, int n) {
  Case c;
  c.name = absl::StrCat("t", i);
  c.kind = i % 6;
  switch (c.kind) {
    case 0: {  // allreduce sum
      int64_t count = 1 + (i * 37) % 200;
      for (int64_t j = 0; j < count; ++j) {
        c.in.push_back((rank + 1) * (i + j % 7));
        c.want.push_back((i + j % 7) * n * (n + 1) / 2);
      }
      c.out.assign(count, -1);
      break;
    }
    case 1: {  // allgather: rank r has r+1+i%3 rows of 2
      for (int r = 0; r < n; ++r) {
        int64_t rows = r + 1 + i % 3;
        for (int64_t k = 0; k < rows * 2; ++k) {
          if (r == rank) c.in.push_back(1000 * r + k + i);
          c.want.push_back(1000 * r + k + i);
        }
      }
      break;
    }
    case 2: {  // broadcast from root i % n
      int root = i % n;
      for (int64_t j = 0; j < 50 + i; ++j) {
        c.in.push_back(rank == root ? i + j : -7);
        c.want.push_back(i + j);
      }
      break;
    }
    case 3: {  // alltoall: rank r sends (r+s+i)%3 rows to s
      for (int s = 0; s < n; ++s) {
        int64_t rows = (rank + s + i) % 3;
        c.splits.push_back(rows);
        for (int64_t k = 0; k < rows; ++k) c.in.push_back(100 * rank + s);
      }
      for (int s = 0; s < n; ++s) {
        int64_t rows = (s + rank + i) % 3;
        for (int64_t k = 0; k < rows; ++k) c.want.push_back(100 * s + rank);
      }
      break;
    }
    case 4: {  // reducescatter, default split of d0 = 2n + i%3 rows
      int64_t d0 = 2 * n + i % 3;
      for (int64_t j = 0; j < d0; ++j) c.in.push_back(rank + j);
      int64_t first = 0;
      for (int r = 0; r < rank; ++r) first += d0 / n + (r < d0 % n ? 1 : 0);
      int64_t mine = d0 / n + (rank < d0 % n ? 1 : 0);
      for (int64_t j = first; j < first + mine; ++j) {
        c.want.push_back(n * (n - 1) / 2 + n * j);
      }
      c.out.assign(mine, -1);
      break;
    }
    default:  // barrier
      break;
  }
  return c;
}

absl::StatusOr<Handle> SubmitCase(Case& c, std::vector<int64_t>& gathered) {
  const DataType t = DataType::kInt64;
  auto out_alloc =
      [&gathered](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    gathered.assign(n, -1);
    return gathered.data();
  };
  switch (c.kind) {
    case 0:
      return kolo::allreduce_async(
          T1(t, c.in, {static_cast<int64_t>(c.in.size())}),
          T1(t, c.out, {static_cast<int64_t>(c.out.size())}), {}, c.name);
    case 1:
      return kolo::allgather_async(
          T1(t, c.in, {static_cast<int64_t>(c.in.size()) / 2, 2}), out_alloc,
          c.name);
    case 2:
      return kolo::broadcast_async(
          T1(t, c.in, {static_cast<int64_t>(c.in.size())}),
          std::stoi(c.name.substr(1)) % kolo::size(), c.name);
    case 3:
      return kolo::alltoall_async(
          T1(t, c.in, {static_cast<int64_t>(c.in.size())}), out_alloc, c.splits,
          c.name);
    case 4:
      return kolo::reducescatter_async(
          T1(t, c.in, {static_cast<int64_t>(c.in.size())}),
          T1(t, c.out, {static_cast<int64_t>(c.out.size())}), {}, {}, c.name);
    default:
      return kolo::barrier_async(c.name);
  }
}

int Orders() {
  const int rank = kolo::rank(), n = kolo::size();
  const int kCases = 48;
  std::vector<Case> cases;
  std::vector<std::vector<int64_t>> gathered(kCases);
  for (int i = 0; i < kCases; ++i) cases.push_back(MakeCase(i, rank, n));
  // Every rank its own order: rotated by 7 per rank, reversed on odd ranks.
  std::vector<int> order(kCases);
  std::iota(order.begin(), order.end(), 0);
  std::rotate(order.begin(), order.begin() + (rank * 7) % kCases, order.end());
  if (rank % 2 == 1) std::reverse(order.begin(), order.end());
  std::vector<Handle> handles;
  for (int i : order) {
    auto h = SubmitCase(cases[i], gathered[i]);
    if (!h.ok())
      return Fail(absl::StrCat("submit ", cases[i].name), h.status());
    cases[i].handle = *h;
  }
  // Wait for one through wait_any and poll, then for the rest.
  for (int i = 0; i < kCases; ++i) handles.push_back(cases[i].handle);
  auto first = kolo::wait_any(handles, kWait);
  if (!first.ok()) return Fail("wait_any", first.status());
  auto polled = kolo::poll(handles[*first]);
  if (!polled.ok() || !*polled)
    return Fail("poll after wait_any", polled.status());
  std::vector<absl::Status> done = kolo::synchronize_all(handles, kWait);
  for (int i = 0; i < kCases; ++i) {
    if (!done[i].ok()) return Fail(cases[i].name, done[i]);
    Case& c = cases[i];
    const std::vector<int64_t>& got = c.kind == 1 || c.kind == 3 ? gathered[i]
                                      : c.kind == 2              ? c.in
                                                                 : c.out;
    if (got != c.want) {
      size_t k = 0;
      while (k < got.size() && k < c.want.size() && got[k] == c.want[k]) ++k;
      std::printf("NEG_FAIL %s (kind %d) differs at element %zu of %zu/%zu\n",
                  c.name.c_str(), c.kind, k, got.size(), c.want.size());
      return 4;
    }
  }
  // A released handle is unknown now.
  if (kolo::poll(handles[0]).status().code() != absl::StatusCode::kNotFound) {
    return Fail("poll of a released handle",
                absl::InternalError("not NotFound"));
  }
  std::printf("NEG_OK mode=orders rank=%d size=%d cases=%d\n", rank, n, kCases);
  return 0;
}

// A good allreduce after an error: the job goes on.
bool GoodAfter(const std::string& kind) {
  std::vector<int64_t> v = {kolo::rank() + 1, 5};
  absl::Status s = kolo::allreduce(v.data(), v.data(), 2, DataType::kInt64);
  const int64_t n = kolo::size();
  if (!s.ok() || v[0] != n * (n + 1) / 2 || v[1] != 5 * n) {
    std::printf("NEG_FAIL good op after %s: %s\n", kind.c_str(),
                s.ToString().c_str());
    return false;
  }
  return true;
}

int Mismatch() {
  const int rank = kolo::rank(), n = kolo::size();
  const bool odd = rank == n - 1;  // the rank that disagrees
  std::vector<float> f(12, 1.0f), fo(12);
  std::vector<int32_t> i32(12, 1), io(12);
  std::vector<int64_t> scratch;
  auto alloc =
      [&scratch](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t e = 1;
    for (int64_t d : shape) e *= d;
    scratch.assign(e * 2, 0);
    return scratch.data();
  };
  auto ft = [&](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), f.data(), kolo::kCpu};
  };
  auto fout = [&](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), fo.data(), kolo::kCpu};
  };
  struct Kind {
    std::string name;
    std::function<absl::StatusOr<Handle>(const std::string&)> submit;
  };
  // splits/counts with `value` at `at` and zeros elsewhere.
  auto one_at = [n](int at, int64_t value) {
    std::vector<int64_t> v;
    for (int r = 0; r < n; ++r) v.push_back(r == at ? value : 0);
    return v;
  };
  std::vector<Kind> kinds = {
      {"op",
       [&](const std::string& nm) {
         return odd ? kolo::broadcast_async(ft({12}), 0, nm)
                    : kolo::allreduce_async(ft({12}), fout({12}), {}, nm);
       }},
      {"dtype",
       [&](const std::string& nm) {
         Tensor in =
             odd ? Tensor{DataType::kInt32, {12}, i32.data()} : ft({12});
         Tensor out =
             odd ? Tensor{DataType::kInt32, {12}, io.data()} : fout({12});
         return kolo::allreduce_async(in, out, {}, nm);
       }},
      {"shape",
       [&](const std::string& nm) {
         std::vector<int64_t> s =
             odd ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{4, 3};
         return kolo::allreduce_async(ft(s), fout(s), {}, nm);
       }},
      {"reduce",
       [&](const std::string& nm) {
         kolo::AllreduceOptions o;
         o.op = odd ? kolo::ReduceOp::kMax : kolo::ReduceOp::kSum;
         return kolo::allreduce_async(ft({12}), fout({12}), o, nm);
       }},
      {"prescale",
       [&](const std::string& nm) {
         kolo::AllreduceOptions o;
         o.prescale = odd ? 0.5 : 1.0;
         return kolo::allreduce_async(ft({12}), fout({12}), o, nm);
       }},
      {"postscale",
       [&](const std::string& nm) {
         kolo::AllreduceOptions o;
         o.postscale = odd ? 2.0 : 1.0;
         return kolo::allreduce_async(ft({12}), fout({12}), o, nm);
       }},
      {"root",
       [&](const std::string& nm) {
         return kolo::broadcast_async(ft({12}), odd ? 1 % n : 0, nm);
       }},
      {"allgather-dims",
       [&](const std::string& nm) {
         return kolo::allgather_async(
             ft(odd ? std::vector<int64_t>{2, 6} : std::vector<int64_t>{3, 4}),
             alloc, nm);
       }},
      {"alltoall-dims",
       [&](const std::string& nm) {
         std::vector<int64_t> splits = one_at(0, odd ? 2 : 3);
         return kolo::alltoall_async(
             ft(odd ? std::vector<int64_t>{2, 6} : std::vector<int64_t>{3, 4}),
             alloc, splits, nm);
       }},
      {"reducescatter-counts",
       [&](const std::string& nm) {
         std::vector<int64_t> counts = one_at(odd ? 0 : n - 1, 12);
         std::vector<int64_t> mine = {odd ? 0 : (rank == n - 1 ? 12 : 0)};
         return kolo::reducescatter_async(ft({12}), fout(mine), {}, counts, nm);
       }},
      {"invalid",
       [&](const std::string& nm) {
         // Bad splits on the odd rank only: they add up to 13 of 12 rows.
         std::vector<int64_t> splits = one_at(0, odd ? 13 : 12);
         return kolo::alltoall_async(ft({12}), alloc, splits, nm);
       }},
  };
  if (n < 2) kinds.clear();  // one rank cannot disagree with itself
  for (Kind& k : kinds) {
    const std::string name = absl::StrCat("bad/", k.name);
    auto h = k.submit(name);
    if (!h.ok()) return Fail(absl::StrCat("submit ", name), h.status());
    absl::Status s = kolo::synchronize(*h, kWait);
    std::printf("NEG_ERR kind=%s code=%d\n", k.name.c_str(),
                static_cast<int>(s.code()));
    std::printf("NEG_MSG %s: %s\n", k.name.c_str(),
                std::string(s.message()).c_str());
    if (!GoodAfter(k.name)) return 4;
  }
  std::printf("NEG_OK mode=mismatch rank=%d size=%d cases=%zu\n", rank, n,
              kinds.size());
  return 0;
}

int Duplicate() {
  const int rank = kolo::rank(), n = kolo::size();
  std::vector<int64_t> v(3, rank + 1), out(3, -1);
  Tensor in{DataType::kInt64, {3}, v.data()};
  Tensor o{DataType::kInt64, {3}, out.data()};
  // The other ranks submit 'dup' only after rank 0 tried it twice, so that
  // rank 0's first op is certainly still in flight then.
  // A group whose second member's name ('dupg.1') is in flight fails, and
  // leaves its first member's name free: 'dupg.0' goes in alone after it.
  std::vector<int64_t> v1(3, rank + 1), out1(3, -1), out0(3, -1);
  Tensor in1{DataType::kInt64, {3}, v1.data()};
  Tensor o1{DataType::kInt64, {3}, out1.data()};
  Tensor o0{DataType::kInt64, {3}, out0.data()};
  absl::StatusOr<Handle> h, h1, h0;
  if (rank == 0) {
    h = kolo::allreduce_async(in, o, {}, "dup");
    if (!h.ok()) return Fail("first dup", h.status());
    auto again = kolo::allreduce_async(in, o, {}, "dup");
    std::printf("NEG_DUP code=%d\n", static_cast<int>(again.status().code()));
    std::printf("NEG_MSG dup: %s\n",
                std::string(again.status().message()).c_str());
    h1 = kolo::allreduce_async(in1, o1, {}, "dupg.1");
    if (!h1.ok()) return Fail("dupg.1", h1.status());
    const Tensor ins[] = {in, in1}, outs[] = {o0, o1};
    auto group = kolo::grouped_allreduce_async(ins, outs, {}, "dupg");
    std::printf("NEG_DUP_GROUP code=%d\n",
                static_cast<int>(group.status().code()));
    std::printf("NEG_MSG dupg: %s\n",
                std::string(group.status().message()).c_str());
    h0 = kolo::allreduce_async(in, o0, {}, "dupg.0");
    if (!h0.ok()) return Fail("dupg.0 after the group", h0.status());
  }
  if (auto tried = kolo::control_allgather("dup-tried", "", kWait);
      !tried.ok()) {
    return Fail("dup-tried", tried.status());
  }
  if (rank != 0) {
    h = kolo::allreduce_async(in, o, {}, "dup");
    if (!h.ok()) return Fail("first dup", h.status());
    h1 = kolo::allreduce_async(in1, o1, {}, "dupg.1");
    if (!h1.ok()) return Fail("dupg.1", h1.status());
    h0 = kolo::allreduce_async(in, o0, {}, "dupg.0");
    if (!h0.ok()) return Fail("dupg.0", h0.status());
  }
  for (Handle each : {*h, *h1, *h0}) {
    if (absl::Status s = kolo::synchronize(each, kWait); !s.ok()) {
      return Fail("dup", s);
    }
  }
  const std::vector<int64_t> sum(3, n * (n + 1) / 2);
  if (out != sum || out1 != sum || out0 != sum) {
    return Fail("dup result", absl::InternalError("wrong sum"));
  }
  // The name is free again once completed.
  if (!GoodAfter("dup")) return 4;
  auto h2 = kolo::allreduce_async(in, o, {}, "dup");
  if (!h2.ok()) return Fail("dup reused", h2.status());
  if (absl::Status s2 = kolo::synchronize(*h2, kWait); !s2.ok()) {
    return Fail("dup reused", s2);
  }
  std::printf("NEG_OK mode=duplicate rank=%d size=%d\n", rank, n);
  return 0;
}

// Waits for `h` with try_synchronize only (bounded): its final status, and
// the number of calls that found it running in `*running`.
absl::Status TryUntilDone(Handle h, kolo::OpResult* result, int* running) {
  const absl::Time deadline = absl::Now() + kWait;
  while (true) {
    absl::StatusOr<bool> done = kolo::try_synchronize(h, result);
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    ++*running;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("try_synchronize never said done");
    }
    absl::SleepFor(absl::Microseconds(200));
  }
}

int Try() {
  const int rank = kolo::rank(), n = kolo::size();
  std::vector<int64_t> v(5, rank + 1), out(5, -1);
  Tensor in{DataType::kInt64, {5}, v.data(), kolo::kCpu};
  Tensor o{DataType::kInt64, {5}, out.data(), kolo::kCpu};
  // Rank 0 tries 'try' before the others submit it (they wait for it at a
  // control allgather): still running, the handle stays valid.
  absl::StatusOr<Handle> h;
  int early_running = 0;
  if (rank == 0) {
    h = kolo::allreduce_async(in, o, {}, "try");
    if (!h.ok()) return Fail("try submit", h.status());
    if (n > 1) {
      absl::StatusOr<bool> early = kolo::try_synchronize(*h);
      if (!early.ok()) return Fail("early try", early.status());
      if (*early) {
        return Fail("early try", absl::InternalError("finished too soon"));
      }
      early_running = 1;
    }
  }
  if (auto tried = kolo::control_allgather("try-tried", "", kWait);
      !tried.ok()) {
    return Fail("try-tried", tried.status());
  }
  if (rank != 0) {
    h = kolo::allreduce_async(in, o, {}, "try");
    if (!h.ok()) return Fail("try submit", h.status());
  }
  kolo::OpResult result;
  int running = 0;
  if (absl::Status s = TryUntilDone(*h, &result, &running); !s.ok()) {
    return Fail("try", s);
  }
  if (out != std::vector<int64_t>(5, n * (n + 1) / 2) ||
      result.shape != std::vector<int64_t>{5}) {
    return Fail("try result", absl::InternalError("wrong sum or shape"));
  }
  // Released: unknown now.
  if (absl::StatusCode c = kolo::try_synchronize(*h).status().code();
      c != absl::StatusCode::kNotFound) {
    return Fail("try of a released handle",
                absl::InternalError(absl::StrCat("code ", c)));
  }
  // A failed op: try_synchronize gives its error (the last rank sends
  // int32 where the others send float32), and the next op works.
  if (n > 1) {
    std::vector<float> f(4, 1.0f), fo(4);
    std::vector<int32_t> i32(4, 1), io(4);
    const bool odd = rank == n - 1;
    absl::StatusOr<Handle> bad =
        odd ? kolo::allreduce_async(
                  Tensor{DataType::kInt32, {4}, i32.data(), kolo::kCpu},
                  Tensor{DataType::kInt32, {4}, io.data(), kolo::kCpu}, {},
                  "try-bad")
            : kolo::allreduce_async(
                  Tensor{DataType::kFloat32, {4}, f.data(), kolo::kCpu},
                  Tensor{DataType::kFloat32, {4}, fo.data(), kolo::kCpu}, {},
                  "try-bad");
    if (!bad.ok()) return Fail("try-bad submit", bad.status());
    absl::Status s = TryUntilDone(*bad, nullptr, &running);
    std::printf("NEG_TRY bad code=%d\n", static_cast<int>(s.code()));
    if (kolo::try_synchronize(*bad).status().code() !=
        absl::StatusCode::kNotFound) {
      return Fail("try of a failed, released handle",
                  absl::InternalError("not NotFound"));
    }
    if (!GoodAfter("try-bad")) return 4;
  }
  std::printf("NEG_TRY early_running=%d\n", early_running);
  std::printf("NEG_OK mode=try rank=%d size=%d\n", rank, n);
  return 0;
}

bool Failed(int /*code*/) { return false; }

// NEG_WARM steps (0 without it) of every rank's allreduce of int64 tensors
// `names`, of `shapes`, in place; true when every one gave the exact sum.
bool Warm(const std::vector<std::string>& names,
          const std::vector<int64_t>& sizes) {
  const char* env = std::getenv("NEG_WARM");
  int steps = 0;
  if (env == nullptr || !absl::SimpleAtoi(env, &steps)) return true;
  const int rank = kolo::rank(), n = kolo::size();
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<int64_t>> bufs;
    std::vector<Handle> handles;
    for (size_t i = 0; i < names.size(); ++i) {
      bufs.emplace_back(static_cast<size_t>(sizes[i]), rank + step);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      Tensor t{DataType::kInt64, {sizes[i]}, bufs[i].data()};
      auto h = kolo::allreduce_async(t, t, {}, names[i]);
      if (!h.ok()) return Failed(Fail("warm submit", h.status()));
      handles.push_back(*h);
    }
    for (absl::Status& s : kolo::synchronize_all(handles, kWait)) {
      if (!s.ok()) return Failed(Fail("warm", s));
    }
    const int64_t want =
        static_cast<int64_t>(n) * (n - 1) / 2 + static_cast<int64_t>(n) * step;
    for (const std::vector<int64_t>& b : bufs) {
      if (b[0] != want) {
        return Failed(Fail("warm result", absl::InternalError("wrong sum")));
      }
    }
  }
  return true;
}

int Stall(int seconds) {
  const int rank = kolo::rank(), n = kolo::size();
  if (!Warm({"late"}, {2})) return 4;
  if (rank == n - 1) {
    // Every warm-up step has run on every rank: from here on, 'late' waits
    // only for this rank.
    std::printf("NEG_STALL_BEGIN rank=%d\n", rank);
    std::fflush(stdout);
    absl::SleepFor(absl::Seconds(seconds));
  }
  std::vector<int64_t> v(2, rank + 1);
  Tensor t{DataType::kInt64, {2}, v.data()};
  auto h = kolo::allreduce_async(t, t, {}, "late");
  if (!h.ok()) return Fail("late", h.status());
  if (absl::Status s = kolo::synchronize(*h, kWait); !s.ok()) {
    return Fail("late", s);
  }
  if (v[0] != n * (n + 1) / 2) {
    return Fail("late result", absl::InternalError("wrong sum"));
  }
  std::printf("NEG_OK mode=stall rank=%d size=%d\n", rank, n);
  return 0;
}

int StallShutdown() {
  const int rank = kolo::rank(), n = kolo::size();
  std::vector<int64_t> v(2, rank + 1);
  Tensor t{DataType::kInt64, {2}, v.data()};
  auto h =
      kolo::allreduce_async(t, t, {}, rank == n - 1 ? "only-last" : "not-last");
  if (!h.ok()) return Fail("submit", h.status());
  absl::Status s = kolo::synchronize(*h, kWait);
  if (s.ok()) return Fail("stalled op", absl::InternalError("succeeded"));
  std::printf("NEG_STALL_FAILED rank=%d code=%d\n", rank,
              static_cast<int>(s.code()));
  std::printf("NEG_MSG stall: %s\n", std::string(s.message()).c_str());
  std::fflush(stdout);
  (void)kolo::shutdown();
  return 0;
}

int Kill(int victim) {
  const int rank = kolo::rank();
  if (rank == victim) {
    absl::SleepFor(absl::Milliseconds(300));  // the others have submitted
    std::fflush(stdout);
    raise(SIGKILL);
  }
  // kolorun stops the job when it sees the victim die (SIGTERM, then SIGKILL
  // seconds later): ignore the SIGTERM so that this rank can report what its
  // handles said.
  signal(SIGTERM, SIG_IGN);
  std::vector<std::vector<int64_t>> bufs(3, std::vector<int64_t>(4, rank));
  std::vector<Handle> handles;
  for (int i = 0; i < 3; ++i) {
    Tensor t{DataType::kInt64, {4}, bufs[i].data()};
    auto h = kolo::allreduce_async(t, t, {}, absl::StrCat("pending", i));
    if (!h.ok()) return Fail("submit", h.status());
    handles.push_back(*h);
  }
  const absl::Time start = absl::Now();
  std::vector<absl::Status> done = kolo::synchronize_all(handles, kWait);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (const absl::Status& s : done) {
    std::printf("NEG_KILLED rank=%d code=%d seconds=%.1f\n", rank,
                static_cast<int>(s.code()), seconds);
    std::printf("NEG_MSG killed: %s\n", std::string(s.message()).c_str());
  }
  std::fflush(stdout);
  (void)kolo::shutdown();
  return 0;
}

// Rank `leaver` runs out of work first: one allreduce with everyone, then
// shutdown() and exit 0, while the others wait in more ops (issue 39): each
// of their ops fails within seconds naming it, and so do ops they submit
// afterwards; then they shut down too and the job ends well.
int EarlyExit(int leaver) {
  const int rank = kolo::rank();
  if (!Warm({"together", "stranded0", "stranded1", "stranded2"},
            {2, 4, 4, 4})) {
    return 4;
  }
  std::vector<int64_t> v(2, rank + 1);
  Tensor t{DataType::kInt64, {2}, v.data()};
  auto first = kolo::allreduce_async(t, t, {}, "together");
  if (!first.ok()) return Fail("together", first.status());
  if (absl::Status s = kolo::synchronize(*first, kWait); !s.ok()) {
    return Fail("together", s);
  }
  if (rank == leaver) {
    absl::SleepFor(absl::Milliseconds(300));  // the others are waiting
    std::printf("NEG_LEAVER rank=%d\n", rank);
    std::fflush(stdout);
    if (absl::Status s = kolo::shutdown(); !s.ok()) return Fail("shutdown", s);
    return 0;
  }
  std::vector<std::vector<int64_t>> bufs(3, std::vector<int64_t>(4, rank));
  std::vector<Handle> handles;
  for (int i = 0; i < 3; ++i) {
    Tensor b{DataType::kInt64, {4}, bufs[i].data()};
    auto h = kolo::allreduce_async(b, b, {}, absl::StrCat("stranded", i));
    if (!h.ok()) return Fail("submit", h.status());
    handles.push_back(*h);
  }
  const absl::Time start = absl::Now();
  std::vector<absl::Status> done = kolo::synchronize_all(handles, kWait);
  // Submitted after the leave: fails at once.
  absl::Status later = kolo::barrier();
  done.push_back(later);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (const absl::Status& s : done) {
    std::printf("NEG_LEFT rank=%d code=%d seconds=%.1f\n", rank,
                static_cast<int>(s.code()), seconds);
    std::printf("NEG_MSG left: %s\n", std::string(s.message()).c_str());
  }
  std::fflush(stdout);
  if (absl::Status s = kolo::shutdown(); !s.ok()) return Fail("shutdown", s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kolo-negotiation-worker MODE [ARG]\n");
    return 2;
  }
  if (absl::Status s = kolo::init(); !s.ok()) return Fail("init", s);
  const std::string mode = argv[1];
  int arg = 0;
  if (argc > 2 && !absl::SimpleAtoi(argv[2], &arg)) return 2;
  int rc;
  if (mode == "orders") {
    rc = Orders();
  } else if (mode == "mismatch") {
    rc = Mismatch();
  } else if (mode == "duplicate") {
    rc = Duplicate();
  } else if (mode == "try") {
    rc = Try();
  } else if (mode == "stall") {
    rc = Stall(arg);
  } else if (mode == "stall-shutdown") {
    return StallShutdown();
  } else if (mode == "kill") {
    return Kill(arg);
  } else if (mode == "early-exit") {
    return EarlyExit(arg);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    rc = 2;
  }
  std::fflush(stdout);
  if (absl::Status s = kolo::shutdown(); !s.ok()) return Fail("shutdown", s);
  return rc;
}
