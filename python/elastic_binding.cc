// The elastic part of kolo._kolo: see elastic_binding.h.
#include "python/elastic_binding.h"

#include <pybind11/pybind11.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "proto/membership_error.h"
#include "worker_lib/api/api_internal.h"
#include "worker_lib/fault_hook.h"

namespace py = pybind11;

namespace kolo::python {
namespace {

// How long a wait holds the GIL released before it looks for signals.
constexpr absl::Duration kSlice = absl::Milliseconds(200);

bool SkipSync(const absl::Status& s) {
  if (!elastic::is_hosts_updated(s)) return false;
  const std::optional<proto::EpochAborted> payload =
      proto::MembershipPayload(s);
  return payload.has_value() && payload->joining().empty();
}

[[noreturn]] void Raise(const absl::Status& s) {
  // kolo._kolo.Error, looked up on the module (it is registered there).
  static PyObject* const error_type = [] {
    py::object type = py::module_::import("kolo._kolo").attr("Error");
    return type.release().ptr();
  }();
  PyObject* args = ErrorArgs(s);
  PyErr_SetObject(error_type, args);
  Py_XDECREF(args);
  throw py::error_already_set();
}

void Check(const absl::Status& s) {
  if (!s.ok()) Raise(s);
}

// Runs `wait` (a blocking call bounded by its own timeout) with the GIL
// released.
absl::Status Released(const std::function<absl::Status()>& wait) {
  py::gil_scoped_release nogil;
  return wait();
}

absl::Duration SecondsArg(double seconds) {
  return seconds < 0 ? absl::Seconds(120) : absl::Seconds(seconds);
}

// The membership check (State.commit): one coordinator round, waited for in
// slices with the GIL released and signals checked between slices.
void CheckHostUpdates() {
  if (!internal::IsElasticJob()) return;
  absl::StatusOr<Handle> h =
      internal::MembershipCheckAsync(internal::LeaveRequested());
  if (!h.ok()) Raise(h.status());
  while (true) {
    absl::StatusOr<size_t> done;
    {
      py::gil_scoped_release nogil;
      internal::SlicedWaits sliced;  // the loop waits again
      done = wait_any(absl::MakeConstSpan(&*h, 1), kSlice);
    }
    if (done.ok()) break;
    if (done.status().code() != absl::StatusCode::kDeadlineExceeded) {
      Raise(done.status());
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  Check(synchronize(*h, absl::ZeroDuration(), nullptr));
}

}  // namespace

const char* MembershipKind(const absl::Status& s) {
  if (elastic::is_evicted_error(s)) return "evicted";
  if (elastic::is_leaving(s)) return "leaving";
  if (elastic::is_hosts_updated(s)) return "hosts_updated";
  if (elastic::is_membership_error(s)) return "lost";
  return "";
}

PyObject* ErrorArgs(const absl::Status& s) {
  const std::string message(s.message());
  return Py_BuildValue("(isNN)", static_cast<int>(s.code()), message.c_str(),
                       PyUnicode_FromString(MembershipKind(s)),
                       PyBool_FromLong(SkipSync(s) ? 1 : 0));
}

void BindElastic(py::module_& m) {
  m.def("check_host_updates", &CheckHostUpdates,
        "Elastic jobs: the membership check of State.commit() (GIL released "
        "while waiting); raises Error with membership 'hosts_updated' or "
        "'leaving' when workers join or leave here. A no-op outside elastic "
        "jobs.");
  m.def(
      "await_next_epoch",
      [](double timeout_seconds) {
        Check(Released([&] {
          return internal::AwaitNextEpoch(SecondsArg(timeout_seconds));
        }));
      },
      py::arg("timeout_seconds") = -1.0,
      "Elastic jobs: after a membership error, waits (GIL released; at most "
      "the timeout, default 120 s) for the next epoch and builds its data "
      "plane; rank() and size() then give the new epoch's values.");
  m.def(
      "rejoin",
      [](double timeout_seconds) {
        Check(Released(
            [&] { return internal::Rejoin(SecondsArg(timeout_seconds)); }));
      },
      py::arg("timeout_seconds") = -1.0,
      "Elastic jobs: after this worker was evicted, joins the job again as "
      "a newcomer (GIL released; at most the timeout).");
  m.def(
      "await_session_verdict",
      [] { Check(Released([] { return internal::AwaitSessionVerdict(); })); },
      "After an op failed with the link to the coordinator broken: waits, at "
      "most the lease, for the coordinator's verdict (raises it: e.g. the "
      "eviction); returns when the session is still healthy.");
  m.def("request_leave", &elastic::request_leave,
        "Leave the job at the next membership check (what SIGTERM does).");
  m.def("note_commit", &worker::faults::OnCommit, py::arg("commits"),
        "State.commit() number `commits` (the fault hook's at-commit "
        "triggers and the recovery report's rollbacks).");
  m.def("note_rollback", &worker::faults::OnRollback, py::arg("commit"),
        "run() restored commit number `commit` (for the recovery report).");
  m.def("leave_requested", &internal::LeaveRequested);
  m.def("is_elastic_job", &internal::IsElasticJob);
  m.def(
      "coordinator_reconnect_window",
      [] {
        return absl::ToDoubleSeconds(internal::CoordinatorReconnectWindow());
      },
      "Seconds this worker waits for a lost coordinator to come back (an "
      "elastic job's standalone coordinator restarted at its address: the "
      "lease); 0 when a lost coordinator ends the worker.");
  m.def("worker_id", &worker_id);
}

}  // namespace kolo::python
