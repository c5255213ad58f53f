// Tests of kolo-ctl's poll loop (ctl/run.h) with a fake poll: once and
// --watch, text and JSON, failed polls.
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "ctl/run.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kolo::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

proto::StatusReply Reply() {
  proto::StatusReply r;
  r.set_job_id("train");
  r.set_phase("running");
  r.set_epoch(1);
  return r;
}

struct Harness {
  std::vector<absl::StatusOr<proto::StatusReply>> replies;  // in order
  size_t polls = 0;
  int waits_left = 0;  // waits that return true before one returns false
  std::vector<absl::Duration> waited;
  std::ostringstream out, err;

  RunIo Io() {
    RunIo io;
    io.poll = [this] { return replies.at(polls++); };
    io.out = &out;
    io.err = &err;
    io.clock = [] { return absl::FromUnixSeconds(1714564800); };
    io.wait = [this](absl::Duration d) {
      waited.push_back(d);
      return waits_left-- > 0;
    };
    return io;
  }
};

CtlOptions Options() {
  CtlOptions o;
  o.coordinator = "127.0.0.1:1";
  return o;
}

TEST(CtlRunTest, OnceText) {
  Harness h;
  h.replies = {Reply()};
  EXPECT_EQ(RunStatus(Options(), h.Io()), 0);
  EXPECT_THAT(h.out.str(), HasSubstr("job:         train\n"));
  EXPECT_THAT(h.out.str(), Not(HasSubstr(kClearScreen)));
  EXPECT_EQ(h.err.str(), "");
  EXPECT_EQ(h.polls, 1u);
  EXPECT_TRUE(h.waited.empty());
}

TEST(CtlRunTest, OnceJsonIsOneLine) {
  Harness h;
  h.replies = {Reply()};
  CtlOptions o = Options();
  o.json = true;
  EXPECT_EQ(RunStatus(o, h.Io()), 0);
  std::string s = h.out.str();
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.find('\n'), s.size() - 1);
  EXPECT_EQ(nlohmann::json::parse(s)["job"]["id"], "train");
}

TEST(CtlRunTest, OnceFailedExitsOneWithTheMessage) {
  for (bool json : {false, true}) {
    Harness h;
    h.replies = {absl::UnavailableError("cannot reach the coordinator")};
    CtlOptions o = Options();
    o.json = json;
    EXPECT_EQ(RunStatus(o, h.Io()), 1);
    EXPECT_EQ(h.err.str(), "kolo-ctl: cannot reach the coordinator\n");
    EXPECT_EQ(h.out.str(), "");
  }
}

TEST(CtlRunTest, WatchTextClearsTheScreenAndGoesOnAfterAFailure) {
  Harness h;
  h.replies = {Reply(), absl::DeadlineExceededError("no answer"), Reply()};
  h.waits_left = 2;
  CtlOptions o = Options();
  o.watch = true;
  o.interval = absl::Milliseconds(250);
  EXPECT_EQ(RunStatus(o, h.Io()), 0);
  EXPECT_EQ(h.polls, 3u);
  EXPECT_THAT(h.waited, ::testing::ElementsAre(absl::Milliseconds(250),
                                               absl::Milliseconds(250),
                                               absl::Milliseconds(250)));
  std::vector<std::string> screens =
      absl::StrSplit(h.out.str(), kClearScreen, absl::SkipEmpty());
  ASSERT_EQ(screens.size(), 3u);
  EXPECT_THAT(screens[0], HasSubstr("every 250ms, 2024-05-01 12:00:00.000"));
  EXPECT_THAT(screens[0], HasSubstr("job:         train"));
  EXPECT_THAT(screens[1], HasSubstr("kolo-ctl: no answer\n"));
  EXPECT_THAT(screens[2], HasSubstr("job:         train"));
  EXPECT_EQ(h.err.str(), "");
}

TEST(CtlRunTest, WatchJsonOneObjectPerPoll) {
  Harness h;
  h.replies = {Reply(), absl::UnauthenticatedError("refused")};
  h.waits_left = 1;
  CtlOptions o = Options();
  o.watch = true;
  o.json = true;
  EXPECT_EQ(RunStatus(o, h.Io()), 0);
  std::vector<std::string> lines =
      absl::StrSplit(h.out.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["job"]["phase"], "running");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["error"], "refused");
}

}  // namespace
}  // namespace kolo::ctl
