// kolo-mp-worker: the program the multi-process tests run under kolorun or
// an env start (torchrun/Slurm/Open MPI style). One mode per behaviour:
//   topology                 init, print a TOPO line, agree on worker ids,
//   shutdown die RANK                 init; RANK kills itself with SIGKILL,
//   others wait exit RANK CODE           init; RANK exits with CODE, others
//   wait spawn-and-sleep DIR      init; write pid files for itself and a
//   grandchild, wait hold SECONDS             init, print INITIALISED, then
//   wait SECONDS (the lease
//                            is expected to end the process first)
//   init-only                init and report the status (exit 3 on failure)
// Every wait is bounded; nothing here can hang a test run.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

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
