// The coordinator's metrics page and event log through kolorun (issue 38,
// point 2), with real processes (tests/workers/elastic_worker.cc):
//   - a 2-worker job run with --metrics-port and --events: /metrics fetched
//     while it runs (curl) passes `promtool check metrics` and shows the
//     running phase, epoch 1 and both members; the event log starts with
//     epoch 1 formed and ends with the job's end, with exact fields;
//   - an elastic job whose worker is killed (kolorun --fault kill) shows the
//     loss in the event log and a recovery in kolo_recovery_seconds.
// promtool (Debian's prometheus) and curl are needed; without them the
// test is skipped saying which is missing. Each job takes a few seconds.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/job_run.h"

namespace kolo::testing {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;

// The output of shell command `command`, and its exit status.
std::string Shell(const std::string& command, int* status = nullptr) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    const int st = ::pclose(p);
    if (status != nullptr) *status = st;
  }
  return out;
}

bool Have(const std::string& program) {
  int st = -1;
  Shell(absl::StrCat("command -v ", program, " >/dev/null 2>&1"), &st);
  return st == 0;
}

// A TCP port of 127.0.0.1 free a moment ago.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::vector<json> ReadEvents(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> events;
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
    events.push_back(std::move(j));
  }
  return events;
}

// Scrapes http://127.0.0.1:port/metrics every 100 ms while a job runs and
// keeps the latest page that contains `want` (else the latest page).
class Scraper {
 public:
  Scraper(int port, std::string want) : want_(std::move(want)) {
    thread_ = std::thread([this, port] {
      const std::string cmd = absl::StrCat(
          "curl -sf --max-time 2 http://127.0.0.1:", port, "/metrics");
      while (!stop_) {
        std::string page = Shell(cmd);
        // The latest page with `want`; before one came, the latest page.
        if (absl::StrContains(page, want_)) {
          last_ = page;
          found_ = true;
        } else if (!page.empty() && !found_) {
          last_ = page;
        }
        ::usleep(100 * 1000);
      }
    });
  }
  // Stops scraping; the page kept.
  std::string Finish() {
    stop_ = true;
    thread_.join();
    return last_;
  }

 private:
  std::string want_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> found_{false};
  std::string last_;  // written by the thread only until Finish joins it
  std::thread thread_;
};

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"promtool", "curl"}) {
      if (!Have(tool)) {
        GTEST_SKIP() << tool
                     << " is not installed (Debian: prometheus, curl; "
                        "scripts/install-deps.sh --test)";
      }
    }
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/kolo-metrics-", ::getpid(), "-",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    Shell(absl::StrCat("mkdir -p ", dir_));
    events_ = dir_ + "/events.jsonl";
  }
  void TearDown() override {
    if (!dir_.empty()) Shell(absl::StrCat("rm -rf ", dir_));
  }

  // `promtool check metrics` on `page`: its output, "" when clean.
  std::string Promtool(const std::string& page, int* status) {
    const std::string path = dir_ + "/page.txt";
    std::ofstream(path) << page;
    return Shell(absl::StrCat("promtool check metrics < ", path, " 2>&1"),
                 status);
  }

  std::string dir_, events_;
};

TEST_F(MetricsTest, PageDuringARunAndEventsOfTheJob) {
  const int port = FreePort();
  Scraper scraper(port, "kolo_job_phase{phase=\"running\"} 1");
  JobRun run = RunJob(
      {Bin("kolorun"), "-np", "2", "--metrics-port", std::to_string(port),
       "--events", events_, Bin("kolo-elastic-worker"), "--steps", "1000000",
       "--seconds", "3", "--step-ms", "10"},
      {}, absl::Seconds(60));
  const std::string page = scraper.Finish();
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ASSERT_THAT(page, HasSubstr("kolo_job_phase{phase=\"running\"} 1")) << page;
  EXPECT_THAT(page, HasSubstr("\nkolo_epoch 1\n"));
  EXPECT_THAT(page, HasSubstr("\nkolo_members 2\n"));
  EXPECT_THAT(page, HasSubstr("kolo_worker_rank{worker=\"w1\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("kolo_collectives_total{op=\"allreduce\"}"));
  int status = -1;
  const std::string lint = Promtool(page, &status);
  EXPECT_EQ(status, 0) << lint << "\n" << page;
  EXPECT_EQ(lint, "") << page;

  const std::vector<json> events = ReadEvents(events_);
  ASSERT_GE(events.size(), 2u);
  const json& first = events.front();
  EXPECT_EQ(first["event"], "epoch_formed");
  EXPECT_EQ(first["epoch"], 1);
  EXPECT_EQ(first["cause"], "start");
  EXPECT_EQ(first["members"], json({"w0", "w1"}));
  EXPECT_EQ(first["joined"], json::array());
  EXPECT_EQ(first["lost"], json::array());
  // "2026-11-28T14:03:07.125Z"
  ASSERT_TRUE(first["time"].is_string());
  const std::string time = first["time"];
  EXPECT_EQ(time.size(), 24u) << time;
  EXPECT_EQ(time.substr(10, 1), "T");
  EXPECT_EQ(time.substr(23), "Z");
  const json& last = events.back();
  EXPECT_EQ(last["event"], "job_end");
  EXPECT_EQ(last["epoch"], 1);
  EXPECT_EQ(last["failure"], false);
  EXPECT_EQ(last["failed_worker"], "");
  EXPECT_TRUE(last["reason"].is_string());
}

TEST_F(MetricsTest, KilledWorkerIsALossAndARecovery) {
  const int port = FreePort();
  Scraper scraper(port, "kolo_recovery_seconds_count 1");
  JobRun run = RunJob({Bin("kolorun"),
                       "-np",
                       "3",
                       "--min-np",
                       "2",
                       "--metrics-port",
                       std::to_string(port),
                       "--events",
                       events_,
                       "--fault",
                       "kill:rank=2:after=1500ms",
                       Bin("kolo-elastic-worker"),
                       "--steps",
                       "1000000",
                       "--seconds",
                       "4",
                       "--step-ms",
                       "10",
                       "--replacement-exits",
                       "1"},
                      {}, absl::Seconds(60));
  const std::string page = scraper.Finish();
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  ASSERT_THAT(page, HasSubstr("kolo_recovery_seconds_count 1\n")) << page;
  EXPECT_THAT(page,
              HasSubstr("kolo_worker_losses_total{worker=\"w2\",detection="));
  EXPECT_THAT(page, HasSubstr("kolo_resets_total 1\n"));
  int status = -1;
  const std::string lint = Promtool(page, &status);
  EXPECT_EQ(status, 0) << lint << "\n" << page;

  const std::vector<json> events = ReadEvents(events_);
  bool lost = false, second = false;
  for (const json& e : events) {
    if (e["event"] == "worker_lost" && e["worker_id"] == "w2") {
      lost = true;
      EXPECT_EQ(e["epoch"], 1);
      EXPECT_EQ(e["rank"], 2);
      EXPECT_TRUE(e["cause"].is_string());
    }
    if (e["event"] == "epoch_formed" && e["epoch"] == 2) {
      second = true;
      EXPECT_EQ(e["cause"], "lost");
      EXPECT_EQ(e["members"], json({"w0", "w1"}));
      EXPECT_EQ(e["lost"], json({"w2"}));
    }
  }
  EXPECT_TRUE(lost) << "no worker_lost event for w2";
  EXPECT_TRUE(second) << "no epoch_formed event for epoch 2";
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["event"], "job_end");
}

}  // namespace
}  // namespace kolo::testing
