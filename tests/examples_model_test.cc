// kolo-elastic-train's model (examples/elastic_train/model.h): its gradient
// against finite differences of the loss, and the property the example's
// exactness rests on — the fixed-point sums of a batch are the same bits
// however the batch is split, and so is the update.
#include <cmath>
#include <cstdint>
#include <vector>

#include "examples/elastic_train/model.h"
#include "gtest/gtest.h"

namespace kolo::examples {
namespace {

TEST(ElasticTrainModel, GradientMatchesFiniteDifferences) {
  Shape shape;
  shape.features = 5;
  shape.hidden = 3;
  std::vector<double> p = InitialParams(7, shape);
  const Sample s = MakeSample(7, shape, 11);
  Sums sums(shape.num_params());
  Accumulate(shape, p, s, /*with_gradient=*/true, sums);
  for (int64_t i = 0; i < shape.num_params(); ++i) {
    const double h = 1e-6;
    std::vector<double> up = p, down = p;
    up[static_cast<size_t>(i)] += h;
    down[static_cast<size_t>(i)] -= h;
    const double numeric =
        (SampleLoss(shape, up, s) - SampleLoss(shape, down, s)) / (2 * h);
    const double analytic =
        static_cast<double>(sums.values[static_cast<size_t>(i)]) / kFixedScale;
    EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::fabs(numeric))
        << "parameter " << i;
  }
  EXPECT_EQ(sums.loss(shape),
            std::llround(SampleLoss(shape, p, s) * kFixedScale));
}

TEST(ElasticTrainModel, SumsAndUpdateAreTheSameBitsForEverySplit) {
  Shape shape;
  shape.features = 8;
  shape.hidden = 4;
  const std::vector<double> p = InitialParams(3, shape);
  const int batch = 97;
  std::vector<Sample> samples;
  for (int i = 0; i < batch; ++i) samples.push_back(MakeSample(3, shape, i));
  Sums whole(shape.num_params());
  for (const Sample& s : samples) Accumulate(shape, p, s, true, whole);
  for (int size : {2, 3, 5, 7}) {
    // Each "rank" sums its strided part; the parts are added in reverse.
    std::vector<Sums> parts(static_cast<size_t>(size),
                            Sums(shape.num_params()));
    for (int i = 0; i < batch; ++i) {
      Accumulate(shape, p, samples[static_cast<size_t>(i)], true,
                 parts[static_cast<size_t>(i % size)]);
    }
    Sums total(shape.num_params());
    for (int r = size - 1; r >= 0; --r) {
      for (size_t k = 0; k < total.values.size(); ++k) {
        total.values[k] += parts[static_cast<size_t>(r)].values[k];
      }
    }
    EXPECT_EQ(total.values, whole.values) << size << " parts";
    std::vector<double> a = p, b = p;
    Apply(shape, whole, batch, 0.5, a);
    Apply(shape, total, batch, 0.5, b);
    EXPECT_EQ(Fingerprint(a), Fingerprint(b)) << size << " parts";
  }
}

TEST(ElasticTrainModel, DataIsDeterministicAndBalanced) {
  Shape shape;
  const Sample a = MakeSample(1, shape, 5);
  const Sample b = MakeSample(1, shape, 5);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.label, b.label);
  EXPECT_NE(MakeSample(2, shape, 5).x, a.x);
  int ones = 0;
  for (int i = 0; i < 2000; ++i) ones += MakeSample(1, shape, i).label;
  EXPECT_GT(ones, 600);  // both classes are well represented
  EXPECT_LT(ones, 1400);
}

}  // namespace
}  // namespace kolo::examples
