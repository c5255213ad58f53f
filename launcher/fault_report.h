// The recovery report of a run with faults (kolorun --fault): what
// each fault did, put together at the job's end from three sources — the
// FaultDriver's records (when and on whom each fault fired), the workers'
// fault events (worker_lib/fault_hook.h: first collective of each epoch,
// rollbacks), and the coordinator's membership history (Status: each epoch,
// who was lost, when and how that was detected).
//
// kolorun prints FaultReportText to stderr and, with --fault-report FILE,
// writes the JSON (schema "kolo-fault-report/1"; docs/fault-injection.md
// documents every field). Times "*_s" are seconds since
// kolorun started (fired, ended, detected, formed) or since the fault fired
// (after_s), as doubles.
//
// Thread-safety: pure functions.
#ifndef KOLO_LAUNCHER_FAULT_REPORT_H_
#define KOLO_LAUNCHER_FAULT_REPORT_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "launcher/fault_driver.h"
#include "nlohmann/json.hpp"
#include "proto/kolo.pb.h"

namespace kolo::launcher {

struct ReportInputs {
  const FaultDriver* driver = nullptr;
  proto::StatusReply status;     // the coordinator's, at the end
  int coordinator_restarts = 0;  // kill-coordinator:for= restarts
  // The coordinator's event log (coordinator/event_log.h), across its
  // incarnations: the report's epochs and losses are derived from it.
  std::vector<nlohmann::ordered_json> coordinator_events;
  int exit_code = 0;
  std::string failure_reason;  // "" when the job succeeded
  absl::Time end = absl::Now();
};

nlohmann::json BuildFaultReport(const ReportInputs& in);

// The short text form (a few lines per fault).
std::string FaultReportText(const nlohmann::json& report);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_FAULT_REPORT_H_
