// Tests of MetricsText (coordinator/metrics_text.h), the Prometheus text
// format writer: exact text of counters, gauges and histograms, escaping,
// value formatting, and the checked names.
#include <limits>
#include <string>

#include "coordinator/metrics_text.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

TEST(MetricsTextTest, CounterAndGaugeWithLabels) {
  MetricsText m;
  m.Family("kolo_plans_total", "Plans sent.", MetricsText::Type::kCounter);
  m.Value(3);
  m.Family("kolo_job_phase", "1 for the current phase.",
           MetricsText::Type::kGauge);
  m.Value(1, {{"phase", "running"}});
  m.Value(0, {{"phase", "ended"}, {"job", "j"}});
  EXPECT_EQ(m.text(),
            "# HELP kolo_plans_total Plans sent.\n"
            "# TYPE kolo_plans_total counter\n"
            "kolo_plans_total 3\n"
            "# HELP kolo_job_phase 1 for the current phase.\n"
            "# TYPE kolo_job_phase gauge\n"
            "kolo_job_phase{phase=\"running\"} 1\n"
            "kolo_job_phase{phase=\"ended\",job=\"j\"} 0\n");
}

TEST(MetricsTextTest, Histogram) {
  Histogram h({0.5, 1, 2.5});
  h.Observe(0.25);
  h.Observe(1);  // on a bound: counted in it
  h.Observe(2);
  h.Observe(10);
  MetricsText m;
  m.Family("kolo_recovery_seconds", "Recoveries.",
           MetricsText::Type::kHistogram);
  m.Observations(h, {{"job", "a"}});
  EXPECT_EQ(m.text(),
            "# HELP kolo_recovery_seconds Recoveries.\n"
            "# TYPE kolo_recovery_seconds histogram\n"
            "kolo_recovery_seconds_bucket{job=\"a\",le=\"0.5\"} 1\n"
            "kolo_recovery_seconds_bucket{job=\"a\",le=\"1\"} 2\n"
            "kolo_recovery_seconds_bucket{job=\"a\",le=\"2.5\"} 3\n"
            "kolo_recovery_seconds_bucket{job=\"a\",le=\"+Inf\"} 4\n"
            "kolo_recovery_seconds_sum{job=\"a\"} 13.25\n"
            "kolo_recovery_seconds_count{job=\"a\"} 4\n");
}

TEST(MetricsTextTest, EmptyHistogram) {
  MetricsText m;
  m.Family("h_seconds", "x", MetricsText::Type::kHistogram);
  m.Observations(Histogram({1}));
  EXPECT_EQ(m.text(),
            "# HELP h_seconds x\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"1\"} 0\n"
            "h_seconds_bucket{le=\"+Inf\"} 0\n"
            "h_seconds_sum 0\nh_seconds_count 0\n");
}

TEST(MetricsTextTest, Escaping) {
  MetricsText m;
  m.Family("g", "a \\ back\nslash \"quoted\"", MetricsText::Type::kGauge);
  m.Value(1, {{"cause", "say \"hi\"\\\nbye"}});
  EXPECT_EQ(m.text(),
            "# HELP g a \\\\ back\\nslash \"quoted\"\n"
            "# TYPE g gauge\n"
            "g{cause=\"say \\\"hi\\\"\\\\\\nbye\"} 1\n");
}

TEST(MetricsTextTest, Values) {
  EXPECT_EQ(MetricsText::FormatValue(0), "0");
  EXPECT_EQ(MetricsText::FormatValue(-7), "-7");
  EXPECT_EQ(MetricsText::FormatValue(1e15), "1000000000000000");
  EXPECT_EQ(MetricsText::FormatValue(0.1), "0.1");
  EXPECT_EQ(MetricsText::FormatValue(0.005), "0.005");
  EXPECT_EQ(MetricsText::FormatValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(MetricsText::FormatValue(1e300), "1e+300");
  EXPECT_EQ(MetricsText::FormatValue(std::numeric_limits<double>::infinity()),
            "+Inf");
  EXPECT_EQ(MetricsText::FormatValue(-std::numeric_limits<double>::infinity()),
            "-Inf");
  EXPECT_EQ(MetricsText::FormatValue(std::numeric_limits<double>::quiet_NaN()),
            "NaN");
}

TEST(MetricsTextTest, Names) {
  EXPECT_TRUE(MetricsText::ValidMetricName("kolo_epoch"));
  EXPECT_TRUE(MetricsText::ValidMetricName("a:b_c9"));
  EXPECT_FALSE(MetricsText::ValidMetricName(""));
  EXPECT_FALSE(MetricsText::ValidMetricName("9a"));
  EXPECT_FALSE(MetricsText::ValidMetricName("a-b"));
  EXPECT_TRUE(MetricsText::ValidLabelName("worker"));
  EXPECT_FALSE(MetricsText::ValidLabelName("a:b"));
  EXPECT_FALSE(MetricsText::ValidLabelName("__name"));
  EXPECT_FALSE(MetricsText::ValidLabelName("1x"));
}

TEST(MetricsTextDeathTest, BadNamesAndRepeatsAreBugs) {
  EXPECT_DEATH(
      {
        MetricsText m;
        m.Family("bad-name", "x", MetricsText::Type::kGauge);
      },
      "invalid metric name 'bad-name'");
  EXPECT_DEATH(
      {
        MetricsText m;
        m.Family("g", "x", MetricsText::Type::kGauge);
        m.Value(1, {{"bad label", "v"}});
      },
      "invalid label name 'bad label'");
  EXPECT_DEATH(
      {
        MetricsText m;
        m.Family("g", "x", MetricsText::Type::kGauge);
        m.Family("g", "x", MetricsText::Type::kGauge);
      },
      "written twice");
  EXPECT_DEATH(
      {
        MetricsText m;
        m.Family("h", "x", MetricsText::Type::kHistogram);
        m.Observations(Histogram({1}), {{"le", "1"}});
      },
      "'le' is the histogram's own label");
}

}  // namespace
}  // namespace kolo::coordinator
