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

}  // namespace kolo

#endif  // KOLO_KOLO_H_
