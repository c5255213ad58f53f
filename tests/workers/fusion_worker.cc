// kolo-fusion-worker: the program the fusion, response cache and timeline
// tests run under kolorun (tests/multiprocess_fusion_test.cc, issue 5 point
// 5). Usage: kolo-fusion-worker MODE [STEPS]
//   steps STEPS  the "step": 79 tensors (allreduce of float32, int32,
//     float64, float16 and bfloat16 with every reduce op, some with
//     prescale / postscale 0.5, 2 or 4, counts 0, 1, 7, 1000 and 70000, in
//     place and not; three of at least 1 MiB, which run direct; ten
//     allgathers with a different first dimension on each rank, zero rows
//     included; three broadcasts and a barrier), submitted asynchronously
//     in a different order on every rank (a shuffle seeded by rank and
//     step), then synchronize_all, STEPS times, every output checked bit
//     for bit. The settings come from the environment (KOLO_FUSION_THRESHOLD,
//     KOLO_CACHE_CAPACITY): the test runs the grid of them.
//   churn STEPS  as steps, but each step submits a different subset of the
//     tensors (the same on every rank).
//   allreduce STEPS  as steps with the allreduces alone (what the fast path,
//     KOLO_FAST_PATH=1, runs without the coordinator); FUS_OK then also says
//     fast_rounds=K, the rounds of the fast path on this rank.
//   switch  the same step seven times, changing the settings with
//     kolo::set_fusion_threshold / set_cache_capacity between steps, the
//     same on every rank (kSwitches below).
//   metadata  eight steps of a smaller set in which some names change
//     metadata: at step 2 on every rank (shape, dtype, reduce op, scale
//     factors, an allgather's row shape, the collective), and back at step
//     7; at step 4 on
//     the last rank only (n >= 2), which must fail those tensors on every
//     rank with kFailedPrecondition naming each, while the others in the
//     step are exact, and the step after works again. `metadata CACHED`
//     repeats step 3 CACHED more times first (a mismatch after that many
//     cached steps).
//   timeline STEPS  STEPS steps of seven tensors (four small allreduces,
//     two allgathers, a broadcast, one direct allreduce): the test reads
//     the KOLO_TIMELINE file rank 0 wrote.
//
// Values are small integers (times 0.5 after a prescale of 0.5), so every
// partial result is exact whatever the reduction order, in every dtype; the
// expectation is computed here, independently of the kernels, in the
// kernels' arithmetic (allreduce/kernels.h): prescale each input, reduce,
// divide an average by the world size (float for float32, float16 and
// bfloat16, double for float64, truncating for integers), then postscale.
// Only the float16 / bfloat16 conversions come from kernels.h.
//
// Prints, per rank: "FUS_OK mode=M rank=R size=N steps=S tensors=T
// elements=E" on success (E: elements checked); "FUS_ERR step=S name=X
// code=C" and "FUS_MSG X: <message>" per expected failure; "FUS_FAIL ..."
// naming the step, tensor and first differing element, then exit 4, on any
// unexpected result. Every wait is bounded.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/kernels.h"
#include "kolo/kolo.h"
#include "worker_lib/api/api_internal.h"
#include "worker_lib/runtime/op_runtime.h"

namespace {

using kolo::DataType;
using kolo::Handle;
using kolo::ReduceOp;
using kolo::Tensor;

const absl::Duration kWait = absl::Seconds(60);

int Fail(const std::string& what, const absl::Status& st) {
  std::printf("FUS_FAIL rank=%d %s: %s\n", kolo::rank(), what.c_str(),
              st.ToString().c_str());
  std::fflush(stdout);
  (void)kolo::shutdown();
  return 4;
}

// ---- Values and the kernels' arithmetic -----------------------------------

bool IsInt(DataType t) { return t == DataType::kInt32; }

// `x` converted to `t` and back (x is exactly representable for every value
// used here, except the results of an average's division).
double RoundTo(DataType t, double x) {
  switch (t) {
    case DataType::kFloat32:
      return static_cast<float>(x);
    case DataType::kFloat16:
      return kolo::HalfToFloat(kolo::FloatToHalf(static_cast<float>(x)));
    case DataType::kBFloat16:
      return kolo::BFloat16ToFloat(
          kolo::FloatToBFloat16(static_cast<float>(x)));
    case DataType::kInt32:
      return static_cast<int32_t>(x);
    default:
      return x;
  }
}

// Scale(): in double then truncated for integers, in float otherwise (in
// double for float64), rounded back to the type.
double ScaleAs(DataType t, double x, double factor) {
  if (factor == 1.0) return x;
  if (IsInt(t)) return std::trunc(x * factor);
  if (t == DataType::kFloat64) return x * factor;
  return RoundTo(t, static_cast<float>(x) * static_cast<float>(factor));
}

// DivideBy(): truncating for integers, in double for float64, in float
// otherwise.
double DivideAs(DataType t, double sum, int n) {
  if (n == 1) return sum;
  if (IsInt(t)) return static_cast<double>(static_cast<int64_t>(sum) / n);
  if (t == DataType::kFloat64) return sum / n;
  return RoundTo(t, static_cast<float>(sum) / static_cast<float>(n));
}

void Put(DataType t, void* base, int64_t j, double x) {
  switch (t) {
    case DataType::kFloat32:
      static_cast<float*>(base)[j] = static_cast<float>(x);
      return;
    case DataType::kFloat64:
      static_cast<double*>(base)[j] = x;
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[j] =
          kolo::FloatToHalf(static_cast<float>(x));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[j] =
          kolo::FloatToBFloat16(static_cast<float>(x));
      return;
    default:
      static_cast<int32_t*>(base)[j] = static_cast<int32_t>(x);
      return;
  }
}

double Get(DataType t, const void* base, int64_t j) {
  switch (t) {
    case DataType::kFloat32:
      return static_cast<const float*>(base)[j];
    case DataType::kFloat64:
      return static_cast<const double*>(base)[j];
    case DataType::kFloat16:
      return kolo::HalfToFloat(static_cast<const uint16_t*>(base)[j]);
    case DataType::kBFloat16:
      return kolo::BFloat16ToFloat(static_cast<const uint16_t*>(base)[j]);
    default:
      return static_cast<const int32_t*>(base)[j];
  }
}

// Element j of rank r's input of tensor `seed` at `step`: -5..5, or -1, 1, 2
// for a product (so that |product| stays a small power of two).
double Value(int step, int seed, int r, int64_t j, bool product) {
  if (product) {
    static constexpr double kFactors[] = {-1, 1, 2};
    return kFactors[(j + seed + r + step) % 3];
  }
  return static_cast<double>((j * 7 + seed * 13 + r * 5 + step * 3) % 11) - 5;
}

// ---- Tensors ---------------------------------------------------------------

enum class Kind { kAllreduce, kAllgather, kBroadcast, kBarrier };

struct Spec {
  std::string name;
  Kind kind = Kind::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0, postscale = 1.0;
  // Allreduce / broadcast: the shape. Allgather: the row shape (the
  // dimensions after the first).
  std::vector<int64_t> shape;
  bool in_place = false;
  int seed = 0;  // the value model's tensor index
  int root = 0;  // broadcast
  // Allgather: rank r has ((r + row_offset) % 3 + min_rows) * row_mult rows.
  int row_offset = 0;
  int64_t min_rows = 0, row_mult = 1;
  // The error this rank expects (metadata mode): kFailedPrecondition.
  bool expect_error = false;

  int64_t Rows(int r) const {
    return ((r + row_offset) % 3 + min_rows) * row_mult;
  }
};

int64_t Product(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

// One tensor's buffers for one step.
struct Slot {
  std::vector<char> in, out, gathered, want;
  std::vector<int64_t> in_shape;
  std::vector<int64_t> want_shape, want_splits;  // of the OpResult
  int64_t elements = 0;                          // of `want`
  Handle handle = 0;
};

// Fills `slot` with this rank's input for `step` and the expected output.
void Prepare(const Spec& s, int step, int rank, int n, Slot& slot) {
  const size_t esize = kolo::DataTypeSize(s.dtype);
  const bool product = s.kind == Kind::kAllreduce && s.op == ReduceOp::kProduct;
  slot = Slot{};
  if (s.kind == Kind::kBarrier) return;
  if (s.kind == Kind::kAllgather) {
    const int64_t row = Product(s.shape);
    slot.in_shape = {s.Rows(rank)};
    slot.in_shape.insert(slot.in_shape.end(), s.shape.begin(), s.shape.end());
    slot.in.resize(std::max<int64_t>(1, s.Rows(rank) * row) * esize);
    for (int64_t j = 0; j < s.Rows(rank) * row; ++j) {
      Put(s.dtype, slot.in.data(), j, Value(step, s.seed, rank, j, false));
    }
    int64_t total = 0, rows = 0;
    for (int r = 0; r < n; ++r) {
      total += s.Rows(r) * row;
      rows += s.Rows(r);
      slot.want_splits.push_back(s.Rows(r));
    }
    slot.want_shape = {rows};
    slot.want_shape.insert(slot.want_shape.end(), s.shape.begin(),
                           s.shape.end());
    slot.elements = total;
    slot.want.resize(total * esize);
    int64_t at = 0;
    for (int r = 0; r < n; ++r) {
      for (int64_t j = 0; j < s.Rows(r) * row; ++j) {
        Put(s.dtype, slot.want.data(), at++, Value(step, s.seed, r, j, false));
      }
    }
    return;
  }
  const int64_t count = Product(s.shape);
  slot.in_shape = s.shape;
  slot.want_shape = s.shape;
  slot.elements = count;
  slot.in.resize(std::max<int64_t>(1, count) * esize);
  slot.want.resize(count * esize);
  if (s.kind == Kind::kBroadcast) {
    for (int64_t j = 0; j < count; ++j) {
      // Not the root: a value that the broadcast must overwrite.
      Put(s.dtype, slot.in.data(), j,
          rank == s.root ? Value(step, s.seed, rank, j, false) : 9);
      Put(s.dtype, slot.want.data(), j, Value(step, s.seed, s.root, j, false));
    }
    return;
  }
  for (int64_t j = 0; j < count; ++j) {
    Put(s.dtype, slot.in.data(), j, Value(step, s.seed, rank, j, product));
    double acc = 0;
    for (int r = 0; r < n; ++r) {
      const double x =
          ScaleAs(s.dtype, Value(step, s.seed, r, j, product), s.prescale);
      if (r == 0) {
        acc = x;
      } else if (s.op == ReduceOp::kMin) {
        acc = std::min(acc, x);
      } else if (s.op == ReduceOp::kMax) {
        acc = std::max(acc, x);
      } else if (s.op == ReduceOp::kProduct) {
        acc *= x;
      } else {
        acc += x;
      }
    }
    if (s.op == ReduceOp::kAverage) acc = DivideAs(s.dtype, acc, n);
    Put(s.dtype, slot.want.data(), j, ScaleAs(s.dtype, acc, s.postscale));
  }
  if (!s.in_place) {
    slot.out.assign(std::max<int64_t>(1, count) * esize, '\xa5');
  }
}

absl::StatusOr<Handle> Submit(const Spec& s, Slot& slot) {
  Tensor in{s.dtype, slot.in_shape, slot.in.data(), kolo::kCpu};
  switch (s.kind) {
    case Kind::kAllreduce: {
      Tensor out = in;
      if (!s.in_place) out.data = slot.out.data();
      kolo::AllreduceOptions o;
      o.op = s.op;
      o.prescale = s.prescale;
      o.postscale = s.postscale;
      return kolo::allreduce_async(in, out, o, s.name);
    }
    case Kind::kAllgather: {
      const size_t esize = kolo::DataTypeSize(s.dtype);
      auto alloc =
          [&slot,
           esize](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
        int64_t e = 1;
        for (int64_t d : shape) e *= d;
        slot.gathered.assign(std::max<int64_t>(1, e) * esize, '\xa5');
        slot.gathered.resize(e * esize);
        return slot.gathered.data();
      };
      return kolo::allgather_async(in, alloc, s.name);
    }
    case Kind::kBroadcast:
      return kolo::broadcast_async(in, s.root, s.name);
    case Kind::kBarrier:
      return kolo::barrier_async(s.name);
  }
  return absl::InternalError("unknown kind");
}

// The output to compare with slot.want.
const std::vector<char>& Got(const Spec& s, const Slot& slot) {
  if (s.kind == Kind::kAllgather) return slot.gathered;
  if (s.kind == Kind::kBroadcast || s.in_place) return slot.in;
  return slot.out;
}

// "" when the output is the expected one, bit for bit.
std::string Check(const Spec& s, const Slot& slot,
                  const kolo::OpResult& result) {
  if (s.kind == Kind::kBarrier) return "";
  const std::vector<char>& got = Got(s, slot);
  const size_t esize = kolo::DataTypeSize(s.dtype);
  if (got.size() < slot.want.size()) {
    return absl::StrCat("output of ", got.size(), " bytes, want ",
                        slot.want.size());
  }
  if (result.shape != slot.want_shape) {
    return absl::StrCat("result shape [", absl::StrJoin(result.shape, ","),
                        "], want [", absl::StrJoin(slot.want_shape, ","), "]");
  }
  if (s.kind == Kind::kAllgather && result.splits != slot.want_splits) {
    return absl::StrCat("result splits [", absl::StrJoin(result.splits, ","),
                        "], want [", absl::StrJoin(slot.want_splits, ","), "]");
  }
  if (slot.want.empty() ||  // (memcmp of null pointers is undefined)
      std::memcmp(got.data(), slot.want.data(), slot.want.size()) == 0) {
    return "";
  }
  int64_t j = 0;
  while (std::memcmp(got.data() + j * esize, slot.want.data() + j * esize,
                     esize) == 0) {
    ++j;
  }
  return absl::StrCat("element ", j, " of ", slot.elements, " is ",
                      Get(s.dtype, got.data(), j), ", want ",
                      Get(s.dtype, slot.want.data(), j));
}

// Runs one step of `specs`: submits every tensor in this rank's order,
// waits for all, checks every result (and every expected error). Adds the
// elements checked to `*elements`. Returns 0, or 4 after a FUS_FAIL line.
int RunStep(const std::vector<Spec>& specs, int step, int64_t* elements) {
  const int rank = kolo::rank(), n = kolo::size();
  std::vector<Slot> slots(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    Prepare(specs[i], step, rank, n, slots[i]);
  }
  std::vector<size_t> order(specs.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(static_cast<uint32_t>(1000003 * rank + 7919 * step + 17));
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) {
    absl::StatusOr<Handle> h = Submit(specs[i], slots[i]);
    if (!h.ok()) {
      return Fail(absl::StrCat("step ", step, " submit ", specs[i].name),
                  h.status());
    }
    slots[i].handle = *h;
  }
  // Synchronize in this rank's submission order, with results.
  std::vector<absl::Status> done(specs.size());
  std::vector<kolo::OpResult> results(specs.size());
  const absl::Time deadline = absl::Now() + kWait;
  for (size_t i : order) {
    done[i] =
        kolo::synchronize(slots[i].handle, deadline - absl::Now(), &results[i]);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    if (s.expect_error) {
      const std::string needle = absl::StrCat("tensor '", s.name, "'");
      std::printf("FUS_ERR step=%d name=%s code=%d\n", step, s.name.c_str(),
                  static_cast<int>(done[i].code()));
      std::printf("FUS_MSG %s: %s\n", s.name.c_str(),
                  std::string(done[i].message()).c_str());
      if (done[i].code() != absl::StatusCode::kFailedPrecondition ||
          !absl::StrContains(done[i].message(), needle)) {
        return Fail(
            absl::StrCat("step ", step, " ", s.name, " should fail naming it"),
            done[i]);
      }
      continue;
    }
    if (!done[i].ok())
      return Fail(absl::StrCat("step ", step, " ", s.name), done[i]);
    const std::string diff = Check(s, slots[i], results[i]);
    if (!diff.empty()) {
      std::printf("FUS_FAIL rank=%d size=%d step=%d tensor=%s dtype=%s: %s\n",
                  rank, n, step, s.name.c_str(),
                  std::string(kolo::DataTypeName(s.dtype)).c_str(),
                  diff.c_str());
      std::fflush(stdout);
      return 4;
    }
    *elements += slots[i].elements;
  }
  return 0;
}

// ---- The step --------------------------------------------------------------

Spec Allreduce(std::string name, DataType t, ReduceOp op,
               std::vector<int64_t> shape, int seed) {
  Spec s;
  s.name = std::move(name);
  s.dtype = t;
  s.op = op;
  s.shape = std::move(shape);
  s.seed = seed;
  return s;
}

Spec Allgather(std::string name, DataType t, std::vector<int64_t> row,
               int row_offset, int seed) {
  Spec s;
  s.name = std::move(name);
  s.kind = Kind::kAllgather;
  s.dtype = t;
  s.shape = std::move(row);
  s.row_offset = row_offset;
  s.seed = seed;
  return s;
}

Spec Broadcast(std::string name, DataType t, std::vector<int64_t> shape,
               int root, int seed) {
  Spec s;
  s.name = std::move(name);
  s.kind = Kind::kBroadcast;
  s.dtype = t;
  s.shape = std::move(shape);
  s.root = root;
  s.seed = seed;
  return s;
}

std::vector<Spec> StepSpecs(int n) {
  constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kInt32,
                                 DataType::kFloat64, DataType::kFloat16,
                                 DataType::kBFloat16};
  constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage,
                               ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct};
  constexpr int64_t kCounts[] = {0, 1, 7, 1000, 70000};
  std::vector<Spec> specs;
  int seed = 0;
  // 50 allreduces: two of every dtype x op, which may fuse with each other
  // (their scale factors agree), with varied counts and scale factors.
  constexpr double kPrescales[] = {1.0, 2.0, 0.5, 4.0, 1.0};
  constexpr double kPostscales[] = {1.0, 0.5, 2.0};
  for (int d = 0; d < 5; ++d) {
    for (int o = 0; o < 5; ++o) {
      double prescale = kPrescales[(d + o) % 5];
      // A product of prescale 4 could overflow float16 with 5 ranks.
      if (kOps[o] == ReduceOp::kProduct && prescale == 4.0) prescale = 2.0;
      for (int k = 0; k < 2; ++k) {
        const int64_t count = kCounts[(d * 6 + o + 2 * k) % 5];
        std::vector<int64_t> shape = {count};
        if (count == 1000 && k == 1) shape = {10, 100};
        if (count == 1 && (d + o) % 3 == 0) shape = {};  // a scalar
        Spec s =
            Allreduce(absl::StrCat("ar/", kolo::DataTypeName(kTypes[d]), "/",
                                   kolo::ReduceOpName(kOps[o]), "/", k),
                      kTypes[d], kOps[o], shape, seed++);
        s.prescale = prescale;
        s.postscale = kPostscales[(d + 2 * o) % 3];
        s.in_place = (d + o + k) % 4 == 2;
        specs.push_back(std::move(s));
      }
    }
  }
  // 12 plain sums that fuse with each other (float32 and float16).
  constexpr int64_t kPlain[] = {1, 7, 1000, 70000, 0, 3, 1000, 7};
  for (int k = 0; k < 8; ++k) {
    specs.push_back(Allreduce(absl::StrCat("sum32/", k), DataType::kFloat32,
                              ReduceOp::kSum, {kPlain[k]}, seed++));
    specs.back().in_place = k % 3 == 1;
  }
  for (int k = 0; k < 4; ++k) {
    specs.push_back(Allreduce(absl::StrCat("sum16/", k), DataType::kFloat16,
                              ReduceOp::kSum, {kPlain[k]}, seed++));
  }
  // Three of at least 1 MiB (KOLO_FUSION_DIRECT_BYTES): never fused.
  specs.push_back(Allreduce("direct/f32sum", DataType::kFloat32, ReduceOp::kSum,
                            {300000}, seed++));
  specs.back().prescale = 2.0;
  specs.push_back(Allreduce("direct/i32max", DataType::kInt32, ReduceOp::kMax,
                            {270000}, seed++));
  specs.back().in_place = true;
  specs.push_back(Allreduce("direct/f64avg", DataType::kFloat64,
                            ReduceOp::kAverage, {140000}, seed++));
  specs.back().postscale = 0.5;
  // Ten allgathers, with a different first dimension on each rank (0 on
  // some); the last gathers 70000 rows per rank and more, past 1 MiB from 3
  // ranks on.
  specs.push_back(Allgather("ag/0", DataType::kFloat32, {3}, 0, seed++));
  specs.push_back(Allgather("ag/1", DataType::kFloat32, {3}, 1, seed++));
  specs.push_back(Allgather("ag/2", DataType::kFloat32, {}, 2, seed++));
  specs.push_back(Allgather("ag/3", DataType::kInt32, {2}, 0, seed++));
  specs.push_back(Allgather("ag/4", DataType::kInt32, {}, 1, seed++));
  specs.push_back(Allgather("ag/5", DataType::kFloat64, {5}, 2, seed++));
  specs.push_back(Allgather("ag/6", DataType::kFloat16, {4}, 0, seed++));
  specs.push_back(Allgather("ag/7", DataType::kBFloat16, {2, 2}, 1, seed++));
  specs.push_back(Allgather("ag/8", DataType::kFloat32, {3}, 2, seed++));
  specs.push_back(Allgather("ag/big", DataType::kFloat32, {}, 0, seed++));
  specs.back().min_rows = 1;
  specs.back().row_mult = 70000;
  // Broadcasts (never fused) and a barrier.
  specs.push_back(Broadcast("bc/0", DataType::kFloat32, {1000}, 0, seed++));
  specs.push_back(Broadcast("bc/1", DataType::kInt32, {7, 2}, 1 % n, seed++));
  specs.push_back(
      Broadcast("bc/2", DataType::kFloat16, {70000}, n - 1, seed++));
  Spec barrier;
  barrier.name = "barrier/0";
  barrier.kind = Kind::kBarrier;
  specs.push_back(barrier);
  return specs;
}

// `steps`, or with `churn` a different subset of the step's tensors every
// step (the same on every rank: about two thirds, chosen by a hash of the
// step and the tensor), so that names leave and come back to a small cache.
// The fast path's rounds on this rank so far (0 without it).
uint64_t FastRounds() {
  auto ops = kolo::internal::CurrentOps("fast_path_rounds");
  return ops.ok() ? (*ops)->fast_path_rounds() : 0;
}

int Steps(int steps, bool churn, bool allreduce_only) {
  std::vector<Spec> all = StepSpecs(kolo::size());
  if (allreduce_only) {
    all.erase(std::remove_if(
                  all.begin(), all.end(),
                  [](const Spec& s) { return s.kind != Kind::kAllreduce; }),
              all.end());
  }
  int64_t elements = 0;
  size_t submitted = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<Spec> specs;
    for (size_t i = 0; i < all.size(); ++i) {
      if (!churn || (i * 7 + step * 13 + i * step) % 3 != 0) {
        specs.push_back(all[i]);
      }
    }
    submitted += specs.size();
    if (int rc = RunStep(specs, step, &elements); rc != 0) return rc;
  }
  std::printf(
      "FUS_OK mode=%s rank=%d size=%d steps=%d tensors=%zu submitted=%zu "
      "elements=%lld fast_rounds=%llu\n",
      allreduce_only ? "allreduce"
      : churn        ? "churn"
                     : "steps",
      kolo::rank(), kolo::size(), steps, all.size(), submitted,
      static_cast<long long>(elements),
      static_cast<unsigned long long>(FastRounds()));
  return 0;
}

// The settings before each step of `switch` (-1: unchanged). Steps 1 and 2
// run unfused; step 3 fuses into buffers of at most 4 KiB; step 4 has room
// for 3 cache entries (eviction on every tensor); 5 and 6 are back to the
// defaults.
struct Switch {
  int64_t fusion_threshold, cache_capacity;
};
constexpr Switch kSwitches[] = {
    {-1, -1}, {0, -1}, {-1, 0}, {4096, -1}, {-1, 3}, {int64_t{128} << 20, 1024},
    {-1, -1},
};

int SwitchMode() {
  const std::vector<Spec> specs = StepSpecs(kolo::size());
  int64_t elements = 0;
  int step = 0;
  for (const Switch& s : kSwitches) {
    if (s.fusion_threshold >= 0) {
      if (absl::Status st = kolo::set_fusion_threshold(s.fusion_threshold);
          !st.ok()) {
        return Fail("set_fusion_threshold", st);
      }
    }
    if (s.cache_capacity >= 0) {
      if (absl::Status st = kolo::set_cache_capacity(s.cache_capacity);
          !st.ok()) {
        return Fail("set_cache_capacity", st);
      }
    }
    if (int rc = RunStep(specs, step, &elements); rc != 0) return rc;
    ++step;
  }
  // Invalid settings are refused.
  if (kolo::set_fusion_threshold(-1).code() !=
          absl::StatusCode::kInvalidArgument ||
      kolo::set_cache_capacity(-1).code() !=
          absl::StatusCode::kInvalidArgument) {
    return Fail("negative settings", absl::InternalError("not refused"));
  }
  std::printf(
      "FUS_OK mode=switch rank=%d size=%d steps=%d tensors=%zu "
      "elements=%lld\n",
      kolo::rank(), kolo::size(), step, specs.size(),
      static_cast<long long>(elements));
  return 0;
}

// ---- Metadata changes -------------------------------------------------------

constexpr int kMetadataSteps = 8;
constexpr int kMismatchStep = 4;

// The tensors of `step` on `rank`: see the header. "meta/keep*" never change
// (but ag's first dimension does, every step, on some ranks).
std::vector<Spec> MetadataSpecs(int step, int rank, int n) {
  const bool changed = step >= 2 && step < 7;
  const bool odd = step == kMismatchStep && n >= 2 && rank == n - 1;
  std::vector<Spec> specs;
  int seed = 100;
  constexpr int64_t kKeep[] = {1, 7, 100, 1000, 3, 12};
  for (int k = 0; k < 6; ++k) {
    specs.push_back(Allreduce(absl::StrCat("meta/keep", k), DataType::kFloat32,
                              ReduceOp::kSum, {kKeep[k]}, seed++));
  }
  specs.push_back(
      Allgather("meta/keepag", DataType::kFloat32, {3}, step, seed++));

  Spec shape = Allreduce(
      "meta/shape", DataType::kFloat32, ReduceOp::kSum,
      changed ? std::vector<int64_t>{6, 5} : std::vector<int64_t>{4, 3},
      seed++);
  if (odd) shape.shape = {5, 6};
  specs.push_back(shape);

  Spec dtype =
      Allreduce("meta/dtype", changed ? DataType::kInt32 : DataType::kFloat32,
                ReduceOp::kSum, {10}, seed++);
  if (odd) dtype.dtype = DataType::kFloat64;
  specs.push_back(dtype);

  Spec reduce =
      Allreduce("meta/reduce", DataType::kFloat32,
                changed ? ReduceOp::kMax : ReduceOp::kSum, {9}, seed++);
  if (odd) reduce.op = ReduceOp::kMin;
  specs.push_back(reduce);

  Spec scale =
      Allreduce("meta/scale", DataType::kFloat32, ReduceOp::kSum, {8}, seed++);
  if (changed) {
    scale.prescale = 2.0;
    scale.postscale = 0.5;
  }
  specs.push_back(scale);

  Spec gather = Allgather(
      "meta/gather", DataType::kFloat32,
      changed ? std::vector<int64_t>{4} : std::vector<int64_t>{3}, 1, seed++);
  if (odd) gather.shape = {5};
  specs.push_back(gather);

  // The collective itself changes: allreduce, then allgather.
  specs.push_back(changed
                      ? Allgather("meta/op", DataType::kFloat32, {2}, 2, seed++)
                      : Allreduce("meta/op", DataType::kFloat32, ReduceOp::kSum,
                                  {6}, seed++));

  if (step == kMismatchStep && n >= 2) {
    for (Spec& s : specs) {
      s.expect_error = s.name == "meta/shape" || s.name == "meta/dtype" ||
                       s.name == "meta/reduce" || s.name == "meta/gather";
    }
  }
  return specs;
}

int Metadata(int cached) {
  const int rank = kolo::rank(), n = kolo::size();
  int64_t elements = 0;
  size_t tensors = 0;
  for (int step = 0; step < kMetadataSteps; ++step) {
    const std::vector<Spec> specs = MetadataSpecs(step, rank, n);
    tensors = specs.size();
    for (int again = 0; step == 3 && again < cached; ++again) {
      int64_t ignored = 0;
      if (int rc = RunStep(specs, step, &ignored); rc != 0) return rc;
    }
    if (int rc = RunStep(specs, step, &elements); rc != 0) return rc;
  }
  std::printf(
      "FUS_OK mode=metadata rank=%d size=%d steps=%d tensors=%zu "
      "elements=%lld\n",
      rank, n, kMetadataSteps, tensors, static_cast<long long>(elements));
  return 0;
}

// ---- Timeline
// ----------------------------------------------------------------

std::vector<Spec> TimelineSpecs() {
  std::vector<Spec> specs;
  for (int k = 0; k < 4; ++k) {
    specs.push_back(Allreduce(absl::StrCat("tl/ar", k), DataType::kFloat32,
                              ReduceOp::kSum, {100 + k}, 200 + k));
  }
  specs.push_back(Allgather("tl/ag0", DataType::kFloat32, {2}, 0, 210));
  specs.back().min_rows = 1;
  specs.push_back(Allgather("tl/ag1", DataType::kFloat32, {2}, 1, 211));
  specs.back().min_rows = 1;
  specs.push_back(Broadcast("tl/bc", DataType::kFloat32, {10}, 0, 220));
  specs.push_back(Allreduce("tl/direct", DataType::kFloat32, ReduceOp::kSum,
                            {300000}, 230));
  return specs;
}

int TimelineMode(int steps) {
  const std::vector<Spec> specs = TimelineSpecs();
  int64_t elements = 0;
  for (int step = 0; step < steps; ++step) {
    if (int rc = RunStep(specs, step, &elements); rc != 0) return rc;
  }
  std::printf(
      "FUS_OK mode=timeline rank=%d size=%d steps=%d tensors=%zu "
      "elements=%lld\n",
      kolo::rank(), kolo::size(), steps, specs.size(),
      static_cast<long long>(elements));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: kolo-fusion-worker "
                 "steps|churn|allreduce|switch|metadata|timeline "
                 "[STEPS]\n");
    return 2;
  }
  const std::string mode = argv[1];
  int steps = 4;
  if (argc > 2 && (!absl::SimpleAtoi(argv[2], &steps) || steps < 1)) return 2;
  if (absl::Status s = kolo::init(); !s.ok()) return Fail("init", s);
  int rc;
  if (mode == "steps" || mode == "churn" || mode == "allreduce") {
    rc = Steps(steps, mode == "churn", mode == "allreduce");
  } else if (mode == "switch") {
    rc = SwitchMode();
  } else if (mode == "metadata") {
    rc = Metadata(argc > 2 ? steps : 0);
  } else if (mode == "timeline") {
    rc = TimelineMode(steps);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    rc = 2;
  }
  std::fflush(stdout);
  if (rc != 0) {
    (void)kolo::shutdown();
    return rc;
  }
  if (absl::Status s = kolo::shutdown(); !s.ok()) return Fail("shutdown", s);
  return 0;
}
