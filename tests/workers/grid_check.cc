#include "tests/workers/grid_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kolo::testing {
namespace {

// "1 0 255 3": the bytes of one element.
std::string ElementBytes(const char* p, size_t elem) {
  std::string out;
  for (size_t i = 0; i < elem; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : " ",
                    static_cast<int>(static_cast<uint8_t>(p[i])));
  }
  return out;
}

}  // namespace

void Checker::Ok(const absl::Status& st, const Case& c) {
  if (!st.ok()) Fail(c, absl::StrCat("call failed: ", st.ToString()));
}

void Checker::Refused(const absl::Status& st, const Case& c) {
  if (st.code() != absl::StatusCode::kInvalidArgument) {
    Fail(c, absl::StrCat("expected kInvalidArgument, got ", st.ToString()));
  }
  ++cases_;
}

void Checker::Same(const Bytes& got, const Bytes& want, const Case& c,
                   bool count_case) {
  std::string diff = Diff(got, want, DataTypeSize(c.type));
  if (!diff.empty()) Fail(c, diff);
  if (count_case) ++cases_;
}

void Checker::SameTiled(const Bytes& got, const Bytes& period, const Case& c) {
  const size_t elem = DataTypeSize(c.type);
  for (size_t at = 0; at < got.size(); at += period.size()) {
    const size_t run = std::min(period.size(), got.size() - at);
    if (std::memcmp(got.data() + at, period.data(), run) == 0) continue;
    size_t b = 0;
    while (got[at + b] == period[b]) ++b;
    const size_t e = b / elem;
    Fail(c, absl::StrCat("element ", (at + b) / elem, " of ", got.size() / elem,
                         ": bytes [",
                         ElementBytes(got.data() + at + e * elem, elem),
                         "], expected [",
                         ElementBytes(period.data() + e * elem, elem), "]"));
  }
  ++cases_;
}

void Checker::Phase(absl::string_view name) {
  const absl::Time now = absl::Now();
  absl::StrAppend(
      &phases_, phases_.empty() ? "" : ",", name, ":",
      absl::StrFormat("%.1f", absl::ToDoubleSeconds(now - phase_start_)));
  phase_start_ = now;
}

void Checker::Fail(const Case& c, const std::string& what) const {
  std::printf(
      "GRID_FAIL size=%d rank=%d collective=%s dtype=%s op=%s "
      "count=%lld%s%s: %s\n",
      size_, rank_, c.collective.c_str(),
      std::string(DataTypeName(c.type)).c_str(),
      c.op ? std::string(ReduceOpName(*c.op)).c_str() : "-",
      static_cast<long long>(c.count), c.extra.empty() ? "" : " ",
      c.extra.c_str(), what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

void TileInto(const Bytes& period, size_t elem, int64_t first, int64_t count,
              char* out) {
  const int64_t p = static_cast<int64_t>(period.size() / elem);
  for (int64_t i = 0; i < count;) {
    const int64_t at = (first + i) % p;
    const int64_t run = std::min(count - i, p - at);
    std::memcpy(out + i * elem, period.data() + at * elem, run * elem);
    i += run;
  }
}

Bytes Tiled(const Bytes& period, size_t elem, int64_t first, int64_t count) {
  Bytes out(static_cast<size_t>(count) * elem);
  TileInto(period, elem, first, count, out.data());
  return out;
}

}  // namespace kolo::testing
