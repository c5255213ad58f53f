// kolo-collectives-worker (collectives_worker.h): the error cases. Each
// must fail on every rank with a code and message that
// tests/multiprocess_collectives_test.cc checks, and a good allreduce right
// after it must work (the job goes on).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tests/workers/collectives_worker.h"

namespace collectives_worker {
namespace {

absl::Status Run(const absl::StatusOr<Handle>& h) {
  if (!h.ok()) return h.status();
  return kolo::synchronize(*h, kWait);
}

// A good allreduce after an error: the job goes on.
bool GoodAfter(const std::string& name) {
  std::vector<int64_t> v = {g_rank + 1, 5};
  Tensor t{DataType::kInt64, {2}, v.data()};
  absl::Status s = Run(kolo::allreduce_async(t, t, {}, "good/" + name));
  const int64_t n = g_size;
  return s.ok() && v[0] == n * (n + 1) / 2 && v[1] == 5 * n;
}

struct ErrorCase {
  std::string name;
  std::function<absl::Status(const std::string&)> run;
};

std::vector<ErrorCase> ErrorCases() {
  const int n = g_size, rank = g_rank;
  const bool last = rank == n - 1;  // the rank that disagrees
  // Buffers large enough for every case below.
  auto f = std::make_shared<std::vector<float>>(64, 1.0f);
  auto fo = std::make_shared<std::vector<float>>(64, 0.0f);
  auto d = std::make_shared<std::vector<double>>(64, 1.0);
  auto i32 = std::make_shared<std::vector<int32_t>>(64, 1);
  auto b = std::make_shared<std::vector<uint8_t>>(64, 1);
  auto scratch = std::make_shared<std::vector<char>>();
  auto alloc =
      [scratch](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t elements = 1;
    for (int64_t dim : shape) elements *= dim;
    scratch->assign(static_cast<size_t>(elements * 8), 0);
    return scratch->data();
  };
  auto ft = [f](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), f->data()};
  };
  auto fout = [fo](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), fo->data()};
  };
  std::vector<int64_t> ones(n, 1), wrong_recv(n, 1);
  // n + 1 elements in all (a job has a rank: the test keeps GCC's
  // -Wnull-dereference from assuming an empty one).
  if (!wrong_recv.empty()) wrong_recv[0] = 2;
  std::vector<int64_t> moved(n, 1);
  if (n >= 2) {  // same total, another distribution
    moved[0] = 2;
    moved[1] = 0;
  }
  const int64_t d0 = 2 * n + 1;
  auto rows_of = [n](int64_t rows, int r) {
    return rows / n + (r < rows % n ? 1 : 0);
  };
  return {
      // Allgather of a scalar, on every rank and on the last rank only.
      {"ag/scalar-all",
       [=](const std::string& nm) {
         return Run(kolo::allgather_async(ft({}), alloc, nm));
       }},
      {"ag/scalar-last",
       [=](const std::string& nm) {
         return Run(kolo::allgather_async(
             ft(last ? std::vector<int64_t>{} : std::vector<int64_t>{2, 3}),
             alloc, nm));
       }},
      {"ag/dtype",
       [=](const std::string& nm) {
         Tensor t =
             last ? Tensor{DataType::kFloat64, {2, 3}, d->data()} : ft({2, 3});
         return Run(kolo::allgather_async(t, alloc, nm));
       }},
      // Alltoall without splits of n + 1 rows; bad splits.
      {"a2a/indivisible",
       [=](const std::string& nm) {
         return Run(kolo::alltoall_async(ft({n + 1, 2}), alloc, {}, nm));
       }},
      {"a2a/indivisible-last",
       [=](const std::string& nm) {
         return Run(
             kolo::alltoall_async(ft({last ? n + 1 : n, 2}), alloc, {}, nm));
       }},
      {"a2a/splits-entries",
       [=](const std::string& nm) {
         std::vector<int64_t> splits(last ? n - 1 : n, 1);
         return Run(kolo::alltoall_async(
             ft({static_cast<int64_t>(splits.size()), 2}), alloc, splits, nm));
       }},
      // The blocking alltoall, whose recv_splits the peers' send_splits
      // contradict on the last rank: more rows in all, or the same number
      // from other ranks.
      {"a2a/recv-splits-total",
       [=](const std::string&) {
         return kolo::alltoall(f->data(), DataType::kFloat32, ones, fo->data(),
                               last ? wrong_recv : ones);
       }},
      {"a2a/recv-splits-moved",
       [=](const std::string&) {
         return kolo::alltoall(f->data(), DataType::kFloat32, ones, fo->data(),
                               last ? moved : ones);
       }},
      // The blocking allgather, whose counts on the last rank say that rank
      // 0 sends two elements; it sends one.
      {"ag/counts-peer",
       [=](const std::string&) {
         return kolo::allgather(f->data(), 1, DataType::kFloat32,
                                last ? wrong_recv : ones, fo->data());
       }},
      // Broadcast: a different root on every rank, a root out of range.
      {"bc/roots-differ",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({6}), rank, nm));
       }},
      {"bc/root-out-of-range",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({6}), n, nm));
       }},
      {"bc/root-negative-last",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({6}), last ? -1 : 0, nm));
       }},
      {"bc/shape",
       [=](const std::string& nm) {
         return Run(kolo::broadcast_async(ft({last ? 7 : 6}), 0, nm));
       }},
      // Reducescatter: shapes differ (row length, then rows), a wrong output
      // shape, counts that do not add up, average of bools.
      {"rs/shape",
       [=](const std::string& nm) {
         const int64_t cols = last ? 2 : 3;
         return Run(kolo::reducescatter_async(
             ft({d0, cols}), fout({rows_of(d0, rank), cols}), {}, {}, nm));
       }},
      {"rs/shape-rows",
       [=](const std::string& nm) {
         const int64_t rows = last ? d0 - 1 : d0;
         return Run(kolo::reducescatter_async(
             ft({rows, 3}), fout({rows_of(rows, rank), 3}), {}, {}, nm));
       }},
      {"rs/output-shape",
       [=](const std::string& nm) {
         const int64_t mine = rows_of(d0, rank) + (last ? 1 : 0);
         return Run(kolo::reducescatter_async(ft({d0, 3}), fout({mine, 3}), {},
                                              {}, nm));
       }},
      {"rs/counts-sum",
       [=](const std::string& nm) {
         return Run(
             kolo::reducescatter_async(ft({n + 1}), fout({1}), {}, ones, nm));
       }},
      {"rs/average-bool",
       [=](const std::string& nm) {
         kolo::AllreduceOptions o;
         o.op = ReduceOp::kAverage;
         return Run(kolo::reducescatter_async(
             Tensor{DataType::kBool, {n}, b->data()},
             Tensor{DataType::kBool, {1}, b->data() + 32}, o, {}, nm));
       }},
      // Allreduce: a wrong output shape, a prescale that is not finite.
      {"ar/output-shape",
       [=](const std::string& nm) {
         return Run(
             kolo::allreduce_async(ft({6}), fout({last ? 5 : 6}), {}, nm));
       }},
      {"ar/prescale-nan",
       [=](const std::string& nm) {
         kolo::AllreduceOptions o;
         o.prescale = NAN;
         return Run(kolo::allreduce_async(ft({6}), fout({6}), o, nm));
       }},
  };
}

}  // namespace

int RunErrorCases() {
  std::vector<ErrorCase> cases = ErrorCases();
  for (ErrorCase& c : cases) {
    absl::Status s = c.run(c.name);
    const bool next = GoodAfter(c.name);
    if (!next) ++g_fails;
    std::printf("COLL_ERR case=%s rank=%d code=%d next=%d\n", c.name.c_str(),
                g_rank, static_cast<int>(s.code()), next ? 1 : 0);
    std::printf("COLL_MSG %s: %s\n", c.name.c_str(),
                std::string(s.message()).c_str());
  }
  return static_cast<int>(cases.size());
}

}  // namespace collectives_worker
