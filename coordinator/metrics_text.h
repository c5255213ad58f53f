// MetricsText: a writer of Prometheus' text exposition format (version
// 0.0.4), the format of the coordinator's /metrics page and of
// `kolo-ctl metrics`. Each family is written at once: its HELP and TYPE
// lines, then its samples. Counters and gauges take one value per label
// set; a histogram takes a Histogram and becomes its `_bucket` lines (with
// `le`, cumulative, the last `+Inf`), `_sum` and `_count`.
//
// Escaping: in HELP, backslash and newline; in label values, backslash,
// double quote and newline. Values print as integers when they are whole
// (below 2^53), else with the fewest of 15 to 17 significant digits that
// read back the same; infinities as +Inf/-Inf, NaN as NaN.
//
// Thread-safety: none; one writer per page.
// Invariants: metric and label names are valid (metric:
// [a-zA-Z_:][a-zA-Z0-9_:]*, label: [a-zA-Z_][a-zA-Z0-9_]*, not starting
// with "__", not "le" on a histogram) and a family is written once; the
// names are kolo's own constants, so a wrong one is a kolo bug (KOLO_CHECK).
#ifndef KOLO_COORDINATOR_METRICS_TEXT_H_
#define KOLO_COORDINATOR_METRICS_TEXT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace kolo::coordinator {

// Label name and value pairs, in the order they print.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Observations counted in buckets: counts[i] holds those <= bounds[i] (and
// above bounds[i-1]); the last count holds those above every bound.
struct Histogram {
  // REQUIRES: ascending, finite.
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);

  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1
  double sum = 0;
  uint64_t count = 0;
};

class MetricsText {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Begins family `name`: its HELP line (`help`) and TYPE line.
  void Family(absl::string_view name, absl::string_view help, Type type);
  // A sample of the current family (a counter or a gauge).
  void Value(double value, const MetricLabels& labels = {});
  // The samples of the current family (a histogram).
  void Observations(const Histogram& histogram,
                    const MetricLabels& labels = {});

  const std::string& text() const { return text_; }

  static bool ValidMetricName(absl::string_view name);
  static bool ValidLabelName(absl::string_view name);
  static std::string EscapeLabelValue(absl::string_view value);
  static std::string FormatValue(double value);

 private:
  void Line(absl::string_view suffix, const MetricLabels& labels, double value);

  std::string text_;
  std::string family_;
  Type type_ = Type::kGauge;
  absl::flat_hash_set<std::string> written_;
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_METRICS_TEXT_H_
