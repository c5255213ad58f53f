// The shared-memory transport (allreduce/shm/): exact bytes through rings
// small enough to wrap, FIFO matching and its errors, Abort waking a
// sleeping Wait, the inactivity deadline naming the peer, a killed peer
// process failing the waits on it at once, the segment set-up over TCP
// (nothing in /dev/shm, everyone or no one), and the hybrid transport
// running the collectives across two "hosts" of two ranks.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "allreduce/collectives.h"
#include "allreduce/shm/hybrid_transport.h"
#include "allreduce/shm/segment.h"
#include "allreduce/shm/shm_setup.h"
#include "allreduce/shm/shm_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allreduce_hybrid_test_world.h"
#include "tests/allreduce_tcp_test_mesh.h"
#include "tests/testing/collective_data.h"
#include "tests/testing/shm_world.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::JoinAll;
using ::kolo::testing::Joined;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Pattern(size_t len, int salt) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) {
    s[i] = static_cast<char>((i * 131 + salt * 17 + (i >> 12)) & 0xff);
  }
  return s;
}

std::vector<std::unique_ptr<Transport>> World(
    int n, size_t ring, absl::Duration timeout,
    size_t attach_min = ShmOptions().attach_min_bytes) {
  return testing::MakeShmWorld(n, ring, timeout, attach_min);
}

// Through the rings only (attach off), and with every message from 4 KiB by
// reference once the pair's probe succeeded (the first ones go through the
// ring while it runs).
TEST(ShmTransportTest, ExactBytesBothWaysThroughRingsAndByReference) {
  for (size_t attach_min : {size_t{0}, size_t{4096}}) {
    auto ts = World(2, 4096, testing::Scaled(absl::Seconds(30)), attach_min);
    ASSERT_EQ(ts.size(), 2u);
    const std::vector<size_t> sizes = {
        0, 1, 23, 4096, 4097, 100000, 3 << 20, 5000, 70000, 0, 1 << 20};
    std::vector<std::vector<std::string>> got(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        Transport& t = *ts[r];
        std::vector<std::string> out;
        for (size_t i = 0; i < sizes.size(); ++i) {
          out.push_back(Pattern(sizes[i], r * 100 + static_cast<int>(i)));
        }
        got[r].assign(sizes.size(), "");
        // Two rounds: the second finds the probe done.
        for (int round = 0; round < 2; ++round) {
          t.BeginOperation(5 + round);
          std::vector<OpId> ops;
          for (size_t i = 0; i < sizes.size(); ++i) {
            got[r][i].assign(sizes[i], 'x');
            ops.push_back(*t.StartRecv(1 - r, got[r][i].data(), sizes[i]));
            ops.push_back(*t.StartSend(1 - r, out[i].data(), sizes[i]));
          }
          EXPECT_TRUE(t.WaitAll(ops).ok());
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_TRUE(got[r][i] ==
                    Pattern(sizes[i], (1 - r) * 100 + static_cast<int>(i)))
            << "rank " << r << ", message " << i << " of " << sizes[i]
            << " B, attach from " << attach_min;
      }
    }
  }
}

TEST(ShmTransportTest, LengthOrSequenceMismatchFailsNamingThePeer) {
  auto ts = World(2, 4096, testing::Scaled(absl::Seconds(30)));
  ASSERT_EQ(ts.size(), 2u);
  std::string in(10, 'a');
  std::string out(12, 'b');
  ts[0]->BeginOperation(3);
  ts[1]->BeginOperation(3);
  OpId send = *ts[0]->StartSend(1, in.data(), in.size());
  OpId recv = *ts[1]->StartRecv(0, out.data(), out.size());
  EXPECT_TRUE(ts[0]->Wait(send).ok());
  absl::Status s = ts[1]->Wait(recv);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("from rank 0"));
  EXPECT_THAT(PeersOf(s), ElementsAre(0));

  auto us = World(2, 4096, testing::Scaled(absl::Seconds(30)));
  us[0]->BeginOperation(8);
  us[1]->BeginOperation(9);
  send = *us[0]->StartSend(1, in.data(), in.size());
  recv = *us[1]->StartRecv(0, out.data(), in.size());
  EXPECT_TRUE(us[0]->Wait(send).ok());
  s = us[1]->Wait(recv);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("operation 8"));
}

TEST(ShmTransportTest, AbortWakesASleepingWait) {
  // No spinning: the wait is asleep on its futex when Abort comes.
  auto first = shm::Segment::Create(2, 4096, 1, std::string(16, 'x'));
  ASSERT_TRUE(first.ok());
  ShmOptions o;
  o.rank = 0;
  o.epoch = 1;
  o.spin = absl::ZeroDuration();
  o.timeout = absl::Seconds(600);
  ShmTransport t(*std::move(first), o);
  char buf[8];
  OpId recv = *t.StartRecv(1, buf, sizeof(buf));
  const absl::Time start = absl::Now();
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    t.Abort(absl::AbortedError("epoch 1 ended"));
  });
  absl::Status s = t.Wait(recv);
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("epoch 1 ended"));
  EXPECT_LT(absl::Now() - start, testing::Scaled(absl::Seconds(10)));
  // Later starts fail too.
  EXPECT_EQ(t.StartSend(1, buf, 1).status().code(), absl::StatusCode::kAborted);
}

TEST(ShmTransportTest, InactivityDeadlineNamesThePeer) {
  auto ts = World(3, 4096, absl::Milliseconds(300));
  ASSERT_EQ(ts.size(), 3u);
  char buf[8];
  ts[0]->BeginOperation(1);
  OpId recv = *ts[0]->StartRecv(2, buf, sizeof(buf));
  absl::Status s = ts[0]->Wait(recv);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no data from rank 2"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("KOLO_TIMEOUT_SECONDS"));
  EXPECT_THAT(PeersOf(s), ElementsAre(2));
}

// A peer process that dies mid-collective (after its first message, before
// its second) fails the wait on it within moments, not at the deadline.
TEST(ShmTransportTest, KilledPeerProcessFailsTheWaitAtOnce) {
  auto seg = shm::Segment::Create(2, 4096, 1, std::string(16, 'k'));
  ASSERT_TRUE(seg.ok());
  const int fd = (*seg)->fd();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto mapped =
        shm::Segment::Map(net::UniqueFd(::dup(fd)), 2, 1, std::string(16, 'k'));
    if (!mapped.ok()) ::_exit(3);
    ShmOptions o;
    o.rank = 1;
    o.epoch = 1;
    ShmTransport t(*std::move(mapped), o);
    t.BeginOperation(1);
    const std::string first = Pattern(10000, 1);
    auto op = t.StartSend(0, first.data(), first.size());
    if (!op.ok() || !t.Wait(*op).ok()) ::_exit(4);
    (void)!::write(ready[1], "r", 1);
    ::pause();  // killed here, before the second message
    ::_exit(0);
  }
  ::close(ready[1]);
  ShmOptions o;
  o.rank = 0;
  o.epoch = 1;
  o.pids = {::getpid(), child};
  o.names = {"rank 0 (worker a)", "rank 1 (worker b)"};
  o.timeout = absl::Seconds(600);
  ShmTransport t(*std::move(seg), o);
  t.BeginOperation(1);
  std::string first(10000, '\0');
  std::string second(10000, '\0');
  OpId a = *t.StartRecv(1, first.data(), first.size());
  OpId b = *t.StartRecv(1, second.data(), second.size());
  EXPECT_TRUE(t.Wait(a).ok());
  EXPECT_TRUE(first == Pattern(10000, 1));
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  const absl::Time start = absl::Now();
  absl::Status s = t.Wait(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 1 (worker b) (process"));
  EXPECT_THAT(PeersOf(s), ElementsAre(1));
  EXPECT_LT(absl::Now() - start, testing::Scaled(absl::Seconds(10)));
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
}

int DevShmEntries() {
  int n = 0;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n;
}

TEST(ShmSetupTest, LocalRanksShareOneSegmentAndLeaveNothingInDevShm) {
  const int before = DevShmEntries();
  testing::TestWorld world(3);
  Joined j = JoinAll(world, {{0, 1, 2}}, 1 << 20);
  EXPECT_EQ(DevShmEntries(), before);
  std::vector<std::unique_ptr<Transport>> shm;
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(j.joins[r].ok()) << j.joins[r].status();
    ASSERT_NE(j.joins[r]->segment, nullptr) << j.joins[r]->why;
    EXPECT_EQ(j.joins[r]->segment->fd(), -1) << "descriptor kept";
    EXPECT_EQ(j.joins[r]->local_rank, r);
    EXPECT_EQ(j.joins[r]->pids.size(), 3u);
    ShmOptions o;
    o.rank = r;
    o.epoch = 4;
    o.pids = j.joins[r]->pids;
    shm.push_back(
        std::make_unique<ShmTransport>(std::move(j.joins[r]->segment), o));
  }
  // A ring of messages: each rank sends to the next.
  std::vector<std::string> got(3, std::string(50000, '\0'));
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      const std::string out = Pattern(50000, r);
      shm[r]->BeginOperation(2);
      EXPECT_TRUE(shm[r]
                      ->SendRecv((r + 1) % 3, out.data(), out.size(),
                                 (r + 2) % 3, got[r].data(), got[r].size())
                      .ok());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(got[r] == Pattern(50000, (r + 2) % 3));
}

TEST(ShmSetupTest, ASegmentTooSmallMeansTcpForEveryLocalRank) {
  testing::TestWorld world(2);
  Joined j = JoinAll(world, {{0, 1}}, 4096);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(j.joins[r].ok()) << j.joins[r].status();
    EXPECT_EQ(j.joins[r]->segment, nullptr);
    EXPECT_THAT(j.joins[r]->why, HasSubstr("KOLO_SHM_BYTES"));
  }
}

// Two "hosts" of two ranks: shared memory inside each, TCP across; the ring
// and the latency-optimal allreduce, exact on every rank.
TEST(HybridTransportTest, CollectivesAcrossTwoHostsOfTwoRanks) {
  testing::TestWorld world(4);
  const std::vector<std::vector<int>> hosts = {{0, 1}, {2, 3}};
  std::vector<std::unique_ptr<Transport>> ts =
      testing::MakeHybridWorld(world, hosts, 1 << 20);
  ASSERT_EQ(ts.size(), 4u);
  uint64_t seq = 10;
  testing::ExpectExactAllreduces(ts, {0, 1, 4099, (1 << 20) + 3}, &seq);
  // Abort reaches both halves: a wait on a remote peer and one on a local
  // peer both end at once.
  char buf[4];
  ts[0]->BeginOperation(99);
  OpId remote = *ts[0]->StartRecv(2, buf, 4);
  OpId local = *ts[0]->StartRecv(1, buf, 4);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ts[0]->Abort(absl::AbortedError("epoch over"));
  });
  EXPECT_EQ(ts[0]->Wait(remote).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(ts[0]->Wait(local).code(), absl::StatusCode::kAborted);
  aborter.join();
}

// Issue 22 point 5: a segment another user's process cannot open. The
// segment is a memfd (no name in /dev/shm to guess), mode 0600; the only way
// in from outside is /proc/PID/fd/N, which the kernel refuses to another
// user. Root's child opens it (the path is right), then as `nobody` it
// cannot.
TEST(ShmSegmentTest, AnotherUsersProcessCannotOpenTheSegment) {
  absl::StatusOr<std::unique_ptr<shm::Segment>> seg =
      shm::Segment::Create(2, 4096, 7, std::string(shm::kNonceBytes, 'n'));
  ASSERT_TRUE(seg.ok()) << seg.status();
  struct stat st {};
  ASSERT_EQ(::fstat((*seg)->fd(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  char target[256] = {};
  const std::string link = absl::StrCat("/proc/self/fd/", (*seg)->fd());
  ASSERT_GT(::readlink(link.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_EQ(std::string(target).rfind("/memfd:", 0), 0u)
      << target << ": not a memfd (a name in /dev/shm could be opened)";
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to run a child as another user";
  }
  const std::string path =
      absl::StrCat("/proc/", ::getpid(), "/fd/", (*seg)->fd());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int as_root = ::open(path.c_str(), O_RDWR);
    if (as_root < 0) ::_exit(2);  // the path is wrong: the test proves nothing
    ::close(as_root);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    const int as_nobody = ::open(path.c_str(), O_RDONLY);
    ::_exit(as_nobody < 0 && (errno == EACCES || errno == EPERM) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: another user opened the segment; 2: root could not open " << path
      << "; 3: could not become nobody";
}

}  // namespace
}  // namespace kolo
