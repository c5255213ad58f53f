// kolo-elastic-train's model and data (see model.h).
#include "examples/elastic_train/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kolo::examples {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1) from the stream (seed, a, b).
double Uniform(uint64_t seed, uint64_t a, uint64_t b) {
  const uint64_t bits = SplitMix64(SplitMix64(seed ^ SplitMix64(a)) + b);
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

double Gaussian(uint64_t seed, uint64_t a, uint64_t b) {
  const double u1 = Uniform(seed, a, 2 * b);
  const double u2 = Uniform(seed, a, 2 * b + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

constexpr size_t kTeacherHidden = 8;
constexpr double kLabelNoise = 0.05;
constexpr double kInputClamp = 8.0;
constexpr double kWeightClamp = 64.0;

// The teacher's score of x: a fixed random network of the seed (its
// weights drawn once per thread, seed and width).
double Teacher(uint64_t seed, const std::vector<double>& x) {
  struct Weights {
    uint64_t seed = 0;
    size_t features = 0;
    std::vector<double> in, out;
  };
  thread_local Weights w;
  if (w.in.empty() || w.seed != seed || w.features != x.size()) {
    const uint64_t tseed = SplitMix64(seed ^ 0x7465616368657221ULL);
    w.seed = seed;
    w.features = x.size();
    w.in.resize(kTeacherHidden * x.size());
    w.out.resize(kTeacherHidden);
    for (size_t h = 0; h < kTeacherHidden; ++h) {
      for (size_t f = 0; f < x.size(); ++f) {
        w.in[h * x.size() + f] = Gaussian(tseed, h, f);
      }
      w.out[h] = Gaussian(tseed, 1000, h);
    }
  }
  double out = 0;
  for (size_t h = 0; h < kTeacherHidden; ++h) {
    double a = 0;
    for (size_t f = 0; f < x.size(); ++f) a += w.in[h * x.size() + f] * x[f];
    out += w.out[h] * std::tanh(a / std::sqrt(static_cast<double>(x.size())));
  }
  return out;
}

int64_t ToFixed(double v) { return std::llround(v * kFixedScale); }

}  // namespace

Sample MakeSample(uint64_t seed, const Shape& shape, int64_t index) {
  Sample s;
  s.x.resize(static_cast<size_t>(shape.features));
  const uint64_t row = static_cast<uint64_t>(index) + 1;
  for (int f = 0; f < shape.features; ++f) {
    s.x[static_cast<size_t>(f)] =
        std::clamp(Gaussian(seed, row, static_cast<uint64_t>(f)), -kInputClamp,
                   kInputClamp);
  }
  s.label = Teacher(seed, s.x) > 0 ? 1 : 0;
  if (Uniform(seed ^ 0x6e6f697365ULL, row, 0) < kLabelNoise) s.label ^= 1;
  return s;
}

std::vector<double> InitialParams(uint64_t seed, const Shape& shape) {
  std::vector<double> p(static_cast<size_t>(shape.num_params()), 0.0);
  const uint64_t pseed = SplitMix64(seed ^ 0x696e6974ULL);
  const double s1 = 1.0 / std::sqrt(static_cast<double>(shape.features));
  const double s2 = 1.0 / std::sqrt(static_cast<double>(shape.hidden));
  const size_t w1 = static_cast<size_t>(shape.hidden) * shape.features;
  for (size_t i = 0; i < w1; ++i) p[i] = s1 * Gaussian(pseed, 1, i);
  // b1 stays 0; w2 random; b2 0.
  const size_t w2 = w1 + static_cast<size_t>(shape.hidden);
  for (int h = 0; h < shape.hidden; ++h) {
    p[w2 + static_cast<size_t>(h)] =
        s2 * Gaussian(pseed, 2, static_cast<uint64_t>(h));
  }
  return p;
}

namespace {

// Forward pass: hidden activations and the output logit.
double Forward(const Shape& shape, const std::vector<double>& p,
               const std::vector<double>& x, std::vector<double>& hidden) {
  const size_t F = static_cast<size_t>(shape.features);
  const size_t H = static_cast<size_t>(shape.hidden);
  const double* w1 = p.data();
  const double* b1 = w1 + H * F;
  const double* w2 = b1 + H;
  const double b2 = w2[H];
  hidden.assign(H, 0.0);
  double logit = b2;
  for (size_t h = 0; h < H; ++h) {
    double a = b1[h];
    for (size_t f = 0; f < F; ++f) a += w1[h * F + f] * x[f];
    hidden[h] = std::tanh(a);
    logit += w2[h] * hidden[h];
  }
  return logit;
}

// log(1 + e^z), stable.
double Softplus(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

}  // namespace

double SampleLoss(const Shape& shape, const std::vector<double>& params,
                  const Sample& sample) {
  std::vector<double> hidden;
  const double z = Forward(shape, params, sample.x, hidden);
  // -[y log s(z) + (1-y) log(1-s(z))] = softplus(z) - y z
  return Softplus(z) - sample.label * z;
}

void Accumulate(const Shape& shape, const std::vector<double>& params,
                const Sample& sample, bool with_gradient, Sums& sums) {
  std::vector<double> hidden;
  const double z = Forward(shape, params, sample.x, hidden);
  const double loss = Softplus(z) - sample.label * z;
  sums.loss(shape) += ToFixed(loss);
  sums.correct(shape) += ((z > 0 ? 1 : 0) == sample.label) ? 1 : 0;
  if (!with_gradient) return;
  const size_t F = static_cast<size_t>(shape.features);
  const size_t H = static_cast<size_t>(shape.hidden);
  const double* w2 = params.data() + H * F + H;
  const double dz = 1.0 / (1.0 + std::exp(-z)) - sample.label;  // dL/dz
  int64_t* g = sums.values.data();
  int64_t* gb1 = g + H * F;
  int64_t* gw2 = gb1 + H;
  for (size_t h = 0; h < H; ++h) {
    gw2[h] += ToFixed(dz * hidden[h]);
    const double da = dz * w2[h] * (1.0 - hidden[h] * hidden[h]);
    gb1[h] += ToFixed(da);
    for (size_t f = 0; f < F; ++f) g[h * F + f] += ToFixed(da * sample.x[f]);
  }
  gw2[H] += ToFixed(dz);  // b2
}

void Apply(const Shape& shape, const Sums& sums, int64_t batch, double lr,
           std::vector<double>& params) {
  const double step = lr / (kFixedScale * static_cast<double>(batch));
  for (size_t i = 0; i < static_cast<size_t>(shape.num_params()); ++i) {
    params[i] =
        std::clamp(params[i] - step * static_cast<double>(sums.values[i]),
                   -kWeightClamp, kWeightClamp);
  }
}

uint64_t Fingerprint(const std::vector<double>& params) {
  uint64_t h = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(params.data());
  for (size_t i = 0; i < params.size() * sizeof(double); ++i) {
    h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

}  // namespace kolo::examples
