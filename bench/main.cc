// kolo-bench: times kolo's collectives over a series of sizes, checks every
// result, and prints the nccl-tests style table (and optionally JSON). Run it
// under kolorun, e.g. `kolorun -np 2 kolo-bench --op allreduce`. See
// bench/options.h for the flags, bench/case.h for one iteration in each
// --mode, bench/step.h for --mode step (one training step's tensors), and
// bench/report.h for the figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allreduce/collectives.h"
#include "bench/case.h"
#include "bench/options.h"
#include "bench/plot.h"
#include "bench/report.h"
#include "bench/step.h"
#include "kolo/kolo.h"

namespace kolo::bench {
namespace {

double Micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

int Fail(int rank, const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "kolo-bench: rank %d: %s: %s\n", rank, what.c_str(),
               st.ToString().c_str());
  return 1;
}

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
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
    BusyFor(o.gap_us);
    const Clock::time_point t0 = Clock::now();
    if (absl::Status st = c.RunOnce(); !st.ok()) return st;
    warm.push_back(Micros(Clock::now() - t0));
  }
  int64_t iters = o.iters;
  if (iters == 0) {  // every rank must run the same number of iterations
    std::vector<double> estimate = {Median(warm)};
    if (absl::Status st = MaxOverRanks(o.mode, estimate); !st.ok()) return st;
    iters = static_cast<int64_t>(o.seconds * 1e6 / std::max(estimate[0], 1.0));
    iters = std::clamp<int64_t>(iters, 5, 1000000);
  }
  std::vector<double> times;
  times.reserve(iters);
  for (int64_t i = 0; i < iters; ++i) {
    if (c.NeedsRestore()) c.Restore();
    if (i + 1 == iters) c.PoisonResult();
    BusyFor(o.gap_us);
    const Clock::time_point t0 = Clock::now();
    if (absl::Status st = c.RunOnce(); !st.ok()) return st;
    times.push_back(Micros(Clock::now() - t0));
  }
  if (absl::Status st = c.Download(); !st.ok()) return st;
  if (rank == o.corrupt_rank) c.Corrupt();
  const absl::Status check = c.Check();
  if (!check.ok()) {
    std::fprintf(stderr, "kolo-bench: CHECK FAILED: %s\n",
                 std::string(check.message()).c_str());
  }
  const double median = Median(times);
  std::vector<double> agreed = {median, -median, Percentile(times, 90),
                                check.ok() ? 0.0 : 1.0};
  if (absl::Status st = MaxOverRanks(o.mode, agreed); !st.ok()) return st;
  row.op = std::string(CollectiveName(o.op));
  row.mode = std::string(ModeName(o.mode));
  if (o.cuda) {
    row.mode += EnvOr("KOLO_CUDA_STAGING", "0") == std::string("1")
                    ? "+cuda-staging"
                    : "+cuda";
  }
  row.ranks = n;
  row.bytes = c.bytes();
  row.count = c.count();
  row.dtype = std::string(DataTypeName(o.dtype));
  row.reduce = Reduces(o.op) ? std::string(ReduceOpName(o.reduce)) : "";
  row.inplace = o.inplace;
  row.iters = iters;
  row.time_us = agreed[0];
  row.min_time_us = -agreed[1];
  row.p90_us = agreed[2];
  row.check_ok = agreed[3] == 0;
  ComputeBandwidth(o.op, row);
  return absl::OkStatus();
}

// The first line (what runs, and the settings from the environment that
// shape it) and the table header; rank 0 prints them.
void PrintBanner(const BenchOptions& o, int n) {
  const std::string cycle_ms =
      EnvOr("KOLO_CYCLE_TIME_MS", EnvOr("HOROVOD_CYCLE_TIME", "1").c_str());
  const std::string gap =
      o.gap_us > 0 ? absl::StrCat("; busy ", o.gap_us, " us before each ",
                                  o.mode == Mode::kStep ? "step" : "iteration")
                   : "";
  if (o.mode == Mode::kStep) {
    const Preset preset = *o.preset;
    std::printf(
        "# kolo-bench: step, %s (%zu float32 tensors, %.2f MiB), %d ranks, "
        "average allreduce, %s, reverse order, %d warm-up + %d "
        "timed steps per setting; env: fusion threshold %s, cache capacity "
        "%s, cycle time %s ms, algorithm %s, spin %s us%s\n",
        std::string(PresetName(preset)).c_str(), PresetCounts(preset).size(),
        static_cast<double>(PresetBytes(preset)) / (1 << 20), n,
        o.inplace ? "in place" : "out of place", o.warmup, o.steps,
        EnvOr("KOLO_FUSION_THRESHOLD",
              EnvOr("HOROVOD_FUSION_THRESHOLD", "default").c_str())
            .c_str(),
        EnvOr("KOLO_CACHE_CAPACITY",
              EnvOr("HOROVOD_CACHE_CAPACITY", "default").c_str())
            .c_str(),
        cycle_ms.c_str(), EnvOr("KOLO_ALLREDUCE_ALGORITHM", "auto").c_str(),
        EnvOr("KOLO_SPIN_US", "default").c_str(), gap.c_str());
    std::fputs(StepTableHeader().c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  const std::string cycle = o.mode == Mode::kNegotiated
                                ? absl::StrCat(", cycle time ", cycle_ms, " ms")
                                : "";
  std::printf(
      "# kolo-bench: %s, %d ranks, %s%s%s, %s, %s mode; algorithm %s, "
      "small allreduce <= %s B, spin %s us, hierarchical %s, data "
      "encryption %s%s%s\n",
      std::string(CollectiveName(o.op)).c_str(), n,
      std::string(DataTypeName(o.dtype)).c_str(), Reduces(o.op) ? " " : "",
      Reduces(o.op) ? std::string(ReduceOpName(o.reduce)).c_str() : "",
      o.inplace ? "in place" : "out of place",
      o.cuda ? absl::StrCat(ModeName(o.mode), ", CUDA tensors (",
                            EnvOr("KOLO_CUDA_STAGING", "0") == "1"
                                ? "staged through host memory"
                                : "NCCL where usable",
                            ")")
                   .c_str()
             : std::string(ModeName(o.mode)).c_str(),
      EnvOr("KOLO_ALLREDUCE_ALGORITHM", "auto").c_str(),
      EnvOr("KOLO_SMALL_ALLREDUCE_BYTES",
            std::to_string(DefaultSmallBytes(n)).c_str())
          .c_str(),
      EnvOr("KOLO_SPIN_US", "default").c_str(),
      EnvOr("KOLO_HIERARCHICAL",
            EnvOr("HOROVOD_HIERARCHICAL_ALLREDUCE", "auto").c_str())
          .c_str(),
      EnvOr("KOLO_DATA_ENCRYPTION", "none").c_str(), cycle.c_str(),
      gap.c_str());
  std::fputs(TableHeader().c_str(), stdout);
  std::fflush(stdout);
}

// --plot's preparation, on rank 0: gnuplot is there, and the peers' report
// (if any) has a table for `n` ranks, read into `peers`. "" when all is
// well, else what is wrong.
std::string PreparePlot(const BenchOptions& o, int n,
                        std::vector<PlotSeries>& peers) {
  if (absl::StatusOr<std::string> g = FindGnuplot(); !g.ok()) {
    return std::string(g.status().message());
  }
  if (o.plot_peers_path.empty()) return "";
  std::ifstream in(o.plot_peers_path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::StrCat("--plot-peers: cannot read ", o.plot_peers_path);
  }
  absl::StatusOr<std::vector<PlotSeries>> parsed =
      ParsePeerBench(text.str(), n);
  if (!parsed.ok()) {
    return absl::StrCat("--plot-peers ", o.plot_peers_path, ": ",
                        parsed.status().message());
  }
  peers = *std::move(parsed);
  return "";
}

// Rank 0 draws the sweep (and the peers) into --plot's file.
absl::Status Draw(const BenchOptions& o, int n, const std::vector<Row>& rows,
                  const std::vector<PlotSeries>& peers) {
  PlotSpec spec;
  spec.path = o.plot_path;
  spec.format = *PlotFormatOf(o.plot_path);
  spec.ranks = n;
  spec.title = absl::StrCat(
      "kolo-bench: ", CollectiveName(o.op), " ", DataTypeName(o.dtype),
      Reduces(o.op) ? absl::StrCat(" ", ReduceOpName(o.reduce)) : "", ", ", n,
      n == 1 ? " rank" : " ranks", ", ", ModeName(o.mode), " mode",
      o.plot_peers_path.empty()
          ? ""
          : absl::StrCat("; peers from ", o.plot_peers_path));
  std::vector<PlotSeries> series = {SeriesFromRows("kolo", rows)};
  series.insert(series.end(), peers.begin(), peers.end());
  return DrawPlot(spec, series);
}

// The size sweep of --mode raw / negotiated; rank 0 prints each row. On a
// failed collective returns 1 after printing it; else 0 and the rows.
int RunSweep(const BenchOptions& o, std::vector<Row>& rows) {
  const int rank = kolo::rank(), n = kolo::size();
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
    rows.push_back(row);
    if (rank == 0) {
      std::fputs(TableLine(row).c_str(), stdout);
      std::fflush(stdout);
    }
  }
  return 0;
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
  if (o.version) {
    std::printf("kolo-bench (kolo) %s\n", KOLO_VERSION_STRING);
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
  std::vector<PlotSeries> peers;
  if (!o.plot_path.empty()) {  // before the sweep, not after it
    const std::string problem = rank == 0 ? PreparePlot(o, n, peers) : "";
    std::vector<double> bad = {problem.empty() ? 0.0 : 1.0};
    if (absl::Status st = MaxOverRanks(o.mode, bad); !st.ok()) {
      return Fail(rank, "--plot", st);
    }
    if (bad[0] != 0) {
      if (rank == 0) std::fprintf(stderr, "kolo-bench: %s\n", problem.c_str());
      (void)kolo::shutdown();
      return 2;
    }
  }
  if (rank == 0) PrintBanner(o, n);
  bool all_ok = true;
  bool plot_ok = true;
  std::string json_text;
  if (o.mode == Mode::kStep) {
    std::vector<StepRow> rows;
    if (absl::Status st = RunStepMode(o, rows); !st.ok()) {
      return Fail(rank, "--mode step", st);
    }
    for (const StepRow& row : rows) all_ok &= row.check_ok;
    json_text = StepToJson(rows);
  } else {
    std::vector<Row> rows;
    if (int failed = RunSweep(o, rows); failed != 0) return failed;
    for (const Row& row : rows) all_ok &= row.check_ok;
    json_text = ToJson(rows);
    if (rank == 0 && !o.plot_path.empty()) {
      if (absl::Status st = Draw(o, n, rows, peers); !st.ok()) {
        std::fprintf(stderr, "kolo-bench: %s\n",
                     std::string(st.message()).c_str());
        plot_ok = false;
      } else {
        std::printf("# plot: %s\n", o.plot_path.c_str());
      }
    }
  }
  if (rank == 0 && !o.json_path.empty()) {
    std::ofstream json(o.json_path);
    json << json_text;
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
  return all_ok && plot_ok ? 0 : 1;
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) { return kolo::bench::Main(argc, argv); }
