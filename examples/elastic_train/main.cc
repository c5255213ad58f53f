// kolo-elastic-train: data-parallel training in plain C++ that survives
// faults. A two-layer perceptron learns a synthetic classification set
// (examples/elastic_train/model.h: fixed seed, nothing downloaded) under
// kolo::elastic::run:
//   - every rank holds the samples i with i % size == rank (its shard) and,
//     at each step, works on the samples of the global batch (B consecutive
//     indices, wrapping) that are in its shard; a reset callback re-shards
//     after every membership change;
//   - the gradient sums are int64 fixed point, allreduced with kolo (one op
//     per step), so every rank applies the same update, bit for bit, at any
//     world size;
//   - the parameters and the step are the elastic State, committed every
//     --commit-every steps: a lost worker makes the survivors restore the
//     last commit and replay; a newcomer receives rank 0's state.
// So a run with faults ends with exactly the parameters, loss and accuracy
// of a run without (EL_FINAL lines carry a fingerprint of the parameters).
//
//   kolorun -np 4 --min-np 2 --max-np 4 build/bin/kolo-elastic-train
//
// Lines on stdout (for people and for scripts/chaos.sh):
//   EL_STEP step=N size=S loss=L accuracy=A          (rank 0, every
//   --log-every) EL_RESHARD rank=R size=S shard=K                 (each rank,
//   after a change) EL_CONSISTENT step=N size=S fingerprint=F        (rank 0:
//   every rank holds
//                                                     the same parameters)
//   EL_INCONSISTENT step=N ...                       (they do not: exit 1)
//   EL_FINAL rank=R size=S steps=N loss=L accuracy=A fingerprint=F
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "examples/elastic_train/model.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"

namespace {

using kolo::examples::Sample;
using kolo::examples::Shape;
using kolo::examples::Sums;

struct Args {
  int64_t steps = 400;
  int64_t batch = 256;
  int64_t samples = 8192;
  int64_t test_samples = 2048;
  Shape shape;
  double lr = 0.5;
  uint64_t seed = 1;
  int64_t commit_every = 1;
  int64_t log_every = 50;
  int64_t check_every = 100;
  int step_ms = 0;
};

void Print(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// This rank's shard: the samples i (of `count` from `first`) with
// (i - first) % size == rank, at position (i - first) / size.
std::vector<Sample> MakeShard(const Args& a, int64_t first, int64_t count,
                              int rank, int size) {
  std::vector<Sample> shard;
  for (int64_t i = rank; i < count; i += size) {
    shard.push_back(kolo::examples::MakeSample(a.seed, a.shape, first + i));
  }
  return shard;
}

// Whether every rank holds the same parameters: the max of the fingerprint
// and of its complement (= the complement of the min) agree.
absl::StatusOr<bool> SameEverywhere(uint64_t fingerprint) {
  int64_t v[2];
  std::memcpy(&v[0], &fingerprint, sizeof(int64_t));
  const uint64_t inverse = ~fingerprint;
  std::memcpy(&v[1], &inverse, sizeof(int64_t));
  if (absl::Status s = kolo::allreduce(v, v, 2, kolo::DataType::kInt64,
                                       kolo::ReduceOp::kMax);
      !s.ok()) {
    return s;
  }
  uint64_t max_fp, max_inv;
  std::memcpy(&max_fp, &v[0], sizeof(int64_t));
  std::memcpy(&max_inv, &v[1], sizeof(int64_t));
  return max_fp == ~max_inv;
}

// This rank's shards of the training and the held-out sets, for the
// membership it was made for.
struct Shards {
  std::vector<Sample> train, test;
  int rank = -1, size = 0;
};

void Reshard(const Args& a, Shards& sh) {
  sh.rank = kolo::rank();
  sh.size = kolo::size();
  sh.train = MakeShard(a, 0, a.samples, sh.rank, sh.size);
  sh.test = MakeShard(a, a.samples, a.test_samples, sh.rank, sh.size);
}

// One training step: the gradient sums of this rank's samples of the global
// batch, allreduced, applied; `step` advances (EL_STEP on rank 0).
absl::Status TrainStep(const Args& a, const Shards& sh,
                       std::vector<double>& params, int64_t& step) {
  Sums sums(a.shape.num_params());
  for (int64_t j = 0; j < a.batch; ++j) {
    const int64_t i = (step * a.batch + j) % a.samples;
    if (i % sh.size != sh.rank) continue;
    kolo::examples::Accumulate(a.shape, params,
                               sh.train[static_cast<size_t>(i / sh.size)],
                               /*with_gradient=*/true, sums);
  }
  if (absl::Status s = kolo::allreduce(sums.values.data(), sums.values.data(),
                                       static_cast<int64_t>(sums.values.size()),
                                       kolo::DataType::kInt64);
      !s.ok()) {
    return s;
  }
  kolo::examples::Apply(a.shape, sums, a.batch, a.lr, params);
  ++step;
  if (sh.rank == 0 && a.log_every > 0 &&
      (step % a.log_every == 0 || step == a.steps)) {
    Print(absl::StrFormat(
        "EL_STEP step=%d size=%d loss=%.6f accuracy=%.4f", step, sh.size,
        static_cast<double>(sums.loss(a.shape)) / kolo::examples::kFixedScale /
            static_cast<double>(a.batch),
        static_cast<double>(sums.correct(a.shape)) /
            static_cast<double>(a.batch)));
  }
  return absl::OkStatus();
}

// Whether every rank holds the same parameters (EL_CONSISTENT on rank 0,
// else EL_INCONSISTENT and a DataLoss error).
absl::Status CheckConsistent(const Shards& sh,
                             const std::vector<double>& params, int64_t step) {
  const uint64_t fp = kolo::examples::Fingerprint(params);
  absl::StatusOr<bool> same = SameEverywhere(fp);
  if (!same.ok()) return same.status();
  if (!*same) {
    Print(
        absl::StrFormat("EL_INCONSISTENT step=%d size=%d rank=%d "
                        "fingerprint=%016x",
                        step, sh.size, sh.rank, fp));
    return absl::DataLossError(absl::StrFormat(
        "the ranks hold different parameters at step %d", step));
  }
  if (sh.rank == 0) {
    Print(absl::StrFormat("EL_CONSISTENT step=%d size=%d fingerprint=%016x",
                          step, sh.size, fp));
  }
  return absl::OkStatus();
}

// The loss and accuracy on the held-out set, sharded like the training set.
struct Score {
  double loss = 0, accuracy = 0;
};

absl::StatusOr<Score> Evaluate(const Args& a, const Shards& sh,
                               const std::vector<double>& params) {
  const int64_t P = a.shape.num_params();
  Sums eval(P);
  for (const Sample& s : sh.test) {
    kolo::examples::Accumulate(a.shape, params, s, /*with_gradient=*/false,
                               eval);
  }
  if (absl::Status s =
          kolo::allreduce(eval.values.data() + P, eval.values.data() + P, 2,
                          kolo::DataType::kInt64);
      !s.ok()) {
    return s;
  }
  Score score;
  score.loss = static_cast<double>(eval.loss(a.shape)) /
               kolo::examples::kFixedScale /
               static_cast<double>(a.test_samples);
  score.accuracy = static_cast<double>(eval.correct(a.shape)) /
                   static_cast<double>(a.test_samples);
  return score;
}

int Train(const Args& a) {
  if (absl::Status s = kolo::init(); !s.ok()) {
    std::fprintf(stderr, "kolo-elastic-train: init failed: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  std::vector<double> params = kolo::examples::InitialParams(a.seed, a.shape);
  int64_t step = 0;
  std::string step_blob(sizeof(step), '\0');
  kolo::elastic::State state;
  absl::Status added = state.add_tensor("params", params.data(),
                                        static_cast<int64_t>(params.size()),
                                        kolo::DataType::kFloat64);
  if (added.ok()) added = state.add_blob("step", &step_blob);
  if (!added.ok()) {
    std::fprintf(stderr, "kolo-elastic-train: %s\n", added.ToString().c_str());
    return 1;
  }
  Shards shards;
  bool check_after_reset = false;
  Reshard(a, shards);
  state.register_reset_callback([&] {
    Reshard(a, shards);
    Print(absl::StrFormat("EL_RESHARD rank=%d size=%d shard=%d", shards.rank,
                          shards.size, shards.train.size()));
  });

  Score final_score;
  absl::Status result = kolo::elastic::run(state, [&]() -> absl::Status {
    std::memcpy(&step, step_blob.data(), sizeof(step));
    // Every rank enters here after the state sync (a newcomer too, which
    // runs no reset callback): all check together after the first step.
    check_after_reset = true;
    while (step < a.steps) {
      if (absl::Status s = TrainStep(a, shards, params, step); !s.ok()) {
        return s;
      }
      std::memcpy(step_blob.data(), &step, sizeof(step));
      if (a.step_ms > 0) ::usleep(static_cast<useconds_t>(a.step_ms) * 1000);
      if (step % a.commit_every == 0 || step == a.steps) {
        if (absl::Status s = state.commit(); !s.ok()) return s;
      }
      if (check_after_reset ||
          (a.check_every > 0 && step % a.check_every == 0)) {
        if (absl::Status s = CheckConsistent(shards, params, step); !s.ok()) {
          return s;
        }
        check_after_reset = false;
      }
    }
    absl::StatusOr<Score> score = Evaluate(a, shards, params);
    if (!score.ok()) return score.status();
    final_score = *score;
    return absl::OkStatus();
  });
  if (!result.ok()) {
    std::fprintf(stderr, "kolo-elastic-train: rank %d: %s\n", kolo::rank(),
                 result.ToString().c_str());
    (void)kolo::shutdown();
    return 1;
  }
  Print(absl::StrFormat(
      "EL_FINAL rank=%d size=%d steps=%d loss=%.9f accuracy=%.6f "
      "fingerprint=%016x",
      kolo::rank(), kolo::size(), step, final_score.loss, final_score.accuracy,
      kolo::examples::Fingerprint(params)));
  if (absl::Status s = kolo::shutdown(); !s.ok()) {
    std::fprintf(stderr, "kolo-elastic-train: shutdown: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{
      "kolo-elastic-train: data-parallel training of a small perceptron on a "
      "synthetic data set, through faults (run it under kolorun --min-np)"};
  app.add_option("--steps", a.steps, "Training steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--batch", a.batch, "Global batch (samples per step)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--samples", a.samples, "Training samples")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--test-samples", a.test_samples, "Held-out samples")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--features", a.shape.features, "Input features")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--hidden", a.shape.hidden, "Hidden units")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--lr", a.lr, "Learning rate")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--seed", a.seed, "Seed of the data and the initial weights")
      ->capture_default_str();
  app.add_option("--commit-every", a.commit_every,
                 "Steps between State commits")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--log-every", a.log_every,
                 "Steps between EL_STEP lines (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--check-every", a.check_every,
                 "Steps between checks that every rank holds the same "
                 "parameters (also after every membership change; 0: only "
                 "then)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--step-ms", a.step_ms,
                 "Milliseconds each step sleeps (to make runs long enough "
                 "for faults)")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  CLI11_PARSE(app, argc, argv);
  return Train(a);
}
