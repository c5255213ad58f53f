// FusionCandidateOf (fusion_candidate.h).
#include "proto/fusion_candidate.h"

#include <cstddef>
#include <cstdint>

#include "kolo/types.h"

namespace kolo::proto {

fusion::Candidate FusionCandidateOf(const Response& response,
                                    const Request* first,
                                    uint64_t direct_bytes) {
  fusion::Candidate c;
  if (response.error_code() != 0 || first == nullptr) return c;  // kOther
  const Request& r = *first;
  const auto dtype = static_cast<DataType>(r.dtype());
  if (r.dtype() < 0 || DataTypeSize(dtype) == 0) return c;
  uint64_t row = 1;
  for (size_t i = 1; i < static_cast<size_t>(r.shape_size()); ++i) {
    row *= static_cast<uint64_t>(r.shape(static_cast<int>(i)));
  }
  const uint64_t element = DataTypeSize(dtype);  // checked above
  uint64_t bytes = 0;
  if (response.op() == ALLREDUCE) {
    c.op = fusion::OpKind::kAllreduce;
    bytes = element;
    for (int64_t d : r.shape()) bytes *= static_cast<uint64_t>(d);
    c.reduce_op = static_cast<ReduceOp>(r.reduce_op());
    c.prescale = r.prescale();
    c.postscale = r.postscale();
  } else if (response.op() == ALLGATHER) {
    if (r.shape_size() == 0) return c;
    c.op = fusion::OpKind::kAllgather;
    for (int64_t rows : response.sizes()) {
      bytes += static_cast<uint64_t>(rows) * row * element;
    }
  } else {
    return c;
  }
  c.dtype = dtype;
  // The kind (-1 host, 0 CUDA): ordinals differ from rank to rank, and a
  // rank's CUDA tensors run on its one device
  // (worker_lib/exec/cuda_executor.h).
  c.device = r.device() < 0 ? -1 : 0;
  c.bytes = bytes;
  if (bytes >= direct_bytes) c.op = fusion::OpKind::kOther;  // runs in place
  return c;
}

}  // namespace kolo::proto
