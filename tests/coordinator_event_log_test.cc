// Tests of the event log's lines and the coordinator's metrics page
// (coordinator/event_log.h, coordinator/metrics.h): exact lines, the
// timestamp's format, a log written and read back, and the page of a
// scripted Status reply.
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/event_log.h"
#include "coordinator/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

using ::testing::HasSubstr;

const absl::Time kT = absl::FromUnixMillis(1795874587125);  // 2026-11-28

TEST(EventLogTest, TimestampsAreRfc3339UtcWithMilliseconds) {
  EXPECT_EQ(Rfc3339Millis(kT), "2026-11-28T14:03:07.125Z");
  EXPECT_EQ(Rfc3339Millis(absl::FromUnixMillis(5)), "1970-01-01T00:00:00.005Z");
}

TEST(EventLogTest, LinesStartWithTimeEventAndEpoch) {
  nlohmann::ordered_json fields;
  fields["worker_id"] = "w2";
  fields["rank"] = 2;
  fields["cause"] = "said \"bye\"\n";
  EXPECT_EQ(FormatEvent(kT, "worker_lost", 3, fields),
            "{\"time\":\"2026-11-28T14:03:07.125Z\",\"event\":\"worker_lost\","
            "\"epoch\":3,\"worker_id\":\"w2\",\"rank\":2,"
            "\"cause\":\"said \\\"bye\\\"\\n\"}");
  EXPECT_EQ(FormatEvent(kT, "job_end", 1, nlohmann::ordered_json::object()),
            "{\"time\":\"2026-11-28T14:03:07.125Z\",\"event\":\"job_end\","
            "\"epoch\":1}");
}

TEST(EventLogTest, InvalidUtf8IsReplacedNotThrown) {
  nlohmann::ordered_json fields;
  fields["peer"] = std::string("a\xff");
  EXPECT_EQ(FormatEvent(kT, "refusal", 0, fields),
            "{\"time\":\"2026-11-28T14:03:07.125Z\",\"event\":\"refusal\","
            "\"epoch\":0,\"peer\":\"a\xef\xbf\xbd\"}");
}

TEST(EventLogTest, WritesOneLinePerEvent) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/kolo-events-", ::getpid());
  {
    auto log = EventLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    (*log)->Write(kT, "epoch_formed", 1, {{"members", {"w0", "w1"}}});
    (*log)->Write(kT, "job_end", 1, {{"failure", false}});
  }
  std::ifstream in(path);
  std::string a, b, c;
  ASSERT_TRUE(std::getline(in, a));
  ASSERT_TRUE(std::getline(in, b));
  EXPECT_FALSE(std::getline(in, c));
  EXPECT_EQ(a,
            "{\"time\":\"2026-11-28T14:03:07.125Z\",\"event\":\"epoch_formed\","
            "\"epoch\":1,\"members\":[\"w0\",\"w1\"]}");
  EXPECT_EQ(b,
            "{\"time\":\"2026-11-28T14:03:07.125Z\",\"event\":\"job_end\","
            "\"epoch\":1,\"failure\":false}");
  std::remove(path.c_str());
}

// What kolorun's fault report reads: the events kept in memory, in order,
// with their time back to the millisecond; a log without a file keeps them
// too.
TEST(EventLogTest, KeptEventsReadBackWithTheirTimes) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/kolo-events-kept-", ::getpid());
  auto log = EventLog::Open(path, /*keep=*/true);
  ASSERT_TRUE(log.ok()) << log.status();
  std::shared_ptr<EventLog> memory = EventLog::InMemory();
  for (EventLog* l : {log->get(), memory.get()}) {
    l->Write(kT, "worker_lost", 1, {{"worker_id", "w1"}});
    l->Write(kT + absl::Milliseconds(7), "epoch_formed", 2, {{"lost", {"w1"}}});
    std::vector<nlohmann::ordered_json> kept = l->Kept();
    ASSERT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept[0]["event"], "worker_lost");
    EXPECT_EQ(kept[1]["epoch"], 2);
    EXPECT_EQ(EventTime(kept[0]), kT);
    EXPECT_EQ(EventTime(kept[1]), kT + absl::Milliseconds(7));
  }
  EXPECT_EQ(EventTime(nlohmann::ordered_json{{"time", "yesterday"}}),
            absl::InfinitePast());
  auto unkept = EventLog::Open(path);
  ASSERT_TRUE(unkept.ok());
  (*unkept)->Write(kT, "job_end", 1);
  EXPECT_TRUE((*unkept)->Kept().empty());
  std::remove(path.c_str());
}

TEST(EventLogTest, OpenFailureNamesThePath) {
  auto log = EventLog::Open("/nonexistent-dir/events");
  ASSERT_FALSE(log.ok());
  EXPECT_THAT(
      std::string(log.status().message()),
      HasSubstr("cannot write the event log '/nonexistent-dir/events'"));
}

TEST(MetricsPageTest, ScriptedStatus) {
  proto::StatusReply s;
  s.set_job_id("j");
  s.set_phase("running");
  s.set_epoch(2);
  s.set_expected_size(3);
  for (const char* id : {"w0", "w1"}) {
    proto::WorkerStatus* w = s.add_workers();
    w->set_worker_id(id);
    w->set_rank(id[1] - '0');
    w->set_state(proto::MEMBER_STATE_MEMBER);
    w->set_millis_since_heard(1500);
  }
  s.add_history()->set_cause("start");
  s.add_history()->set_cause("lost");
  s.set_resets(1);
  proto::LostWorker* lost = s.add_lost();
  lost->set_worker_id("w2");
  lost->set_detection("stream");
  CoreStats stats;
  stats.plans = 7;
  stats.recovery_seconds.Observe(0.2);
  stats.negotiation.by_op[proto::ALLREDUCE] = {3, 6, 4096, 0};
  stats.refusals["AUTH_FAILED"] = 2;
  const std::string page = RenderMetrics(s, stats);
  for (const char* line : {
           "kolo_job_phase{phase=\"running\"} 1\n",
           "kolo_job_phase{phase=\"forming\"} 0\n",
           "kolo_epoch 2\n",
           "kolo_members 2\n",
           "kolo_workers{state=\"member\"} 2\n",
           "kolo_worker_heard_seconds{worker=\"w1\"} 1.5\n",
           "kolo_epochs_formed_total{cause=\"lost\"} 1\n",
           "kolo_resets_total 1\n",
           "kolo_worker_losses_total{worker=\"w2\",detection=\"stream\"} 1\n",
           "kolo_recovery_seconds_bucket{le=\"0.25\"} 1\n",
           "kolo_recovery_seconds_count 1\n",
           "kolo_plans_total 7\n",
           "kolo_collectives_total{op=\"allreduce\"} 3\n",
           "kolo_tensors_total{op=\"allreduce\"} 6\n",
           "kolo_collective_bytes_total{op=\"allreduce\"} 4096\n",
           "kolo_refusals_total{reason=\"AUTH_FAILED\"} 2\n",
       }) {
    EXPECT_THAT(page, HasSubstr(line));
  }
}

}  // namespace
}  // namespace kolo::coordinator
