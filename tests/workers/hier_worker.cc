// kolo-hier-worker: the collectives a hierarchical job runs, checked exactly
// and summarised so that runs can be compared, for
// tests/multiprocess_hierarchical_test.cc and multiprocess_netns_test.cc.
//
// Runs, through the public blocking API (negotiated): allreduce of float32
// and int32 with sum, average, min and max at counts 0, 1, 7, 4099 and
// 262147 (~1 MiB of float32), in place and out of place; allgather with
// uneven counts (one rank contributes nothing); broadcast from every root;
// reducescatter (sum, uneven counts); and through the raw data plane a
// 1 MiB float32 allreduce. Inputs are small integers
// (tests/testing/collective_data.h), so every result is exact and checked
// against its expectation bit for bit, whatever the reduction order. Then an
// allreduce of random floats (same seed on every run), whose bits depend on
// the order, so ranks of one run must agree on them but runs with another
// algorithm need not.
//
// Prints, on success,
//   HIER_OK rank=R size=N cases=K digest=D scatter=S random=X
// where D is a digest (FNV-1a) of every exact output in call order that all
// ranks share (all but reducescatter's), equal on every rank and across
// KOLO_HIERARCHICAL settings, S the digest of this rank's reducescatter
// blocks (equal across settings), and X the digest of the random-float
// result; on the first mismatch or error,
//   HIER_FAIL rank=R what=...
// and exits 1.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kolo/kolo.h"
#include "tests/testing/collective_data.h"
#include "worker_lib/api/raw.h"

namespace kolo::testing {
namespace {

class Digest {
 public:
  void Add(const void* data, size_t len) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < len; ++i) {
      h_ ^= p[i];
      h_ *= 1099511628211ull;
    }
  }
  std::string Hex() const { return absl::StrCat(absl::Hex(h_)); }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

struct Run {
  int rank = 0;
  int size = 1;
  int64_t cases = 0;
  Digest digest;   // results equal on every rank
  Digest scatter;  // this rank's reducescatter blocks

  [[noreturn]] void Fail(const std::string& what) {
    std::printf("HIER_FAIL rank=%d what=%s\n", rank, what.c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  void Ok(const absl::Status& st, const std::string& what) {
    if (!st.ok()) Fail(absl::StrCat(what, ": ", st.ToString()));
  }
  // got must equal want bytewise; it then joins `into` (the digest of the
  // results every rank shares, by default).
  void Same(const Bytes& got, const Bytes& want, size_t elem,
            const std::string& what, Digest* into = nullptr) {
    const std::string diff = Diff(got, want, elem);
    if (!diff.empty()) Fail(absl::StrCat(what, ": ", diff));
    (into != nullptr ? into : &digest)->Add(got.data(), got.size());
    ++cases;
  }
};

constexpr int64_t kCounts[] = {0, 1, 7, 4099, 262147};

void Allreduces(Run& run) {
  int index = 0;
  for (int64_t count : kCounts) {
    for (DataType type : {DataType::kFloat32, DataType::kInt32}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                          ReduceOp::kMax}) {
        const bool in_place = index++ % 2 == 1;
        const std::string what =
            CaseName(run.size, type, op, count,
                     in_place ? "allreduce in place" : "allreduce");
        Bytes in = Input(type, op, run.rank, 0, count);
        Bytes out(in.size(), '\xcd');
        Bytes& result = in_place ? in : out;
        run.Ok(kolo::allreduce(in.data(), result.data(), count, type, op),
               what);
        run.Same(result, Expected(type, op, run.size, 0, count),
                 DataTypeSize(type), what);
      }
    }
  }
  // The raw data plane (no negotiation, no fusion buffer).
  const int64_t count = 262147;
  Bytes buf = Input(DataType::kFloat32, ReduceOp::kSum, run.rank, 0, count);
  run.Ok(
      kolo::raw::allreduce(buf.data(), buf.data(), count, DataType::kFloat32),
      "raw allreduce");
  run.Same(buf,
           Expected(DataType::kFloat32, ReduceOp::kSum, run.size, 0, count), 4,
           "raw allreduce");
}

void Allgathers(Run& run) {
  const int n = run.size;
  for (int64_t base : kCounts) {
    for (DataType type : {DataType::kFloat32, DataType::kInt32}) {
      const size_t elem = DataTypeSize(type);
      std::vector<int64_t> counts(n);
      for (int p = 0; p < n; ++p) counts[p] = p == n / 2 ? 0 : base + p;
      std::vector<Bytes> inputs(n);
      Bytes want;
      for (int p = 0; p < n; ++p) {
        inputs[p] = Pattern(1000 * base + 10 * p + static_cast<int>(type),
                            static_cast<size_t>(counts[p]) * elem);
        want.insert(want.end(), inputs[p].begin(), inputs[p].end());
      }
      Bytes out(want.size(), '\xcd');
      const std::string what =
          CaseName(n, type, ReduceOp::kSum, base, "allgather");
      run.Ok(kolo::allgather(inputs[run.rank].data(), counts[run.rank], type,
                             counts, out.data()),
             what);
      run.Same(out, want, elem, what);
    }
  }
}

void Broadcasts(Run& run) {
  for (int64_t count : kCounts) {
    for (int root = 0; root < run.size; ++root) {
      const Bytes want =
          Pattern(7000 + 10 * count + root, static_cast<size_t>(count) * 4);
      Bytes data = run.rank == root ? want : Bytes(want.size(), '\xcd');
      const std::string what =
          CaseName(run.size, DataType::kFloat32, ReduceOp::kSum, count,
                   absl::StrCat("broadcast root ", root));
      run.Ok(kolo::broadcast(data.data(), count, DataType::kFloat32, root),
             what);
      run.Same(data, want, 4, what);
    }
  }
}

void Reducescatters(Run& run) {
  const int n = run.size;
  for (int64_t base : kCounts) {
    std::vector<int64_t> counts(n);
    for (int p = 0; p < n; ++p) counts[p] = p == 1 ? 0 : base + p;
    const int64_t total = Total(counts);
    const Bytes in =
        Input(DataType::kInt32, ReduceOp::kSum, run.rank, 0, total);
    Bytes out(static_cast<size_t>(counts[run.rank]) * 4, '\xcd');
    int64_t offset = 0;
    for (int p = 0; p < run.rank; ++p) offset += counts[p];
    const std::string what =
        CaseName(n, DataType::kInt32, ReduceOp::kSum, base, "reducescatter");
    run.Ok(kolo::reducescatter(in.data(), total, DataType::kInt32, counts,
                               out.data()),
           what);
    run.Same(
        out,
        Expected(DataType::kInt32, ReduceOp::kSum, n, offset, counts[run.rank]),
        4, what, &run.scatter);
  }
}

// Random floats: the result's bits depend on the reduction order.
std::string RandomFloats(Run& run) {
  const int64_t count = 100003;
  std::mt19937 rng(1234u + static_cast<unsigned>(run.rank));
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  run.Ok(kolo::allreduce(v.data(), v.data(), count, DataType::kFloat32,
                         ReduceOp::kAverage),
         "random float32 average");
  Digest d;
  d.Add(v.data(), v.size() * sizeof(float));
  return d.Hex();
}

int Main() {
  absl::Status st = kolo::init();
  if (!st.ok()) {
    std::printf("HIER_FAIL rank=-1 what=init: %s\n", st.ToString().c_str());
    return 1;
  }
  Run run;
  run.rank = kolo::rank();
  run.size = kolo::size();
  Allreduces(run);
  Allgathers(run);
  Broadcasts(run);
  Reducescatters(run);
  const std::string random = RandomFloats(run);
  st = kolo::shutdown();
  if (!st.ok()) run.Fail(absl::StrCat("shutdown: ", st.ToString()));
  std::printf(
      "HIER_OK rank=%d size=%d cases=%lld digest=%s scatter=%s random=%s\n",
      run.rank, run.size, static_cast<long long>(run.cases),
      run.digest.Hex().c_str(), run.scatter.Hex().c_str(), random.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace kolo::testing

int main() { return kolo::testing::Main(); }
