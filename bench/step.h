// Step: kolo-bench --mode step — one training step's gradients, as a
// framework hands them to kolo.
//
// A StepCase holds one preset's tensors (bench/presets.h) on this rank: the
// inputs, filled once with small integers that depend on the rank, the tensor
// and the element (bench/workload.h stream `rank`, starting at position
// `tensor`), and separate outputs, allocated once. One step submits every
// tensor's float32 average allreduce through kolo::allreduce_async, out of
// place, under its stable preset name, from the last tensor to the first (the
// order backpropagation produces gradients in), then waits for all of them
// with kolo::synchronize_all. The step time runs from the first submit to the
// return of synchronize_all; the enqueue time covers the submits alone. The
// check compares every output element bitwise with the float sum over ranks
// divided by static_cast<float>(size).
//
// RunStepMode runs each setting (--fusion-threshold x --cache-capacity) in
// turn: it applies the setting on this rank (every rank does the same, with
// nothing in flight), runs the warm-up and timed steps, checks the outputs,
// and agrees on the figures with the other ranks (MaxOverRanks).
//
// Thread-safety: used by one thread.
// REQUIRES: kolo::init() succeeded; every rank runs the same options.
#ifndef KOLO_BENCH_STEP_H_
#define KOLO_BENCH_STEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/options.h"
#include "bench/presets.h"
#include "bench/report.h"
#include "bench/workload.h"
#include "kolo/kolo.h"

namespace kolo::bench {

class StepCase {
 public:
  // REQUIRES: 0 <= rank < n. `inplace`: each tensor is its own output (as
  // Horovod's optimizer reduces gradients); else it has an output of its own.
  StepCase(Preset preset, int rank, int n, bool inplace);

  int tensors() const { return static_cast<int>(in_.size()); }
  int64_t bytes() const { return PresetBytes(preset_); }

  struct Timing {
    double enqueue_ms = 0;  // the submits of every tensor
    double step_ms = 0;     // first submit to the return of synchronize_all
  };
  // One step. A failed op fails the step with its status, prefixed with the
  // tensor's name.
  absl::StatusOr<Timing> RunOnce();

  // Makes the check see the next step's results: overwrites every output
  // (out of place), or gives every tensor its original input again (in
  // place: the steps before reduced it already).
  void PrepareCheckedStep();
  // Damages the first element of tensor 0's output (--corrupt-rank).
  void Corrupt();
  // OK if every output element is exactly the expected average; kDataLoss
  // naming the first bad tensor, this rank and the element otherwise.
  absl::Status Check() const;

 private:
  const Preset preset_;
  const int rank_, n_;
  const Periodic expected_;
  std::vector<std::string> names_;
  const bool inplace_;
  // Inputs and outputs; in place, out_ keeps the original inputs.
  std::vector<std::vector<float>> in_, out_;
  // What the check reads: out_, or in_ in place.
  const std::vector<std::vector<float>>& results() const {
    return inplace_ ? in_ : out_;
  }
  std::vector<Handle> handles_;  // this step's, in submission order
};

// Runs every setting of `o` (StepSettings) and appends one row per setting to
// `rows` (the same on every rank); rank 0 prints each row as it is done. A
// failed check is row.check_ok == false (and a line on stderr); a failed
// collective or setting call is returned, naming the setting.
absl::Status RunStepMode(const BenchOptions& o, std::vector<StepRow>& rows);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_STEP_H_
