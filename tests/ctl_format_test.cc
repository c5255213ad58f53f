// Tests of kolo-ctl's formatting (ctl/status_text.h, ctl/status_json.h,
// ctl/pending.h, ctl/table.h): a StatusReply built here, the exact lines and
// JSON expected.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "ctl/pending.h"
#include "ctl/status_json.h"
#include "ctl/status_text.h"
#include "ctl/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::ctl {
namespace {

using ::testing::ElementsAre;

// 2024-05-01 12:00:00 UTC.
constexpr int64_t kNoonMs = 1714564800000;

proto::WorkerStatus* AddWorker(proto::StatusReply& r, const std::string& id,
                               uint32_t incarnation, int rank,
                               const std::string& host,
                               proto::MemberState state, int64_t heard_ms,
                               int64_t pid) {
  proto::WorkerStatus* w = r.add_workers();
  w->set_worker_id(id);
  w->set_incarnation(incarnation);
  w->set_rank(rank);
  w->set_host_name(host);
  w->set_data_address(host + ":7000");
  w->set_state(state);
  w->set_millis_since_heard(heard_ms);
  w->set_pid(pid);
  return w;
}

// An elastic job in its third epoch: w1 was lost, w3 joined, w4 waits.
proto::StatusReply ElasticReply() {
  proto::StatusReply r;
  r.set_incarnation(0xdeadbeef);
  r.set_epoch(3);
  r.set_job_id("train");
  r.set_expected_size(3);
  r.set_phase("running");
  r.set_plans(42);
  r.set_elastic(true);
  r.set_min_size(2);
  r.set_max_size(4);
  r.set_resets(2);
  AddWorker(r, "w0", 0, 0, "a", proto::MEMBER_STATE_MEMBER, 120, 101);
  AddWorker(r, "w2", 1, 1, "b", proto::MEMBER_STATE_MEMBER, 2500, 103);
  AddWorker(r, "w3", 0, 2, "c", proto::MEMBER_STATE_MEMBER, 0, 104);
  AddWorker(r, "w4", 0, -1, "d", proto::MEMBER_STATE_WAITING, 40, 0);
  proto::PendingTensor* a = r.add_pending();
  a->set_name("grad/a");
  a->add_ranks(2);
  a->add_ranks(0);
  a->set_seconds(75.25);
  proto::PendingTensor* b = r.add_pending();
  b->set_name("grad/b");
  b->add_ranks(1);
  b->set_seconds(0.5);
  proto::LostWorker lost;
  lost.set_worker_id("w1");
  lost.set_rank(1);
  lost.set_host_name("b");
  lost.set_cause("silent for 3.1 s");
  *r.add_lost() = lost;
  proto::EpochRecord* e1 = r.add_history();
  e1->set_epoch(1);
  e1->set_formed_unix_ms(kNoonMs);
  e1->set_cause("start");
  for (const char* m : {"w0", "w1", "w2"}) e1->add_members(m);
  proto::EpochRecord* e2 = r.add_history();
  e2->set_epoch(2);
  e2->set_formed_unix_ms(kNoonMs + 300250);
  e2->set_cause("lost");
  for (const char* m : {"w0", "w2"}) e2->add_members(m);
  *e2->add_lost() = lost;
  proto::EpochRecord* e3 = r.add_history();
  e3->set_epoch(3);
  e3->set_formed_unix_ms(kNoonMs + 600000);
  e3->set_cause("joined");
  for (const char* m : {"w0", "w2", "w3"}) e3->add_members(m);
  e3->add_joined("w3");
  return r;
}

FormatContext Context() {
  FormatContext c;
  c.now = absl::FromUnixMillis(kNoonMs + 700000);
  c.stall_check = absl::Seconds(60);
  c.coordinator = "127.0.0.1:29400";
  return c;
}

std::vector<std::string> Lines(const std::string& text) {
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  lines.pop_back();  // after the last '\n'
  return lines;
}

TEST(CtlTableTest, AlignsColumnsAndTrimsTrailingSpaces) {
  Table t({{"NAME"}, {"N", Table::Align::kRight}, {"NOTE"}});
  t.AddRow({"a", "1", ""});
  t.AddRow({"long-name", "100", "x"});
  EXPECT_THAT(Lines(t.Render("  ")),
              ElementsAre("  NAME         N  NOTE", "  a            1",
                          "  long-name  100  x"));
}

TEST(CtlPendingTest, MissingRanksAreTheMembersThatDidNotSubmit) {
  std::vector<PendingView> p =
      AnalyzePending(ElasticReply(), absl::Seconds(60));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "grad/a");
  EXPECT_THAT(p[0].submitted, ElementsAre(0, 2));
  ASSERT_EQ(p[0].missing.size(), 1u);
  EXPECT_EQ(p[0].missing[0].rank, 1);
  EXPECT_EQ(p[0].missing[0].worker_id, "w2");
  EXPECT_TRUE(p[0].stalled);
  EXPECT_THAT(p[1].submitted, ElementsAre(1));
  ASSERT_EQ(p[1].missing.size(), 2u);
  EXPECT_EQ(p[1].missing[0].worker_id, "w0");
  EXPECT_EQ(p[1].missing[1].worker_id, "w3");
  EXPECT_FALSE(p[1].stalled);
}

TEST(CtlPendingTest, ZeroStallCheckNeverStalls) {
  std::vector<PendingView> p =
      AnalyzePending(ElasticReply(), absl::ZeroDuration());
  ASSERT_EQ(p.size(), 2u);
  EXPECT_FALSE(p[0].stalled);
}

TEST(CtlStatusTextTest, ElasticJob) {
  EXPECT_THAT(
      Lines(FormatStatusText(ElasticReply(), Context())),
      ElementsAre(
          "job:         train",
          "coordinator: 127.0.0.1:29400 (incarnation 00000000deadbeef)",
          "phase:       running", "epoch:       3 (42 plans dispatched in it)",
          "members:     3 (3 expected at the start)",
          "elastic:     min 2, max 4; 2 resets",  //
          "",                                     //
          "workers:",                             //
          "  WORKER  INC  RANK  HOST  STATE       HEARD  PID",
          "  w0        0     0  a     member   0.1s ago  101",
          "  w2        1     1  b     member   2.5s ago  103",
          "  w3        0     2  c     member   0.0s ago  104",
          "  w4        0     -  d     waiting  0.0s ago    -", "",
          "pending tensors: 2, 1 stalled (pending for 1m or more)",
          "  NAME    PENDING  STALLED  NOT SUBMITTED BY",
          "  grad/a    1m15s  yes      rank 1 (w2)",
          "  grad/b     0.5s  no       rank 0 (w0), rank 2 (w3)", "",
          "membership history:",
          "  EPOCH  FORMED (UTC)             CAUSE   MEMBERS     CHANGES",
          "      1  2024-05-01 12:00:00.000  start   w0, w1, w2  -",
          "      2  2024-05-01 12:05:00.250  lost    w0, w2      lost w1 "
          "(rank 1, host b: silent for 3.1 s)",
          "      3  2024-05-01 12:10:00.000  joined  w0, w2, w3  joined w3"));
}

TEST(CtlStatusTextTest, FixedJobThatEndedWithoutHistory) {
  proto::StatusReply r;
  r.set_incarnation(1);
  r.set_epoch(1);
  r.set_job_id("j");
  r.set_expected_size(2);
  r.set_phase("ended");
  r.set_end_reason("worker w1 (rank 1) disconnected without leaving");
  r.set_failed_worker("w1");
  AddWorker(r, "w0", 0, 0, "h", proto::MEMBER_STATE_ENDED, 1000, 7);
  AddWorker(r, "w1", 0, 1, "h", proto::MEMBER_STATE_FAILED, 61500, 8);
  proto::LostWorker* l = r.add_lost();
  l->set_worker_id("w1");
  l->set_rank(1);
  FormatContext c = Context();
  c.stall_check = absl::ZeroDuration();
  EXPECT_THAT(
      Lines(FormatStatusText(r, c)),
      ElementsAre("job:         j",
                  "coordinator: 127.0.0.1:29400 (incarnation "
                  "0000000000000001)",
                  "phase:       ended",  //
                  "epoch:       1 (0 plans dispatched in it)",
                  "members:     2 (2 expected at the start)", "elastic:     no",
                  "ended:       worker w1 (rank 1) disconnected without "
                  "leaving (failed worker w1)",
                  "",          //
                  "workers:",  //
                  "  WORKER  INC  RANK  HOST  STATE       HEARD  PID",
                  "  w0        0     0  h     ended    1.0s ago    7",
                  "  w1        0     1  h     failed  1m01s ago    8",
                  "",                       //
                  "pending tensors: none",  //
                  "",                       //
                  "lost workers: w1 (rank 1)"));
}

TEST(CtlStatusJsonTest, ElasticJob) {
  nlohmann::ordered_json j = StatusToJson(ElasticReply(), Context());
  EXPECT_EQ(j["time_unix_ms"], kNoonMs + 700000);
  EXPECT_EQ(j["coordinator"], "127.0.0.1:29400");
  EXPECT_EQ(j["job"].dump(),
            R"({"id":"train","phase":"running","epoch":3,)"
            R"("incarnation":"00000000deadbeef","expected_size":3,)"
            R"("members":3,"plans":42,"elastic":true,"min_size":2,)"
            R"("max_size":4,"resets":2,"end_reason":"","failed_worker":""})");
  ASSERT_EQ(j["workers"].size(), 4u);
  EXPECT_EQ(j["workers"][1].dump(),
            R"({"worker_id":"w2","incarnation":1,"rank":1,"host":"b",)"
            R"("data_address":"b:7000","state":"member",)"
            R"("heard_ms_ago":2500,"pid":103})");
  EXPECT_EQ(j["workers"][3]["rank"], -1);
  EXPECT_EQ(j["workers"][3]["state"], "waiting");
  ASSERT_EQ(j["pending"].size(), 2u);
  EXPECT_EQ(j["pending"][0].dump(),
            R"({"name":"grad/a","seconds":75.25,"stalled":true,)"
            R"("submitted_ranks":[0,2],)"
            R"("missing":[{"rank":1,"worker_id":"w2"}]})");
  EXPECT_EQ(j["pending"][1]["missing"].size(), 2u);
  EXPECT_EQ(j["stall_check_seconds"], 60.0);
  EXPECT_EQ(j["lost"].dump(), R"([{"worker_id":"w1","rank":1,"host":"b",)"
                              R"("cause":"silent for 3.1 s"}])");
  ASSERT_EQ(j["history"].size(), 3u);
  EXPECT_EQ(j["history"][1].dump(),
            R"({"epoch":2,"formed_unix_ms":1714565100250,"cause":"lost",)"
            R"("members":["w0","w2"],"joined":[],"left":[],)"
            R"("lost":[{"worker_id":"w1","rank":1,"host":"b",)"
            R"("cause":"silent for 3.1 s"}]})");
  EXPECT_EQ(j["history"][2]["joined"].dump(), R"(["w3"])");
  // Parses back as JSON (one line: --watch --json prints one per poll).
  std::string line = j.dump();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(line)["job"]["id"], "train");
}

TEST(CtlStatusJsonTest, Error) {
  EXPECT_EQ(ErrorToJson("cannot reach", Context()).dump(),
            R"({"time_unix_ms":1714565500000,"coordinator":"127.0.0.1:29400",)"
            R"("error":"cannot reach"})");
}

}  // namespace
}  // namespace kolo::ctl
