// JobContext: what every epoch of a job takes from the job — its
// configuration, the data port's acceptor and the coordinator's address as
// dialled. worker::Job (job.h) owns it; BuildEpoch and OpRuntime read it
// while they build an epoch.
//
// Thread-safety: immutable once the job started; read from any thread.
// Lifetime: the job's. An epoch's parts keep what they need by value
// (settings, durations) or borrow only what the job outlives them with
// (the acceptor: the data listener lives as long as the job).
#ifndef KOLO_WORKER_LIB_RUNTIME_JOB_CONTEXT_H_
#define KOLO_WORKER_LIB_RUNTIME_JOB_CONTEXT_H_

#include <string>

#include "allreduce/tcp/tcp_options.h"
#include "worker_lib/config.h"

namespace kolo::worker {

struct JobContext {
  const WorkerConfig* config = nullptr;
  // The data port's acceptor (worker_lib/runtime/data_listener.h).
  tcp::Acceptor* acceptor = nullptr;
  // The coordinator's address as dialled ("host:port"), for the link.
  std::string coordinator;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_JOB_CONTEXT_H_
