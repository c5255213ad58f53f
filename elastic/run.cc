// kolo::elastic::run (include/kolo/elastic.h): the retry wrapper, the
// membership check, and the predicates on the membership error that decide
// a retry (with or without rollback) or a leave.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "proto/membership_error.h"
#include "worker_lib/api/api_internal.h"
#include "worker_lib/fault_hook.h"

namespace kolo::elastic {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("elastic"));
  return *logger;
}

}  // namespace

bool is_membership_error(const absl::Status& s) {
  return proto::IsMembershipError(s) && !proto::IsEvictedError(s);
}

bool is_evicted_error(const absl::Status& s) {
  return proto::IsEvictedError(s);
}

bool is_hosts_updated(const absl::Status& s) {
  if (!is_membership_error(s)) return false;
  std::optional<proto::EpochAborted> payload = proto::MembershipPayload(s);
  return payload.has_value() && payload->planned();
}

bool is_leaving(const absl::Status& s) {
  if (!is_hosts_updated(s)) return false;
  const std::string me = kolo::worker_id();
  const std::optional<proto::EpochAborted> payload =
      proto::MembershipPayload(s);
  for (const std::string& w : payload->leaving()) {
    if (w == me) return true;
  }
  return false;
}

absl::Status check_host_updates() {
  if (!internal::IsElasticJob()) return absl::OkStatus();
  absl::StatusOr<Handle> h =
      internal::MembershipCheckAsync(internal::LeaveRequested());
  if (!h.ok()) return h.status();
  return synchronize(*h);
}

void request_leave() { internal::RequestLeave(); }

absl::Status run(State& state, const std::function<absl::Status()>& fn,
                 const RunOptions& options) {
  int resets = 0;
  while (true) {
    absl::Status s = state.sync();
    if (s.ok()) s = fn();
    if (absl::IsUnavailable(s) && options.rejoin_after_eviction &&
        internal::IsElasticJob()) {
      // The link to the coordinator broke. After a partition that healed,
      // the eviction arrives just behind the broken link: wait (at most the
      // lease) for the Session's verdict. A lost coordinator stays the
      // error (and the process exits: kLostCoordinatorExitCode).
      absl::Status verdict = internal::AwaitSessionVerdict();
      if (is_evicted_error(verdict)) s = verdict;
      const absl::Duration window = internal::CoordinatorReconnectWindow();
      if (absl::IsUnavailable(verdict) && window > absl::ZeroDuration()) {
        // A standalone coordinator was lost: restarted at its address (a
        // Kubernetes Service, a systemd unit) within the lease, it forms
        // the job again from the workers that reconnect. Each goes back to
        // its last commit; the new epoch's sync makes them one state.
        Log()->warn(
            "worker {} lost the coordinator ({}); restoring commit {} and "
            "reconnecting for up to {} (KOLO_LEASE_SECONDS and a grace)",
            kolo::worker_id(), std::string(verdict.message()), state.commits(),
            absl::FormatDuration(window));
        state.restore();
        worker::faults::OnRollback(state.commits());
        if (absl::Status back = internal::Rejoin(window); !back.ok()) {
          return absl::UnavailableError(absl::StrCat(
              verdict.message(),
              "; the coordinator did not come back: ", back.message()));
        }
        Log()->warn("worker {} is back: the coordinator restarted",
                    kolo::worker_id());
        ++resets;
        state.on_reset();
        continue;
      }
    }
    // Rejoins as a newcomer after an eviction; false: `evicted` stays the
    // error.
    auto rejoin = [&](const absl::Status& evicted) -> absl::Status {
      Log()->warn("worker {} was evicted ({}); rejoining as a newcomer",
                  kolo::worker_id(), std::string(evicted.message()));
      absl::Status back = internal::Rejoin(options.epoch_timeout);
      if (!back.ok()) return back;
      ++resets;
      state.on_reset();
      return absl::OkStatus();
    };
    if (is_evicted_error(s) && options.rejoin_after_eviction) {
      if (absl::Status back = rejoin(s); !back.ok()) return back;
      continue;
    }
    if (s.ok() || !is_membership_error(s)) return s;
    // Asked to leave, at the check that ended the epoch or after it (the
    // epoch then ended without this worker among the leavers): it leaves
    // now rather than wait for the next epoch.
    if (is_leaving(s) || internal::LeaveRequested()) {
      Log()->warn("worker {} leaves the job at commit {} (asked to: SIGTERM)",
                  kolo::worker_id(), state.commits());
      if (!options.exit_on_leave) return s;
      if (absl::Status down = kolo::shutdown(); !down.ok()) {
        Log()->warn("leaving: {}", std::string(down.message()));
      }
      std::exit(0);
    }
    ++resets;
    if (is_hosts_updated(s)) {
      Log()->warn(
          "membership change #{} at commit {}: {}; going on from it (no "
          "rollback)",
          resets, state.commits(), std::string(s.message()));
    } else {
      Log()->warn(
          "membership change #{}: {}; restoring commit {} and regrouping",
          resets, std::string(s.message()), state.commits());
      state.restore();
      worker::faults::OnRollback(state.commits());
    }
    absl::Status next = internal::AwaitNextEpoch(options.epoch_timeout);
    // A worker cut off while the others changed epochs learns of the
    // change first, then (waiting for the next epoch) of its own eviction.
    if (is_evicted_error(next) && options.rejoin_after_eviction) {
      if (absl::Status back = rejoin(next); !back.ok()) return back;
      continue;
    }
    if (!next.ok()) return next;
    state.on_reset();
  }
}

}  // namespace kolo::elastic
