// kolo's public C++ API (start): initialise, learn the topology, shut down.
//
// A Horovod-like API. `init()` reads its configuration from the environment:
//   - under kolorun (KOLO_LAUNCHER=kolorun): the coordinator address, worker
//     id, host name and secret kolorun set;
//   - under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
//     Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or Open MPI
//     (OMPI_COMM_WORLD_*): rank 0 hosts the coordinator at
//     MASTER_ADDR:MASTER_PORT (or KOLO_COORDINATOR) and the job secret comes
//     from KOLO_SECRET_FILE.
// See docs/configuration.md for every variable and its default. Elastic jobs
// (workers lost while the others go on): kolo/elastic.h.
//
// Thread-safety: every function may be called from any thread. `init` and
// `shutdown` are serialised; topology getters are lock-free reads.
// Errors: absl::Status; messages say what failed, where, and what to do.
#ifndef KOLO_KOLO_H_
#define KOLO_KOLO_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kolo/types.h"
#include "kolo/version.h"

// kolo's public C++ API: kolo.h, kolo/types.h and kolo/elastic.h.
namespace kolo {

// Joins the job: authenticates to the coordinator and waits (at most the start
// timeout, KOLO_START_TIMEOUT, default 30 s) for the first epoch to form.
// Calling init() again while initialised is a no-op returning OK.
absl::Status init();

// What init() may be given besides the environment.
struct InitOptions {
  // Static process sets, registered in this order once the job formed (ids
  // 1, 2, ...), as add_process_set() would; every rank must pass the same.
  std::vector<std::vector<int>> process_sets;
};
// init(), then registers options.process_sets.
absl::Status init(const InitOptions& options);

// Leaves the job in order. On the rank that hosts the coordinator it waits
// (bounded) for the other workers to leave first. Idempotent. Ops still in
// flight are failed (kAborted) and named, with what each waited for, in a
// warning on this rank and in the returned kFailedPrecondition. A process
// that exits (returns from main, or calls exit()) with kolo initialised
// shuts down like this at exit, with a warning.
absl::Status shutdown();

// Whether init() succeeded and shutdown() has not run since.
bool is_initialized();

// Topology of the current epoch; -1 when not initialised (as Horovod's C API).
int rank();        // 0 .. size() - 1
int size();        // the number of workers
int local_rank();  // among workers with the same launcher host name
int local_size();  // the number of those workers
int cross_rank();  // among workers with the same local_rank
int cross_size();  // the number of those workers

// This worker's stable identity (given by the launcher), "" when not
// initialised.
std::string worker_id();
// The address ("ip:port") this worker's data plane listens on.
std::string data_address();

// Small-value allgather through the coordinator (control plane, not for
// tensors): every rank calls it with the same key; returns every rank's value
// in rank order. Fails with kDeadlineExceeded after `timeout`, and with
// kAborted if the job ends meanwhile; keys over 16 KiB and values over 64 KiB
// are refused (kInvalidArgument) before anything is sent.
absl::StatusOr<std::vector<std::string>> control_allgather(
    absl::string_view key, absl::string_view value, absl::Duration timeout);

// ---- Tensors and asynchronous collectives ---------------------------------
// Every collective is negotiated: each rank submits it under a name, in any
// order relative to its other submissions; the coordinator runs a name once
// every rank has submitted it, in one global order, after checking that the
// ranks agree (dtype, shape rules, reduce op, root, scale factors, device).
// A disagreement fails that op on every rank with kFailedPrecondition naming
// the tensor, the ranks and the values; an op invalid on some rank (bad
// splits, average of bools, a wrong output shape, ...) fails on every rank
// with kInvalidArgument; the next op works either way. Only a name already
// in flight on this rank fails at once, on this rank alone.

// Where a tensor lives: kCpu (host memory), or a CUDA device ordinal (0, 1,
// ...: `data` is device memory of that device, as cudaMalloc gives). Ranks
// must agree on the device *kind* of a name (CPU or CUDA; each rank may use
// its own ordinal): a disagreement fails the op on every rank. A CUDA tensor
// on a kolo built without CUDA (cuda_built() false), or with no usable
// device, fails on every rank with kInvalidArgument saying why.
// CUDA tensors run on NCCL when kolo was built with it (nccl_built()), on
// every process set (one communicator per set and epoch), otherwise through
// pinned host memory on kolo's own data plane (KOLO_CUDA_STAGING=1 forces
// that; so do ranks sharing a GPU under NCCL < 2.30); docs/gpus.md.
inline constexpr int kCpu = -1;

// A buffer described by dtype and shape (row major, contiguous).
struct Tensor {
  DataType dtype = DataType::kFloat32;  // the element type
  std::vector<int64_t> shape;           // {} = a scalar (one element)
  void* data = nullptr;                 // the first element
  int device = kCpu;                    // kCpu, or a CUDA device ordinal
  // CUDA tensors only (ignored for kCpu), both a cudaEvent_t passed as void*
  // so that this header needs no CUDA headers, owned by the caller, and
  // valid until the op completes:
  // - ready_event (input): recorded by the caller after the work that writes
  //   `data`; kolo's stream waits for it before reading. Null: `data` must
  //   be ready when the op is submitted — the caller synchronised the work
  //   that wrote it (cudaStreamSynchronize / cudaDeviceSynchronize): kolo's
  //   stream is non-blocking, it does not wait for other streams, the
  //   legacy default stream included (and a cudaMemcpy from pageable host
  //   memory may return before its copy has landed).
  void* ready_event = nullptr;
  // - done_event (output): kolo records it on its stream once the op's
  //   output is written; synchronize() returns only after that point too,
  //   so it serves callers that wait on a stream (cudaStreamWaitEvent).
  void* done_event = nullptr;

  // The product of shape (1 for a scalar), and that times the dtype's size;
  // -1 when the shape is not one kolo takes (a negative dimension, over
  // kMaxTensorElements elements or kMaxTensorBytes bytes).
  int64_t num_elements() const;  // product(shape)
  int64_t num_bytes() const;     // num_elements() times the dtype's size
};

// Returns memory for an output whose shape is known only after negotiation
// (allgather, alltoall): at least product(shape) elements of the input's
// dtype. Called once, on kolo's background thread; an error fails that op on
// this rank only (the rank still takes part, into scratch memory).
using Allocator =
    std::function<absl::StatusOr<void*>(absl::Span<const int64_t> shape)>;

// Identifies one submitted op (or group of ops) until synchronize() returns
// its result.
using Handle = int64_t;

// A process set: some ranks that run collectives among themselves, with
// their own tensor names (negotiated apart from other sets'). 0 is every
// rank; others come from add_process_set() or InitOptions. In a set, ranks
// are counted in the set's order (ascending global ranks): average divides
// by the set's size, allgather concatenates in set order, alltoall splits
// and reducescatter counts have one entry per member; a broadcast root is a
// global rank that must be a member (as in Horovod).
using ProcessSet = int32_t;
inline constexpr ProcessSet kGlobalProcessSet = 0;  // every rank

// How allreduce and reducescatter combine the ranks' inputs.
struct AllreduceOptions {
  ReduceOp op = ReduceOp::kSum;  // the reduction
  double prescale = 1.0;         // each input is multiplied by it first
  double postscale = 1.0;        // the result is multiplied by it
};

// What a finished op produced, beyond its output buffer.
struct OpResult {
  std::vector<int64_t> shape;  // the output's shape
  // alltoall: rows received from each rank; allgather: rows from each rank.
  std::vector<int64_t> splits;
  // A grouped op: each member's result, in member order.
  std::vector<OpResult> members;
};

// An empty `name` gets "<op>.noname.<N>" from a per-process-set counter,
// which matches across ranks only when every rank submits unnamed ops in the
// same order (as in Horovod). `process_set`: the ranks that take part (0 =
// all); names of other sets are their own (kolo appends " (process set
// <id>)" to them in messages). Errors returned at once: kFailedPrecondition
// before init() or after the job ended; kInvalidArgument for a name in
// flight, for a name longer than 16 KiB, and for a process set that does
// not exist or that this rank is not a member of. A shape with a negative
// dimension, one whose size overflows, or one over 2^44 elements or 2^47
// bytes fails with kInvalidArgument on every rank of the op (it is still
// announced, so that no rank waits for it).

// output = op over every rank's input (same shape; in place when
// output.data == input.data). Average divides by size(); integers truncate
// toward zero.
absl::StatusOr<Handle> allreduce_async(
    const Tensor& input, const Tensor& output,
    const AllreduceOptions& options = {}, absl::string_view name = "",
    ProcessSet process_set = kGlobalProcessSet);
// Concatenates every rank's input along the first dimension, in rank order;
// the other dimensions must agree. Output shape [sum of first dims, ...].
absl::StatusOr<Handle> allgather_async(
    const Tensor& input, Allocator output, absl::string_view name = "",
    ProcessSet process_set = kGlobalProcessSet);
// Copies root's tensor into every rank's `tensor` (same shape everywhere).
absl::StatusOr<Handle> broadcast_async(
    const Tensor& tensor, int root, absl::string_view name = "",
    ProcessSet process_set = kGlobalProcessSet);
// Sends splits[r] rows (consecutive blocks along the first dimension) to rank
// r; empty splits = the first dimension divided evenly (it must divide by
// size()). Receives from every rank in rank order; OpResult.splits says how
// many rows came from each.
absl::StatusOr<Handle> alltoall_async(
    const Tensor& input, Allocator output,
    absl::Span<const int64_t> splits = {}, absl::string_view name = "",
    ProcessSet process_set = kGlobalProcessSet);
// Reduces every rank's input (same shape) and gives rank r counts[r] rows of
// the result, starting at row counts[0] + ... + counts[r-1]. Empty counts =
// shape[0] / size() rows each, the first shape[0] % size() ranks one more.
// `output` must have the shape of this rank's part.
absl::StatusOr<Handle> reducescatter_async(
    const Tensor& input, const Tensor& output,
    const AllreduceOptions& options = {}, absl::Span<const int64_t> counts = {},
    absl::string_view name = "", ProcessSet process_set = kGlobalProcessSet);
// Completes once every rank (of the set) has submitted it.
absl::StatusOr<Handle> barrier_async(
    absl::string_view name = "", ProcessSet process_set = kGlobalProcessSet);

// ---- Grouped ops ------------------------------------------------------------
// Several tensors as one op: member i is named "<name>.<i>" (name: as
// above, "grouped_<op>.noname.<N>" when empty); the members become ready
// together (none is dispatched before every member is ready on every rank)
// and complete together, under one handle whose OpResult.members holds each
// member's result; the status is the first member's error, if any. Members
// may fuse with other tensors unless KOLO_DISABLE_GROUP_FUSION=1 (then only
// with each other). No members, or inputs and outputs of different lengths
// → kInvalidArgument at once.
absl::StatusOr<Handle> grouped_allreduce_async(
    absl::Span<const Tensor> inputs, absl::Span<const Tensor> outputs,
    const AllreduceOptions& options = {}, absl::string_view name = "",
    ProcessSet process_set = kGlobalProcessSet);
// Each member as allgather_async() gathers it.
absl::StatusOr<Handle> grouped_allgather_async(
    absl::Span<const Tensor> inputs, absl::Span<const Allocator> outputs,
    absl::string_view name = "", ProcessSet process_set = kGlobalProcessSet);
// Each member with the default split of its first dimension.
absl::StatusOr<Handle> grouped_reducescatter_async(
    absl::Span<const Tensor> inputs, absl::Span<const Tensor> outputs,
    const AllreduceOptions& options = {}, absl::string_view name = "",
    ProcessSet process_set = kGlobalProcessSet);

// ---- Join -------------------------------------------------------------------
// This rank has no more data (uneven batch counts per rank): until every
// rank joined, it contributes the reduce op's identity to the other ranks'
// allreduces (0 for sum and average, 1 for product, the dtype's largest
// value for min and smallest for max; an average still divides by the full
// set size) and barriers complete; allgather, broadcast, alltoall and
// reducescatter fail on every rank that submitted them (kFailedPrecondition
// saying which ranks joined). Returns the last rank to join, once every rank
// has. After `timeout` it returns kDeadlineExceeded and the rank stays
// joined: call join() again to go on waiting.
absl::StatusOr<int> join(absl::Duration timeout = absl::InfiniteDuration());

// ---- Process sets -----------------------------------------------------------
// Registers the set of `ranks` (any order; kolo sorts them) and returns its
// id. Call it identically on every rank, in the same order as other
// registrations: it is negotiated over every rank. Ranks that differ
// between ranks, a duplicate rank, a rank out of range, or ranks that
// already form a set → kInvalidArgument / kFailedPrecondition on every rank.
absl::StatusOr<ProcessSet> add_process_set(absl::Span<const int> ranks);
// Removes a set (identically on every rank). Unknown id, id 0, or ops still
// pending on the set → an error on every rank; the set stays.
absl::Status remove_process_set(ProcessSet id);
// The set's ranks, ascending; kInvalidArgument for an unknown id.
absl::StatusOr<std::vector<int>> process_set_ranks(ProcessSet id);
// The ids of every registered set, 0 included, ascending.
std::vector<ProcessSet> process_sets();

// True once the op finished (with success or an error); unknown handle →
// kNotFound.
absl::StatusOr<bool> poll(Handle handle);
// Waits until the op finished or `timeout` passed. Finished: returns its
// status (and fills `result` if given) and releases the handle. Not finished
// in time: kDeadlineExceeded, and the handle stays valid.
absl::Status synchronize(Handle handle,
                         absl::Duration timeout = absl::InfiniteDuration(),
                         OpResult* result = nullptr);
// synchronize() that never waits (MPI_Test): the op finished → true, or
// its error, with `result` filled and the handle released as synchronize()
// does; still running → false, and the handle stays valid; unknown handle
// → kNotFound. One call where poll() then synchronize() take two.
absl::StatusOr<bool> try_synchronize(Handle handle, OpResult* result = nullptr);
// synchronize() on many handles with one deadline: one status per handle,
// in order (kDeadlineExceeded for those that did not finish in time).
std::vector<absl::Status> synchronize_all(
    absl::Span<const Handle> handles,
    absl::Duration timeout = absl::InfiniteDuration());
// Waits until one of `handles` finished (not releasing it) and returns its
// index; kDeadlineExceeded after `timeout`.
absl::StatusOr<size_t> wait_any(
    absl::Span<const Handle> handles,
    absl::Duration timeout = absl::InfiniteDuration());

// ---- Runtime settings -------------------------------------------------------
// Fusion and the response cache start from KOLO_FUSION_THRESHOLD (default
// 128 MiB) and KOLO_CACHE_CAPACITY (default 1024 entries); these change them
// for the ops submitted after the call (to compare settings in one job, as
// kolo-bench --mode step does). Call them identically on every rank, with no
// op in flight: while ranks differ, the coordinator uses the smallest value.
// A threshold of 0 turns fusion off; a capacity of 0 turns the cache off
// (and drops every entry). Negative values → kInvalidArgument;
// kFailedPrecondition before init().
absl::Status set_fusion_threshold(int64_t bytes);
// The response cache's capacity, in entries (see set_fusion_threshold()).
absl::Status set_cache_capacity(int64_t entries);

// ---- Timeline at run time ---------------------------------------------------
// With KOLO_TIMELINE=DYNAMIC (alias HOROVOD_TIMELINE=DYNAMIC) no timeline is
// written at start; start_timeline() makes rank 0 write one to `path` (a
// Chrome trace, as KOLO_TIMELINE=path does; a timeline already open is
// closed first) and stop_timeline() closes it. On other ranks both return
// OK and write nothing. `mark_cycles` is accepted for Horovod's signature:
// kolo always marks every plan on the trace's "plans" row. It applies to
// the current epoch (an elastic job's next epoch starts without one).
// kFailedPrecondition before init() or without DYNAMIC; a path that cannot
// be written: its errno's code, naming the path.
absl::Status start_timeline(const std::string& path, bool mark_cycles = false);
// Closes the timeline start_timeline() opened (see there).
absl::Status stop_timeline();

// ---- Blocking collectives on host buffers --------------------------------
// Thin wrappers: submit the asynchronous op (unnamed, so every rank must call
// the same collectives in the same order, as with Horovod's blocking calls)
// and synchronize. Counts are in elements of `type`. Bad arguments (counts
// that do not match splits, a root out of range, average of bools, ...) fail
// with kInvalidArgument on every rank before any byte moves; a peer that
// vanishes fails the call naming it, within seconds.

// output = op over every rank's input (in place when input == output).
// Each input is multiplied by `prescale` first and the result by
// `postscale`; average divides by size() (integers truncate toward zero).
absl::Status allreduce(const void* input, void* output, int64_t count,
                       DataType type, ReduceOp op = ReduceOp::kSum,
                       double prescale = 1.0, double postscale = 1.0);
// Concatenates every rank's input in rank order; counts[r] is rank r's
// count (counts[rank()] == count), output holds their sum.
absl::Status allgather(const void* input, int64_t count, DataType type,
                       absl::Span<const int64_t> counts, void* output);
// Copies root's buffer to every rank.
absl::Status broadcast(void* buffer, int64_t count, DataType type, int root);
// Sends send_splits[r] elements (consecutive blocks of input) to rank r and
// receives recv_splits[r] elements from rank r into consecutive blocks of
// output.
absl::Status alltoall(const void* input, DataType type,
                      absl::Span<const int64_t> send_splits, void* output,
                      absl::Span<const int64_t> recv_splits);
// Reduces every rank's input (sum of counts elements) and gives rank r the
// counts[r] elements of the result that start at counts[0] + ... +
// counts[r-1].
absl::Status reducescatter(const void* input, int64_t count, DataType type,
                           absl::Span<const int64_t> counts, void* output,
                           ReduceOp op = ReduceOp::kSum);
// Returns once every rank has entered it.
absl::Status barrier();

// ---- Build and device queries --------------------------------------------
// Whether this kolo was built with CUDA (-DKOLO_WITH_CUDA=ON, or AUTO with
// the toolkit found).
bool cuda_built();
// The NCCL version kolo runs with (NCCL_VERSION_CODE form: 22809 for
// 2.28.9, from ncclGetVersion), 0 when built without NCCL. As Horovod's
// nccl_built().
int nccl_built();
// The number of CUDA devices this process can use; 0 when none is usable or
// kolo was built without CUDA (cuda_status() says why).
int cuda_device_count();
// "ok", or why CUDA tensors cannot run here (no CUDA in this build, no
// driver, no device), as the error of an op on a CUDA tensor says it.
std::string cuda_status();

}  // namespace kolo

#endif  // KOLO_KOLO_H_
