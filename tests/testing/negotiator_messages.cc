#include "tests/testing/negotiator_messages.h"

#include <utility>

#include "kolo/types.h"

namespace kolo::testing {

proto::Request Req(const std::string& name, std::vector<int64_t> shape,
                   proto::OpType op) {
  proto::Request r;
  r.set_name(name);
  r.set_op(op);
  r.set_dtype(static_cast<int>(DataType::kFloat32));
  for (int64_t d : shape) r.add_shape(d);
  r.set_reduce_op(static_cast<int>(ReduceOp::kSum));
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  r.set_device(-1);
  return r;
}

proto::Request OnSet(proto::Request r, int32_t set) {
  r.set_process_set(set);
  return r;
}

proto::Request Control(const std::string& name, proto::OpType op) {
  proto::Request r;
  r.set_name(name);
  r.set_op(op);
  r.set_device(-1);
  r.set_reduce_op(static_cast<int>(ReduceOp::kSum));
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  return r;
}

proto::Announce AnnReq(std::vector<proto::Request> requests) {
  proto::Announce a;
  for (proto::Request& r : requests) *a.add_requests() = std::move(r);
  return a;
}

proto::Announce Ann(const std::vector<std::string>& names) {
  std::vector<proto::Request> requests;
  for (const std::string& n : names) requests.push_back(Req(n));
  return AnnReq(std::move(requests));
}

std::vector<std::string> Names(const proto::Plan& plan) {
  std::vector<std::string> out;
  for (const proto::Response& r : plan.responses()) {
    for (const std::string& n : r.names()) out.push_back(n);
  }
  return out;
}

coordinator::NegotiatorOptions Opts(int size) {
  coordinator::NegotiatorOptions o;
  o.size = size;
  o.cycle_time = absl::Milliseconds(10);
  return o;
}

}  // namespace kolo::testing
