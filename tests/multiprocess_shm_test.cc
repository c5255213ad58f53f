// Shared memory between the ranks of one host through kolorun (every rank of
// these jobs shares the host "localhost", so their data goes through
// allreduce/shm/): a rank SIGKILLed in the middle of 1 MiB allreduces ends
// the job well before any deadline, and in elastic mode only the epoch,
// which the survivors rebuild over a new segment; neither leaves a file in
// /dev/shm. (The collective grid through real processes,
// multiprocess_grid_test, runs over shared memory too, KOLO_SHM being on by
// default.)
#include <dirent.h>

#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

using ::testing::HasSubstr;

int DevShmEntries() {
  int n = 0;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n;
}

TEST(SharedMemoryJob, RankKilledMidAllreduceEndsTheJobAndLeavesNothing) {
  const int before = DevShmEntries();
  JobRun run = RunJob({Bin("kolorun"), "-np", "3", "--log-level", "info",
                       Bin("kolo-mp-worker"), "kill-mid-allreduce", "1", "20"},
                      {}, absl::Seconds(60));
  EXPECT_TRUE(run.exit.exited && run.exit.code != 0) << run.exit.ToString();
  // The survivors' inactivity deadline is 30 s: the job ended on the kill.
  EXPECT_LT(run.seconds, absl::ToDoubleSeconds(Scaled(absl::Seconds(25))))
      << run.output;
  EXPECT_EQ(Lines(run.output, "shared memory with the 3 ranks").size(), 3u)
      << run.output;
  EXPECT_THAT(run.output, HasSubstr("rank 1"));
  EXPECT_EQ(DevShmEntries(), before) << "a file appeared in /dev/shm";
}

TEST(SharedMemoryJob, ElasticEpochEndsOnAKillAndTheSurvivorsShareANewSegment) {
  const int before = DevShmEntries();
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "3", "--min-np", "2", "--log-level",
              "info", Bin("kolo-elastic-worker"), "--steps", "30", "--kill",
              "2:10", "--replacement-exits", "1"},
             {}, absl::Seconds(120));
  EXPECT_TRUE(run.exit.exited && run.exit.code == 0)
      << run.exit.ToString() << "\n"
      << run.output;
  EXPECT_EQ(Lines(run.output, "shared memory with the 3 ranks").size(), 3u)
      << run.output;
  EXPECT_GE(Lines(run.output, "shared memory with the 2 ranks").size(), 2u)
      << run.output;
  EXPECT_EQ(DevShmEntries(), before) << "a file appeared in /dev/shm";
}

}  // namespace
}  // namespace kolo::testing
