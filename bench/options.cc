#include "bench/options.h"

#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/plot.h"

namespace kolo::bench {
namespace {

constexpr absl::string_view kCollectives =
    "allreduce, allgather, broadcast, alltoall, reducescatter";

absl::StatusOr<Collective> ParseCollective(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (Collective op :
       {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
        Collective::kAlltoall, Collective::kReducescatter}) {
    if (lower == CollectiveName(op)) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--op: unknown collective '", name, "'; use one of ", kCollectives));
}

absl::StatusOr<Mode> ParseMode(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (Mode mode : {Mode::kRaw, Mode::kNegotiated, Mode::kStep}) {
    if (lower == ModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--mode: unknown mode '", name, "'; use raw, negotiated or step"));
}

absl::Status Bad(absl::string_view flag, absl::string_view value,
                 absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": '", value, "' is not ", want));
}

// A comma-separated list of values >= 0 ("0,64M,128M"), each parsed by
// `parse`; empty items are refused.
template <typename Parse>
absl::StatusOr<std::vector<int64_t>> ParseList(absl::string_view flag,
                                               absl::string_view text,
                                               absl::string_view want,
                                               Parse parse) {
  std::vector<int64_t> values;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<int64_t> v = parse(absl::StripAsciiWhitespace(item));
    if (!v.ok()) {
      return Bad(flag, text, absl::StrCat("a comma-separated list of ", want));
    }
    values.push_back(*v);
  }
  return values;
}

absl::StatusOr<int64_t> ParseCount(absl::string_view text) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < 0) {
    return absl::InvalidArgumentError("not a count");
  }
  return v;
}

constexpr absl::string_view kStepFlags =
    "--preset, --steps, --warmup, --fusion-threshold, --cache-capacity, "
    "--inplace, --gap-us, --json and --corrupt-rank";

// The checks of --mode step once every flag is read. `sweep_flag` is the
// first flag given that only the size sweep takes ("" if none).
absl::Status CheckStepMode(const BenchOptions& o, bool op_given,
                           bool dtype_given, bool reduce_given,
                           const std::string& sweep_flag) {
  if (!o.preset.has_value()) {
    return absl::InvalidArgumentError(
        "--mode step needs --preset resnet50 or --preset small161");
  }
  const absl::string_view what =
      " does not apply to --mode step, which times float32 average "
      "allreduces of the preset's tensors; its flags are ";
  if (op_given && o.op != Collective::kAllreduce) {
    return absl::InvalidArgumentError(
        absl::StrCat("--op ", CollectiveName(o.op), what, kStepFlags));
  }
  if (dtype_given && o.dtype != DataType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype ", DataTypeName(o.dtype), what, kStepFlags));
  }
  if (reduce_given && o.reduce != ReduceOp::kAverage) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reduce ", ReduceOpName(o.reduce), what, kStepFlags));
  }
  if (!sweep_flag.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(sweep_flag, what, kStepFlags));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view CollectiveName(Collective op) {
  switch (op) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kAlltoall:
      return "alltoall";
    case Collective::kReducescatter:
      return "reducescatter";
  }
  return "unknown";
}

absl::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kRaw:
      return "raw";
    case Mode::kNegotiated:
      return "negotiated";
    case Mode::kStep:
      return "step";
  }
  return "unknown";
}

bool Reduces(Collective op) {
  return op == Collective::kAllreduce || op == Collective::kReducescatter;
}

bool SplitsSize(Collective op) {
  return op == Collective::kAllgather || op == Collective::kAlltoall ||
         op == Collective::kReducescatter;
}

absl::StatusOr<int64_t> ParseBytes(absl::string_view text) {
  absl::string_view digits = text;
  int shift = 0;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(digits.back())) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
    if (shift != 0) digits.remove_suffix(1);
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value < 0 ||
      value > (std::numeric_limits<int64_t>::max() >> 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text,
                     "' is not a byte count (a number, optionally with K, M or "
                     "G: powers of 1024)"));
  }
  return value << shift;
}

std::vector<int64_t> SizeSeries(int64_t min_bytes, int64_t max_bytes,
                                double factor) {
  std::vector<int64_t> sizes;
  double next = static_cast<double>(min_bytes);
  while (next <= static_cast<double>(max_bytes)) {
    const auto size = static_cast<int64_t>(next);
    if (sizes.empty() || size > sizes.back()) sizes.push_back(size);
    next = std::max(next * factor, next + 1);
  }
  return sizes;
}

namespace {

// Declares kolo-bench's flags to CLI11 without variables: it matches the
// names and counts the values. Returns each option's flag name.
std::map<const CLI::Option*, std::string> DeclareFlags(CLI::App& app) {
  app.set_help_flag();  // Usage() is the help
  app.allow_extras();   // reported as unknown flags below
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  std::map<const CLI::Option*, std::string> names;
  names[app.add_flag("-h,--help")->disable_flag_override()] = "--help";
  names[app.add_flag("--version")->disable_flag_override()] = "--version";
  names[app.add_flag("--inplace")->disable_flag_override()] = "--inplace";
  for (const char* name : {"--op",
                           "--mode",
                           "--dtype",
                           "--reduce",
                           "--min-bytes",
                           "--max-bytes",
                           "--factor",
                           "--iters",
                           "--seconds",
                           "--warmup",
                           "--gap-us",
                           "--root",
                           "--json",
                           "--device",
                           "--corrupt-rank",
                           "--preset",
                           "--steps",
                           "--fusion-threshold",
                           "--cache-capacity",
                           "--plot",
                           "--plot-peers"}) {
    names[app.add_option(name)] = name;
  }
  return names;
}

// Runs CLI11 over `args`; returns its error ("" without one), which is
// reported after the values read before it.
std::string RunCli(CLI::App& app, const std::vector<std::string>& args) {
  // CLI11 reads "--flag=" as "--flag" and takes the next argument as the
  // value; for a flag that takes one, it is the empty value, as in "--flag
  // ''". CLI11 reads the arguments in reverse.
  std::vector<std::string> reversed;
  for (auto arg = args.rbegin(); arg != args.rend(); ++arg) {
    const std::string name = arg->substr(0, arg->size() - 1);
    if (absl::StartsWith(*arg, "--") && absl::EndsWith(*arg, "=") &&
        app.get_option_no_throw(name) != nullptr &&
        app.get_option_no_throw(name)->get_items_expected_max() > 0) {
      reversed.push_back("");
      reversed.push_back(name);
    } else {
      reversed.push_back(*arg);
    }
  }
  std::string parse_error;
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // A flag given last without its value, or "--inplace=1" ("inplace was
    // given a disallowed flag override").
    const std::string what = e.what();
    std::string flag = args.back();
    if (absl::StrContains(what, "flag override")) {
      const std::string prefix =
          absl::StrCat("--", what.substr(0, what.find(' ')), "=");
      for (const std::string& arg : args) {
        if (absl::StartsWith(arg, prefix)) {
          flag = arg;
          break;
        }
      }
      parse_error = absl::StrCat("unknown flag '", flag, "' (see --help)");
    } else {
      parse_error = absl::StrCat("unknown flag or missing value: '", flag,
                                 "' (see --help)");
    }
  } catch (const std::exception& e) {
    parse_error = e.what();
  }
  return parse_error;
}

// What the flags given say beyond their values: which were given, and the
// first flag of each mode.
struct GivenFlags {
  bool reduce = false, iters = false, seconds = false;
  bool op = false, dtype = false;
  std::string sweep_flag, step_flag;
};

// Reads the value `v` of one of --mode step's own flags into `o`.
absl::Status ReadStepFlag(const std::string& flag, const std::string& v,
                          BenchOptions& o) {
  if (flag == "--preset") {
    absl::StatusOr<Preset> preset = ParsePreset(v);
    if (!preset.ok()) return preset.status();
    o.preset = *preset;
  } else if (flag == "--steps") {
    if (!absl::SimpleAtoi(v, &o.steps) || o.steps < 1) {
      return Bad(flag, v, "a whole number >= 1");
    }
  } else if (flag == "--fusion-threshold") {
    absl::StatusOr<std::vector<int64_t>> list =
        ParseList(flag, v, "byte counts like 0, 64M or 128M", ParseBytes);
    if (!list.ok()) return list.status();
    o.fusion_thresholds = *std::move(list);
  } else if (flag == "--cache-capacity") {
    absl::StatusOr<std::vector<int64_t>> list =
        ParseList(flag, v, "entry counts >= 0 like 0 or 1024", ParseCount);
    if (!list.ok()) return list.status();
    o.cache_capacities = *std::move(list);
  }
  return absl::OkStatus();
}

// Reads the value `v` of one `flag` into `o`.
absl::Status ReadFlag(const std::string& flag, const std::string& v,
                      BenchOptions& o, GivenFlags& given) {
  if (flag == "--min-bytes" || flag == "--max-bytes" || flag == "--factor" ||
      flag == "--iters" || flag == "--seconds" || flag == "--root" ||
      flag == "--device" || flag == "--plot" || flag == "--plot-peers") {
    if (given.sweep_flag.empty()) given.sweep_flag = flag;
  } else if (flag == "--preset" || flag == "--steps" ||
             flag == "--fusion-threshold" || flag == "--cache-capacity") {
    if (given.step_flag.empty()) given.step_flag = flag;
    return ReadStepFlag(flag, v, o);
  }
  if (flag == "--help") {
    o.help = true;
  } else if (flag == "--version") {
    o.version = true;
  } else if (flag == "--inplace") {
    o.inplace = true;
  } else if (flag == "--op") {
    absl::StatusOr<Collective> op = ParseCollective(v);
    if (!op.ok()) return op.status();
    o.op = *op;
    given.op = true;
  } else if (flag == "--device") {
    if (v != "cpu" && v != "cuda") return Bad(flag, v, "cpu or cuda");
    o.cuda = v == "cuda";
  } else if (flag == "--mode") {
    absl::StatusOr<Mode> mode = ParseMode(v);
    if (!mode.ok()) return mode.status();
    o.mode = *mode;
  } else if (flag == "--dtype") {
    absl::StatusOr<DataType> t = ParseDataType(v);
    if (!t.ok()) return Bad(flag, v, t.status().message());
    o.dtype = *t;
    given.dtype = true;
  } else if (flag == "--reduce") {
    absl::StatusOr<ReduceOp> r = ParseReduceOp(v);
    if (!r.ok()) return Bad(flag, v, r.status().message());
    o.reduce = *r;
    given.reduce = true;
  } else if (flag == "--min-bytes" || flag == "--max-bytes") {
    absl::StatusOr<int64_t> b = ParseBytes(v);
    if (!b.ok()) return Bad(flag, v, "a byte count like 4, 1K or 64M");
    (flag == "--min-bytes" ? o.min_bytes : o.max_bytes) = *b;
  } else if (flag == "--factor") {
    if (!absl::SimpleAtod(v, &o.factor) || !(o.factor > 1) ||
        !std::isfinite(o.factor)) {
      return Bad(flag, v, "a number > 1");
    }
  } else if (flag == "--iters") {
    if (!absl::SimpleAtoi(v, &o.iters) || o.iters < 1) {
      return Bad(flag, v, "a whole number >= 1");
    }
    given.iters = true;
  } else if (flag == "--seconds") {
    if (!absl::SimpleAtod(v, &o.seconds) || !(o.seconds > 0) ||
        !std::isfinite(o.seconds)) {
      return Bad(flag, v, "a number of seconds > 0");
    }
    given.seconds = true;
  } else if (flag == "--warmup") {
    if (!absl::SimpleAtoi(v, &o.warmup) || o.warmup < 0) {
      return Bad(flag, v, "a whole number >= 0");
    }
  } else if (flag == "--gap-us") {
    if (!absl::SimpleAtoi(v, &o.gap_us) || o.gap_us < 0 ||
        o.gap_us > 10'000'000) {
      return Bad(flag, v, "a number of microseconds in 0..10000000");
    }
  } else if (flag == "--root") {
    if (!absl::SimpleAtoi(v, &o.root) || o.root < 0) {
      return Bad(flag, v, "a rank >= 0");
    }
  } else if (flag == "--json") {
    o.json_path = v;
  } else if (flag == "--plot") {
    if (absl::StatusOr<PlotFormat> f = PlotFormatOf(v); !f.ok()) {
      return f.status();
    }
    o.plot_path = v;
  } else if (flag == "--plot-peers") {
    if (v.empty()) return Bad(flag, v, "a scripts/peer-bench.sh report");
    o.plot_peers_path = v;
  } else if (flag == "--corrupt-rank") {
    if (!absl::SimpleAtoi(v, &o.corrupt_rank) || o.corrupt_rank < 0) {
      return Bad(flag, v, "a rank >= 0");
    }
  }
  return absl::OkStatus();
}

// The flags of a size sweep (--mode raw or negotiated), checked together.
absl::Status CheckSweepMode(const BenchOptions& o, const GivenFlags& given) {
  if (!given.step_flag.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(given.step_flag, " applies to --mode step only"));
  }
  if (o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("--min-bytes (", o.min_bytes,
                                                   ") is above --max-bytes (",
                                                   o.max_bytes, ")"));
  }
  if (given.iters && given.seconds) {
    return absl::InvalidArgumentError(
        "--iters and --seconds both given; use one of them");
  }
  if (given.reduce && !Reduces(o.op)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reduce applies to allreduce and reducescatter, not ",
                     CollectiveName(o.op)));
  }
  if (o.inplace && o.op != Collective::kAllreduce &&
      o.op != Collective::kBroadcast) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inplace applies to allreduce (broadcast is always in place), not ",
        CollectiveName(o.op)));
  }
  if (o.cuda && o.mode != Mode::kNegotiated) {
    return absl::InvalidArgumentError(
        "--device cuda needs --mode negotiated (kolo::raw::* take host "
        "buffers only)");
  }
  if (o.root != 0 && o.op != Collective::kBroadcast) {
    return absl::InvalidArgumentError("--root applies to broadcast only");
  }
  if (!o.plot_peers_path.empty() && o.plot_path.empty()) {
    return absl::InvalidArgumentError(
        "--plot-peers adds peers to a picture: give --plot FILE.png (or "
        ".svg) too");
  }
  if (!o.plot_peers_path.empty() && o.op != Collective::kAllreduce) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--plot-peers: scripts/peer-bench.sh measures allreduce, so its "
        "peers go with --op allreduce, not ",
        CollectiveName(o.op)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchOptions> ParseBenchOptions(
    const std::vector<std::string>& args) {
  // The values are checked in the order they were given
  // (app.parse_order()), so that the first bad one is reported, the last of
  // a repeated flag wins, and the first flag of each mode is known.
  CLI::App app("kolo-bench", "kolo-bench");
  const std::map<const CLI::Option*, std::string> names = DeclareFlags(app);
  const std::string parse_error = RunCli(app, args);
  BenchOptions o;
  GivenFlags given;
  std::map<const CLI::Option*, size_t> used;  // results read, per option
  for (const CLI::Option* option : app.parse_order()) {
    const std::string& flag = names.at(option);
    const std::string& v = option->results()[used[option]++];
    if (absl::Status st = ReadFlag(flag, v, o, given); !st.ok()) return st;
  }
  if (!parse_error.empty()) return absl::InvalidArgumentError(parse_error);
  if (const std::vector<std::string> rest = app.remaining(); !rest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flag '", rest.front(), "' (see --help)"));
  }
  if (o.mode == Mode::kStep) {
    if (absl::Status st = CheckStepMode(o, given.op, given.dtype, given.reduce,
                                        given.sweep_flag);
        !st.ok()) {
      return st;
    }
    o.reduce = ReduceOp::kAverage;
    return o;
  }
  if (absl::Status st = CheckSweepMode(o, given); !st.ok()) return st;
  if (o.op == Collective::kBroadcast) o.inplace = true;
  return o;
}

std::vector<StepSetting> StepSettings(const BenchOptions& o) {
  const std::vector<int64_t> env = {StepSetting::kFromEnv};
  const std::vector<int64_t>& thresholds =
      o.fusion_thresholds.empty() ? env : o.fusion_thresholds;
  const std::vector<int64_t>& capacities =
      o.cache_capacities.empty() ? env : o.cache_capacities;
  std::vector<StepSetting> settings;
  for (int64_t threshold : thresholds) {
    for (int64_t capacity : capacities) {
      settings.push_back({threshold, capacity});
    }
  }
  return settings;
}

std::string Usage() {
  return absl::StrCat(
      "usage: kolorun -np N kolo-bench [flags]\n"
      "       kolorun -np N kolo-bench --mode step --preset NAME [flags]\n"
      "       kolo-bench --help | --version\n"
      "  --op NAME         ",
      kCollectives,
      " (allreduce)\n"
      "  --mode NAME       raw: the data plane alone (kolo::raw::*),\n"
      "                    negotiated: each op submitted through the\n"
      "                    asynchronous API and synchronized, or step: one\n"
      "                    training step of a preset (below) (raw)\n"
      "  --dtype NAME      uint8 int8 int16 int32 int64 float16 bfloat16\n"
      "                    float32 float64 bool (float32)\n"
      "  --reduce NAME     sum average min max product (sum; allreduce and\n"
      "                    reducescatter)\n"
      "  --min-bytes B     smallest size, K/M/G = 1024^1..3 (4)\n"
      "  --max-bytes B     largest size (64M)\n"
      "  --factor F        size multiplier between rows (4)\n"
      "  --iters N         timed iterations per size, or\n"
      "  --seconds S       about S seconds of iterations per size, at least\n"
      "                    5 (1)\n"
      "  --warmup N        untimed iterations per size (3)\n"
      "  --root R          broadcast root (0)\n"
      "  --inplace         allreduce in place (out of place by default)\n"
      "  --gap-us N        busy work of N us before each iteration, untimed:\n"
      "                    a training step's compute between its ops (0)\n"
      "  --device D        cpu, or cuda: CUDA device buffers (negotiated\n"
      "                    mode; NCCL, or host staging with\n"
      "                    KOLO_CUDA_STAGING=1) (cpu)\n"
      "  --json FILE       also write one JSON record per size to FILE\n"
      "  --corrupt-rank R  damage rank R's last result (tests the check)\n"
      "  --plot FILE       also draw time and bus bandwidth against size into\n"
      "                    FILE, .png or .svg (rank 0; needs gnuplot)\n"
      "  --plot-peers FILE add the peers of a scripts/peer-bench.sh report\n"
      "                    (its table for this many ranks) to the picture\n"
      "time = each rank's median per-iteration time, max over ranks;\n"
      "p90 = each rank's 90th percentile (nearest rank), max over ranks;\n"
      "algbw = size/time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n\n"
      "(allgather, reducescatter, alltoall), 1 (broadcast); GB = 1e9 B.\n"
      "\n"
      "--mode step: every rank submits the preset's tensors as float32\n"
      "average allreduces (out of place, stable names) in reverse order, then\n"
      "synchronizes them all; step time = first submit to the end of the\n"
      "synchronize, enqueue = the submits alone.\n"
      "  --preset NAME     resnet50 (ResNet-50's 161 parameter tensors,\n"
      "                    97.5 MiB) or small161 (161 x 256 floats); required\n"
      "  --steps N         timed steps per setting (20)\n"
      "  --warmup N        untimed steps per setting (3)\n"
      "  --fusion-threshold LIST  comma-separated byte counts, e.g. 0,64M\n"
      "                    (the job's KOLO_FUSION_THRESHOLD: env)\n"
      "  --cache-capacity LIST    comma-separated entry counts, e.g. 0,1024\n"
      "                    (the job's KOLO_CACHE_CAPACITY: env)\n"
      "  --inplace         each tensor is its own output (as Horovod's\n"
      "                    optimizer reduces gradients; out of place by "
      "default)\n"
      "  --gap-us N, --json FILE, --corrupt-rank R  as above (the gap comes\n"
      "                    before each step)\n"
      "Each threshold x capacity runs in turn in the same job (set on every\n"
      "rank before its warm-up). step/p90/enqueue: each rank's median (90th\n"
      "percentile) over the timed steps, max over ranks; busbw = preset bytes\n"
      "x 2(n-1)/n / step time. Every output element is checked exactly.\n");
}

}  // namespace kolo::bench
