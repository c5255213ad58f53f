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
// See README.md for every variable and its default.
//
// Thread-safety: every function may be called from any thread. `init` and
// `shutdown` are serialised; topology getters are lock-free reads.
// Errors: absl::Status; messages say what failed, where, and what to do.
#ifndef KOLO_KOLO_H_
#define KOLO_KOLO_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "allreduce/types.h"

namespace kolo {

// Joins the job: authenticates to the coordinator and waits (at most the start
// timeout, KOLO_START_TIMEOUT, default 30 s) for the first epoch to form.
// Calling init() again while initialised is a no-op returning OK.
absl::Status init();

// Leaves the job in order. On the rank that hosts the coordinator it waits
// (bounded) for the other workers to leave first. Idempotent.
absl::Status shutdown();

bool is_initialized();

// Topology of the current epoch; -1 when not initialised (as Horovod's C API).
int rank();
int size();
int local_rank();  // among workers with the same launcher host name
int local_size();
int cross_rank();  // among workers with the same local_rank
int cross_size();

// This worker's stable identity (given by the launcher), "" when not
// initialised.
std::string worker_id();
// The address ("ip:port") this worker's data plane listens on.
std::string data_address();

// Small-value allgather through the coordinator (control plane, not for
// tensors): every rank calls it with the same key; returns every rank's value
// in rank order. Fails with kDeadlineExceeded after `timeout`, and with
// kAborted if the job ends meanwhile.
absl::StatusOr<std::vector<std::string>> control_allgather(
    absl::string_view key, absl::string_view value, absl::Duration timeout);

// ---- Blocking collectives on host buffers --------------------------------
// They run directly on the data plane, in call order: every rank must call
// the same collectives in the same order with matching arguments (the
// negotiated runtime of a later issue lifts this). Counts are in elements of
// `type`. Bad arguments (counts that do not match splits, a root out of
// range, average of bools, ...) fail with kInvalidArgument before any byte
// moves; a peer that vanishes fails the call naming it, within
// KOLO_TIMEOUT_SECONDS at most.

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

}  // namespace kolo

#endif  // KOLO_KOLO_H_
