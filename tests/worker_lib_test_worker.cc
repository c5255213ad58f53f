// kolo-test-worker: a worker for the multi-process tests of worker_lib.
//   kolo-test-worker agree   init, agree on a value with every rank, shut down
//   kolo-test-worker hold    init, then idle (up to 60 s) as a training step
//                            would, so that tests can kill the coordinator
// Prints "ready rank R of S local L of LS cross C of CS" after init; on
// failure prints the status and exits 1.
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "kolo/kolo.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "agree";
  absl::Status st = kolo::init();
  if (!st.ok()) {
    std::printf("init failed: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("ready rank %d of %d local %d of %d cross %d of %d\n",
              kolo::rank(), kolo::size(), kolo::local_rank(),
              kolo::local_size(), kolo::cross_rank(), kolo::cross_size());
  std::fflush(stdout);
  if (mode == "hold") {
    absl::SleepFor(absl::Seconds(60));  // the lease ends this sooner
    std::printf("still here after 60 s\n");
    return 2;
  }
  auto values = kolo::control_allgather(
      "agree", std::to_string(kolo::rank() * 10), absl::Seconds(30));
  if (!values.ok()) {
    std::printf("agree failed: %s\n", values.status().ToString().c_str());
    return 1;
  }
  std::printf("rank %d agreed [%s]\n", kolo::rank(),
              absl::StrJoin(*values, ",").c_str());
  std::fflush(stdout);
  st = kolo::shutdown();
  if (!st.ok()) {
    std::printf("shutdown failed: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
