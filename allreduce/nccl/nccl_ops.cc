#include "allreduce/nccl/nccl_ops.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace kolo::nccl {

bool WireOf(DataType dtype, Wire* wire) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kBool:
      *wire = Wire::kUint8;
      return true;
    case DataType::kInt8:
      *wire = Wire::kInt8;
      return true;
    case DataType::kInt16:
      return false;
    case DataType::kInt32:
      *wire = Wire::kInt32;
      return true;
    case DataType::kInt64:
      *wire = Wire::kInt64;
      return true;
    case DataType::kFloat16:
      *wire = Wire::kFloat16;
      return true;
    case DataType::kBFloat16:
      *wire = Wire::kBfloat16;
      return true;
    case DataType::kFloat32:
      *wire = Wire::kFloat32;
      return true;
    case DataType::kFloat64:
      *wire = Wire::kFloat64;
      return true;
  }
  return false;
}

namespace {

bool IsFloat(DataType d) {
  return d == DataType::kFloat16 || d == DataType::kBFloat16 ||
         d == DataType::kFloat32 || d == DataType::kFloat64;
}

Op OpOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return Op::kSum;
    case ReduceOp::kAverage:
      return Op::kAvg;
    case ReduceOp::kMin:
      return Op::kMin;
    case ReduceOp::kMax:
      return Op::kMax;
    case ReduceOp::kProduct:
      return Op::kProd;
  }
  return Op::kSum;
}

absl::Status Grouped(Communicator& comm, absl::string_view what,
                     const std::function<absl::Status()>& body) {
  if (absl::Status s =
          comm.Call("ncclGroupStart",
                    [](NcclApi& api, Comm) { return api.GroupStart(); });
      !s.ok()) {
    return s;
  }
  absl::Status inner = body();
  absl::Status end =
      comm.Call(absl::StrCat(what, " (ncclGroupEnd)"),
                [](NcclApi& api, Comm) { return api.GroupEnd(); });
  return inner.ok() ? end : inner;
}

}  // namespace

std::string NcclCanReduce(DataType dtype, const ReduceOptions& reduce) {
  Wire w;
  if (dtype == DataType::kBool || !WireOf(dtype, &w)) {
    return absl::StrCat("NCCL has no ", DataTypeName(dtype), " reduction");
  }
  if (reduce.op == ReduceOp::kAverage && !IsFloat(dtype)) {
    return "kolo's integer average truncates toward zero; NCCL's does not "
           "promise that";
  }
  if (reduce.prescale != 1.0 || reduce.postscale != 1.0) {
    return "pre/post scale factors are applied on the host path";
  }
  return "";
}

absl::Status Allreduce(Communicator& comm, void* stream, DataType dtype,
                       const ReduceOptions& reduce, const void* in, void* out,
                       int64_t count) {
  Wire w;
  WireOf(dtype, &w);
  const Op op = OpOf(reduce.op);
  return comm.Call("ncclAllReduce", [&](NcclApi& api, Comm c) {
    return api.AllReduce(in, out, static_cast<size_t>(count), w, op, c, stream);
  });
}

absl::Status Broadcast(Communicator& comm, void* stream, void* data,
                       int64_t bytes, int root) {
  return comm.Call("ncclBroadcast", [&](NcclApi& api, Comm c) {
    return api.Broadcast(data, data, static_cast<size_t>(bytes), Wire::kUint8,
                         root, c, stream);
  });
}

absl::Status Allgatherv(Communicator& comm, void* stream, const void* in,
                        absl::Span<const int64_t> bytes, void* out) {
  const int rank = comm.options().rank;
  return Grouped(comm, "allgather", [&]() -> absl::Status {
    int64_t at = 0;
    for (int r = 0; r < static_cast<int>(bytes.size()); ++r) {
      char* dst = static_cast<char*>(out) + at;
      at += bytes[r];
      if (bytes[r] == 0) continue;
      if (absl::Status s = comm.Call("ncclBroadcast (allgather)",
                                     [&](NcclApi& api, Comm c) {
                                       return api.Broadcast(
                                           r == rank ? in : dst, dst,
                                           static_cast<size_t>(bytes[r]),
                                           Wire::kUint8, r, c, stream);
                                     });
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  });
}

absl::Status Alltoallv(Communicator& comm, void* stream, const void* in,
                       absl::Span<const int64_t> send_bytes, void* out,
                       absl::Span<const int64_t> recv_bytes) {
  return Grouped(comm, "alltoall", [&]() -> absl::Status {
    int64_t send_at = 0, recv_at = 0;
    for (int r = 0; r < static_cast<int>(send_bytes.size()); ++r) {
      const char* src = static_cast<const char*>(in) + send_at;
      char* dst = static_cast<char*>(out) + recv_at;
      send_at += send_bytes[r];
      recv_at += recv_bytes[r];
      if (send_bytes[r] > 0) {
        if (absl::Status s = comm.Call(
                "ncclSend (alltoall)",
                [&](NcclApi& api, Comm c) {
                  return api.Send(src, static_cast<size_t>(send_bytes[r]),
                                  Wire::kUint8, r, c, stream);
                });
            !s.ok()) {
          return s;
        }
      }
      if (recv_bytes[r] > 0) {
        if (absl::Status s = comm.Call(
                "ncclRecv (alltoall)",
                [&](NcclApi& api, Comm c) {
                  return api.Recv(dst, static_cast<size_t>(recv_bytes[r]),
                                  Wire::kUint8, r, c, stream);
                });
            !s.ok()) {
          return s;
        }
      }
    }
    return absl::OkStatus();
  });
}

absl::Status Reducescatter(Communicator& comm, void* stream, DataType dtype,
                           const ReduceOptions& reduce, const void* in,
                           absl::Span<const int64_t> counts, void* out) {
  Wire w;
  WireOf(dtype, &w);
  const Op op = OpOf(reduce.op);
  bool even = true;
  for (int64_t c : counts) even = even && c == counts[0];
  if (even) {
    return comm.Call("ncclReduceScatter", [&](NcclApi& api, Comm c) {
      return api.ReduceScatter(in, out, static_cast<size_t>(counts[0]), w, op,
                               c, stream);
    });
  }
  const int rank = comm.options().rank;
  const size_t element = DataTypeSize(dtype);
  return Grouped(comm, "reducescatter", [&]() -> absl::Status {
    int64_t at = 0;
    for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
      const char* src = static_cast<const char*>(in) + at * element;
      at += counts[r];
      if (counts[r] == 0) continue;
      if (absl::Status s = comm.Call("ncclReduce (reducescatter)",
                                     [&](NcclApi& api, Comm c) {
                                       return api.Reduce(
                                           src, r == rank ? out : nullptr,
                                           static_cast<size_t>(counts[r]), w,
                                           op, r, c, stream);
                                     });
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  });
}

absl::Status Barrier(Communicator& comm, void* stream, void* scratch) {
  return comm.Call("ncclAllReduce (barrier)", [&](NcclApi& api, Comm c) {
    return api.AllReduce(scratch, scratch, 1, Wire::kInt32, Op::kSum, c,
                         stream);
  });
}

}  // namespace kolo::nccl
