// kolo-mp-worker: the program the multi-process tests run under kolorun or
// an env start (torchrun/Slurm/Open MPI style). One mode per behaviour:
//   topology: init, print a TOPO line, agree on worker ids, shutdown.
//   die RANK: init; RANK kills itself with SIGKILL, the others wait.
//   exit RANK CODE: init; RANK exits with CODE, the others wait.
//   spawn-and-sleep DIR: init; write pid files for itself and a grandchild,
//     wait.
//   hold SECONDS: init, print INITIALISED, then wait SECONDS (the lease is
//     expected to end the process first).
//   init-only: init and report the status (exit 3 on failure).
//   kill-mid-allreduce V N: allreduce 1 MiB in a loop; rank V kills itself
//     with SIGKILL at iteration N; the others print ALLREDUCE_FAILED with the
//     error and exit 5.
//   stop-mid-allreduce V N: the same, but rank V stops itself (SIGSTOP): its
//     connections stay open, so only the coordinator (missed heartbeats) can
//     end the others' wait before the inactivity deadline.
//   collectives: every blocking collective with exact expected values;
//     prints COLL_OK, or COLL_FAIL and exits 4.
// Every wait is bounded; nothing here can hang a test run.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "kolo/kolo.h"

namespace {

int Fail(const char* what, const absl::Status& st) {
  std::fprintf(stderr, "TEST_WORKER_FAILED %s: %s\n", what,
               st.ToString().c_str());
  return 3;
}

int64_t RealtimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void SleepSeconds(int seconds) {
  for (int i = 0; i < seconds * 10; ++i) usleep(100 * 1000);
}

int ArgInt(int argc, char** argv, int i) {
  int v = -1;
  if (i >= argc || !absl::SimpleAtoi(argv[i], &v)) {
    std::fprintf(stderr, "kolo-mp-worker: argument %d must be a number\n", i);
    std::exit(2);
  }
  return v;
}

int Topology() {
  const char* host = std::getenv("KOLO_HOSTNAME");
  const char* fake = std::getenv("KOLO_TEST_FAKE_HOST");
  auto ids = kolo::control_allgather("test/worker_ids", kolo::worker_id(),
                                     absl::Seconds(60));
  if (!ids.ok()) return Fail("control_allgather", ids.status());
  std::printf(
      "TOPO rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d "
      "cross_size=%d worker=%s "
      "host=%s fake_host=%s data=%s agreed=%s init_done_ns=%lld\n",
      kolo::rank(), kolo::size(), kolo::local_rank(), kolo::local_size(),
      kolo::cross_rank(), kolo::cross_size(), kolo::worker_id().c_str(),
      host ? host : "-", fake ? fake : "-", kolo::data_address().c_str(),
      absl::StrJoin(*ids, ",").c_str(),
      static_cast<long long>(RealtimeNanos()));
  std::fflush(stdout);
  absl::Status st = kolo::shutdown();
  if (!st.ok()) return Fail("shutdown", st);
  return 0;
}

// Exact checks of every blocking collective. Inputs are small integers, so
// every partial result is exact in every dtype used.
int Collectives() {
  const int r = kolo::rank(), n = kolo::size();
  std::string failures;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) failures += what + "; ";
  };
  auto ok = [&](const absl::Status& st, const std::string& what) {
    if (!st.ok()) failures += what + ": " + st.ToString() + "; ";
    return st.ok();
  };
  // allreduce, int32 sum, small (recursive doubling) and large (ring) sizes.
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4099},
                        int64_t{(1 << 20) + 3}}) {
    std::vector<int32_t> in(count), out(count);
    for (int64_t i = 0; i < count; ++i)
      in[i] = static_cast<int32_t>((i % 13) + r);
    if (!ok(kolo::allreduce(in.data(), out.data(), count,
                            kolo::DataType::kInt32),
            "allreduce int32 " + std::to_string(count))) {
      continue;
    }
    bool good = true;
    for (int64_t i = 0; i < count; ++i) {
      good &= out[i] == static_cast<int32_t>((i % 13) * n + n * (n - 1) / 2);
    }
    check(good, "allreduce int32 sum " + std::to_string(count) + " wrong");
  }
  {  // float32 average in place, and int8 max.
    std::vector<float> f(4099);
    for (size_t i = 0; i < f.size(); ++i)
      f[i] = static_cast<float>(2 * r * n + i % 5);
    if (ok(kolo::allreduce(f.data(), f.data(), 4099, kolo::DataType::kFloat32,
                           kolo::ReduceOp::kAverage),
           "allreduce float32 average")) {
      bool good = true;
      for (size_t i = 0; i < f.size(); ++i) {
        good &= f[i] == static_cast<float>((n - 1) * n + i % 5);
      }
      check(good, "allreduce float32 average wrong");
    }
    std::vector<int8_t> b(33, static_cast<int8_t>(-r)), out(33);
    if (ok(kolo::allreduce(b.data(), out.data(), 33, kolo::DataType::kInt8,
                           kolo::ReduceOp::kMax),
           "allreduce int8 max")) {
      check(
          std::all_of(out.begin(), out.end(), [](int8_t v) { return v == 0; }),
          "allreduce int8 max wrong");
    }
  }
  {  // allgather with per-rank counts r + 1.
    std::vector<int64_t> counts(n);
    int64_t total = 0;
    for (int i = 0; i < n; ++i) total += counts[i] = i + 1;
    std::vector<int64_t> in(r + 1, 100 + r), out(total);
    if (ok(kolo::allgather(in.data(), r + 1, kolo::DataType::kInt64, counts,
                           out.data()),
           "allgather")) {
      bool good = true;
      int64_t at = 0;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j <= i; ++j) good &= out[at++] == 100 + i;
      }
      check(good, "allgather wrong");
    }
  }
  {  // broadcast from the last rank.
    std::vector<double> v(1000, r == n - 1 ? 3.5 : -1.0);
    if (ok(kolo::broadcast(v.data(), 1000, kolo::DataType::kFloat64, n - 1),
           "broadcast")) {
      check(std::all_of(v.begin(), v.end(), [](double x) { return x == 3.5; }),
            "broadcast wrong");
    }
  }
  {  // alltoall: rank r sends (p + 1) elements of value 10 * r + p to rank p.
    std::vector<int64_t> send(n), recv(n);
    std::vector<int32_t> in, out;
    for (int p = 0; p < n; ++p) {
      send[p] = p + 1;
      recv[p] = r + 1;
      for (int j = 0; j <= p; ++j) in.push_back(10 * r + p);
    }
    out.resize(static_cast<size_t>(n) * (r + 1));
    if (ok(kolo::alltoall(in.data(), kolo::DataType::kInt32, send, out.data(),
                          recv),
           "alltoall")) {
      bool good = true;
      for (int p = 0; p < n; ++p) {
        for (int j = 0; j <= r; ++j) good &= out[p * (r + 1) + j] == 10 * p + r;
      }
      check(good, "alltoall wrong");
    }
  }
  {  // reducescatter: rank r gets r + 1 elements of the elementwise sum.
    std::vector<int64_t> counts(n);
    int64_t total = 0;
    for (int i = 0; i < n; ++i) total += counts[i] = i + 1;
    std::vector<int32_t> in(total), out(r + 1);
    for (int64_t i = 0; i < total; ++i) in[i] = static_cast<int32_t>(i + r);
    if (ok(kolo::reducescatter(in.data(), total, kolo::DataType::kInt32, counts,
                               out.data()),
           "reducescatter")) {
      int64_t start = r * (r + 1) / 2;
      bool good = true;
      for (int j = 0; j <= r; ++j) {
        good &=
            out[j] == static_cast<int32_t>((start + j) * n + n * (n - 1) / 2);
      }
      check(good, "reducescatter wrong");
    }
  }
  ok(kolo::barrier(), "barrier");
  // A caller's mistake fails on this rank with kInvalidArgument, before any
  // byte moves (so the other ranks are not left waiting).
  bool b = true;
  absl::Status bad = kolo::allreduce(&b, &b, 1, kolo::DataType::kBool,
                                     kolo::ReduceOp::kAverage);
  check(bad.code() == absl::StatusCode::kInvalidArgument,
        "bool average not refused");
  if (!failures.empty()) {
    std::printf("COLL_FAIL rank=%d %s\n", r, failures.c_str());
    std::fflush(stdout);
    return 4;
  }
  std::printf("COLL_OK rank=%d size=%d\n", r, n);
  std::fflush(stdout);
  absl::Status st = kolo::shutdown();
  return st.ok() ? 0 : Fail("shutdown", st);
}

int KillMidAllreduce(int victim, int at, int sig) {
  const int r = kolo::rank();
  std::vector<float> buf(1 << 18, 1.0f);  // 1 MiB: the ring path
  for (int i = 0; i < 1000000; ++i) {
    if (r == victim && i == at) raise(sig);
    absl::Status st = kolo::allreduce(buf.data(), buf.data(),
                                      static_cast<int64_t>(buf.size()),
                                      kolo::DataType::kFloat32);
    if (!st.ok()) {
      std::printf("ALLREDUCE_FAILED rank=%d iteration=%d: %s\n", r, i,
                  st.ToString().c_str());
      std::fflush(stdout);
      // As a training script would: leave in order, so that rank 0 (which
      // may host the coordinator) stays until the others heard the reason.
      (void)kolo::shutdown();
      std::_Exit(5);
    }
    std::fill(buf.begin(), buf.end(), 1.0f);
  }
  return 0;
}

int SpawnAndSleep(const std::string& dir) {
  pid_t child = fork();
  if (child == 0) {
    execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  int r = kolo::rank();
  std::ofstream(dir + "/pid." + std::to_string(r)) << getpid() << "\n";
  std::ofstream(dir + "/child." + std::to_string(r)) << child << "\n";
  std::printf("READY rank=%d pid=%d child=%d\n", r, getpid(), child);
  std::fflush(stdout);
  SleepSeconds(300);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kolo-mp-worker MODE [ARGS]\n");
    return 2;
  }
  std::string mode = argv[1];
  absl::Status st = kolo::init();
  if (!st.ok()) {
    std::fprintf(stderr, "INIT_FAILED: %s\n", st.ToString().c_str());
    return 3;
  }
  if (mode == "init-only") {
    std::printf("INIT_OK rank=%d size=%d\n", kolo::rank(), kolo::size());
    std::fflush(stdout);
    st = kolo::shutdown();
    return st.ok() ? 0 : Fail("shutdown", st);
  }
  if (mode == "topology") return Topology();
  if (mode == "collectives") return Collectives();
  if (mode == "kill-mid-allreduce" || mode == "stop-mid-allreduce") {
    return KillMidAllreduce(ArgInt(argc, argv, 2), ArgInt(argc, argv, 3),
                            mode == "kill-mid-allreduce" ? SIGKILL : SIGSTOP);
  }
  if (mode == "die" || mode == "exit") {
    int victim = ArgInt(argc, argv, 2);
    if (kolo::rank() == victim) {
      std::fprintf(stderr, "rank %d ending on purpose\n", victim);
      std::fflush(stderr);
      if (mode == "die") raise(SIGKILL);
      std::_Exit(ArgInt(argc, argv, 3));
    }
    SleepSeconds(120);
    return 0;
  }
  if (mode == "spawn-and-sleep" && argc > 2) return SpawnAndSleep(argv[2]);
  if (mode == "hold") {
    std::printf("INITIALISED rank=%d\n", kolo::rank());
    std::fflush(stdout);
    SleepSeconds(ArgInt(argc, argv, 2));
    std::printf("SURVIVED rank=%d\n", kolo::rank());
    return 0;
  }
  std::fprintf(stderr, "kolo-mp-worker: unknown mode %s\n", mode.c_str());
  return 2;
}
