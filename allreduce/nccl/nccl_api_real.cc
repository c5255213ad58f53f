// RealNcclApi: NcclApi over libnccl (built only with KOLO_HAVE_CUDA).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "allreduce/nccl/nccl_api.h"

namespace kolo::nccl {
namespace {

Result Of(ncclResult_t r, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return {};
  if (r == ncclInProgress) return {Result::kInProgress, ""};
  const char* last = ncclGetLastError(comm);
  return {Result::kError, absl::StrCat(ncclGetErrorString(r),
                                       last != nullptr && *last != '\0'
                                           ? absl::StrCat(" (", last, ")")
                                           : std::string())};
}

ncclDataType_t TypeOf(Wire w) {
  switch (w) {
    case Wire::kInt8:
      return ncclInt8;
    case Wire::kUint8:
      return ncclUint8;
    case Wire::kInt32:
      return ncclInt32;
    case Wire::kInt64:
      return ncclInt64;
    case Wire::kFloat16:
      return ncclFloat16;
    case Wire::kBfloat16:
      return ncclBfloat16;
    case Wire::kFloat32:
      return ncclFloat32;
    case Wire::kFloat64:
      return ncclFloat64;
  }
  return ncclUint8;
}

ncclRedOp_t OpOf(Op op) {
  switch (op) {
    case Op::kSum:
      return ncclSum;
    case Op::kProd:
      return ncclProd;
    case Op::kMin:
      return ncclMin;
    case Op::kMax:
      return ncclMax;
    case Op::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

ncclComm_t C(Comm c) { return static_cast<ncclComm_t>(c); }
cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }

class Real final : public NcclApi {
 public:
  int Version() override {
    int v = 0;
    return ncclGetVersion(&v) == ncclSuccess ? v : 0;
  }
  Result GetUniqueId(std::string* id) override {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r == ncclSuccess) id->assign(u.internal, sizeof(u.internal));
    return Of(r);
  }
  Result CommInitRank(Comm* comm, int nranks, const std::string& id, int rank,
                      int device) override {
    ncclUniqueId u;
    if (id.size() != sizeof(u.internal)) {
      return {Result::kError, absl::StrCat("the NCCL unique id has ", id.size(),
                                           " bytes, not ", sizeof(u.internal))};
    }
    std::memcpy(u.internal, id.data(), sizeof(u.internal));
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
      return {Result::kError, absl::StrCat("cudaSetDevice(", device,
                                           "): ", cudaGetErrorString(e))};
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that an epoch's end can abort it safely
    ncclComm_t c = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&c, nranks, u, rank, &config);
    *comm = c;
    return Of(r, c);
  }
  Result CommGetAsyncError(Comm comm) override {
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(C(comm), &async);
    if (r != ncclSuccess) return Of(r, C(comm));
    return Of(async, C(comm));
  }
  Result CommAbort(Comm comm) override { return Of(ncclCommAbort(C(comm))); }
  Result GroupStart() override { return Of(ncclGroupStart()); }
  Result GroupEnd() override { return Of(ncclGroupEnd()); }
  Result AllReduce(const void* send, void* recv, size_t count, Wire type, Op op,
                   Comm comm, void* stream) override {
    return Of(ncclAllReduce(send, recv, count, TypeOf(type), OpOf(op), C(comm),
                            S(stream)),
              C(comm));
  }
  Result Broadcast(const void* send, void* recv, size_t count, Wire type,
                   int root, Comm comm, void* stream) override {
    return Of(ncclBroadcast(send, recv, count, TypeOf(type), root, C(comm),
                            S(stream)),
              C(comm));
  }
  Result Reduce(const void* send, void* recv, size_t count, Wire type, Op op,
                int root, Comm comm, void* stream) override {
    return Of(ncclReduce(send, recv, count, TypeOf(type), OpOf(op), root,
                         C(comm), S(stream)),
              C(comm));
  }
  Result ReduceScatter(const void* send, void* recv, size_t recv_count,
                       Wire type, Op op, Comm comm, void* stream) override {
    return Of(ncclReduceScatter(send, recv, recv_count, TypeOf(type), OpOf(op),
                                C(comm), S(stream)),
              C(comm));
  }
  Result Send(const void* send, size_t count, Wire type, int peer, Comm comm,
              void* stream) override {
    return Of(ncclSend(send, count, TypeOf(type), peer, C(comm), S(stream)),
              C(comm));
  }
  Result Recv(void* recv, size_t count, Wire type, int peer, Comm comm,
              void* stream) override {
    return Of(ncclRecv(recv, count, TypeOf(type), peer, C(comm), S(stream)),
              C(comm));
  }
};

}  // namespace

std::unique_ptr<NcclApi> RealNcclApi() { return std::make_unique<Real>(); }

}  // namespace kolo::nccl
