// SoloTransport: the Transport of a one-rank world, for tests whose
// collectives never send or receive (one rank; the NCCL path never uses the
// data plane). Any send, receive or wait is an error.
// Thread-safety: stateless.
#ifndef KOLO_TESTS_TESTING_SOLO_TRANSPORT_H_
#define KOLO_TESTS_TESTING_SOLO_TRANSPORT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/transport.h"

namespace kolo::testing {

class SoloTransport : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void BeginOperation(uint64_t) override {}
  absl::StatusOr<OpId> StartSend(int, const void*, size_t) override {
    return absl::InternalError("no peers");
  }
  absl::StatusOr<OpId> StartRecv(int, void*, size_t) override {
    return absl::InternalError("no peers");
  }
  absl::Status Wait(OpId) override { return absl::InternalError("no op"); }
  void Abort(absl::Status) override {}
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_SOLO_TRANSPORT_H_
