// Case: one size of one collective on this rank, as kolo-bench runs it — its
// buffers, one iteration, and the check of its result.
//
// One iteration goes through kolo::raw::* (--mode raw: the data plane
// without negotiation) or is submitted through the asynchronous API under a
// fixed name per collective ("kolo-bench.allreduce", ...) and synchronized
// (--mode negotiated: what a framework sees). allgather and alltoall get
// their output from an Allocator that hands back the preallocated output
// buffer after checking the negotiated shape, so both modes write into the
// same memory and the same check applies.
//
// Thread-safety: used by one thread. In negotiated mode the output allocator
// runs on kolo's background thread while that thread waits in synchronize().
// REQUIRES: kolo::init() succeeded; every rank builds its Case from the same
// options and size, and calls RunOnce the same number of times.
#ifndef KOLO_BENCH_CASE_H_
#define KOLO_BENCH_CASE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/device_buffer.h"
#include "bench/options.h"
#include "kolo/kolo.h"

namespace kolo::bench {

// The longest a negotiated iteration may take before kolo-bench gives up.
// kolo fails an op on its own within seconds when a peer vanishes; this is
// the backstop that keeps the bench from ever hanging.
inline constexpr absl::Duration kOpTimeout = absl::Minutes(5);

// `bytes` rounded down to whole elements (per rank where the size is split).
int64_t RoundedBytes(const BenchOptions& o, int64_t bytes, int n);

// Max over ranks of each value (one allreduce of float64s), in the bench's
// mode: raw and negotiated ops must never be in flight together, so in
// negotiated (and step) mode every timed op is synchronized before this runs.
// REQUIRES: every rank calls it with as many values.
absl::Status MaxOverRanks(Mode mode, std::vector<double>& values);

// Keeps the calling thread busy for `us` microseconds (--gap-us: compute,
// not a sleep, so that the core is taken as a training step's would be).
void BusyFor(int64_t us);

class Case {
 public:
  // REQUIRES: `o` outlives the Case; 0 <= rank < n.
  Case(const BenchOptions& o, int64_t bytes, int rank, int n);

  int64_t bytes() const { return count_ * static_cast<int64_t>(elem_); }
  int64_t count() const { return count_; }

  // Refills the input (needed before each in-place allreduce): the first
  // time from its stream, then as a copy of that (a fill rebuilds the
  // stream's tile, about 100 us, which would put a gap between iterations).
  void Restore();
  bool NeedsRestore() const {
    return o_.inplace && o_.op == Collective::kAllreduce;
  }
  // Overwrites the result so that the check sees this iteration's output.
  void PoisonResult();

  // One iteration, in the mode of the options.
  absl::Status RunOnce();

  // --device cuda: the result back to the host (before Corrupt and Check).
  absl::Status Download();
  // Flips a byte of the result (--corrupt-rank).
  void Corrupt();
  // OK if the result is exactly the expected one; kDataLoss naming the
  // collective, size, rank and first bad element otherwise.
  absl::Status Check() const;

 private:
  absl::Status RunRaw();
  absl::Status RunNegotiated();
  absl::StatusOr<Handle> Submit();
  // A 1-d tensor of `count` elements of the bench's dtype over `buffer`.
  Tensor Vector(std::vector<char>& buffer, int64_t count) const;
  // Hands out out_ (or its device twin) for a negotiated output of count_
  // elements.
  Allocator OutputAllocator();
  // --device cuda: copies a host buffer to its device twin.
  void Upload(const std::vector<char>& host,
              const std::unique_ptr<DeviceBuffer>& dev);

  const BenchOptions& o_;
  const int rank_, n_;
  const size_t elem_;
  const std::string name_;  // the negotiated name
  int64_t per_rank_ = 0, count_ = 0;
  std::vector<char> in_, out_;
  std::vector<char> restored_;  // in_ as Restore leaves it (once filled)
  std::vector<int64_t> splits_;
  // --device cuda: the device twins of in_ and out_ (the host buffers keep
  // the fill and, after Download, the result the check reads), on device
  // device_.
  int device_ = -1;
  std::unique_ptr<DeviceBuffer> d_in_, d_out_;
  absl::Status device_error_;
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_CASE_H_
