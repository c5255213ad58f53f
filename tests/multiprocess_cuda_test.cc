// CUDA tensors through kolorun and the public API
// (tests/workers/cuda_worker.cc):
//   - on every machine: ranks that disagree on a tensor's device kind get an
//     error on every rank, and a CUDA tensor where no device is usable (or
//     kolo has no CUDA) is refused on every rank saying why; the next op
//     works;
//   - with a CUDA device (skipped with a message otherwise): every op over
//     CUDA tensors with exact values on NCCL with one rank, through host
//     memory (KOLO_CUDA_STAGING=1) with one and with two ranks on the one
//     device, and two ranks without KOLO_CUDA_STAGING (on one GPU, NCCL
//     < 2.30 cannot take both: set 0 goes through host memory by itself);
//     with two ranks, an allreduce on each rank's own process set runs on
//     that set's communicator; a large allreduce in flight at shutdown ends
//     in bounded time;
//   - with a CUDA device: an elastic job's epoch ends (a newcomer admitted
//     at a membership check) while an NCCL allreduce is in flight behind a
//     gated ready_event: it fails with the membership error within 20 s,
//     and the next epoch (2 ranks on the one GPU, staged) is exact.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"

namespace kolo::testing {
namespace {

constexpr int kInvalid = 3;   // absl::StatusCode::kInvalidArgument
constexpr int kMismatch = 9;  // absl::StatusCode::kFailedPrecondition

bool DeviceUsable(const std::string& output) {
  return absl::StrContains(output, " devices=") &&
         !absl::StrContains(output, " devices=0 ");
}

TEST(CudaKinds, DisagreeingDeviceKindsFailOnEveryRankAndTheJobGoesOn) {
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "3", Bin("kolo-cuda-worker"), "kinds"});
  EXPECT_EQ(run.exit.code, 0) << run.output;
  const auto mixed = Lines(run.output, "CUDA_ERR case=kinds/mixed ");
  ASSERT_EQ(mixed.size(), 3u) << run.output;
  const bool device = DeviceUsable(run.output);
  for (const std::string& line : mixed) {
    EXPECT_EQ(Field(line, "next"), "1") << line;
    if (device) {
      EXPECT_EQ(Int(Field(line, "code")), kMismatch) << line;
      EXPECT_TRUE(absl::StrContains(line,
                                    "device kind cpu on ranks 0,1 but "
                                    "cuda on rank 2"))
          << line;
    } else {
      // Rank 2 flagged its own tensor: no usable device.
      EXPECT_EQ(Int(Field(line, "code")), kInvalid) << line;
      EXPECT_TRUE(absl::StrContains(line, "is on CUDA device 0, but")) << line;
      EXPECT_TRUE(absl::StrContains(line, "kolo::kCpu")) << line;
    }
  }
  if (device) return;
  const auto refused = Lines(run.output, "CUDA_ERR case=kinds/refused ");
  ASSERT_EQ(refused.size(), 3u) << run.output;
  for (const std::string& line : refused) {
    EXPECT_EQ(Int(Field(line, "code")), kInvalid) << line;
    EXPECT_EQ(Field(line, "next"), "1") << line;
    EXPECT_TRUE(absl::StrContains(line, "CUDA device 0")) << line;
  }
}

void RunGpu(int np, bool staging) {
  std::map<std::string, std::optional<std::string>> env;
  env["KOLO_CUDA_STAGING"] = staging ? "1" : "0";
  JobRun run = RunJob({Bin("kolorun"), "-np", std::to_string(np),
                       Bin("kolo-cuda-worker"), "gpu"},
                      env, absl::Seconds(300));
  if (absl::StrContains(run.output, "CUDA_SKIP")) {
    GTEST_SKIP() << "no usable CUDA device: "
                 << Lines(run.output, "CUDA_SKIP")[0];
  }
  EXPECT_EQ(run.exit.code, 0) << run.output;
  EXPECT_TRUE(Lines(run.output, "CUDA_FAIL").empty()) << run.output;
  // 20 allreduces + big + allgather + np broadcasts + alltoall +
  // reducescatter + grouped + own process set (np >= 2) + abort, on every
  // rank.
  const int own_set = np >= 2 ? 1 : 0;
  EXPECT_EQ(
      Lines(run.output, "CUDA_OK ").size(),
      static_cast<size_t>(np * (20 + 1 + 1 + np + 1 + 1 + 1 + own_set + 1)))
      << run.output;
  std::cout << run.output;
}

// kolo-cuda-worker abort DIR: worker w0 alone on NCCL, its gated allreduce
// in flight; the discovery script offers a second slot once DIR/grow exists
// (the worker creates it), and w0's membership check with the newcomer
// waiting ends the epoch.
TEST(CudaGpu, EpochEndsDuringAnNcclAllreduce) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/cuda_abort.", getpid());
  ::mkdir(dir.c_str(), 0700);
  const std::string script = dir + "/discover.sh";
  struct Cleanup {
    std::string dir, script;
    ~Cleanup() {
      for (const char* f : {"/grow", "/newcomer", "/discover.sh"}) {
        ::unlink((dir + f).c_str());
      }
      ::rmdir(dir.c_str());
    }
  } cleanup{dir, script};
  ::unlink((dir + "/grow").c_str());
  ::unlink((dir + "/newcomer").c_str());
  std::ofstream(script) << "#!/bin/sh\nif [ -e " << dir
                        << "/grow ]; then echo localhost:2; else echo "
                           "localhost:1; fi\n";
  ::chmod(script.c_str(), 0700);
  std::map<std::string, std::optional<std::string>> env;
  env["KOLO_CUDA_STAGING"] = "0";
  // The gated allreduce's own deadline (the NCCL wait) well past the ~7 s
  // the worker takes to grow the job and end the epoch.
  env["KOLO_TIMEOUT_SECONDS"] = "90";
  JobRun run =
      RunJob({Bin("kolorun"), "--min-np", "1", "--max-np", "2",
              "--host-discovery-script", script, "--discovery-interval-seconds",
              "0.2", Bin("kolo-cuda-worker"), "abort", dir},
             env, absl::Seconds(240));
  if (absl::StrContains(run.output, "CUDA_SKIP")) {
    GTEST_SKIP() << "no usable CUDA device: "
                 << Lines(run.output, "CUDA_SKIP")[0];
  }
  std::cout << run.output;
  EXPECT_EQ(run.exit.code, 0) << run.output;
  EXPECT_TRUE(Lines(run.output, "CUDA_FAIL").empty()) << run.output;
  const auto aborted = Lines(run.output, "CUDA_ABORTED ");
  ASSERT_EQ(aborted.size(), 1u) << run.output;
  EXPECT_EQ(Int(Field(aborted[0], "code")), 10) << aborted[0];  // kAborted
  EXPECT_EQ(Field(aborted[0], "membership"), "1") << aborted[0];
  EXPECT_EQ(Field(aborted[0], "hosts_updated"), "1") << aborted[0];
  EXPECT_EQ(Field(aborted[0], "check_hosts_updated"), "1") << aborted[0];
  EXPECT_EQ(Lines(run.output, "CUDA_OK case=abort/warm ").size(), 1u)
      << run.output;
  EXPECT_EQ(Lines(run.output, "CUDA_OK case=abort/gated ").size(), 1u)
      << run.output;
  // Epoch 2: two ranks, two allreduces each.
  EXPECT_EQ(Lines(run.output, "CUDA_OK case=abort/next/").size(), 4u)
      << run.output;
}

TEST(CudaGpu, NcclOneRank) { RunGpu(1, false); }
TEST(CudaGpu, StagingOneRank) { RunGpu(1, true); }
TEST(CudaGpu, StagingTwoRanksOnOneDevice) { RunGpu(2, true); }
// Without KOLO_CUDA_STAGING: NCCL where it can take the ranks' devices,
// host memory by itself where it cannot.
TEST(CudaGpu, TwoRanksWithoutStagingFlag) { RunGpu(2, false); }

}  // namespace
}  // namespace kolo::testing
