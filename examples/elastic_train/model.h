// The model and data of kolo-elastic-train: a two-layer perceptron (tanh
// hidden layer, sigmoid output, log loss) on a synthetic binary
// classification set drawn from a fixed seed (a random "teacher" network
// labels Gaussian inputs; a few labels are flipped), so nothing is
// downloaded and every run sees the same data.
//
// Exactness across world sizes: each sample's gradient (and loss) is rounded
// to fixed point (kFixedScale units) before it is summed, and the sums are
// int64. Integer addition is associative, so the global batch's sum is the
// same bits however the batch is split over ranks and in whatever order the
// allreduce adds it: a run that loses a worker and replays its last commit
// ends with the same parameters, to the bit, as a run without faults.
//
// Thread-safety: plain values; Dataset and Model are immutable once built
// and may be read from any thread.
#ifndef KOLO_EXAMPLES_ELASTIC_TRAIN_MODEL_H_
#define KOLO_EXAMPLES_ELASTIC_TRAIN_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo::examples {

// One gradient unit: 2^-32. Per-sample gradients stay well under 2^20 in
// magnitude (inputs are clamped to [-8, 8], weights to [-64, 64]), so a
// batch of up to 2^10 samples sums far below int64's range.
inline constexpr double kFixedScale = 4294967296.0;  // 2^32

struct Shape {
  int features = 32;
  int hidden = 16;
  // Parameters: W1 (hidden x features), b1 (hidden), w2 (hidden), b2.
  int64_t num_params() const {
    return static_cast<int64_t>(hidden) * features + 2 * hidden + 1;
  }
};

// Sample i of the set generated from `seed` (deterministic, independent of
// every other sample: ranks generate only their own shard).
struct Sample {
  std::vector<double> x;
  int label = 0;  // 0 or 1
};
Sample MakeSample(uint64_t seed, const Shape& shape, int64_t index);

// The parameters a run starts from (small random values from `seed`).
std::vector<double> InitialParams(uint64_t seed, const Shape& shape);

// Fixed-point sums over some samples: the gradient of the summed log loss
// (num_params values), then the summed loss and the number classified
// right, each in kFixedScale units (the count in plain units).
struct Sums {
  explicit Sums(int64_t num_params)
      : values(static_cast<size_t>(num_params) + 2, 0) {}
  std::vector<int64_t> values;
  int64_t& loss(const Shape& s) {
    return values[static_cast<size_t>(s.num_params())];
  }
  int64_t& correct(const Shape& s) {
    return values[static_cast<size_t>(s.num_params()) + 1];
  }
};

// Adds one sample's rounded gradient, loss and correctness to `sums`
// (gradient only when `with_gradient`).
void Accumulate(const Shape& shape, const std::vector<double>& params,
                const Sample& sample, bool with_gradient, Sums& sums);

// params -= lr * gradient_sum / batch, then clamps every weight to
// [-64, 64] (so that per-sample gradients stay in fixed-point range).
void Apply(const Shape& shape, const Sums& sums, int64_t batch, double lr,
           std::vector<double>& params);

// The summed log loss of one sample (double precision; for tests).
double SampleLoss(const Shape& shape, const std::vector<double>& params,
                  const Sample& sample);

// FNV-1a over the parameters' bytes: equal on every rank iff the bits are.
uint64_t Fingerprint(const std::vector<double>& params);

}  // namespace kolo::examples

#endif  // KOLO_EXAMPLES_ELASTIC_TRAIN_MODEL_H_
