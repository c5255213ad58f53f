// Tensor fusion, the response cache and the timeline through real processes
// (issue 5 point 5): kolorun jobs of kolo-fusion-worker
// (tests/workers/fusion_worker.cc), which checks every output bit for bit.
// - A step of 79 tensors (every dtype x reduce op, scale factors, counts 0 to
//   300000, allgathers with a different first dimension per rank, broadcasts,
//   a barrier) in a different order on every rank, four steps, is exact for
//   world sizes 1-5 with fusion on and off and the cache on and off; the
//   timeline of those runs shows that fusion happened (allreduces and
//   allgathers; never tensors of KOLO_FUSION_DIRECT_BYTES or more,
//   broadcasts or the barrier) exactly when it was on. The same on the
//   Session stream (no negotiation links), with Horovod's variable names,
//   and with KOLO_FUSION_DIRECT_BYTES at 0 and 64.
// - The same with a 3-entry cache (eviction on every step), with a different
//   subset of the tensors every step through a 10-entry cache, and with the
//   settings switched between steps by kolo::set_fusion_threshold /
//   set_cache_capacity (the timeline shows each step fused or not as set).
// - A metadata change of a name between steps (shape, dtype, reduce op, scale
//   factors, an allgather's row shape, the collective) on every rank gives
//   exact results for the new metadata; the same change on one rank only
//   fails those tensors on every rank with kFailedPrecondition naming each,
//   and the next step works.
// - The timeline of a short run is a valid JSON array with, per tensor and
//   step, its negotiation, every rank's ready tick, its queueing and its
//   collective (with the fusion buffer copies when fused); a marker per plan
//   that counts its tensors; balanced B/E events; written by rank 0 only.
// Fusion depends on which tensors are ready together, so the checks that it
// happened hold over a whole run (every run has dozens of candidates), not
// per tensor.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"
#include "tests/testing/topology.h"

namespace kolo::testing {
namespace {

using Env = std::map<std::string, std::optional<std::string>>;

// kolorun -np n kolo-fusion-worker args..., with the fusion and cache knobs
// unset unless `env` sets them (so that the defaults are the library's).
JobRun Launch(int n, const std::vector<std::string>& args, Env env = {}) {
  std::vector<std::string> argv = {Bin("kolorun"), "-np", std::to_string(n),
                                   Bin("kolo-fusion-worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const char* knob :
       {"KOLO_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD",
        "KOLO_FUSION_DIRECT_BYTES", "KOLO_CACHE_CAPACITY",
        "HOROVOD_CACHE_CAPACITY", "KOLO_TIMELINE", "HOROVOD_TIMELINE"}) {
    env.try_emplace(knob, std::nullopt);
  }
  JobRun run = RunJob(argv, std::move(env));
  return run;
}

// Every rank printed FUS_OK for `mode` with `steps` steps and checked the
// same (non-zero) number of elements.
void ExpectOk(const JobRun& run, int n, const std::string& mode, int steps) {
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "FUS_FAIL")) << run.output;
  std::vector<Fields> ok = ParseTagged(run.output, "FUS_OK");
  ASSERT_EQ(ok.size(), static_cast<size_t>(n)) << run.output;
  std::set<int> ranks;
  for (const Fields& f : ok) {
    EXPECT_EQ(f.at("mode"), mode);
    EXPECT_EQ(IntField(f, "size"), n);
    EXPECT_EQ(IntField(f, "steps"), steps);
    EXPECT_GT(std::stoll(f.at("elements")), 0);
    EXPECT_EQ(f.at("elements"), ok[0].at("elements")) << run.output;
    ranks.insert(IntField(f, "rank"));
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(n)) << run.output;
}

// ---- Timeline files ---------------------------------------------------------

// A path for a timeline in the test's temporary directory, removed at the
// end of its scope.
class TempFile {
 public:
  explicit TempFile(const std::string& name)
      : path_(absl::StrCat(::testing::TempDir(), "/kolo_fusion_", getpid(), "_",
                           name)) {
    unlink(path_.c_str());
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Ev {
  std::string name, ph, s;
  bool has_ts = false, has_pid = false, has_tid = false;
  double ts = 0;
  int pid = -1, tid = -1;
  std::map<std::string, std::string> args;

  // args[key], "" when absent.
  std::string Arg(const std::string& key) const {
    auto it = args.find(key);
    return it == args.end() ? "" : it->second;
  }
};

// `text` as a JSON array of events; a test failure if it is not one.
std::vector<Ev> ParseEvents(const std::string& text) {
  google::protobuf::ListValue list;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &list);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text.substr(0, 4000);
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
        ev.has_pid = true;
      } else if (key == "tid") {
        ev.tid = static_cast<int>(field.number_value());
        ev.has_tid = true;
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

// What a timeline says, by tensor.
struct Trace {
  std::vector<Ev> events;
  std::map<int, std::string> rows;  // tid -> thread_name
  // Per tensor, per occurrence (a segment starts at each NEGOTIATE_* B): the
  // row's events as "B:NAME", "E", "i:NAME", in file order.
  std::map<std::string, std::vector<std::vector<std::string>>> segments;
  std::vector<Ev> markers;  // instants on the plans row, but the last
  // Per allreduce, its bytes (from its first NEGOTIATE_ALLREDUCE's args).
  std::map<std::string, int64_t> allreduce_bytes;
};

// "float32" -> 4; 0 for a name not used here.
int64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "float64") return 8;
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16" || dtype == "bfloat16") return 2;
  return 0;
}

// "[10,100]" -> 1000; "[]" -> 1.
int64_t Elements(const std::string& shape) {
  EXPECT_TRUE(absl::StartsWith(shape, "[") && absl::EndsWith(shape, "]"))
      << shape;
  int64_t n = 1;
  const std::string inner = shape.substr(1, shape.size() - 2);
  if (inner.empty()) return n;
  for (absl::string_view d : absl::StrSplit(inner, ',')) {
    int64_t v = 0;
    EXPECT_TRUE(absl::SimpleAtoi(d, &v)) << shape;
    n *= v;
  }
  return n;
}

// Parses the file rank 0 wrote and checks what every timeline holds: a
// JSON array; pid 0 throughout; ph, pid and tid on every event, ts on all
// but metadata; the process and plans rows first and the close record last
// (with no drops); every row named once before use; B/E balanced and
// nested per row, ts never going backwards among them.
Trace ReadTrace(const std::string& path) {
  Trace t;
  const std::string text = ReadFile(path);
  EXPECT_FALSE(text.empty()) << path;
  EXPECT_EQ(text.substr(0, 1), "[");
  t.events = ParseEvents(text);
  const std::vector<Ev>& ev = t.events;
  EXPECT_GE(ev.size(), 3u);
  if (ev.size() < 3) return t;
  EXPECT_EQ(ev[0].name, "process_name");
  EXPECT_EQ(ev[0].Arg("name"), "rank 0");
  EXPECT_EQ(ev[1].name, "thread_name");
  EXPECT_EQ(ev[1].tid, 0);
  EXPECT_EQ(ev[1].Arg("name"), "plans");
  t.rows[0] = "plans";
  EXPECT_EQ(ev.back().name, "timeline closed");
  EXPECT_EQ(ev.back().Arg("dropped_events"), "0");
  std::map<int, std::vector<double>> open;  // tid -> ts of open Bs
  std::map<int, double> last;               // tid -> ts of the last B/E
  for (size_t i = 0; i < ev.size(); ++i) {
    const Ev& e = ev[i];
    SCOPED_TRACE(absl::StrCat("event ", i, " '", e.name, "' ", e.ph));
    EXPECT_TRUE(e.has_pid && e.has_tid && !e.ph.empty());
    EXPECT_EQ(e.pid, 0) << "only rank 0 writes the timeline";
    if (e.ph == "M") {
      EXPECT_FALSE(e.has_ts);
      if (i >= 2) {
        EXPECT_EQ(e.name, "thread_name");
        EXPECT_EQ(t.rows.count(e.tid), 0u) << "row named twice";
        t.rows[e.tid] = e.Arg("name");
      }
      continue;
    }
    EXPECT_TRUE(e.has_ts);
    if (i + 1 == ev.size()) break;  // the close record
    EXPECT_EQ(t.rows.count(e.tid), 1u) << "row used before it is named";
    const std::string& tensor = t.rows[e.tid];
    if (e.tid == 0) {
      EXPECT_EQ(e.ph, "i");
      t.markers.push_back(e);
      continue;
    }
    auto& segments = t.segments[tensor];
    if (e.ph == "B") {
      EXPECT_FALSE(e.name.empty());
      if (last.count(e.tid) == 1) {
        EXPECT_GE(e.ts, last[e.tid]);
      }
      last[e.tid] = e.ts;
      open[e.tid].push_back(e.ts);
      if (absl::StartsWith(e.name, "NEGOTIATE_")) segments.emplace_back();
      if (e.name == "NEGOTIATE_ALLREDUCE" &&
          t.allreduce_bytes.count(tensor) == 0) {
        EXPECT_EQ(e.args.size(), 2u);
        t.allreduce_bytes[tensor] =
            Elements(e.Arg("shape")) * DtypeBytes(e.Arg("dtype"));
        EXPECT_GT(DtypeBytes(e.Arg("dtype")), 0) << e.Arg("dtype");
      }
      if (segments.empty()) {
        ADD_FAILURE() << tensor << ": " << e.name << " before NEGOTIATE";
        continue;
      }
      segments.back().push_back("B:" + e.name);
    } else if (e.ph == "E") {
      EXPECT_TRUE(e.name.empty());
      if (open[e.tid].empty()) {
        ADD_FAILURE() << tensor << ": E without B";
        continue;
      }
      EXPECT_GE(e.ts, open[e.tid].back());
      EXPECT_GE(e.ts, last[e.tid]);
      last[e.tid] = e.ts;
      open[e.tid].pop_back();
      if (!segments.empty()) segments.back().push_back("E");
    } else {
      EXPECT_EQ(e.ph, "i");
      EXPECT_EQ(e.s, "t");
      if (!segments.empty()) segments.back().push_back("i:" + e.name);
    }
  }
  for (const auto& [tid, stack] : open) {
    EXPECT_TRUE(stack.empty()) << t.rows[tid] << " has an unclosed B";
  }
  return t;
}

bool Fused(const std::vector<std::string>& segment) {
  for (const std::string& e : segment) {
    if (e == "B:MEMCPY_IN_FUSION_BUFFER") return true;
  }
  return false;
}

// Occurrences of `tensor` that ran fused.
int FusedCount(const Trace& t, const std::string& tensor) {
  int n = 0;
  auto it = t.segments.find(tensor);
  if (it == t.segments.end()) return 0;
  for (const auto& seg : it->second) n += Fused(seg) ? 1 : 0;
  return n;
}

// Sum of FusedCount over tensors whose name starts with `prefix`.
int FusedWithPrefix(const Trace& t, const std::string& prefix) {
  int n = 0;
  for (const auto& [name, segs] : t.segments) {
    if (absl::StartsWith(name, prefix)) n += FusedCount(t, name);
  }
  return n;
}

// Occurrences of allreduces of at least `bytes` bytes that ran fused.
int FusedAllreducesOfAtLeast(const Trace& t, int64_t bytes) {
  int n = 0;
  for (const auto& [name, b] : t.allreduce_bytes) {
    if (b >= bytes) n += FusedCount(t, name);
  }
  return n;
}

// ---- The step, over the grid of settings --------------------------------

constexpr int kSteps = 4;
constexpr int kStepTensors = 79;  // StepSpecs in fusion_worker.cc

// (world size, fusion on, cache on)
using GridParam = std::tuple<int, bool, bool>;
class Step : public ::testing::TestWithParam<GridParam> {};

TEST_P(Step, ManyTensorsInDifferentOrdersAreExact) {
  const auto [n, fusion, cache] = GetParam();
  Env env;
  if (!fusion) env["KOLO_FUSION_THRESHOLD"] = "0";
  if (!cache) env["KOLO_CACHE_CAPACITY"] = "0";
  // With the cache on, the timeline shows whether fusion happened.
  std::optional<TempFile> timeline;
  if (cache) {
    timeline.emplace(absl::StrCat("step_", n, "_", fusion, ".json"));
    env["KOLO_TIMELINE"] = timeline->path();
  }
  JobRun run = Launch(n, {"steps", std::to_string(kSteps)}, env);
  ExpectOk(run, n, "steps", kSteps);
  std::printf("%d ranks, fusion %s, cache %s: %.1f s\n", n,
              fusion ? "on" : "off", cache ? "on" : "off", run.seconds);
  if (!timeline.has_value()) return;
  const Trace t = ReadTrace(timeline->path());
  EXPECT_EQ(t.rows.size(), kStepTensors + 1u);  // + "plans"
  for (const auto& [name, segs] : t.segments) {
    EXPECT_EQ(segs.size(), static_cast<size_t>(kSteps)) << name;
  }
  for (const char* never : {"direct/", "bc/", "barrier/"}) {
    EXPECT_EQ(FusedWithPrefix(t, never), 0) << never;
  }
  // KOLO_FUSION_DIRECT_BYTES, 1 MiB by default.
  EXPECT_EQ(FusedAllreducesOfAtLeast(t, int64_t{1} << 20), 0);
  EXPECT_EQ(t.allreduce_bytes.size(), 65u);
  if (fusion) {
    EXPECT_GT(FusedWithPrefix(t, "ar/") + FusedWithPrefix(t, "sum"), 0);
    EXPECT_GT(FusedWithPrefix(t, "ag/"), 0) << "allgathers fuse too";
  } else {
    EXPECT_EQ(FusedWithPrefix(t, ""), 0) << "KOLO_FUSION_THRESHOLD=0";
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, Step,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<GridParam>& p) {
                           return absl::StrCat(
                               std::get<0>(p.param), "ranks",
                               std::get<1>(p.param) ? "Fusion" : "NoFusion",
                               std::get<2>(p.param) ? "Cache" : "NoCache");
                         });

// Negotiation on the Session stream instead of the links: fusion and the
// cache work the same.
TEST(StepVariants, StreamNegotiationFusesAndIsExact) {
  const int n = 3;
  TempFile timeline("stream.json");
  JobRun run = Launch(
      n, {"steps", std::to_string(kSteps)},
      {{"KOLO_NEGOTIATION_LINK", "0"}, {"KOLO_TIMELINE", timeline.path()}});
  ExpectOk(run, n, "steps", kSteps);
  const Trace t = ReadTrace(timeline.path());
  EXPECT_GT(FusedWithPrefix(t, ""), 0);
}

// Horovod's names for the knobs: no fusion, and a timeline.
TEST(StepVariants, HorovodAliases) {
  const int n = 2;
  TempFile timeline("horovod.json");
  JobRun run = Launch(n, {"steps", "3"},
                      {{"HOROVOD_FUSION_THRESHOLD", "0"},
                       {"HOROVOD_CACHE_CAPACITY", "0"},
                       {"HOROVOD_TIMELINE", timeline.path()}});
  ExpectOk(run, n, "steps", 3);
  const Trace t = ReadTrace(timeline.path());
  EXPECT_EQ(t.rows.size(), kStepTensors + 1u);
  EXPECT_EQ(FusedWithPrefix(t, ""), 0);
}

// KOLO_FUSION_DIRECT_BYTES: 0 fuses nothing; 64 fuses only allreduces of
// less than 64 bytes.
class DirectBytes : public ::testing::TestWithParam<int> {};

TEST_P(DirectBytes, BoundsWhatFuses) {
  const int n = 2, direct = GetParam();
  TempFile timeline(absl::StrCat("direct_", direct, ".json"));
  JobRun run = Launch(n, {"steps", std::to_string(kSteps)},
                      {{"KOLO_FUSION_DIRECT_BYTES", std::to_string(direct)},
                       {"KOLO_TIMELINE", timeline.path()}});
  ExpectOk(run, n, "steps", kSteps);
  const Trace t = ReadTrace(timeline.path());
  EXPECT_EQ(FusedAllreducesOfAtLeast(t, direct), 0);
  if (direct == 0) {
    EXPECT_EQ(FusedWithPrefix(t, ""), 0);
  } else {
    EXPECT_GT(FusedAllreducesOfAtLeast(t, 0), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Knob, DirectBytes, ::testing::Values(0, 64));

TEST(Cache, ThreeEntriesEvictOnEveryStepAndResultsStayExact) {
  const int n = 3;
  JobRun run = Launch(n, {"steps", std::to_string(kSteps)},
                      {{"KOLO_CACHE_CAPACITY", "3"}});
  ExpectOk(run, n, "steps", kSteps);
}

// Names leave and come back (a different subset every step) with room for
// 10 of them: bits are evicted, retired and given out again.
TEST(Cache, SubsetsChurnThroughASmallCache) {
  const int n = 3, steps = 12;
  JobRun run = Launch(n, {"churn", std::to_string(steps)},
                      {{"KOLO_CACHE_CAPACITY", "10"}});
  ExpectOk(run, n, "churn", steps);
}

// kSwitches in fusion_worker.cc: the fusion threshold per step takes
// effect at the step it was set before, as the timeline of `switch` shows.
void ExpectSwitchesTakeEffect(const Trace& t) {
  // Per step: fused tensors, and fused allreduces of more than 4 KiB.
  std::vector<int> fused(7, 0), big(7, 0);
  for (const auto& [name, segs] : t.segments) {
    ASSERT_EQ(segs.size(), 7u) << name;
    const auto bytes = t.allreduce_bytes.find(name);
    for (int step = 0; step < 7; ++step) {
      if (!Fused(segs[step])) continue;
      ++fused[step];
      if (bytes != t.allreduce_bytes.end() && bytes->second > 4096) {
        ++big[step];
      }
    }
  }
  EXPECT_EQ(fused[1], 0) << "set_fusion_threshold(0)";
  EXPECT_EQ(fused[2], 0) << "set_fusion_threshold(0)";
  EXPECT_GT(fused[0] + fused[5] + fused[6], 0) << "the default fuses";
  EXPECT_GT(fused[3] + fused[4], 0) << "a 4 KiB threshold fuses small ones";
  EXPECT_EQ(big[3] + big[4], 0) << "nothing over 4 KiB fuses under 4 KiB";
}

TEST(Settings, SwitchedAtRunTimeBetweenSteps) {
  const int n = 3;
  TempFile timeline("switch.json");
  JobRun run =
      Launch(n, {"switch"},
             {{"KOLO_TIMELINE", timeline.path()}, {"KOLO_FAST_PATH", "0"}});
  ExpectOk(run, n, "switch", 7);
  ExpectSwitchesTakeEffect(ReadTrace(timeline.path()));
}

// ---- Metadata changes -------------------------------------------------------

// (world size, the fast path on): a changed signature on one rank leaves the
// fast path and fails with the coordinator's error on every rank; on the
// fast path after a thousand cached steps.
class Metadata : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(Metadata, ChangeOnEveryRankIsExactAndOnOneRankFailsEverywhere) {
  const auto [n, fast] = GetParam();
  std::vector<std::string> args = {"metadata"};
  if (fast) args.push_back("1000");
  JobRun run = Launch(n, args, {{"KOLO_FAST_PATH", fast ? "1" : "0"}});
  ExpectOk(run, n, "metadata", 8);
  std::vector<Fields> errs = ParseTagged(run.output, "FUS_ERR");
  if (n == 1) {
    EXPECT_TRUE(errs.empty()) << run.output;
    return;
  }
  ASSERT_EQ(errs.size(), 4u * n) << run.output;
  std::map<std::string, int> by_name;
  for (const Fields& f : errs) {
    EXPECT_EQ(IntField(f, "code"), 9) << run.output;  // kFailedPrecondition
    EXPECT_EQ(IntField(f, "step"), 4) << run.output;
    ++by_name[f.at("name")];
  }
  EXPECT_EQ(by_name, (std::map<std::string, int>{{"meta/dtype", n},
                                                 {"meta/gather", n},
                                                 {"meta/reduce", n},
                                                 {"meta/shape", n}}));
  if (n != 3) return;
  // The exact wording, on every rank.
  for (const char* m : {
           "FUS_MSG meta/shape: tensor 'meta/shape': allreduce shape [6,5] on "
           "ranks 0,1 but [5,6] on rank 2",
           "FUS_MSG meta/dtype: tensor 'meta/dtype': allreduce dtype int32 on "
           "ranks 0,1 but float64 on rank 2",
           "FUS_MSG meta/reduce: tensor 'meta/reduce': allreduce reduce op max "
           "on ranks 0,1 but min on rank 2",
           "FUS_MSG meta/gather: tensor 'meta/gather': allgather shape [*,4] "
           "on ranks 0,1 but [*,5] on rank 2",
       }) {
    int count = 0;
    for (size_t at = run.output.find(m); at != std::string::npos;
         at = run.output.find(m, at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, n) << m << "\n" << run.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, Metadata,
    ::testing::Values(std::make_tuple(1, false), std::make_tuple(3, false),
                      std::make_tuple(3, true)),
    [](const ::testing::TestParamInfo<std::tuple<int, bool>>& p) {
      return absl::StrCat(std::get<0>(p.param), "ranks",
                          std::get<1>(p.param) ? "FastPath" : "");
    });

// ---- The fast path (KOLO_FAST_PATH=1) --------------------------------------

class FastPath : public ::testing::TestWithParam<int> {};

// Steps of allreduces only: from the second step on, every step is agreed
// among the ranks over the data plane (at least one round per step), and
// every result is exact.
TEST_P(FastPath, AllreduceStepsRunWithoutTheCoordinatorAndAreExact) {
  const int n = GetParam();
  constexpr int kFastSteps = 12;
  JobRun run = Launch(n, {"allreduce", std::to_string(kFastSteps)},
                      {{"KOLO_FAST_PATH", "1"}});
  ExpectOk(run, n, "allreduce", kFastSteps);
  for (const Fields& f : ParseTagged(run.output, "FUS_OK")) {
    EXPECT_GE(IntField(f, "fast_rounds"), kFastSteps - 1) << run.output;
  }
}

// The whole step (allgathers, broadcasts and a barrier, which need the
// coordinator, among the allreduces), in a different order on every rank,
// and a different subset each step: the ranks leave the fast path and come
// back, and every result stays exact.
TEST_P(FastPath, MixedStepsLeaveAndReturnAndAreExact) {
  const int n = GetParam();
  JobRun steps = Launch(n, {"steps", "6"}, {{"KOLO_FAST_PATH", "1"}});
  ExpectOk(steps, n, "steps", 6);
  JobRun churn = Launch(n, {"churn", "6"}, {{"KOLO_FAST_PATH", "1"}});
  ExpectOk(churn, n, "churn", 6);
}

// Settings changed between steps (fusion off, a cache of 3 entries, ...)
// go to the coordinator, which grants the fast path again under them; the
// tensors announced after the change wait for it: a fast round never runs
// them under the old settings.
TEST(FastPathSettings, SwitchedAtRunTime) {
  TempFile timeline("switch-fast.json");
  JobRun run =
      Launch(3, {"switch"},
             {{"KOLO_TIMELINE", timeline.path()}, {"KOLO_FAST_PATH", "1"}});
  ExpectOk(run, 3, "switch", 7);
  ExpectSwitchesTakeEffect(ReadTrace(timeline.path()));
}

INSTANTIATE_TEST_SUITE_P(Sizes, FastPath, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat(p.param, "ranks");
                         });

// ---- The timeline of a short run ----------------------------------------

// Through the coordinator (KOLO_FAST_PATH=0): every tensor's negotiation
// shows each rank's ready tick, and each plan a marker.
TEST(Timeline, ShortRunHasTheExpectedEvents) {
  const int n = 2, steps = 4;
  TempFile timeline("timeline.json");
  JobRun run =
      Launch(n, {"timeline", std::to_string(steps)},
             {{"KOLO_TIMELINE", timeline.path()}, {"KOLO_FAST_PATH", "0"}});
  ExpectOk(run, n, "timeline", steps);
  const Trace t = ReadTrace(timeline.path());

  // TimelineSpecs in fusion_worker.cc, and their collectives.
  const std::map<std::string, std::string> ops = {
      {"tl/ar0", "ALLREDUCE"}, {"tl/ar1", "ALLREDUCE"},
      {"tl/ar2", "ALLREDUCE"}, {"tl/ar3", "ALLREDUCE"},
      {"tl/ag0", "ALLGATHER"}, {"tl/ag1", "ALLGATHER"},
      {"tl/bc", "BROADCAST"},  {"tl/direct", "ALLREDUCE"}};
  std::set<std::string> named;
  for (const auto& [tid, name] : t.rows) named.insert(name);
  std::set<std::string> want = {"plans"};
  for (const auto& [name, op] : ops) want.insert(name);
  EXPECT_EQ(named, want) << "a row per tensor, named by thread_name";

  // Every occurrence: negotiation with both ranks' ready ticks, the queue,
  // then the collective alone or through the fusion buffer.
  int fused_allreduce = 0, fused_allgather = 0, occurrences = 0;
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    const auto it = t.segments.find(name);
    ASSERT_NE(it, t.segments.end());
    ASSERT_EQ(it->second.size(), static_cast<size_t>(steps));
    for (const std::vector<std::string>& seg : it->second) {
      ++occurrences;
      const std::vector<std::string> head = {
          "B:NEGOTIATE_" + op, "i:rank 0 ready",
          "i:rank 1 ready",    "E",
          "B:QUEUE",           "E"};
      const std::vector<std::string> alone = {"B:" + op, "E"};
      const std::vector<std::string> fused = {
          "B:MEMCPY_IN_FUSION_BUFFER",  "E", "B:" + op, "E",
          "B:MEMCPY_OUT_FUSION_BUFFER", "E"};
      std::vector<std::string> want_alone = head, want_fused = head;
      want_alone.insert(want_alone.end(), alone.begin(), alone.end());
      want_fused.insert(want_fused.end(), fused.begin(), fused.end());
      if (seg == want_fused) {
        EXPECT_TRUE(op != "BROADCAST" && name != "tl/direct")
            << name << " never fuses";
        (op == "ALLREDUCE" ? fused_allreduce : fused_allgather)++;
      } else {
        EXPECT_EQ(seg, want_alone) << absl::StrJoin(seg, " ");
      }
    }
  }
  EXPECT_GT(fused_allreduce, 0);
  EXPECT_GT(fused_allgather, 0);

  // A marker per plan, numbered from 1; together they count every tensor.
  int tensors = 0, seq = 0;
  for (const Ev& m : t.markers) {
    EXPECT_EQ(m.name, absl::StrCat("plan ", ++seq));
    EXPECT_EQ(m.args.size(), 2u);
    tensors += std::stoi(m.Arg("tensors"));
    EXPECT_GE(std::stoi(m.Arg("responses")), 1);
    EXPECT_LE(std::stoi(m.Arg("responses")), std::stoi(m.Arg("tensors")));
  }
  EXPECT_EQ(tensors, occurrences);
  EXPECT_LT(static_cast<int>(t.markers.size()), occurrences)
      << "some plans carry several tensors";
}

// On the fast path (the default) each round is a marker on the plans row
// ("fast path round", with the responses it ran), and a tensor that ran in
// one shows its negotiation without the coordinator's ready ticks.
TEST(Timeline, FastPathRoundsAreMarked) {
  const int n = 2, steps = 12;
  TempFile timeline("timeline-fast.json");
  JobRun run = Launch(n, {"allreduce", std::to_string(steps)},
                      {{"KOLO_TIMELINE", timeline.path()}});
  ExpectOk(run, n, "allreduce", steps);
  const Trace t = ReadTrace(timeline.path());
  int rounds = 0, ran = 0, plans = 0;
  for (const Ev& m : t.markers) {
    if (absl::StartsWith(m.name, "fast path round")) {
      ++rounds;
      ran += std::stoi(m.Arg("responses"));
    } else {
      EXPECT_TRUE(absl::StartsWith(m.name, "plan ")) << m.name;
      ++plans;
    }
  }
  EXPECT_GE(rounds, steps - 1) << "a round per step once granted";
  EXPECT_GE(ran, steps - 1);
  EXPECT_GE(plans, 1) << "the first step goes through the coordinator";
  int without_ticks = 0;
  for (const auto& [name, segs] : t.segments) {
    for (const std::vector<std::string>& seg : segs) {
      if (seg.size() >= 2 && seg[0] == "B:NEGOTIATE_ALLREDUCE" &&
          seg[1] == "E") {
        ++without_ticks;
      }
    }
  }
  EXPECT_GT(without_ticks, 0);
}

}  // namespace
}  // namespace kolo::testing
