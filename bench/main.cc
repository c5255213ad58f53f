// kolo-bench: times kolo's collectives over a series of sizes, checks every
// result, and prints the nccl-tests style table (and optionally JSON). Run it
// under kolorun, e.g. `kolorun -np 2 kolo-bench --op allreduce`. See
// bench/options.h for the flags and bench/report.h for the figures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allreduce/collectives.h"
#include "bench/options.h"
#include "bench/report.h"
#include "bench/workload.h"
#include "kolo/kolo.h"

namespace kolo::bench {
namespace {

// `bytes` rounded down to whole elements (per rank where the size is split).
int64_t RoundedBytes(const BenchOptions& o, int64_t bytes, int n) {
  const auto elem = static_cast<int64_t>(DataTypeSize(o.dtype));
  const int64_t unit = SplitsSize(o.op) ? elem * n : elem;
  return bytes / unit * unit;
}

// One size of one collective on this rank: its buffers, one iteration, and
// the check of its result.
class Case {
 public:
  Case(const BenchOptions& o, int64_t bytes, int rank, int n)
      : o_(o), rank_(rank), n_(n), elem_(DataTypeSize(o.dtype)) {
    count_ = RoundedBytes(o, bytes, n) / static_cast<int64_t>(elem_);
    per_rank_ = SplitsSize(o.op) ? count_ / n : count_;
    switch (o.op) {
      case Collective::kAllreduce:
        in_.resize(count_ * elem_);
        if (!o.inplace) out_.resize(count_ * elem_);
        break;
      case Collective::kAllgather:
        in_.resize(per_rank_ * elem_);
        out_.resize(count_ * elem_);
        break;
      case Collective::kBroadcast:
        in_.resize(count_ * elem_);
        break;
      case Collective::kAlltoall:
      case Collective::kReducescatter:
        in_.resize(count_ * elem_);
        out_.resize((o.op == Collective::kAlltoall ? count_ : per_rank_) *
                    elem_);
        break;
    }
    splits_.assign(n, per_rank_);
    Restore();
  }

  int64_t bytes() const { return count_ * static_cast<int64_t>(elem_); }
  int64_t count() const { return count_; }

  // Refills the input (needed before each in-place allreduce).
  void Restore() {
    switch (o_.op) {
      case Collective::kAllreduce:
      case Collective::kReducescatter:
        InputStream(o_.dtype, o_.reduce, rank_).Fill(0, count_, in_.data());
        break;
      case Collective::kAllgather:
        InputStream(o_.dtype, ReduceOp::kSum, rank_ + 1)
            .Fill(0, per_rank_, in_.data());
        break;
      case Collective::kBroadcast:
        if (rank_ == o_.root) {
          InputStream(o_.dtype, ReduceOp::kSum, o_.root)
              .Fill(0, count_, in_.data());
        } else {
          Poison(in_.data(), in_.size());
        }
        break;
      case Collective::kAlltoall:
        for (int j = 0; j < n_; ++j) {
          InputStream(o_.dtype, ReduceOp::kSum, int64_t{rank_} * n_ + j)
              .Fill(0, per_rank_, in_.data() + j * per_rank_ * elem_);
        }
        break;
    }
  }
  bool NeedsRestore() const {
    return o_.inplace && o_.op == Collective::kAllreduce;
  }

  // Overwrites the result so that the check sees this iteration's output.
  void PoisonResult() {
    if (o_.inplace) {
      if (o_.op == Collective::kBroadcast) Restore();  // non-roots poisoned
      return;  // in-place allreduce: the input was just restored
    }
    Poison(out_.data(), out_.size());
  }

  absl::Status RunOnce() {
    switch (o_.op) {
      case Collective::kAllreduce:
        return kolo::allreduce(in_.data(),
                               o_.inplace ? in_.data() : out_.data(), count_,
                               o_.dtype, o_.reduce);
      case Collective::kAllgather:
        return kolo::allgather(in_.data(), per_rank_, o_.dtype, splits_,
                               out_.data());
      case Collective::kBroadcast:
        return kolo::broadcast(in_.data(), count_, o_.dtype, o_.root);
      case Collective::kAlltoall:
        return kolo::alltoall(in_.data(), o_.dtype, splits_, out_.data(),
                              splits_);
      case Collective::kReducescatter:
        return kolo::reducescatter(in_.data(), count_, o_.dtype, splits_,
                                   out_.data(), o_.reduce);
    }
    return absl::InternalError("unknown collective");
  }

  // Flips a byte of the result (--corrupt-rank).
  void Corrupt() {
    std::vector<char>& result = out_.empty() ? in_ : out_;
    if (!result.empty()) result[0] = static_cast<char>(result[0] ^ 0x21);
  }

  absl::Status Check() const {
    const std::string what =
        absl::StrCat(CollectiveName(o_.op), " of ", bytes(), " B on rank ",
                     rank_, " of ", n_);
    const char* result = out_.empty() ? in_.data() : out_.data();
    switch (o_.op) {
      case Collective::kAllreduce:
        return ExpectedReduction(o_.dtype, o_.reduce, n_)
            .Check(0, count_, result, what);
      case Collective::kReducescatter:
        return ExpectedReduction(o_.dtype, o_.reduce, n_)
            .Check(rank_ * per_rank_, per_rank_, result, what);
      case Collective::kBroadcast:
        return InputStream(o_.dtype, ReduceOp::kSum, o_.root)
            .Check(0, count_, result, what);
      case Collective::kAllgather:
      case Collective::kAlltoall:
        for (int j = 0; j < n_; ++j) {
          const int64_t stream =
              o_.op == Collective::kAllgather ? j + 1 : int64_t{j} * n_ + rank_;
          absl::Status st =
              InputStream(o_.dtype, ReduceOp::kSum, stream)
                  .Check(0, per_rank_, result + j * per_rank_ * elem_,
                         absl::StrCat(what, ", block from rank ", j));
          if (!st.ok()) return st;
        }
        return absl::OkStatus();
    }
    return absl::InternalError("unknown collective");
  }

 private:
  const BenchOptions& o_;
  const int rank_, n_;
  const size_t elem_;
  int64_t per_rank_ = 0, count_ = 0;
  std::vector<char> in_, out_;
  std::vector<int64_t> splits_;
};

double Micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Max over ranks of each value (one allreduce of float64s).
absl::Status MaxOverRanks(std::vector<double>& values) {
  return kolo::allreduce(values.data(), values.data(),
                         static_cast<int64_t>(values.size()),
                         DataType::kFloat64, ReduceOp::kMax);
}

int Fail(int rank, const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "kolo-bench: rank %d: %s: %s\n", rank, what.c_str(),
               st.ToString().c_str());
  return 1;
}

// Runs one size; fills `row` (meaningful on every rank). Returns a collective
// failure; a failed check is row.check_ok == false.
absl::Status RunSize(const BenchOptions& o, int64_t size, Row& row) {
  const int rank = kolo::rank(), n = kolo::size();
  Case c(o, size, rank, n);
  using Clock = std::chrono::steady_clock;
  std::vector<double> warm;
  for (int i = 0; i < std::max(o.warmup, o.iters > 0 ? 0 : 1); ++i) {
    if (c.NeedsRestore()) c.Restore();
    const Clock::time_point t0 = Clock::now();
    if (absl::Status st = c.RunOnce(); !st.ok()) return st;
    warm.push_back(Micros(Clock::now() - t0));
  }
  int64_t iters = o.iters;
  if (iters == 0) {  // every rank must run the same number of iterations
    std::vector<double> estimate = {Median(warm)};
    if (absl::Status st = MaxOverRanks(estimate); !st.ok()) return st;
    iters = static_cast<int64_t>(o.seconds * 1e6 / std::max(estimate[0], 1.0));
    iters = std::clamp<int64_t>(iters, 5, 1000000);
  }
  std::vector<double> times;
  times.reserve(iters);
  for (int64_t i = 0; i < iters; ++i) {
    if (c.NeedsRestore()) c.Restore();
    if (i + 1 == iters) c.PoisonResult();
    const Clock::time_point t0 = Clock::now();
    if (absl::Status st = c.RunOnce(); !st.ok()) return st;
    times.push_back(Micros(Clock::now() - t0));
  }
  if (rank == o.corrupt_rank) c.Corrupt();
  const absl::Status check = c.Check();
  if (!check.ok()) {
    std::fprintf(stderr, "kolo-bench: CHECK FAILED: %s\n",
                 std::string(check.message()).c_str());
  }
  const double median = Median(times);
  std::vector<double> agreed = {median, -median, check.ok() ? 0.0 : 1.0};
  if (absl::Status st = MaxOverRanks(agreed); !st.ok()) return st;
  row.op = std::string(CollectiveName(o.op));
  row.ranks = n;
  row.bytes = c.bytes();
  row.count = c.count();
  row.dtype = std::string(DataTypeName(o.dtype));
  row.reduce = Reduces(o.op) ? std::string(ReduceOpName(o.reduce)) : "";
  row.inplace = o.inplace;
  row.iters = iters;
  row.time_us = agreed[0];
  row.min_time_us = -agreed[1];
  row.check_ok = agreed[2] == 0;
  ComputeBandwidth(o.op, row);
  return absl::OkStatus();
}

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

int Main(int argc, char** argv) {
  absl::StatusOr<BenchOptions> parsed =
      ParseBenchOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::fprintf(stderr, "kolo-bench: %s\n%s",
                 std::string(parsed.status().message()).c_str(),
                 Usage().c_str());
    return 2;
  }
  const BenchOptions& o = *parsed;
  if (o.help) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  if (absl::Status st = kolo::init(); !st.ok()) return Fail(-1, "init", st);
  const int rank = kolo::rank(), n = kolo::size();
  if (o.root >= n) {
    std::fprintf(stderr,
                 "kolo-bench: --root %d is not a rank of this %d-rank "
                 "job\n",
                 o.root, n);
    (void)kolo::shutdown();
    return 2;
  }
  if (rank == 0) {
    std::printf(
        "# kolo-bench: %s, %d ranks, %s%s%s, %s; algorithm %s, small "
        "allreduce <= %s B, spin %s us\n",
        std::string(CollectiveName(o.op)).c_str(), n,
        std::string(DataTypeName(o.dtype)).c_str(), Reduces(o.op) ? " " : "",
        Reduces(o.op) ? std::string(ReduceOpName(o.reduce)).c_str() : "",
        o.inplace ? "in place" : "out of place",
        EnvOr("KOLO_ALLREDUCE_ALGORITHM", "auto").c_str(),
        EnvOr("KOLO_SMALL_ALLREDUCE_BYTES",
              std::to_string(DefaultSmallBytes(n)).c_str())
            .c_str(),
        EnvOr("KOLO_SPIN_US", "default").c_str());
    std::fputs(TableHeader().c_str(), stdout);
    std::fflush(stdout);
  }
  std::vector<Row> rows;
  bool all_ok = true;
  for (int64_t size : SizeSeries(o.min_bytes, o.max_bytes, o.factor)) {
    // Sizes that round down to the same number of elements run once.
    if (!rows.empty() && RoundedBytes(o, size, n) == rows.back().bytes) {
      continue;
    }
    Row row;
    if (absl::Status st = RunSize(o, size, row); !st.ok()) {
      return Fail(rank, absl::StrCat(CollectiveName(o.op), " of ", size, " B"),
                  st);
    }
    all_ok &= row.check_ok;
    rows.push_back(row);
    if (rank == 0) {
      std::fputs(TableLine(row).c_str(), stdout);
      std::fflush(stdout);
    }
  }
  if (rank == 0 && !o.json_path.empty()) {
    std::ofstream json(o.json_path);
    json << ToJson(rows);
    json.close();
    if (!json) {
      std::fprintf(stderr, "kolo-bench: could not write %s\n",
                   o.json_path.c_str());
      all_ok = false;
    }
  }
  if (absl::Status st = kolo::shutdown(); !st.ok()) {
    return Fail(rank, "shutdown", st);
  }
  if (!all_ok && rank == 0) {
    std::fprintf(stderr, "kolo-bench: a result check failed (see above)\n");
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) { return kolo::bench::Main(argc, argv); }
