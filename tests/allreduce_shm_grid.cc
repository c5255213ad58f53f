// Runs the algorithm grid (allreduce_algorithms_test.cc, linked beside this
// file) over the shared-memory transport: every RunRanks world is N
// ShmTransports over one segment, ranks as threads. Rings of 64 KiB make the
// large cases wrap around them many times.
#include "tests/testing/collective_data.h"
#include "tests/testing/shm_world.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

const bool registered = [] {
  SetTransportMaker([](int n) {
    return MakeShmWorld(n, 64 * 1024, Scaled(absl::Seconds(30)));
  });
  return true;
}();

}  // namespace
}  // namespace kolo::testing
