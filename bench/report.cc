#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kolo::bench {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + mid);
  return (lower + upper) / 2;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  // p x size / 100 is exact whenever it is a whole number (p and size are
  // small integers in practice), so ceil() does not overshoot.
  const double rank = std::ceil(p * static_cast<double>(v.size()) / 100);
  const size_t k =  // 0-based index of the rank-th smallest
      rank <= 1 ? 0 : std::min(static_cast<size_t>(rank), v.size()) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

double BusFactor(Collective op, int n) {
  if (n <= 0) return 0;
  switch (op) {
    case Collective::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllgather:
    case Collective::kReducescatter:
    case Collective::kAlltoall:
      return static_cast<double>(n - 1) / n;
    case Collective::kBroadcast:
      return 1;
  }
  return 0;
}

void ComputeBandwidth(Collective op, Row& row) {
  row.algbw = row.time_us > 0
                  ? static_cast<double>(row.bytes) / (row.time_us * 1e3)
                  : 0;
  row.busbw = row.algbw * BusFactor(op, row.ranks);
}

std::string TableHeader() {
  return absl::StrFormat(
      "# %12s %12s %9s %8s %12s %12s %10s %10s %7s %6s\n"
      "# %12s %12s %9s %8s %12s %12s %10s %10s %7s %6s\n",
      "size", "count", "dtype", "reduce", "time", "p90", "algbw", "busbw",
      "iters", "check", "(B)", "(elements)", "", "", "(us)", "(us)", "(GB/s)",
      "(GB/s)", "", "");
}

std::string TableLine(const Row& row) {
  return absl::StrFormat(
      "  %12d %12d %9s %8s %12.1f %12.1f %10.3f %10.3f %7d %6s\n", row.bytes,
      row.count, row.dtype, row.reduce.empty() ? "-" : row.reduce, row.time_us,
      row.p90_us, row.algbw, row.busbw, row.iters,
      row.check_ok ? "ok" : "FAIL");
}

std::string ToJson(const std::vector<Row>& rows) {
  std::string out = "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    absl::StrAppendFormat(
        &out,
        "  {\"op\": \"%s\", \"mode\": \"%s\", \"ranks\": %d, "
        "\"size_bytes\": %d, \"count\": %d, \"dtype\": \"%s\", "
        "\"reduce\": \"%s\", \"inplace\": %s, \"iters\": %d, "
        "\"time_us\": %.3f, \"p90_us\": %.3f, \"min_rank_time_us\": %.3f, "
        "\"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"check\": \"%s\"}%s\n",
        r.op, r.mode, r.ranks, r.bytes, r.count, r.dtype, r.reduce,
        r.inplace ? "true" : "false", r.iters, r.time_us, r.p90_us,
        r.min_time_us, r.algbw, r.busbw, r.check_ok ? "ok" : "fail",
        i + 1 < rows.size() ? "," : "");
  }
  out += "]\n";
  return out;
}

void ComputeStepBandwidth(StepRow& row) {
  row.algbw = row.step_ms > 0
                  ? static_cast<double>(row.bytes) / (row.step_ms * 1e6)
                  : 0;
  row.busbw = row.algbw * BusFactor(Collective::kAllreduce, row.ranks);
}

std::string SettingText(int64_t value, bool bytes) {
  if (value < 0) return "env";
  if (bytes && value > 0) {
    for (const auto& [shift, suffix] :
         {std::pair{30, "G"}, std::pair{20, "M"}, std::pair{10, "K"}}) {
      if (value % (int64_t{1} << shift) == 0) {
        return absl::StrCat(value >> shift, suffix);
      }
    }
  }
  return absl::StrCat(value);
}

std::string StepTableHeader() {
  return absl::StrFormat(
      "# %9s %5s %7s %8s %7s %9s %10s %10s %10s %8s %6s\n"
      "# %9s %5s %7s %8s %7s %9s %10s %10s %10s %8s %6s\n",
      "preset", "ranks", "tensors", "size", "fusion", "cache", "step", "p90",
      "enqueue", "busbw", "check", "", "", "", "(MiB)", "(B)", "(entries)",
      "(ms)", "(ms)", "(ms)", "(GB/s)", "");
}

std::string StepTableLine(const StepRow& row) {
  return absl::StrFormat(
      "  %9s %5d %7d %8.2f %7s %9s %10.3f %10.3f %10.3f %8.3f %6s\n",
      row.preset, row.ranks, row.tensors,
      static_cast<double>(row.bytes) / (1 << 20),
      SettingText(row.fusion_threshold, true),
      SettingText(row.cache_capacity, false), row.step_ms, row.step_p90_ms,
      row.enqueue_ms, row.busbw, row.check_ok ? "ok" : "FAIL");
}

std::string StepToJson(const std::vector<StepRow>& rows) {
  auto setting = [](int64_t v) {
    return v < 0 ? std::string("\"env\"") : absl::StrCat(v);
  };
  std::string out = "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const StepRow& r = rows[i];
    absl::StrAppendFormat(
        &out,
        "  {\"mode\": \"step\", \"preset\": \"%s\", \"ranks\": %d, "
        "\"tensors\": %d, \"bytes\": %d, \"mib\": %.3f, "
        "\"fusion_threshold\": %s, \"cache_capacity\": %s, \"steps\": %d, "
        "\"warmup\": %d, \"step_ms\": %.4f, \"step_p90_ms\": %.4f, "
        "\"enqueue_ms\": %.4f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, "
        "\"check\": \"%s\"}%s\n",
        r.preset, r.ranks, r.tensors, r.bytes,
        static_cast<double>(r.bytes) / (1 << 20), setting(r.fusion_threshold),
        setting(r.cache_capacity), r.steps, r.warmup, r.step_ms, r.step_p90_ms,
        r.enqueue_ms, r.algbw, r.busbw, r.check_ok ? "ok" : "fail",
        i + 1 < rows.size() ? "," : "");
  }
  out += "]\n";
  return out;
}

}  // namespace kolo::bench
