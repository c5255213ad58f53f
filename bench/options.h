// BenchOptions: kolo-bench's command line, parsed once into one struct.
//
//   kolo-bench [--op allreduce|allgather|broadcast|alltoall|reducescatter]
//              [--mode raw|negotiated] [--dtype float32] [--reduce sum]
//              [--min-bytes 4] [--max-bytes 64M] [--factor 4]
//              [--iters N | --seconds 1] [--warmup 3] [--root 0] [--inplace]
//              [--gap-us 0]
//              [--device cpu|cuda] [--json FILE] [--corrupt-rank R]
//              [--plot FILE.png|FILE.svg [--plot-peers PEER_BENCH_REPORT]]
//   kolo-bench --mode step --preset resnet50|small161 [--steps 20]
//              [--warmup 3] [--fusion-threshold LIST] [--cache-capacity LIST]
//              [--gap-us 0] [--json FILE] [--corrupt-rank R]
//
// Sizes take K, M, G suffixes (powers of 1024, as nccl-tests). Every size is
// the nccl-tests "size": the allreduce/broadcast buffer, allgather's output,
// reducescatter's input, alltoall's per-rank input; it is rounded down to a
// whole number of elements (and, for allgather/alltoall/reducescatter, of
// elements per rank) at run time. --mode raw times the data plane alone
// (kolo::raw::*); --mode negotiated times each op submitted through the
// asynchronous API and synchronized, as a framework sees it. --corrupt-rank
// flips one output byte on that rank after the last iteration, to prove the
// result check fails. --plot draws the sweep (bench/plot.h); --plot-peers
// adds the peers of a scripts/peer-bench.sh report (allreduce only).
//
// --mode step times a training step instead of a size sweep: the preset's
// tensors (bench/presets.h) submitted as float32 average allreduces, out of
// place (--inplace: in place, as Horovod's optimizer reduces gradients), in
// reverse order, then synchronized together; once per combination
// of --fusion-threshold x --cache-capacity (comma-separated lists; none =
// the job's KOLO_FUSION_THRESHOLD / KOLO_CACHE_CAPACITY, shown as "env").
// The sweep's flags (--op other than allreduce, --dtype other than float32,
// --reduce other than average, sizes, --iters, --seconds, --root) are
// refused in step mode, and the step flags outside it.
//
// Thread-safety: pure functions.
#ifndef KOLO_BENCH_OPTIONS_H_
#define KOLO_BENCH_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/presets.h"
#include "kolo/types.h"

namespace kolo::bench {

enum class Collective {
  kAllreduce,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReducescatter
};
absl::string_view CollectiveName(Collective op);
// How kolo-bench calls the collectives: kRaw = kolo::raw::* (the data plane
// without negotiation), kNegotiated = kolo::*_async + synchronize, kStep =
// one training step of a preset's tensors through the asynchronous API.
enum class Mode { kRaw, kNegotiated, kStep };
absl::string_view ModeName(Mode mode);  // "raw", "negotiated", "step"

// Whether `op` reduces (takes --reduce): allreduce, reducescatter.
bool Reduces(Collective op);
// Whether `op`'s size is split evenly over the ranks: allgather (output),
// alltoall and reducescatter (input).
bool SplitsSize(Collective op);

struct BenchOptions {
  Collective op = Collective::kAllreduce;
  Mode mode = Mode::kRaw;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce = ReduceOp::kSum;  // allreduce and reducescatter only
  int64_t min_bytes = 4;
  int64_t max_bytes = int64_t{64} << 20;
  double factor = 4;   // each size is the previous one times this (> 1)
  int64_t iters = 0;   // > 0: exactly this many timed iterations per size
  double seconds = 1;  // iters == 0: about this long per size (>= 5 iters)
  int warmup = 3;      // untimed iterations per size
  int root = 0;        // broadcast root
  bool inplace = false;
  // Busy work on the caller's thread before each iteration or step, outside
  // the timed part: a training step's compute between its collectives (kolo's
  // background thread meanwhile has nothing to do). 0: back to back.
  int64_t gap_us = 0;
  // --device cuda (--mode negotiated only): the buffers are CUDA device
  // memory on device local_rank % device count; kolo runs them on NCCL or,
  // with KOLO_CUDA_STAGING=1, through host memory. Results are checked as
  // on the host (copied back outside the timed region).
  bool cuda = false;
  std::string json_path;        // "" = no JSON
  std::string plot_path;        // "" = no picture; else ends in .png/.svg
  std::string plot_peers_path;  // "" = no peers; requires plot_path
  int corrupt_rank = -1;        // -1 = none
  bool help = false;
  bool version = false;  // --version: print it and exit
  // --mode step only (required there, refused elsewhere):
  std::optional<Preset> preset;
  int steps = 20;  // timed steps per setting (untimed: warmup)
  // Settings to compare, each applied with kolo::set_fusion_threshold /
  // set_cache_capacity; empty = leave the job's setting.
  std::vector<int64_t> fusion_thresholds;  // bytes
  std::vector<int64_t> cache_capacities;   // entries
};

// One combination of --mode step's settings; kFromEnv = leave the job's.
struct StepSetting {
  static constexpr int64_t kFromEnv = -1;
  int64_t fusion_threshold = kFromEnv;  // bytes
  int64_t cache_capacity = kFromEnv;    // entries
};
// Every threshold x capacity, thresholds outermost, in the order given; one
// kFromEnv entry stands for an empty list.
std::vector<StepSetting> StepSettings(const BenchOptions& o);

// Parses argv[1..argc), with CLI11 ("--flag value" or "--flag=value"; the
// last of a repeated flag wins). Unknown flags, missing or bad values, min >
// max, factor <= 1, a reduce op or --inplace that the collective does not take,
// --mode step without --preset, and flags of the other mode are
// kInvalidArgument naming the flag and what is accepted.
absl::StatusOr<BenchOptions> ParseBenchOptions(
    const std::vector<std::string>& args);

// "64M" -> 67108864, "1K" -> 1024, "4" -> 4; kInvalidArgument otherwise.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text);

// The sizes from min to max: min, min*factor, ... (each rounded down to an
// integer, strictly increasing), never above max.
std::vector<int64_t> SizeSeries(int64_t min_bytes, int64_t max_bytes,
                                double factor);

// The usage text.
std::string Usage();

}  // namespace kolo::bench

#endif  // KOLO_BENCH_OPTIONS_H_
