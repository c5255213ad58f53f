// Report: kolo-bench's figures for one size (or, in --mode step, one
// setting) — the statistics (per-rank median and 90th percentile, then max
// over ranks), bandwidths in the nccl-tests convention, and their text and
// JSON forms.
//
// Thread-safety: pure functions on values.
#ifndef KOLO_BENCH_REPORT_H_
#define KOLO_BENCH_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/options.h"

namespace kolo::bench {

struct Row {
  std::string op;
  std::string mode;  // "raw" or "negotiated"
  int ranks = 0;
  int64_t bytes = 0;  // the nccl-tests size actually used
  int64_t count = 0;  // elements of that size
  std::string dtype;
  std::string reduce;  // "" for data-movement collectives
  bool inplace = false;
  int64_t iters = 0;
  double time_us = 0;      // max over ranks of each rank's median
  double min_time_us = 0;  // min over ranks of each rank's median
  double p90_us = 0;       // max over ranks of each rank's 90th percentile
  double algbw = 0;        // GB/s, GB = 1e9 B
  double busbw = 0;
  bool check_ok = false;
};

// Median of `v` (mean of the middle two for even sizes); 0 when empty.
double Median(std::vector<double> v);

// The p-th percentile (0 < p <= 100) of `v` by the nearest-rank method:
// the smallest element such that at least p% of the elements are <= it,
// i.e. the ceil(p/100 x size)-th smallest (no interpolation; always a
// measured value). 0 when empty.
double Percentile(std::vector<double> v, double p);

// busbw / algbw for `op` on n ranks: 2(n-1)/n allreduce; (n-1)/n allgather,
// reducescatter, alltoall; 1 broadcast.
double BusFactor(Collective op, int n);

// Fills algbw and busbw from bytes and time_us.
void ComputeBandwidth(Collective op, Row& row);

// The table: a header (two lines starting with '#') and one line per row.
std::string TableHeader();
std::string TableLine(const Row& row);

// A JSON array with one object per row (keys as the Row fields).
std::string ToJson(const std::vector<Row>& rows);

// One setting of --mode step.
struct StepRow {
  std::string preset;
  int ranks = 0;
  int tensors = 0;
  int64_t bytes = 0;  // all the preset's tensors
  // The setting applied, StepSetting::kFromEnv (-1) = the job's ("env").
  int64_t fusion_threshold = -1;  // bytes
  int64_t cache_capacity = -1;    // entries
  int steps = 0;                  // timed
  int warmup = 0;
  double step_ms = 0;      // max over ranks of each rank's median step time
  double step_p90_ms = 0;  // max over ranks of each rank's 90th percentile
  double enqueue_ms = 0;   // max over ranks of each rank's median enqueue
  double algbw = 0;        // GB/s = bytes / step time, GB = 1e9 B
  double busbw = 0;        // algbw x 2(n-1)/n
  bool check_ok = false;
};

// Fills algbw and busbw from bytes, ranks and step_ms.
void ComputeStepBandwidth(StepRow& row);

// A setting as shown in the table: "env" for kFromEnv, else the value, with
// a K/M/G suffix when `bytes` and it is a whole multiple ("64M", "0").
std::string SettingText(int64_t value, bool bytes);

// The --mode step table: a header (two lines starting with '#') and one line
// per setting.
std::string StepTableHeader();
std::string StepTableLine(const StepRow& row);

// A JSON array with one object per setting: "mode": "step", the StepRow
// fields ("bytes", "mib", times in ms, bandwidths in GB/s), and the setting
// as a number, or the string "env" for the job's own.
std::string StepToJson(const std::vector<StepRow>& rows);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_REPORT_H_
