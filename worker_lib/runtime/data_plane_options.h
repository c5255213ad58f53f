// DataPlaneOptionsFor: the options of one epoch's data plane
// (allreduce/data_plane.h), from the worker's configuration (the KOLO_*
// variables of the transport, shared memory, algorithms and hierarchy) and
// the epoch's membership (the ranks, their addresses and host names).
//
// Thread-safety: a pure function of its arguments.
#ifndef KOLO_WORKER_LIB_RUNTIME_DATA_PLANE_OPTIONS_H_
#define KOLO_WORKER_LIB_RUNTIME_DATA_PLANE_OPTIONS_H_

#include <cstdint>

#include "allreduce/data_plane.h"
#include "allreduce/tcp/acceptor.h"
#include "proto/kolo.pb.h"
#include "worker_lib/config.h"

namespace kolo::worker {

// The data plane of epoch `epoch` of the coordinator's `incarnation` among
// the peers of `membership`, taking the connections of the borrowed
// `acceptor` and stopping when the borrowed `abort_fd` (if >= 0) becomes
// readable. The connections' job is "<job id>/<incarnation in hex>": a
// restarted coordinator numbers its epochs from 1 again, and a peer of
// the previous incarnation's epoch must not pass for one of the new.
DataPlaneOptions DataPlaneOptionsFor(const WorkerConfig& config,
                                     const proto::Membership& membership,
                                     uint64_t epoch, uint64_t incarnation,
                                     tcp::Acceptor* acceptor, int abort_fd);

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_DATA_PLANE_OPTIONS_H_
