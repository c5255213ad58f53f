// MetricsText: the Prometheus text format (see metrics_text.h).
#include "coordinator/metrics_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo::coordinator {
namespace {

// HELP text: backslash and newline escaped.
std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

const char* TypeName(MetricsText::Type type) {
  switch (type) {
    case MetricsText::Type::kCounter:
      return "counter";
    case MetricsText::Type::kGauge:
      return "gauge";
    case MetricsText::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    KOLO_CHECK(std::isfinite(bounds[i]) &&
               (i == 0 || bounds[i - 1] < bounds[i]))
        << "histogram bounds must be finite and ascending";
  }
}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds.size() && value > bounds[i]) ++i;
  ++counts[i];
  sum += value;
  ++count;
}

bool MetricsText::ValidMetricName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok =
        absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' ||
        c == ':' ||
        (i > 0 && absl::ascii_isdigit(static_cast<unsigned char>(c)));
    if (!ok) return false;
  }
  return true;
}

bool MetricsText::ValidLabelName(absl::string_view name) {
  if (name.empty() || absl::StartsWith(name, "__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok =
        absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' ||
        (i > 0 && absl::ascii_isdigit(static_cast<unsigned char>(c)));
    if (!ok) return false;
  }
  return true;
}

std::string MetricsText::EscapeLabelValue(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string MetricsText::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // The shortest of 15 to 17 significant digits that reads back the same.
  char buf[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

void MetricsText::Family(absl::string_view name, absl::string_view help,
                         Type type) {
  KOLO_CHECK(ValidMetricName(name)) << "invalid metric name '" << name << "'";
  KOLO_CHECK(written_.insert(std::string(name)).second)
      << "metric family '" << name << "' written twice";
  family_ = std::string(name);
  type_ = type;
  absl::StrAppend(&text_, "# HELP ", name, " ", EscapeHelp(help), "\n",
                  "# TYPE ", name, " ", TypeName(type), "\n");
}

void MetricsText::Line(absl::string_view suffix, const MetricLabels& labels,
                       double value) {
  absl::StrAppend(&text_, family_, suffix);
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      KOLO_CHECK(ValidLabelName(labels[i].first))
          << "invalid label name '" << labels[i].first << "'";
      absl::StrAppend(&text_, i > 0 ? "," : "", labels[i].first, "=\"",
                      EscapeLabelValue(labels[i].second), "\"");
    }
    text_ += '}';
  }
  absl::StrAppend(&text_, " ", FormatValue(value), "\n");
}

void MetricsText::Value(double value, const MetricLabels& labels) {
  KOLO_CHECK(!family_.empty() && type_ != Type::kHistogram)
      << "a value outside a counter or gauge family";
  Line("", labels, value);
}

void MetricsText::Observations(const Histogram& histogram,
                               const MetricLabels& labels) {
  KOLO_CHECK(!family_.empty() && type_ == Type::kHistogram)
      << "observations outside a histogram family";
  MetricLabels with_le = labels;
  for (const auto& label : labels) {
    KOLO_CHECK(label.first != "le") << "'le' is the histogram's own label";
  }
  with_le.emplace_back("le", "");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= histogram.bounds.size(); ++i) {
    cumulative += histogram.counts[i];
    with_le.back().second =
        i < histogram.bounds.size() ? FormatValue(histogram.bounds[i]) : "+Inf";
    Line("_bucket", with_le, static_cast<double>(cumulative));
  }
  Line("_sum", labels, histogram.sum);
  Line("_count", labels, static_cast<double>(histogram.count));
}

}  // namespace kolo::coordinator
