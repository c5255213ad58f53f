// kolo-hello: the demo. Every worker initialises, proposes a random number,
// and agrees with the others through the coordinator on the smallest one; then
// prints its place in the job and the agreed value, and shuts down.
//
//   kolorun -np 4 build/bin/kolo-hello
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "kolo/kolo.h"

int main() {
  absl::Status st = kolo::init();
  if (!st.ok()) {
    std::fprintf(stderr, "kolo-hello: init failed: %s\n",
                 st.ToString().c_str());
    return 1;
  }
  std::random_device rd;
  uint64_t proposal = (static_cast<uint64_t>(rd()) << 32 | rd()) % 1000000;
  auto values = kolo::control_allgather(
      "hello/proposal", std::to_string(proposal), absl::Seconds(30));
  if (!values.ok()) {
    std::fprintf(stderr, "kolo-hello: agreeing failed: %s\n",
                 values.status().ToString().c_str());
    return 1;
  }
  uint64_t agreed = UINT64_MAX;
  for (const std::string& v : *values) {
    uint64_t x = 0;
    if (absl::SimpleAtoi(v, &x)) agreed = std::min(agreed, x);
  }
  std::printf(
      "hello from rank %d of %d: local_rank %d of %d, cross_rank %d of %d, "
      "worker %s, data %s; "
      "proposed %llu, agreed value %llu (the smallest of %zu proposals)\n",
      kolo::rank(), kolo::size(), kolo::local_rank(), kolo::local_size(),
      kolo::cross_rank(), kolo::cross_size(), kolo::worker_id().c_str(),
      kolo::data_address().c_str(), static_cast<unsigned long long>(proposal),
      static_cast<unsigned long long>(agreed), values->size());
  std::fflush(stdout);
  st = kolo::shutdown();
  if (!st.ok()) {
    std::fprintf(stderr, "kolo-hello: shutdown failed: %s\n",
                 st.ToString().c_str());
    return 1;
  }
  return 0;
}
