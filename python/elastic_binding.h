// The elastic part of kolo._kolo (python/_kolo.cc): the calls that
// kolo.common.elastic's run() makes between epochs, over kolo's C++ elastic
// layer (include/kolo/elastic.h, worker_lib/api/api_internal.h), and the
// classification of a failed status that tells it what to do.
//
// Thread-safety: as _kolo.cc's functions (any Python thread; every wait
// releases the GIL).
#ifndef KOLO_PYTHON_ELASTIC_BINDING_H_
#define KOLO_PYTHON_ELASTIC_BINDING_H_

#include <Python.h>

#include "absl/status/status.h"

namespace pybind11 {
class module_;
}

namespace kolo::python {

// The args of the kolo._kolo.Error raised for `s` (a new reference):
// (code, message, membership, skip_sync), where code is the absl code,
// membership says what kind of membership change ended the op:
//   ""               not a membership error;
//   "lost"           workers were lost: roll back to the last commit;
//   "hosts_updated"  a planned change at a membership check (workers join
//                    or leave): go on from the commit;
//   "leaving"        a planned change in which this worker leaves;
//   "evicted"        this worker was judged lost (it may rejoin);
// and skip_sync is true for a planned change with no newcomer (every
// member already holds the committed state: Horovod's
// HostsUpdatedInterrupt(skip_sync)).
PyObject* ErrorArgs(const absl::Status& s);

// ErrorArgs's `membership` of `s` alone ("" when it is no membership
// error); the C API hands it to the torch.distributed backend too.
const char* MembershipKind(const absl::Status& s);

// Adds the elastic functions to kolo._kolo: check_host_updates,
// await_next_epoch, rejoin, await_session_verdict, request_leave,
// leave_requested, is_elastic_job, coordinator_reconnect_window, worker_id,
// note_commit, note_rollback.
void BindElastic(pybind11::module_& m);

}  // namespace kolo::python

#endif  // KOLO_PYTHON_ELASTIC_BINDING_H_
