// kolo-bench --plot: a picture of a size sweep — time and bus bandwidth
// against size, log-log, kolo's series beside the peers' read from a
// scripts/peer-bench.sh report (--plot-peers) — drawn by gnuplot (Debian's
// gnuplot-nox) from data files and a script kolo-bench writes into a
// temporary directory.
//
// The peer-bench report is the text the script prints: per world size a
// line "N ranks: time (us), ..." and a Markdown table whose header names the
// columns ("| size | kolo (shm) | kolo TCP | kolo / kolo TCP | Gloo ring |
// ..."), whose rows start with a size ("4 B", "1 KiB", "64 MiB") and whose
// cells are "median (min-max)" in microseconds, or "-". The ratio columns
// ("kolo / ...") and the shared-memory kolo column (what kolo-bench itself
// measures) are left out; the other columns are series.
//
// Thread-safety: pure functions, except DrawPlot (files, a child process).
#ifndef KOLO_BENCH_PLOT_H_
#define KOLO_BENCH_PLOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/options.h"
#include "bench/report.h"

namespace kolo::bench {

enum class PlotFormat { kPng, kSvg };

// By the extension of `path` (.png or .svg, any case); kInvalidArgument
// naming the path otherwise.
absl::StatusOr<PlotFormat> PlotFormatOf(absl::string_view path);

struct PlotPoint {
  int64_t bytes = 0;
  double time_us = 0;
  double busbw = 0;  // GB/s
  double algbw = 0;  // GB/s
};

struct PlotSeries {
  std::string label;
  std::vector<PlotPoint> points;  // ascending sizes
};

// kolo's rows as a series (sizes of 0 bytes left out: no log scale shows
// them).
PlotSeries SeriesFromRows(std::string label, const std::vector<Row>& rows);

// The series of the `ranks`-rank table of a peer-bench report, bandwidths
// computed as allreduce's (busbw = algbw x 2(n-1)/n). kInvalidArgument when
// the text has no such table (naming the world sizes it has) or a row
// cannot be read (naming the line).
absl::StatusOr<std::vector<PlotSeries>> ParsePeerBench(absl::string_view text,
                                                       int ranks);

// "4 B", "16 KiB", "64 MiB": a size as the axis labels show it.
std::string SizeLabel(int64_t bytes);

struct PlotSpec {
  std::string path;  // the picture to write
  PlotFormat format = PlotFormat::kPng;
  std::string title;  // what was measured
  int ranks = 0;      // 1: the right panel shows algbw (busbw is 0)
};

// The gnuplot script that draws `series`, whose data files (columns:
// bytes, time_us, busbw, algbw) are `data_files`, in the same order.
// REQUIRES: data_files.size() == series.size(), series not all empty.
std::string GnuplotScript(const PlotSpec& spec,
                          const std::vector<PlotSeries>& series,
                          const std::vector<std::string>& data_files);

// Whether gnuplot is on PATH: its path, or kFailedPrecondition saying how to
// install it.
absl::StatusOr<std::string> FindGnuplot();

// Writes the data files and the script into a fresh directory under
// TMPDIR (or /tmp), runs gnuplot on it, and removes the directory.
// kFailedPrecondition when gnuplot is missing; kInternal with gnuplot's
// error output (and the directory, kept) when it fails or writes nothing.
absl::Status DrawPlot(const PlotSpec& spec,
                      const std::vector<PlotSeries>& series);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_PLOT_H_
