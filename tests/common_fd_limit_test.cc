// Tests of RaiseOpenFileLimit (common/fd_limit.h): the soft RLIMIT_NOFILE
// goes up to the hard one, and a second call changes nothing.
#include <sys/resource.h>

#include "common/fd_limit.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

TEST(FdLimitTest, RaisesTheSoftLimitToTheHardOne) {
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < 512) {
    GTEST_SKIP() << "hard open-files limit " << lim.rlim_max << " too low";
  }
  // As a shell with `ulimit -Sn 256` would start us.
  rlimit low = lim;
  low.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);

  absl::StatusOr<OpenFileLimit> raised = RaiseOpenFileLimit();
  ASSERT_TRUE(raised.ok()) << raised.status();
  EXPECT_EQ(raised->before, 256u);
  EXPECT_GT(raised->after, 256u);
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(static_cast<uint64_t>(now.rlim_cur), raised->after);
  if (lim.rlim_max != RLIM_INFINITY) {
    EXPECT_EQ(now.rlim_cur, lim.rlim_max);
  }

  absl::StatusOr<OpenFileLimit> again = RaiseOpenFileLimit();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->before, again->after);
  EXPECT_EQ(again->after, raised->after);
}

}  // namespace
}  // namespace kolo
