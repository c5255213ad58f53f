// Messages for the Negotiator's unit tests (coordinator/negotiator.h): valid
// requests and announcements as a worker makes them, the names a plan
// lists, fake times, and the options both test files start from.
//
// Thread-safety: pure functions.
#ifndef KOLO_TESTS_TESTING_NEGOTIATOR_MESSAGES_H_
#define KOLO_TESTS_TESTING_NEGOTIATOR_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/negotiator.h"
#include "proto/kolo.pb.h"

namespace kolo::testing {

// Fake time: kT0 + d.
inline const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);
inline absl::Time At(absl::Duration d) { return kT0 + d; }

// A valid float32 sum allreduce on the host (scale factors 1).
proto::Request Req(const std::string& name, std::vector<int64_t> shape = {4},
                   proto::OpType op = proto::ALLREDUCE);

// `r` on process set `set`.
proto::Request OnSet(proto::Request r, int32_t set);

// A request without a tensor, as the worker makes it (op_request.cc): a
// JOIN, a barrier, a process-set registration.
proto::Request Control(const std::string& name, proto::OpType op);

// An Announce of these full requests.
proto::Announce AnnReq(std::vector<proto::Request> requests);
// An Announce of Req(name) for each name.
proto::Announce Ann(const std::vector<std::string>& names);

// The names of every response of `plan`, flattened in order.
std::vector<std::string> Names(const proto::Plan& plan);

// `size` ranks, a 10 ms cycle time, the rest default.
coordinator::NegotiatorOptions Opts(int size);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_NEGOTIATOR_MESSAGES_H_
