// The checking side of kolo-grid-worker (tests/workers/grid_worker.cc): a
// Checker that compares one rank's outputs with their expectations bit for
// bit, counts the cases, and on the first mismatch or error prints one
// GRID_FAIL line (world size, rank, collective, dtype, op, count, first
// differing element) and ends the process with exit code 1; and the tiling
// helpers that build 64 MiB buffers from one period of the value model.
//
// Thread-safety: a Checker is used from the worker's main thread only.
#ifndef KOLO_TESTS_WORKERS_GRID_CHECK_H_
#define KOLO_TESTS_WORKERS_GRID_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kolo/types.h"
#include "tests/testing/collective_data.h"

namespace kolo::testing {

// One checked call, for messages.
struct Case {
  std::string collective;
  DataType type = DataType::kUInt8;
  std::optional<ReduceOp> op;
  int64_t count = 0;
  std::string extra;  // root, in place, ...
};

class Checker {
 public:
  Checker(int rank, int size) : rank_(rank), size_(size) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  int64_t cases() const { return cases_; }

  // The call must have succeeded.
  void Ok(const absl::Status& st, const Case& c);
  // The call must have been refused with kInvalidArgument (one case).
  void Refused(const absl::Status& st, const Case& c);
  // got must equal want byte for byte; counts one case when `count_case`.
  void Same(const Bytes& got, const Bytes& want, const Case& c,
            bool count_case = true);
  // got (all of it) must equal elements [0, got.size()) of `period` repeated
  // (one case), compared run by run without building the expectation.
  void SameTiled(const Bytes& got, const Bytes& period, const Case& c);
  // Counts k cases checked by the caller.
  void Count(int64_t k) { cases_ += k; }

  // Ends the current phase: its wall time goes into phases() ("name:1.2,...").
  void Phase(absl::string_view name);
  const std::string& phases() const { return phases_; }

  // Prints the GRID_FAIL line and exits 1 at once (kolorun then ends the
  // other ranks).
  [[noreturn]] void Fail(const Case& c, const std::string& what) const;

 private:
  const int rank_, size_;
  int64_t cases_ = 0;
  std::string phases_;
  absl::Time phase_start_ = absl::Now();
};

// Writes elements [first, first + count) of `period` (whole elements of
// `elem` bytes) repeated end to end to `out`.
void TileInto(const Bytes& period, size_t elem, int64_t first, int64_t count,
              char* out);
// The same, as a new buffer.
Bytes Tiled(const Bytes& period, size_t elem, int64_t first, int64_t count);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_WORKERS_GRID_CHECK_H_
