// Tests of the KOLO_TIMELINE writer (worker_lib/timeline.h). Every file is
// parsed as JSON (protobuf's parser into a ListValue) and checked: the exact
// text of the events, rows named once and numbered in first-seen order, B/E
// balanced and nested per row, JSON escaping, pid = rank, drops (queue full,
// writer blocked on a pipe nobody reads, a full disk) counted exactly with
// the file still valid, Close idempotent and run by the destructor, Open's
// errors, and producers on several threads (also under ThreadSanitizer).
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/timeouts.h"
#include "worker_lib/timeline.h"

namespace kolo::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A fresh directory, removed with its files.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/kolo_timeline_XXXXXX";
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
    EXPECT_FALSE(path_.empty()) << std::strerror(errno);
  }
  ~TempDir() {
    for (const std::string& f : files_) unlink(f.c_str());
    rmdir(path_.c_str());
  }
  std::string File(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One parsed event; absent fields are empty / -1.
struct Ev {
  std::string name, ph, s;
  double ts = -1;
  bool has_ts = false;
  int pid = -1, tid = -1;
  std::map<std::string, std::string> args;
};

// Parses `text` as a JSON array of events; fails the test if it is not one.
std::vector<Ev> Parse(const std::string& text) {
  google::protobuf::ListValue list;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &list);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  std::vector<Ev> out;
  for (const google::protobuf::Value& v : list.values()) {
    EXPECT_TRUE(v.has_struct_value());
    Ev ev;
    for (const auto& [key, field] : v.struct_value().fields()) {
      if (key == "name") {
        ev.name = field.string_value();
      } else if (key == "ph") {
        ev.ph = field.string_value();
      } else if (key == "s") {
        ev.s = field.string_value();
      } else if (key == "ts") {
        EXPECT_TRUE(field.has_number_value());
        ev.ts = field.number_value();
        ev.has_ts = true;
      } else if (key == "pid") {
        ev.pid = static_cast<int>(field.number_value());
      } else if (key == "tid") {
        ev.tid = static_cast<int>(field.number_value());
      } else if (key == "args") {
        for (const auto& [k, a] : field.struct_value().fields()) {
          EXPECT_TRUE(a.has_string_value()) << k;
          ev.args[k] = a.string_value();
        }
      } else {
        ADD_FAILURE() << "unexpected field " << key;
      }
    }
    out.push_back(std::move(ev));
  }
  return out;
}

// What CheckWellFormed found.
struct Summary {
  std::map<int, std::string> row_names;  // tid -> thread_name
  // Per tid; ends: the file's E events; instants: not the close record.
  std::map<int, int> begins, ends, instants;
  uint64_t recorded_dropped = 0;
};

// Checks the invariants every finished timeline file holds; `rank` is the
// pid of every event. `monotonic`: per row, ts never goes backwards.
Summary CheckWellFormed(const std::vector<Ev>& events, int rank,
                        bool monotonic = true) {
  Summary sum;
  EXPECT_GE(events.size(), 3u);
  if (events.size() < 3) return sum;
  // Header: process name, then the plans row.
  EXPECT_EQ(events[0].name, "process_name");
  EXPECT_EQ(events[0].ph, "M");
  EXPECT_EQ(events[0].args.at("name"), absl::StrCat("rank ", rank));
  EXPECT_EQ(events[1].name, "thread_name");
  EXPECT_EQ(events[1].tid, 0);
  EXPECT_EQ(events[1].args.at("name"), "plans");
  sum.row_names[0] = "plans";
  // Last: the close record.
  const Ev& last = events.back();
  EXPECT_EQ(last.name, "timeline closed");
  EXPECT_EQ(last.ph, "i");
  EXPECT_EQ(last.s, "p");
  EXPECT_EQ(last.tid, 0);
  EXPECT_EQ(last.args.size(), 1u);
  EXPECT_EQ(last.args.count("dropped_events"), 1u);
  if (last.args.count("dropped_events") == 1) {
    sum.recorded_dropped = std::stoull(last.args.at("dropped_events"));
  }
  std::map<int, std::vector<double>> open;  // tid -> ts of open B
  std::map<int, double> last_ts;
  int next_tid = 1;
  for (size_t i = 2; i + 1 < events.size(); ++i) {
    const Ev& ev = events[i];
    SCOPED_TRACE(absl::StrCat("event ", i, " '", ev.name, "' ", ev.ph));
    EXPECT_EQ(ev.pid, rank);
    EXPECT_GE(ev.tid, 0);
    if (ev.ph == "M") {
      EXPECT_EQ(ev.name, "thread_name");
      EXPECT_FALSE(ev.has_ts);
      // Rows are numbered in the order they appear, and named once, before
      // their first event.
      EXPECT_EQ(ev.tid, next_tid);
      next_tid = std::max(next_tid, ev.tid + 1);
      EXPECT_EQ(sum.row_names.count(ev.tid), 0u);
      sum.row_names[ev.tid] = ev.args.at("name");
      continue;
    }
    EXPECT_EQ(sum.row_names.count(ev.tid), 1u) << "row used before named";
    EXPECT_TRUE(ev.has_ts);
    if (monotonic && last_ts.count(ev.tid) == 1) {
      EXPECT_GE(ev.ts, last_ts[ev.tid]);
    }
    last_ts[ev.tid] = ev.ts;
    if (ev.ph == "B") {
      EXPECT_NE(ev.tid, 0);
      EXPECT_FALSE(ev.name.empty());
      open[ev.tid].push_back(ev.ts);
      ++sum.begins[ev.tid];
    } else if (ev.ph == "E") {
      EXPECT_TRUE(ev.name.empty());
      if (open[ev.tid].empty()) {
        ADD_FAILURE() << "E without B";
        return sum;
      }
      if (monotonic) {
        EXPECT_GE(ev.ts, open[ev.tid].back());
      }
      open[ev.tid].pop_back();
      ++sum.ends[ev.tid];
    } else {
      EXPECT_EQ(ev.ph, "i");
      EXPECT_EQ(ev.s, "t");
      ++sum.instants[ev.tid];
    }
  }
  for (const auto& [tid, stack] : open) {
    EXPECT_TRUE(stack.empty()) << "row " << tid << " has unclosed B";
  }
  return sum;
}

// The lines of `text` (without their trailing ",").
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (std::string& l : lines) {
    if (!l.empty() && l.back() == ',') l.pop_back();
  }
  return lines;
}

absl::Time T0() { return absl::FromUnixSeconds(1700000000); }

// A FIFO at `path`, opened for reading first so that the writer's open does
// not block; reads block from then on.
int OpenFifoReader(const std::string& path) {
  EXPECT_EQ(mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  return fd;
}

// Reads `fd` into `text` until it holds `needle`; false if that takes longer
// than a generous deadline (a hang) or the writer closes first.
bool ReadUntil(int fd, absl::string_view needle, std::string* text) {
  const absl::Time deadline =
      absl::Now() + kolo::testing::Scaled(absl::Seconds(30));
  while (!absl::StrContains(*text, needle)) {
    pollfd p{fd, POLLIN, 0};
    const int left =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0 || poll(&p, 1, left) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return false;
    text->append(buf, n);
  }
  return true;
}

std::unique_ptr<Timeline> MustOpen(const std::string& path, int rank,
                                   Timeline::Options options = {}) {
  absl::StatusOr<std::unique_ptr<Timeline>> t =
      Timeline::Open(path, rank, options);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(AppendJsonString, EscapesQuotesBackslashesAndControlCharacters) {
  const auto json = [](absl::string_view s) {
    std::string out = "x";  // appends
    AppendJsonString(s, &out);
    return out;
  };
  EXPECT_EQ(json(""), "x\"\"");
  EXPECT_EQ(json("plain/name.0"), "x\"plain/name.0\"");
  EXPECT_EQ(json("a\"b\\c"), "x\"a\\\"b\\\\c\"");
  EXPECT_EQ(json("\n\r\t\b\f"), "x\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(json(std::string("\0\x01\x1f\x7f", 4)),
            "x\"\\u0000\\u0001\\u001f\x7f\"");
  // Valid UTF-8 passes as is: 2, 3 and 4 bytes, and the extremes.
  EXPECT_EQ(json("\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80"),
            "x\"\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80\"");
  EXPECT_EQ(json("\xc2\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf"),
            "x\"\xc2\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf\"");
  // Not UTF-8: a lone continuation byte, 0xff, a truncated sequence, an
  // overlong form, a surrogate, above U+10FFFF. One U+FFFD per bad byte.
  EXPECT_EQ(json("a\x80z"), "x\"a\\ufffdz\"");
  EXPECT_EQ(json("\xff"), "x\"\\ufffd\"");
  EXPECT_EQ(json("\xe2\x98"), "x\"\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xc0\xaf"), "x\"\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xed\xa0\x80"), "x\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xf4\x90\x80\x80"), "x\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xe2\x98"
                 "a"),
            "x\"\\ufffd\\ufffda\"");
}

TEST(Timeline, EmptyTimelineIsValidJson) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  auto t = MustOpen(path, 3);
  ASSERT_NE(t, nullptr);
  t->Close();
  const std::string text = ReadFile(path);
  EXPECT_THAT(text,
              StartsWith("[\n"
                         "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":3,"
                         "\"tid\":0,\"args\":{\"name\":\"rank 3\"}},\n"
                         "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":3,"
                         "\"tid\":0,\"args\":{\"name\":\"plans\"}},\n"
                         "{\"name\":\"timeline closed\",\"ph\":\"i\","
                         "\"s\":\"p\",\"ts\":"));
  EXPECT_EQ(text.substr(text.size() - 4), "}\n]\n");
  const std::vector<Ev> events = Parse(text);
  ASSERT_EQ(events.size(), 3u);
  const Summary sum = CheckWellFormed(events, 3);
  EXPECT_EQ(sum.recorded_dropped, 0u);
  EXPECT_EQ(t->dropped(), 0u);
  // ts counts from Open (the default origin): the close is just after it.
  EXPECT_GE(events[2].ts, 0);
  EXPECT_LT(events[2].ts, 3600e6);
}

TEST(Timeline, WritesEventsExactly) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  Timeline::Options options;
  options.origin = T0();
  auto t = MustOpen(path, 1, options);
  ASSERT_NE(t, nullptr);
  const auto at = [](int64_t ns) { return T0() + absl::Nanoseconds(ns); };
  t->Marker("plan 1", at(500), {{"seq", "1"}, {"tensors", "2"}});
  t->Begin("grad/w", "NEGOTIATE", at(1000), {{"bytes", "64"}});
  t->Instant("grad/b", "ready rank 0", at(1250));  // row 2, via Instant
  t->Instant("grad/w", "ready rank 1", at(1500));
  t->End("grad/w", at(2000));
  t->Begin("grad/w", "ALLREDUCE", at(2000));
  t->Begin("grad/w", "RING", at(2001));  // nested
  t->End("grad/w", at(123456789));
  t->End("grad/w", at(123456789));
  t->Begin("grad/b", "QUEUE", at(-2500));  // before the origin
  t->End("grad/b", at(-1));
  t->Close();
  const std::string text = ReadFile(path);
  const std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 19u) << text;
  const std::vector<std::string> events(lines.begin() + 3, lines.end() - 3);
  EXPECT_THAT(
      events,
      ElementsAre(
          R"({"name":"plan 1","ph":"i","s":"t","ts":0.500,"pid":1,"tid":0,"args":{"seq":"1","tensors":"2"}})",
          R"({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"grad/w"}})",
          R"({"name":"NEGOTIATE","ph":"B","ts":1.000,"pid":1,"tid":1,"args":{"bytes":"64"}})",
          R"({"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"grad/b"}})",
          R"({"name":"ready rank 0","ph":"i","s":"t","ts":1.250,"pid":1,"tid":2})",
          R"({"name":"ready rank 1","ph":"i","s":"t","ts":1.500,"pid":1,"tid":1})",
          R"({"ph":"E","ts":2.000,"pid":1,"tid":1})",
          R"({"name":"ALLREDUCE","ph":"B","ts":2.000,"pid":1,"tid":1})",
          R"({"name":"RING","ph":"B","ts":2.001,"pid":1,"tid":1})",
          R"({"ph":"E","ts":123456.789,"pid":1,"tid":1})",
          R"({"ph":"E","ts":123456.789,"pid":1,"tid":1})",
          R"({"name":"QUEUE","ph":"B","ts":-2.500,"pid":1,"tid":2})",
          R"({"ph":"E","ts":-0.001,"pid":1,"tid":2})"));
  EXPECT_THAT(
      lines[lines.size() - 3],
      StartsWith(R"({"name":"timeline closed","ph":"i","s":"p","ts":)"));
  EXPECT_EQ(lines[lines.size() - 2], "]");
  EXPECT_EQ(lines.back(), "");

  const Summary sum = CheckWellFormed(Parse(text), 1, /*monotonic=*/false);
  EXPECT_EQ(sum.row_names, (std::map<int, std::string>{
                               {0, "plans"}, {1, "grad/w"}, {2, "grad/b"}}));
  EXPECT_EQ(sum.begins, (std::map<int, int>{{1, 3}, {2, 1}}));
  EXPECT_EQ(sum.ends, (std::map<int, int>{{1, 3}, {2, 1}}));
  EXPECT_EQ(sum.instants, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_EQ(sum.recorded_dropped, 0u);
}

TEST(Timeline, EscapesNamesAndArgsInTheFile) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  auto t = MustOpen(path, 0);
  ASSERT_NE(t, nullptr);
  const std::string tricky =
      std::string("q\"b\\n\nc\x01 \xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80 ") +
      std::string(1, '\0') + "end";
  const absl::Time now = absl::Now();
  t->Begin(tricky, "phase \"x\"\t", now, {{"key\\\"", tricky}});
  t->End(tricky, now);
  t->Instant("bad \xff utf8", "i\x1f", now);
  t->Marker("m\r", now, {{"\xe2\x98", "v"}});
  t->Close();
  const std::vector<Ev> events = Parse(ReadFile(path));
  const Summary sum = CheckWellFormed(events, 0);
  EXPECT_EQ(sum.row_names,
            (std::map<int, std::string>{
                {0, "plans"}, {1, tricky}, {2, "bad \xef\xbf\xbd utf8"}}));
  ASSERT_EQ(events.size(), 9u);
  EXPECT_EQ(events[3].name, "phase \"x\"\t");
  EXPECT_EQ(events[3].args,
            (std::map<std::string, std::string>{{"key\\\"", tricky}}));
  EXPECT_EQ(events[6].name, "i\x1f");
  EXPECT_EQ(events[7].name, "m\r");
  EXPECT_EQ(
      events[7].args,
      (std::map<std::string, std::string>{{"\xef\xbf\xbd\xef\xbf\xbd", "v"}}));
}

TEST(Timeline, DestructorClosesAndEndsOpenSlices) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  {
    auto t = MustOpen(path, 2);
    ASSERT_NE(t, nullptr);
    t->Begin("a", "outer", absl::Now());
    t->Begin("a", "inner", absl::Now());
    t->Begin("b", "other", absl::Now());
    t->End("b", absl::Now());
    t->End("never begun", absl::Now());  // ignored
    t->End("b", absl::Now());            // ignored: nothing open
    EXPECT_EQ(t->dropped(), 0u);
  }
  const std::vector<Ev> events = Parse(ReadFile(path));
  const Summary sum = CheckWellFormed(events, 2);
  EXPECT_EQ(sum.begins, (std::map<int, int>{{1, 2}, {2, 1}}));
  EXPECT_EQ(sum.ends, (std::map<int, int>{{1, 2}, {2, 1}}));
  EXPECT_EQ(sum.row_names.size(), 3u);  // "never begun" got no row
  // The two slices left open end at the close record's time.
  ASSERT_EQ(events.size(), 11u);
  EXPECT_EQ(events[8].ph, "E");
  EXPECT_EQ(events[9].ph, "E");
  EXPECT_EQ(events[8].ts, events[10].ts);
  EXPECT_EQ(events[9].ts, events[10].ts);
}

TEST(Timeline, CloseIsIdempotentAndLaterEventsAreDropped) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  auto t = MustOpen(path, 0);
  ASSERT_NE(t, nullptr);
  t->Marker("before", absl::Now());
  t->Close();
  const std::string text = ReadFile(path);
  t->Close();
  t->Marker("after", absl::Now());
  t->Begin("x", "after", absl::Now());
  t->End("x", absl::Now());
  t->Instant("x", "after", absl::Now());
  t->Close();
  EXPECT_EQ(t->dropped(), 4u);
  t.reset();
  EXPECT_EQ(ReadFile(path), text);
  const Summary sum = CheckWellFormed(Parse(text), 0);
  EXPECT_EQ(sum.instants, (std::map<int, int>{{0, 1}}));
  EXPECT_EQ(sum.recorded_dropped, 0u);
}

TEST(Timeline, ConcurrentCloseCallsBothReturnAfterTheFileIsDone) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  auto t = MustOpen(path, 0);
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 100; ++i) t->Marker("m", absl::Now());
  std::vector<std::string> seen(2);
  std::vector<std::thread> closers;
  for (int i = 0; i < 2; ++i) {
    closers.emplace_back([&, i] {
      t->Close();
      seen[i] = ReadFile(path);
    });
  }
  for (std::thread& c : closers) c.join();
  EXPECT_EQ(seen[0], seen[1]);
  const Summary sum = CheckWellFormed(Parse(seen[0]), 0);
  EXPECT_EQ(sum.instants, (std::map<int, int>{{0, 100}}));
}

TEST(Timeline, EverythingDroppedWhenNothingMayQueue) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  Timeline::Options options;
  options.max_queued = 0;
  auto t = MustOpen(path, 5, options);
  ASSERT_NE(t, nullptr);
  t->Begin("a", "p", absl::Now());
  t->Instant("a", "i", absl::Now());
  t->End("a", absl::Now());  // dropped with its Begin
  t->Marker("m", absl::Now());
  t->Close();
  EXPECT_EQ(t->dropped(), 4u);
  const std::vector<Ev> events = Parse(ReadFile(path));
  ASSERT_EQ(events.size(), 3u);  // no row for "a": nothing of it was written
  const Summary sum = CheckWellFormed(events, 5);
  EXPECT_EQ(sum.recorded_dropped, 4u);
}

// The writer blocks writing to a pipe that nobody reads, as on a disk that
// cannot keep up: the callers go on (this test would hang otherwise), the
// queue fills, and events are dropped. Then every event is accounted for:
// written or counted, with every written Begin ended.
TEST(Timeline, DropsInsteadOfBlockingWhenTheWriterIsStuck) {
  TempDir dir;
  const std::string path = dir.File("fifo");
  const int rfd = OpenFifoReader(path);
  ASSERT_GE(rfd, 0);
  Timeline::Options options;
  options.max_queued = 8;
  options.origin = T0();
  auto t = MustOpen(path, 4, options);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(fcntl(rfd, F_SETFL, 0), 0);  // blocking reads from now on

  uint64_t calls = 0;
  int64_t ns = 0;
  const auto step = [&](int i) {
    const std::string tensor = absl::StrCat("t", i % 4);
    t->Begin(tensor, "outer", T0() + absl::Nanoseconds(++ns));
    t->Begin(tensor, "inner", T0() + absl::Nanoseconds(++ns));
    t->Instant(tensor, "tick", T0() + absl::Nanoseconds(++ns));
    t->End(tensor, T0() + absl::Nanoseconds(++ns));
    t->End(tensor, T0() + absl::Nanoseconds(++ns));
    t->Marker("plan", T0() + absl::Nanoseconds(++ns));
    calls += 6;
  };
  int i = 0;
  while (t->dropped() == 0 && i < 10'000'000) step(i++);
  ASSERT_GT(t->dropped(), 0u) << "the writer never fell behind";
  for (int k = 0; k < 1000; ++k) step(i++);  // well past the point of drops
  t->Begin("open", "left open", T0() + absl::Nanoseconds(++ns));
  ++calls;

  std::string text;
  std::thread reader([&] {
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(rfd, buf, sizeof(buf))) > 0) text.append(buf, n);
  });
  t->Close();
  reader.join();
  close(rfd);

  const std::vector<Ev> events = Parse(text);
  const Summary sum = CheckWellFormed(events, 4);
  uint64_t written = 0, synthetic_ends = 0;
  for (const auto& [tid, n] : sum.begins) written += n;
  for (const auto& [tid, n] : sum.ends) written += n;
  for (const auto& [tid, n] : sum.instants) written += n;
  // Less the End that Close added for "left open" if its Begin was queued.
  for (const auto& [tid, name] : sum.row_names) {
    if (name == "open") synthetic_ends = 1;
  }
  written -= synthetic_ends;
  EXPECT_EQ(written + t->dropped(), calls);
  EXPECT_EQ(sum.recorded_dropped, t->dropped());
  EXPECT_GT(written, 0u);
}

// Events reach the file while the timeline is open: after flush_interval
// at most (the default), or as soon as a quarter of max_queued wait.
TEST(Timeline, EventsAreWrittenBeforeClose) {
  TempDir dir;
  const std::string path = dir.File("fifo");
  const int rfd = OpenFifoReader(path);
  ASSERT_GE(rfd, 0);
  auto t = MustOpen(path, 0);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(fcntl(rfd, F_SETFL, 0), 0);
  std::string text;
  t->Marker("first", absl::Now());
  EXPECT_TRUE(ReadUntil(rfd, "\"first\"", &text)) << text;
  t->Marker("second", absl::Now());
  EXPECT_TRUE(ReadUntil(rfd, "\"second\"", &text)) << text;
  t->Close();
  EXPECT_TRUE(ReadUntil(rfd, "\n]\n", &text)) << text;
  close(rfd);
  CheckWellFormed(Parse(text), 0);
}

TEST(Timeline, AQuarterFullQueueIsWrittenAtOnce) {
  TempDir dir;
  const std::string path = dir.File("fifo");
  const int rfd = OpenFifoReader(path);
  ASSERT_GE(rfd, 0);
  Timeline::Options options;
  options.max_queued = 8;
  options.flush_interval = absl::InfiniteDuration();  // only when 2 wait
  auto t = MustOpen(path, 0, options);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(fcntl(rfd, F_SETFL, 0), 0);
  std::string text;
  for (int i = 0; i < 4; ++i) {
    // The writer holds a lone event (the interval is infinite) and takes
    // the pair once it is complete.
    t->Marker(absl::StrCat("a", i), absl::Now());
    t->Marker(absl::StrCat("b", i), absl::Now());
    EXPECT_TRUE(ReadUntil(rfd, absl::StrCat("\"b", i, "\""), &text)) << text;
  }
  EXPECT_EQ(t->dropped(), 0u);
  t->Close();
  EXPECT_TRUE(ReadUntil(rfd, "\n]\n", &text)) << text;
  close(rfd);
  const Summary sum = CheckWellFormed(Parse(text), 0);
  EXPECT_EQ(sum.instants, (std::map<int, int>{{0, 8}}));
}

TEST(Timeline, WriteErrorIsCountedAndCloseStillReturns) {
  Timeline::Options options;
  auto t = MustOpen("/dev/full", 0, options);  // every write: ENOSPC
  ASSERT_NE(t, nullptr);
  t->Begin("a", "p", absl::Now());
  t->Instant("a", "i", absl::Now());
  t->End("a", absl::Now());
  t->Close();
  EXPECT_EQ(t->dropped(), 3u);
  t->Marker("after", absl::Now());
  EXPECT_EQ(t->dropped(), 4u);
}

TEST(Timeline, OpenFailsNamingThePath) {
  TempDir dir;
  const std::string missing = dir.path() + "/no/such/dir/t.json";
  absl::StatusOr<std::unique_ptr<Timeline>> t = Timeline::Open(missing, 0);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("'" + missing + "'"));
  EXPECT_THAT(t.status().message(), HasSubstr("KOLO_TIMELINE"));

  t = Timeline::Open(dir.path(), 0);  // a directory
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("'" + dir.path() + "'"));
  EXPECT_THAT(t.status().message(), HasSubstr("Is a directory"));
}

// Producers on several threads (each with a row of its own, and a shared
// one), the plans row, and dropped() readers; nothing is lost.
TEST(Timeline, ConcurrentProducers) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  Timeline::Options options;
  options.origin = T0();
  auto t = MustOpen(path, 6, options);
  ASSERT_NE(t, nullptr);
  constexpr int kThreads = 4, kIters = 1000;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      const std::string mine = absl::StrCat("thread ", th);
      for (int i = 0; i < kIters; ++i) {
        const absl::Time at = T0() + absl::Microseconds(10 * i);
        t->Begin(mine, "op", at, {{"i", absl::StrCat(i)}});
        t->Begin(mine, "inner", at + absl::Microseconds(1));
        t->Instant("shared", absl::StrCat("tick ", th), at);
        t->End(mine, at + absl::Microseconds(2));
        t->End(mine, at + absl::Microseconds(3));
        if (i % 10 == 0) t->Marker(absl::StrCat("plan ", th), at);
        if (i % 100 == 0) {
          EXPECT_EQ(t->dropped(), 0u);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  t->Close();
  // ts goes backwards on the shared row and the plans row (several threads).
  const Summary sum = CheckWellFormed(Parse(ReadFile(path)), 6,
                                      /*monotonic=*/false);
  EXPECT_EQ(t->dropped(), 0u);
  EXPECT_EQ(sum.recorded_dropped, 0u);
  ASSERT_EQ(sum.row_names.size(), kThreads + 2u);
  int shared = -1;
  for (const auto& [tid, name] : sum.row_names) {
    if (name == "shared") shared = tid;
  }
  ASSERT_NE(shared, -1);
  EXPECT_EQ(sum.instants.at(shared), kThreads * kIters);
  EXPECT_EQ(sum.instants.at(0), kThreads * kIters / 10);
  for (const auto& [tid, name] : sum.row_names) {
    if (tid == 0 || tid == shared) continue;
    EXPECT_THAT(name, StartsWith("thread "));
    EXPECT_EQ(sum.begins.at(tid), 2 * kIters) << name;
    EXPECT_EQ(sum.ends.at(tid), 2 * kIters) << name;
  }
}

// Close while producers are running: the file is finished and valid, and
// every event is either in it or counted as dropped.
TEST(Timeline, CloseRacingWithProducers) {
  TempDir dir;
  const std::string path = dir.File("t.json");
  auto t = MustOpen(path, 0);
  ASSERT_NE(t, nullptr);
  constexpr int kThreads = 3, kIters = 3000;
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      started.fetch_add(1);
      for (int i = 0; i < kIters; ++i) {
        if (th == 0) {
          t->Marker("m", absl::Now());
        } else {
          t->Instant(absl::StrCat("row ", th), "i", absl::Now());
        }
      }
    });
  }
  // Pairs from this thread, balanced whatever Close catches.
  for (int i = 0; i < 100; ++i) {
    t->Begin("pairs", "p", absl::Now());
    t->End("pairs", absl::Now());
  }
  t->Begin("pairs", "open at close", absl::Now());
  while (started.load() < kThreads) {
    // (a spin, not a sleep: the producers are starting, so Close races them)
  }
  t->Close();
  for (std::thread& th : threads) th.join();
  const Summary sum = CheckWellFormed(Parse(ReadFile(path)), 0,
                                      /*monotonic=*/false);
  uint64_t instants = 0;
  for (const auto& [tid, n] : sum.instants) instants += n;
  EXPECT_EQ(instants + t->dropped(), uint64_t{kThreads} * kIters);
  EXPECT_LE(sum.recorded_dropped, t->dropped());
  int pairs = -1;
  for (const auto& [tid, name] : sum.row_names) {
    if (name == "pairs") pairs = tid;
  }
  ASSERT_NE(pairs, -1);
  EXPECT_EQ(sum.begins, (std::map<int, int>{{pairs, 101}}));
  EXPECT_EQ(sum.ends, (std::map<int, int>{{pairs, 101}}));  // 1 by Close
}

}  // namespace
}  // namespace kolo::worker
