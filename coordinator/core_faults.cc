// CoordinatorCore (core.h), blame: data-plane faults that members report
// (PeerFault) and the verdict on who failed — a reported peer that went
// silent, one that left (kolo::shutdown) with a collective in flight, or the
// data connections themselves when every worker stays in touch.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "coordinator/core.h"

namespace kolo::coordinator {
namespace {

std::shared_ptr<spdlog::logger> FaultsLog() { return GetLogger("coordinator"); }

std::string SecondsText(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

}  // namespace

absl::Duration CoordinatorCore::suspect_silence() const {
  return std::min(
      options_.heartbeat_timeout,
      std::max(3 * options_.heartbeat_interval, absl::Milliseconds(1500)));
}

void CoordinatorCore::HandlePeerFault(Session& s, const proto::PeerFault& fault,
                                      Actions& out) {
  FaultReport report;
  report.reporter = s.rank;
  for (int p : fault.peers()) {
    if (p >= 0 && p < static_cast<int>(ep_.members.size()) && p != s.rank) {
      report.peers.push_back(p);
    }
  }
  report.error = fault.error().substr(0, 4096);
  report.at = s.last_heard;
  std::vector<std::string> named;
  for (int p : report.peers) {
    named.push_back(absl::StrCat(ep_.members[p].worker_id, " (rank ", p, ")"));
  }
  FaultsLog()->warn(
      "worker {} (rank {}) reports a data-plane fault with {}: {}; judging "
      "from streams and heartbeats",
      ep_.members[s.rank].worker_id, s.rank, absl::StrJoin(named, ", "),
      report.error);
  Event("peer_fault", {{"worker_id", ep_.members[s.rank].worker_id},
                       {"rank", s.rank},
                       {"peers", report.peers},
                       {"error", report.error}});
  if (report.peers.empty()) return;
  ep_.faults.push_back(std::move(report));
  JudgeFaults(options_.clock(), out);
}

void CoordinatorCore::JudgeFaults(absl::Time now, Actions& out) {
  if (ep_.faults.empty() || phase_ != Phase::kRunning) return;
  // A reported peer that left (kolo::shutdown) with a collective in flight:
  // that is the cause, at once.
  for (const FaultReport& f : ep_.faults) {
    for (int p : f.peers) {
      const Member& m = ep_.members[p];
      if (m.state != proto::MEMBER_STATE_LEFT) continue;
      const std::string what = absl::StrCat(
          "worker ", m.worker_id, " (rank ", p, ", host ", m.host_name,
          ") shut down (kolo::shutdown(), or the process ended) during a "
          "collective with worker ",
          ep_.members[f.reporter].worker_id, " (rank ", f.reporter,
          "): one or more ranks finished execution; every rank must submit "
          "the same collectives (rank ",
          f.reporter, "'s data plane reported: ", f.error, ")");
      ep_.faults.clear();
      if (options_.elastic) {
        ReformEpoch(what, out, p);  // the others go on without it
      } else {
        EndJob(true, what, out, m.worker_id);
      }
      return;
    }
  }
  // The most silent reported peer, if silent long enough.
  int suspect = -1;
  absl::Duration quiet = absl::ZeroDuration();
  for (const FaultReport& f : ep_.faults) {
    for (int p : f.peers) {
      const Member& m = ep_.members[p];
      if (m.state != proto::MEMBER_STATE_MEMBER) continue;
      if (now - m.last_heard > quiet) {
        quiet = now - m.last_heard;
        suspect = p;
      }
    }
  }
  if (suspect >= 0 && quiet >= suspect_silence()) {
    const FaultReport* by = nullptr;
    for (const FaultReport& f : ep_.faults) {
      if (std::find(f.peers.begin(), f.peers.end(), suspect) != f.peers.end()) {
        by = &f;
        break;
      }
    }
    const std::string cause = absl::StrCat(
        "silent for ", SecondsText(quiet), " (stopped, hung or cut off; ",
        by != nullptr ? absl::StrCat("rank ", by->reporter,
                                     "'s data plane reported: ", by->error)
                      : std::string("its peers reported it"),
        ")");
    ep_.faults.clear();
    FailMember(suspect, cause, out);
    return;
  }
  if (now - ep_.faults.front().at < options_.heartbeat_timeout) return;
  std::vector<std::string> links;
  for (const FaultReport& f : ep_.faults) {
    for (int p : f.peers) {
      links.push_back(absl::StrCat(ep_.members[f.reporter].worker_id, " (rank ",
                                   f.reporter, ") - ", ep_.members[p].worker_id,
                                   " (rank ", p, ")"));
    }
  }
  const std::string first = ep_.faults.front().error;
  ep_.faults.clear();
  const std::string what = absl::StrCat(
      "the data connections ", absl::StrJoin(links, ", "),
      " failed while every worker stayed in touch with the coordinator for ",
      SecondsText(options_.heartbeat_timeout),
      " (a network fault between workers, or a firewall on their data "
      "ports): ",
      first);
  if (options_.elastic) {
    // Nobody failed: the members rebuild their data plane in a new epoch
    // from their last commit.
    ReformEpoch(what, out);
    return;
  }
  EndJob(true, what, out);
}

}  // namespace kolo::coordinator
