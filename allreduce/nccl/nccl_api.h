// NcclApi: the NCCL calls kolo makes, behind an interface, so that the
// communicator lifecycle (communicator.h) and the completion thread
// (completion.h) are unit-tested around a fake on machines without a GPU
// (tests/allreduce_nccl_test.cc). RealNcclApi (nccl_api_real.cc, only with
// KOLO_HAVE_CUDA) forwards to libnccl.
//
// Handles cross the interface opaquely: Comm is an ncclComm_t, `stream` a
// cudaStream_t, the unique id its 128 bytes in a string. Results keep
// NCCL's three-way outcome: done, still in progress (non-blocking
// communicators), or an error with NCCL's text.
//
// Thread-safety: as NCCL's: a communicator's calls from one thread at a
// time, except CommGetAsyncError and CommAbort, which any thread may call.
#ifndef KOLO_ALLREDUCE_NCCL_NCCL_API_H_
#define KOLO_ALLREDUCE_NCCL_NCCL_API_H_

#include <cstddef>
#include <memory>
#include <string>

#include "kolo/types.h"

namespace kolo::nccl {

using Comm = void*;  // ncclComm_t

struct Result {
  enum Code { kOk, kInProgress, kError };
  Code code = kOk;
  std::string message;  // kError: NCCL's error string (and last error)
  bool ok() const { return code == kOk; }
};

// The NCCL data type moving `dtype`'s values; bool moves as uint8 (for
// copies only: no NCCL reduction computes bool's OR/AND).
enum class Wire {
  kInt8,
  kUint8,
  kInt32,
  kInt64,
  kFloat16,
  kBfloat16,
  kFloat32,
  kFloat64
};
// false when NCCL has no type for `dtype` (int16).
bool WireOf(DataType dtype, Wire* wire);

enum class Op { kSum, kProd, kMin, kMax, kAvg };

class NcclApi {
 public:
  virtual ~NcclApi() = default;
  virtual int Version() = 0;  // NCCL_VERSION_CODE form
  virtual Result GetUniqueId(std::string* id) = 0;
  // A non-blocking communicator (ncclConfig_t.blocking = 0) on `device`:
  // kInProgress until CommGetAsyncError says otherwise.
  virtual Result CommInitRank(Comm* comm, int nranks, const std::string& id,
                              int rank, int device) = 0;
  virtual Result CommGetAsyncError(Comm comm) = 0;
  virtual Result CommAbort(Comm comm) = 0;
  virtual Result GroupStart() = 0;
  virtual Result GroupEnd() = 0;
  virtual Result AllReduce(const void* send, void* recv, size_t count,
                           Wire type, Op op, Comm comm, void* stream) = 0;
  virtual Result Broadcast(const void* send, void* recv, size_t count,
                           Wire type, int root, Comm comm, void* stream) = 0;
  virtual Result Reduce(const void* send, void* recv, size_t count, Wire type,
                        Op op, int root, Comm comm, void* stream) = 0;
  virtual Result ReduceScatter(const void* send, void* recv, size_t recv_count,
                               Wire type, Op op, Comm comm, void* stream) = 0;
  virtual Result Send(const void* send, size_t count, Wire type, int peer,
                      Comm comm, void* stream) = 0;
  virtual Result Recv(void* recv, size_t count, Wire type, int peer, Comm comm,
                      void* stream) = 0;
};

// libnccl's (null when kolo was built without NCCL).
std::unique_ptr<NcclApi> RealNcclApi();

}  // namespace kolo::nccl

#endif  // KOLO_ALLREDUCE_NCCL_NCCL_API_H_
