#include "bench/options.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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
  for (Mode mode : {Mode::kRaw, Mode::kNegotiated}) {
    if (lower == ModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--mode: unknown mode '", name, "'; use raw or negotiated"));
}

absl::Status Bad(absl::string_view flag, absl::string_view value,
                 absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": '", value, "' is not ", want));
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

absl::StatusOr<BenchOptions> ParseBenchOptions(
    const std::vector<std::string>& args) {
  BenchOptions o;
  bool reduce_given = false, iters_given = false, seconds_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      continue;
    }
    if (flag == "--inplace") {
      o.inplace = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag or missing value: '", flag, "' (see --help)"));
    }
    const std::string& v = args[++i];
    if (flag == "--op") {
      absl::StatusOr<Collective> op = ParseCollective(v);
      if (!op.ok()) return op.status();
      o.op = *op;
    } else if (flag == "--mode") {
      absl::StatusOr<Mode> mode = ParseMode(v);
      if (!mode.ok()) return mode.status();
      o.mode = *mode;
    } else if (flag == "--dtype") {
      absl::StatusOr<DataType> t = ParseDataType(v);
      if (!t.ok()) return Bad(flag, v, t.status().message());
      o.dtype = *t;
    } else if (flag == "--reduce") {
      absl::StatusOr<ReduceOp> r = ParseReduceOp(v);
      if (!r.ok()) return Bad(flag, v, r.status().message());
      o.reduce = *r;
      reduce_given = true;
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
      iters_given = true;
    } else if (flag == "--seconds") {
      if (!absl::SimpleAtod(v, &o.seconds) || !(o.seconds > 0) ||
          !std::isfinite(o.seconds)) {
        return Bad(flag, v, "a number of seconds > 0");
      }
      seconds_given = true;
    } else if (flag == "--warmup") {
      if (!absl::SimpleAtoi(v, &o.warmup) || o.warmup < 0) {
        return Bad(flag, v, "a whole number >= 0");
      }
    } else if (flag == "--root") {
      if (!absl::SimpleAtoi(v, &o.root) || o.root < 0) {
        return Bad(flag, v, "a rank >= 0");
      }
    } else if (flag == "--json") {
      o.json_path = v;
    } else if (flag == "--corrupt-rank") {
      if (!absl::SimpleAtoi(v, &o.corrupt_rank) || o.corrupt_rank < 0) {
        return Bad(flag, v, "a rank >= 0");
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", flag, "' (see --help)"));
    }
  }
  if (o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("--min-bytes (", o.min_bytes,
                                                   ") is above --max-bytes (",
                                                   o.max_bytes, ")"));
  }
  if (iters_given && seconds_given) {
    return absl::InvalidArgumentError(
        "--iters and --seconds both given; use one of them");
  }
  if (reduce_given && !Reduces(o.op)) {
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
  if (o.op == Collective::kBroadcast) o.inplace = true;
  if (o.root != 0 && o.op != Collective::kBroadcast) {
    return absl::InvalidArgumentError("--root applies to broadcast only");
  }
  return o;
}

std::string Usage() {
  return absl::StrCat(
      "usage: kolorun -np N kolo-bench [flags]\n"
      "  --op NAME         ",
      kCollectives,
      " (allreduce)\n"
      "  --mode NAME       raw: the data plane alone (kolo::raw::*), or\n"
      "                    negotiated: each op submitted through the\n"
      "                    asynchronous API and synchronized (raw)\n"
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
      "  --json FILE       also write one JSON record per size to FILE\n"
      "  --corrupt-rank R  damage rank R's last result (tests the check)\n"
      "time = each rank's median per-iteration time, max over ranks;\n"
      "p90 = each rank's 90th percentile (nearest rank), max over ranks;\n"
      "algbw = size/time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n\n"
      "(allgather, reducescatter, alltoall), 1 (broadcast); GB = 1e9 B.\n");
}

}  // namespace kolo::bench
