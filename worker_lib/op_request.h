// PendingOp and MakeRequest: one collective a caller submitted, and the
// Request announcing it to the coordinator (proto/kolo.proto).
//
// MakeRequest judges what this rank can see on its own (dtype, device,
// shapes, splits, root range, reduce op for the dtype, output shape) and
// records a problem in Request.invalid instead of refusing: the op is still
// announced so that it fails on every rank rather than stalling the others
// (docs/design.md "Negotiation and fusion").
//
// Thread-safety: PendingOp is owned by OpRuntime (op_runtime.h); its fields
// below "completion" are guarded there. MakeRequest and ValidateOp are pure
// functions of the op (they fill in op.splits / op.set_root); FillRequest
// and Announces only read it.
#ifndef KOLO_WORKER_LIB_OP_REQUEST_H_
#define KOLO_WORKER_LIB_OP_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "allreduce/collectives.h"
#include "kolo/kolo.h"
#include "proto/kolo.pb.h"

namespace kolo::worker {

// The longest tensor name kolo takes (as qualified with its process set
// and group member index); a longer one is refused at submission, on the
// rank that submitted it. Names are keys: Horovod's are tens of bytes.
inline constexpr size_t kMaxNameBytes = 16 * 1024;

struct PendingOp {
  Handle handle = 0;
  std::string name;
  proto::OpType op = proto::OP_UNSPECIFIED;
  Tensor input;
  Tensor output;        // allreduce, reducescatter; broadcast: == input
  Allocator allocator;  // allgather, alltoall
  ReduceOptions reduce;
  int root = 0;
  // alltoall: rows sent to each rank; reducescatter: rows each rank gets
  // (filled in from the default split when the caller gave none). Empty when
  // the caller's splits were invalid.
  // add_process_set: the set's ranks, ascending.
  std::vector<int64_t> splits;
  // The process set (0 = every rank), and its members (global ranks,
  // ascending; filled in by the runtime, empty for set 0).
  int32_t process_set = 0;
  std::vector<int> members;
  int set_root = 0;  // broadcast: the root's index among the set's ranks
  // The blocking allgather / alltoall: rows expected from each rank (see
  // proto Request.expect); empty for the asynchronous calls.
  std::vector<int64_t> expect;
  // A grouped op's member: the group's (qualified) name and size.
  std::string group;
  int32_t group_size = 0;
  // An op of an ordered stream (proto Request.order_stream): the stream,
  // empty when not ordered, and the call's slot in it.
  std::string order_stream;
  uint32_t order_slot = 0;
  // A void (proto Request.order_void): why this rank refused its call at
  // that slot; empty for an op.
  std::string order_void;
  // As announced, when it went in full (the cache compares it); empty when
  // it went as a cache bit (the cache mirror holds the same Request).
  proto::Request request;
  int64_t cache_bit = -1;  // the bit it was announced by; -1: in full
  absl::Time submitted;    // for the timeline

  // Completion (guarded by OpRuntime's mutex).
  bool running = false;  // its collective is on the data plane
  bool done = false;
  absl::Status status;
  OpResult result;

  // Back to a fresh op, keeping the storage of its strings and lists (the
  // runtime recycles finished ops). A field added above must be reset here
  // too.
  void Reset();
};

// Elements per first-dimension row: the product of shape[1..] (1 for a 0-d
// or 1-d tensor).
int64_t RowElements(const std::vector<int64_t>& shape);

// The Request announcing `op` on rank `rank` of `size` ranks (of its
// process set, whose global ranks are op.members, or 0..size-1 when empty);
// fills op.splits with the default split where the caller gave none, and
// op.set_root.
proto::Request MakeRequest(PendingOp& op, int rank, int size);

// MakeRequest in its two steps, for the runtime's hot path:
// What is wrong with `op` as this rank sees it (the Request's `invalid`),
// or ""; fills op.splits with the default split where the caller gave none,
// and op.set_root.
std::string ValidateOp(PendingOp& op, int rank, int size);
// The Request announcing `op` (after ValidateOp, whose answer `invalid` is),
// written into `*out` (cleared first; its storage is reused).
void FillRequest(const PendingOp& op, std::string invalid, proto::Request* out);
// Whether FillRequest(op, "", ...) would write a Request equal to `r` in
// every field (scale factors bitwise), without writing one: the cache's
// question for an op that passed ValidateOp.
bool Announces(const PendingOp& op, const proto::Request& r);

// Whether two Requests are the same announcement (every field; scale
// factors bitwise).
bool SameRequest(const proto::Request& a, const proto::Request& b);

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_OP_REQUEST_H_
