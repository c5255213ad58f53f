#include "bench/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace kolo::bench {
namespace {

// `s` in a gnuplot single-quoted string (a quote is doubled).
std::string Quoted(absl::string_view s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

// `s` in a gnuplot double-quoted string (for titles: no escapes needed but
// quotes and backslashes).
std::string DoubleQuoted(absl::string_view s) {
  return absl::StrCat(
      "\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

// "4 B", "1 KiB", "64 MiB" -> bytes.
bool ParseSizeCell(absl::string_view cell, int64_t& bytes) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(cell, ' ', absl::SkipEmpty());
  if (parts.size() != 2) return false;
  int64_t v = 0;
  if (!absl::SimpleAtoi(parts[0], &v) || v < 0) return false;
  int shift = -1;
  if (parts[1] == "B") shift = 0;
  if (parts[1] == "KiB") shift = 10;
  if (parts[1] == "MiB") shift = 20;
  if (parts[1] == "GiB") shift = 30;
  if (shift < 0) return false;
  bytes = v << shift;
  return true;
}

// "1,234.5 (1,200.0-1,300.0)" -> 1234.5; "-" -> false.
bool ParseTimeCell(absl::string_view cell, double& us) {
  absl::string_view first = cell.substr(0, cell.find(' '));
  return absl::SimpleAtod(absl::StrReplaceAll(first, {{",", ""}}), &us) &&
         us > 0;
}

std::vector<std::string> Cells(absl::string_view line) {
  absl::string_view body = absl::StripAsciiWhitespace(line);
  absl::ConsumePrefix(&body, "|");
  absl::ConsumeSuffix(&body, "|");
  std::vector<std::string> cells;
  for (absl::string_view c : absl::StrSplit(body, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(c));
  }
  return cells;
}

// The sizes the x axis labels: powers of 4 (of 16 when there would be more
// than 9) from the smallest plotted size to the largest.
std::string XTics(const std::vector<PlotSeries>& series) {
  int64_t lo = 0, hi = 0;
  for (const PlotSeries& s : series) {
    for (const PlotPoint& p : s.points) {
      if (lo == 0 || p.bytes < lo) lo = p.bytes;
      hi = std::max(hi, p.bytes);
    }
  }
  std::vector<int64_t> tics;
  for (int64_t t = 1; t <= hi && t > 0; t *= 4) {
    if (t >= lo) tics.push_back(t);
  }
  if (tics.size() > 9) {
    std::vector<int64_t> sparse;
    for (size_t i = 0; i < tics.size(); i += 2) sparse.push_back(tics[i]);
    tics = std::move(sparse);
  }
  std::vector<std::string> items;
  for (int64_t t : tics) {
    items.push_back(absl::StrCat(DoubleQuoted(SizeLabel(t)), " ", t));
  }
  return absl::StrCat("set xtics (", absl::StrJoin(items, ", "), ")\n",
                      "set xrange [", lo / 1.5, ":", hi * 1.5, "]\n");
}

}  // namespace

absl::StatusOr<PlotFormat> PlotFormatOf(absl::string_view path) {
  const std::string lower = absl::AsciiStrToLower(path);
  if (absl::EndsWith(lower, ".png") && lower.size() > 4) {
    return PlotFormat::kPng;
  }
  if (absl::EndsWith(lower, ".svg") && lower.size() > 4) {
    return PlotFormat::kSvg;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--plot: '", path,
      "' does not end in .png or .svg; kolo-bench draws PNG or SVG pictures "
      "(e.g. --plot allreduce.png)"));
}

PlotSeries SeriesFromRows(std::string label, const std::vector<Row>& rows) {
  PlotSeries s;
  s.label = std::move(label);
  for (const Row& r : rows) {
    if (r.bytes <= 0 || r.time_us <= 0) continue;
    s.points.push_back({r.bytes, r.time_us, r.busbw, r.algbw});
  }
  return s;
}

absl::StatusOr<std::vector<PlotSeries>> ParsePeerBench(absl::string_view text,
                                                       int ranks) {
  std::vector<PlotSeries> series;
  std::vector<int> columns;  // series index per cell, -1 = not a series
  std::vector<std::string> seen;
  int section = 0;  // the world size of the table being read
  bool found = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    const absl::string_view t = absl::StripAsciiWhitespace(line);
    if (!t.empty() && absl::ascii_isdigit(t[0]) &&
        absl::StrContains(t, " ranks: time (us)")) {
      section = 0;
      (void)absl::SimpleAtoi(t.substr(0, t.find(' ')), &section);
      seen.push_back(absl::StrCat(section));
      columns.clear();
      continue;
    }
    if (section != ranks || !absl::StartsWith(t, "|") ||
        absl::StartsWith(t, "|---")) {
      continue;
    }
    const std::vector<std::string> cells = Cells(t);
    if (cells.empty()) continue;
    if (cells[0] == "size") {  // the header: which columns are series
      found = true;
      columns.assign(cells.size(), -1);
      for (size_t i = 1; i < cells.size(); ++i) {
        if (absl::StartsWith(cells[i], "kolo / ") || cells[i] == "kolo (shm)") {
          continue;
        }
        columns[i] = static_cast<int>(series.size());
        PlotSeries s;
        s.label = absl::StartsWith(cells[i], "kolo")
                      ? absl::StrCat(cells[i], " (peer-bench)")
                      : cells[i];
        series.push_back(std::move(s));
      }
      continue;
    }
    int64_t bytes = 0;
    if (columns.empty() || !ParseSizeCell(cells[0], bytes) ||
        cells.size() != columns.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", line_no, " of the peer-bench report is not a row of its ",
          ranks, "-rank table: '", t, "'"));
    }
    for (size_t i = 1; i < cells.size(); ++i) {
      double us = 0;
      if (columns[i] < 0 || !ParseTimeCell(cells[i], us)) continue;
      PlotPoint p;
      p.bytes = bytes;
      p.time_us = us;
      p.algbw = static_cast<double>(bytes) / (us * 1e3);
      p.busbw = p.algbw * BusFactor(Collective::kAllreduce, ranks);
      if (bytes > 0) series[columns[i]].points.push_back(p);
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the peer-bench report has no table for ", ranks, " ranks",
        seen.empty() ? std::string(" (no tables at all: is it the output of "
                                   "scripts/peer-bench.sh?)")
                     : absl::StrCat(" (it has ", absl::StrJoin(seen, ", "),
                                    " ranks); run kolo-bench with as many")));
  }
  return series;
}

std::string SizeLabel(int64_t bytes) {
  for (const auto& [shift, unit] :
       {std::pair{30, "GiB"}, std::pair{20, "MiB"}, std::pair{10, "KiB"}}) {
    if (bytes >= (int64_t{1} << shift) && bytes % (int64_t{1} << shift) == 0) {
      return absl::StrCat(bytes >> shift, " ", unit);
    }
  }
  return absl::StrCat(bytes, " B");
}

std::string GnuplotScript(const PlotSpec& spec,
                          const std::vector<PlotSeries>& series,
                          const std::vector<std::string>& data_files) {
  std::string s;
  if (spec.format == PlotFormat::kPng) {
    s += "set terminal pngcairo size 1400,560 enhanced font \"sans,10\"\n";
  } else {
    s += "set terminal svg size 1400,560 dynamic enhanced font \"sans,10\"\n";
  }
  absl::StrAppend(&s, "set output ", Quoted(spec.path), "\n");
  absl::StrAppend(&s, "set multiplot layout 1,2 title ",
                  DoubleQuoted(spec.title), " noenhanced\n");
  s += "set logscale xy\nset format y \"%g\"\nset grid\n";
  s += "set key top left noenhanced\n";
  s += "set xlabel \"size\"\n";
  s += XTics(series);
  const bool bus = spec.ranks > 1;
  for (int panel = 0; panel < 2; ++panel) {
    if (panel == 0) {
      s += "set title \"time (lower is better)\"\n";
      s += "set ylabel \"time (us)\"\n";
    } else {
      absl::StrAppend(&s, "set title \"",
                      bus ? "bus bandwidth" : "algorithm bandwidth",
                      " (higher is better)\"\n");
      absl::StrAppend(&s, "set ylabel \"", bus ? "busbw" : "algbw",
                      " (GB/s)\"\n");
    }
    const int column = panel == 0 ? 2 : (bus ? 3 : 4);
    std::vector<std::string> plots;
    for (size_t i = 0; i < series.size(); ++i) {
      if (series[i].points.empty()) continue;
      plots.push_back(absl::StrCat(Quoted(data_files[i]), " using 1:", column,
                                   " with linespoints lw ", i == 0 ? 3 : 2,
                                   " pt ", 7 + i % 6, " title ",
                                   DoubleQuoted(series[i].label)));
    }
    absl::StrAppend(&s, "plot ", absl::StrJoin(plots, ", \\\n     "), "\n");
  }
  s += "unset multiplot\n";
  return s;
}

absl::StatusOr<std::string> FindGnuplot() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/gnuplot");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::FailedPreconditionError(
      "--plot needs gnuplot, which is not on PATH; install it (Debian: "
      "apt-get install gnuplot-nox) or leave out --plot");
}

absl::Status DrawPlot(const PlotSpec& spec,
                      const std::vector<PlotSeries>& series) {
  absl::StatusOr<std::string> gnuplot = FindGnuplot();
  if (!gnuplot.ok()) return gnuplot.status();
  bool any = false;
  for (const PlotSeries& s : series) any |= !s.points.empty();
  if (!any) {
    return absl::FailedPreconditionError(
        "--plot: nothing to draw (every size was 0 bytes)");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/kolo-plot.XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("--plot: cannot make a directory like ", dir, ": ",
                     std::strerror(errno)));
  }
  std::vector<std::string> files;
  for (size_t i = 0; i < series.size(); ++i) {
    files.push_back(absl::StrCat(dir, "/series", i, ".dat"));
    std::ofstream out(files.back());
    out << "# " << series[i].label << "\n# bytes time_us busbw_GBps "
        << "algbw_GBps\n";
    for (const PlotPoint& p : series[i].points) {
      out << absl::StrFormat("%d %.6g %.6g %.6g\n", p.bytes, p.time_us, p.busbw,
                             p.algbw);
    }
  }
  const std::string script = absl::StrCat(dir, "/plot.gp");
  const std::string log = absl::StrCat(dir, "/gnuplot.log");
  {
    std::ofstream out(script);
    out << GnuplotScript(spec, series, files);
    if (!out) {
      return absl::InternalError(absl::StrCat("--plot: cannot write ", script));
    }
  }
  std::error_code ec;
  std::filesystem::remove(spec.path, ec);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv = {gnuplot->data(), const_cast<char*>(script.c_str()),
                             nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, gnuplot->c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("--plot: cannot run ", *gnuplot, ": ", std::strerror(rc)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream in(log);
  std::stringstream said;
  said << in.rdbuf();
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  const bool written = std::filesystem::file_size(spec.path, ec) > 0 && !ec;
  if (!exited_ok || !written) {
    return absl::InternalError(absl::StrCat(
        "--plot: gnuplot ", exited_ok ? "wrote nothing to " : "failed drawing ",
        spec.path, " (script and data kept in ", dir,
        "): ", absl::StripAsciiWhitespace(said.str())));
  }
  std::filesystem::remove_all(dir, ec);
  return absl::OkStatus();
}

}  // namespace kolo::bench
