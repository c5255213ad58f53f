#include "launcher/fault_report.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/event_log.h"

namespace kolo::launcher {
namespace {

using nlohmann::json;

double Secs(absl::Duration d) { return absl::ToDoubleSeconds(d); }

absl::Time FromMs(int64_t ms) { return absl::FromUnixMillis(ms); }
absl::Time EventTime(const json& e) {
  return absl::FromUnixMicros(e.value("t_us", int64_t{0}));
}

const char* StateName(FaultRecord::State s) {
  switch (s) {
    case FaultRecord::State::kFired:
      return "fired";
    case FaultRecord::State::kSkipped:
      return "skipped";
    default:
      return "not-fired";
  }
}

// Which fault each loss the coordinator recorded belongs to (fault id by
// record): one fault per loss, never two (issue 39: a stop continued 3.5 s
// earlier was credited with the loss a later stop of the same worker
// caused).
using LossOwners = std::map<const proto::LostWorker*, int>;

// Whether `r` may have caused the loss `l`: a kill, stop, term or partition
// that fired on its worker (its host) by the time it was detected (200 ms
// of slack for a loss detected as the fault was being recorded); a stop
// continued before anyone judged its worker lost ended nothing (the
// heartbeat timeout and some slack after SIGCONT).
bool MayCause(const FaultRecord& r, const proto::LostWorker& l) {
  const FaultSpec& s = r.fault.spec;
  if (r.state != FaultRecord::State::kFired) return false;
  switch (s.kind) {
    case FaultKind::kKill:
    case FaultKind::kStop:
    case FaultKind::kTerm:
      if (!r.worker_id.empty() && l.worker_id() != r.worker_id) return false;
      break;
    case FaultKind::kPartition:
      if (l.host_name() != s.target.name) return false;
      break;
    default:
      return false;
  }
  const int64_t detected = l.detected_unix_ms();
  if (detected < absl::ToUnixMillis(r.fired_at) - 200) return false;
  return !(s.kind == FaultKind::kStop && r.ended_at != absl::InfiniteFuture() &&
           detected > absl::ToUnixMillis(r.ended_at) + 4000);
}

// Each loss goes to the latest fault that may have caused it: an earlier
// fault on the same worker was superseded by it (the earlier stop was
// continued; a kill took the process the earlier fault had hit).
LossOwners AssignLosses(const proto::StatusReply& st,
                        const std::vector<FaultRecord>& records) {
  LossOwners owners;
  for (const proto::EpochRecord& e : st.history()) {
    for (const proto::LostWorker& l : e.lost()) {
      const FaultRecord* best = nullptr;
      for (const FaultRecord& r : records) {
        if (MayCause(r, l) && (best == nullptr || r.fired_at > best->fired_at))
          best = &r;
      }
      if (best != nullptr) owners[&l] = best->fault.id;
    }
  }
  return owners;
}

// Whether the loss is free for fault `id` (none of the others caused it).
bool LossIsFor(const LossOwners& owners, const proto::LostWorker& l, int id) {
  auto it = owners.find(&l);
  return it == owners.end() || it->second == id;
}

// The first epoch record that follows `fired` and names the fault's
// victim(s) among the lost or the left; nullptr when none does.
const proto::EpochRecord* EpochAfter(const proto::StatusReply& st,
                                     const LossOwners& owners,
                                     const FaultRecord& r,
                                     const proto::LostWorker** lost_out) {
  const FaultSpec& s = r.fault.spec;
  const int id = r.fault.id;
  // A delay or a slowdown ends no epoch of its own: a later change of its
  // target's is another fault's.
  if (s.kind == FaultKind::kDelay || s.kind == FaultKind::kSlow) {
    return nullptr;
  }
  // A coordinator started again: the first epoch of its new incarnation.
  if (s.kind == FaultKind::kKillCoordinator) {
    for (const proto::EpochRecord& e : st.history()) {
      if (e.formed_unix_ms() >= absl::ToUnixMillis(r.fired_at)) return &e;
    }
    return nullptr;
  }
  // Clocks: the worker's and kolorun's are the same machine's; 200 ms of
  // slack for a loss detected as the fault was being recorded.
  const int64_t from = absl::ToUnixMillis(r.fired_at) - 200;
  // A stopped worker that was continued before anyone judged it lost ended
  // nothing: a later change of its is another fault's (the heartbeat
  // timeout and some slack after SIGCONT).
  const int64_t until =
      s.kind == FaultKind::kStop && r.ended_at != absl::InfiniteFuture()
          ? absl::ToUnixMillis(r.ended_at) + 4000
          : std::numeric_limits<int64_t>::max();
  for (const proto::EpochRecord& e : st.history()) {
    if (e.formed_unix_ms() < from) continue;
    if (e.formed_unix_ms() > until) return nullptr;
    // A cut connection ends the epoch it happens in, whatever else ends it
    // too (a loss, a leave, a join at the same change).
    if (s.kind == FaultKind::kDrop) {
      // The change that ended the epoch the drop fired in comes after it
      // (no slack: the epoch it fired in formed before it).
      if (e.formed_unix_ms() < absl::ToUnixMillis(r.fired_at)) continue;
      for (const proto::LostWorker& l : e.lost()) {
        if (l.detection() == "data-plane" && LossIsFor(owners, l, id))
          *lost_out = &l;
      }
      return &e;
    }
    for (const proto::LostWorker& l : e.lost()) {
      const bool victim =
          s.kind == FaultKind::kPartition
              ? l.host_name() == s.target.name
              : (r.worker_id.empty() || l.worker_id() == r.worker_id);
      // A cut connection loses a worker only through its peers' reports.
      const bool cause_fits =
          s.kind != FaultKind::kDrop || l.detection() == "data-plane";
      if (victim && cause_fits && l.detected_unix_ms() >= from &&
          LossIsFor(owners, l, id)) {
        *lost_out = &l;
        return &e;
      }
    }
    // Only a term makes its target leave.
    if (s.kind == FaultKind::kTerm) {
      for (const std::string& w : e.left()) {
        if (w == r.worker_id) return &e;
      }
    }
    // A replacement (a later incarnation of the target's worker id) joined:
    // the target's end was absorbed into this change (it superseded the
    // old process); later changes of that id are another process's.
    if (!r.worker_id.empty() && std::find(e.joined().begin(), e.joined().end(),
                                          r.worker_id) != e.joined().end()) {
      return &e;
    }
  }
  return nullptr;
}

json Median(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2]
                           : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// How the fault's end was detected: the epoch it ended and what ended it
// (`lost`: the coordinator's record of the lost worker, if any).
json DetectionJson(const FaultRecord& r, const proto::EpochRecord& next,
                   const proto::LostWorker* lost) {
  const FaultSpec& s = r.fault.spec;
  // The first epoch of a restarted coordinator ended none of its own.
  json det = {{"epoch_ended", next.epoch() > 1 ? next.epoch() - 1 : r.epoch},
              {"next_epoch", next.epoch()},
              {"next_epoch_formed_after_s",
               Secs(FromMs(next.formed_unix_ms()) - r.fired_at)},
              {"how", "left"},
              {"cause", "left at its commit (SIGTERM)"},
              {"after_s", nullptr}};
  const bool left = std::find(next.left().begin(), next.left().end(),
                              r.worker_id) != next.left().end();
  if (s.kind == FaultKind::kKillCoordinator) {
    det["how"] = "coordinator-restart";
    det["cause"] =
        "the coordinator was killed and started again at its address; the "
        "workers that dialled it formed its new incarnation's first epoch";
  } else if (lost == nullptr && next.cause() == "reformed") {
    det["how"] = "data-plane";
    det["cause"] =
        "the workers reported the broken connection while every one of them "
        "heartbeated: the epoch was reformed with the same members";
  } else if (lost == nullptr && s.kind == FaultKind::kDrop) {
    det["how"] = "data-plane";
    det["cause"] =
        absl::StrCat("the epoch ended with another change (", next.cause(),
                     ") before the broken connection was judged on its own");
  } else if (lost == nullptr && !(s.kind == FaultKind::kTerm && left)) {
    det["how"] = "replaced";
    det["cause"] =
        "a replacement of the worker joined and superseded the old process";
  }
  if (lost != nullptr) {
    det["how"] = lost->detection();
    det["cause"] = lost->cause();
    det["after_s"] = Secs(FromMs(lost->detected_unix_ms()) - r.fired_at);
  }
  return det;
}

// The record after `e` in `st`'s history, or nullptr.
const proto::EpochRecord* Following(const proto::StatusReply& st,
                                    const proto::EpochRecord& e) {
  for (int i = 0; i + 1 < st.history_size(); ++i) {
    if (&st.history(i) == &e) return &st.history(i + 1);
  }
  return nullptr;
}

// The survivors' first completed collective in the next epoch. Epoch
// numbers start again with each incarnation of the coordinator: an event
// counts only between the epoch's forming and the next one's.
json RecoveryJson(const ReportInputs& in, const FaultRecord& r,
                  const proto::EpochRecord& next) {
  std::set<std::string> joined(next.joined().begin(), next.joined().end());
  json survivors = json::array();
  std::vector<double> times;
  std::set<std::string> seen;
  const absl::Time from =
      FromMs(next.formed_unix_ms()) - absl::Milliseconds(50);
  const proto::EpochRecord* after = Following(in.status, next);
  const absl::Time until = after != nullptr ? FromMs(after->formed_unix_ms())
                                            : absl::InfiniteFuture();
  for (const json& e : in.driver->events()) {
    if (e.value("ev", "") != "first_op" ||
        e.value("epoch", uint64_t{0}) != next.epoch() || EventTime(e) < from ||
        EventTime(e) > until) {
      continue;
    }
    const std::string w = e.value("worker", "");
    if (joined.count(w) != 0 || !seen.insert(w).second) continue;
    const double t = Secs(EventTime(e) - r.fired_at);
    times.push_back(t);
    survivors.push_back({{"worker", w}, {"after_s", t}});
  }
  return {{"survivors", survivors},
          {"median_s", Median(times)},
          {"max_s", times.empty()
                        ? json(nullptr)
                        : json(*std::max_element(times.begin(), times.end()))}};
}

// The rollbacks between the fault and the next epoch.
json RollbacksJson(const ReportInputs& in, const FaultRecord& r,
                   const proto::EpochRecord& next) {
  json rollbacks = json::array();
  const absl::Time formed = FromMs(next.formed_unix_ms());
  for (const json& e : in.driver->events()) {
    if (e.value("ev", "") != "rollback") continue;
    const absl::Time t = EventTime(e);
    if (t < r.fired_at - absl::Milliseconds(200) ||
        t > formed + absl::Seconds(1)) {
      continue;
    }
    rollbacks.push_back(
        {{"worker", e.value("worker", "")},
         {"commit", e.value("commit", int64_t{0})},
         {"ops_discarded", e.value("ops_discarded", int64_t{0})}});
  }
  return rollbacks;
}

// A replacement: the victim's worker id joining a later epoch (null
// without one).
json ReplacementJson(const ReportInputs& in, const FaultRecord& r,
                     const proto::EpochRecord& next) {
  bool reached = false;
  for (const proto::EpochRecord& e : in.status.history()) {
    reached = reached || &e == &next;
    if (!reached) continue;
    if (std::find(e.joined().begin(), e.joined().end(), r.worker_id) ==
        e.joined().end()) {
      continue;
    }
    int inc = -1;
    for (const json& ev : in.driver->events()) {
      if (ev.value("ev", "") == "armed" &&
          ev.value("worker", "") == r.worker_id && EventTime(ev) > r.fired_at) {
        inc = ev.value("inc", -1);
        break;
      }
    }
    return {{"worker", r.worker_id},
            {"incarnation", inc >= 0 ? json(inc) : json(nullptr)},
            {"joined_epoch", e.epoch()},
            {"after_s", Secs(FromMs(e.formed_unix_ms()) - r.fired_at)}};
  }
  return nullptr;
}

json FaultJson(const ReportInputs& in, const LossOwners& owners,
               const FaultRecord& r) {
  const absl::Time origin = in.driver->options().origin;
  const FaultSpec& s = r.fault.spec;
  json f = {{"id", r.fault.id},
            {"spec", FaultSpecText(s)},
            {"kind", std::string(FaultKindName(s.kind))},
            {"from_random", r.fault.from_random >= 0 ? json(r.fault.from_random)
                                                     : json(nullptr)},
            {"fired_by", r.by_worker ? "worker" : "kolorun"},
            {"state", StateName(r.state)},
            {"detail", r.detail},
            {"fired_s", nullptr},
            {"ended_s", nullptr},
            {"target", nullptr},
            {"detection", nullptr},
            {"recovery", nullptr},
            {"rollbacks", json::array()},
            {"replacement", nullptr}};
  if (s.kind == FaultKind::kRandom) {
    int n = 0;
    for (const FaultRecord& o : in.driver->records()) {
      n += o.fault.from_random == r.fault.id ? 1 : 0;
    }
    f["state"] = "plan";
    f["detail"] = absl::StrCat("drew ", n, " fault(s) with seed ",
                               in.driver->options().seed);
    return f;
  }
  if (r.state == FaultRecord::State::kPending) {
    f["detail"] = r.by_worker ? "never due on its target before the job ended"
                              : "the job ended before it was due";
    return f;
  }
  f["fired_s"] = Secs(r.fired_at - origin);
  if (r.ended_at != absl::InfiniteFuture()) {
    f["ended_s"] = Secs(r.ended_at - origin);
  }
  if (!r.worker_id.empty()) {
    f["target"] = {{"worker", r.worker_id},
                   {"incarnation", r.incarnation},
                   {"rank", r.rank},
                   {"epoch", r.epoch},
                   {"pid", r.pid},
                   {"at_op", r.at_op >= 0 ? json(r.at_op) : json(nullptr)}};
  } else if (s.kind == FaultKind::kPartition) {
    f["target"] = {{"host", s.target.name}};
  }
  if (r.state != FaultRecord::State::kFired) return f;
  // Delays and slowdowns change no membership; a drop, a partition or a
  // killed coordinator may end the job rather than an epoch.
  const proto::LostWorker* lost = nullptr;
  const proto::EpochRecord* next = EpochAfter(in.status, owners, r, &lost);
  if (next == nullptr) return f;
  f["detection"] = DetectionJson(r, *next, lost);
  f["recovery"] = RecoveryJson(in, r, *next);
  f["rollbacks"] = RollbacksJson(in, r, *next);
  if (!r.worker_id.empty()) f["replacement"] = ReplacementJson(in, r, *next);
  return f;
}

// The coordinator's history as its event log tells it: a record per
// `epoch_formed`, holding the `worker_lost` events since the one before
// that it names; `incarnation_of` gets each record's coordinator
// incarnation (0: the first; one more at each `coordinator_restarted`).
google::protobuf::RepeatedPtrField<proto::EpochRecord> HistoryFromEvents(
    const std::vector<nlohmann::ordered_json>& events,
    std::vector<int>& incarnation_of) {
  google::protobuf::RepeatedPtrField<proto::EpochRecord> history;
  std::vector<proto::LostWorker> lost;
  int incarnation = 0;
  auto strings = [](const nlohmann::ordered_json& e, const char* key) {
    std::vector<std::string> out;
    auto it = e.find(key);
    if (it == e.end() || !it->is_array()) return out;
    for (const auto& v : *it) {
      if (v.is_string()) out.push_back(v.get<std::string>());
    }
    return out;
  };
  for (const nlohmann::ordered_json& e : events) {
    const std::string kind = e.value("event", "");
    if (kind == "coordinator_restarted") {
      ++incarnation;
      lost.clear();
    } else if (kind == "worker_lost") {
      proto::LostWorker& l = lost.emplace_back();
      l.set_worker_id(e.value("worker_id", ""));
      l.set_rank(e.value("rank", -1));
      l.set_host_name(e.value("host", ""));
      l.set_cause(e.value("cause", ""));
      l.set_detection(e.value("detection", ""));
      l.set_detected_unix_ms(absl::ToUnixMillis(coordinator::EventTime(e)));
    } else if (kind == "epoch_formed") {
      proto::EpochRecord& r = *history.Add();
      r.set_epoch(e.value("epoch", uint64_t{0}));
      r.set_formed_unix_ms(absl::ToUnixMillis(coordinator::EventTime(e)));
      r.set_cause(e.value("cause", ""));
      for (const std::string& w : strings(e, "members")) r.add_members(w);
      for (const std::string& w : strings(e, "joined")) r.add_joined(w);
      for (const std::string& w : strings(e, "left")) r.add_left(w);
      const std::vector<std::string> named = strings(e, "lost");
      for (const proto::LostWorker& l : lost) {
        if (std::find(named.begin(), named.end(), l.worker_id()) !=
            named.end()) {
          *r.add_lost() = l;
        }
      }
      lost.clear();
      incarnation_of.push_back(incarnation);
    }
  }
  return history;
}

}  // namespace

json BuildFaultReport(const ReportInputs& given) {
  // The history the report reads is the event log's, across the
  // coordinator's incarnations, oldest first.
  ReportInputs in = given;
  std::vector<int> incarnation_of;
  *in.status.mutable_history() =
      HistoryFromEvents(given.coordinator_events, incarnation_of);
  const FaultDriver& d = *in.driver;
  const absl::Time origin = d.options().origin;
  const proto::StatusReply& st = in.status;
  json report;
  report["schema"] = "kolo-fault-report/1";
  int members = 0;
  for (const proto::WorkerStatus& w : st.workers()) {
    members += w.state() == proto::MEMBER_STATE_MEMBER ? 1 : 0;
  }
  report["job"] = {{"id", st.job_id()},
                   {"seed", d.options().seed},
                   {"started_unix_ms", absl::ToUnixMillis(origin)},
                   {"duration_s", Secs(in.end - origin)},
                   {"outcome", in.exit_code == 0 ? "ok" : "failed"},
                   {"exit_code", in.exit_code},
                   {"reason", in.failure_reason},
                   // The coordinator's verdict, which kolorun's own reason may
                   // not name (a worker that ended because of it, say).
                   {"coordinator_reason", st.end_reason()},
                   {"coordinator_killed", d.coordinator_gone()},
                   {"coordinator_restarts", in.coordinator_restarts},
                   {"final_epoch", st.epoch()},
                   {"final_members", members},
                   {"resets", st.resets()}};
  report["faults"] = json::array();
  const LossOwners owners = AssignLosses(st, d.records());
  for (const FaultRecord& r : d.records()) {
    report["faults"].push_back(FaultJson(in, owners, r));
  }
  report["epochs"] = json::array();
  for (int i = 0; i < st.history_size(); ++i) {
    const proto::EpochRecord& e = st.history(i);
    json lost = json::array();
    for (const proto::LostWorker& l : e.lost()) {
      lost.push_back(
          {{"worker", l.worker_id()},
           {"rank", l.rank()},
           {"host", l.host_name()},
           {"cause", l.cause()},
           {"detection", l.detection()},
           {"detected_s", Secs(FromMs(l.detected_unix_ms()) - origin)}});
    }
    report["epochs"].push_back(
        {{"epoch", e.epoch()},
         {"incarnation", incarnation_of[static_cast<size_t>(i)]},
         {"formed_s", Secs(FromMs(e.formed_unix_ms()) - origin)},
         {"cause", e.cause()},
         {"members",
          std::vector<std::string>(e.members().begin(), e.members().end())},
         {"joined",
          std::vector<std::string>(e.joined().begin(), e.joined().end())},
         {"left", std::vector<std::string>(e.left().begin(), e.left().end())},
         {"lost", lost}});
  }
  report["worker_ends"] = json::array();
  for (const FaultDriver::WorkerEnd& e : d.worker_ends()) {
    report["worker_ends"].push_back({{"worker", e.worker_id},
                                     {"incarnation", e.incarnation},
                                     {"what", e.what},
                                     {"at_s", Secs(e.at - origin)}});
  }
  return report;
}

namespace {

std::string S(const json& v) {
  return v.is_number() ? absl::StrFormat("%.3f s", v.get<double>()) : "-";
}

}  // namespace

std::string FaultReportText(const json& report) {
  const json& job = report["job"];
  std::string out = absl::StrCat(
      "kolorun: fault report (seed ", job["seed"].get<uint64_t>(),
      "): ", report["faults"].size(), " fault(s); job ",
      job["outcome"].get<std::string>(), " (exit ", job["exit_code"].get<int>(),
      ") after ", S(job["duration_s"]), ", epoch ",
      job["final_epoch"].get<uint64_t>(), ", ", job["resets"].get<uint32_t>(),
      " membership change(s)");
  if (!job["reason"].get<std::string>().empty()) {
    absl::StrAppend(&out, ": ", job["reason"].get<std::string>());
  }
  out += "\n";
  const std::string verdict = job["coordinator_reason"].get<std::string>();
  if (!verdict.empty() && verdict != job["reason"].get<std::string>() &&
      job["outcome"] == "failed") {
    absl::StrAppend(&out, "  the coordinator: ", verdict, "\n");
  }
  for (const json& f : report["faults"]) {
    absl::StrAppend(&out, "  #", f["id"].get<int>(), " ",
                    f["spec"].get<std::string>(), ": ",
                    f["state"].get<std::string>());
    if (f["fired_s"].is_number())
      absl::StrAppend(&out, " at ", S(f["fired_s"]));
    if (f["target"].is_object() && f["target"].contains("worker")) {
      const json& t = f["target"];
      absl::StrAppend(&out, " on ", t["worker"].get<std::string>(), " (rank ",
                      t["rank"].get<int>(), ", epoch ",
                      t["epoch"].get<uint64_t>(), ")");
    }
    if (!f["detail"].get<std::string>().empty()) {
      absl::StrAppend(&out, ": ", f["detail"].get<std::string>());
    }
    out += "\n";
    if (f["detection"].is_object()) {
      const json& d = f["detection"];
      absl::StrAppend(&out, "     detected ", S(d["after_s"]), " later (",
                      d["how"].get<std::string>(), "); epoch ",
                      d["epoch_ended"].get<uint64_t>(), " ended, epoch ",
                      d["next_epoch"].get<uint64_t>(), " formed ",
                      S(d["next_epoch_formed_after_s"]), " after the fault\n");
    }
    if (f["recovery"].is_object()) {
      const json& r = f["recovery"];
      absl::StrAppend(&out, "     survivors' next collective: median ",
                      S(r["median_s"]), ", max ", S(r["max_s"]), " (",
                      r["survivors"].size(), " worker(s))");
      int64_t lo = -1, hi = -1, commit = -1;
      for (const json& rb : f["rollbacks"]) {
        const int64_t n = rb["ops_discarded"].get<int64_t>();
        lo = lo < 0 ? n : std::min(lo, n);
        hi = std::max(hi, n);
        commit = rb["commit"].get<int64_t>();
      }
      if (commit >= 0) {
        absl::StrAppend(&out, "; rolled back to commit ", commit, " (", lo,
                        lo == hi ? "" : absl::StrCat("-", hi),
                        " collective(s) since it discarded)");
      }
      out += "\n";
    }
    if (f["replacement"].is_object()) {
      const json& r = f["replacement"];
      absl::StrAppend(
          &out, "     replaced: ", r["worker"].get<std::string>(),
          r["incarnation"].is_number()
              ? absl::StrCat(" incarnation ", r["incarnation"].get<int>())
              : "",
          " joined epoch ", r["joined_epoch"].get<uint64_t>(), " ",
          S(r["after_s"]), " after the fault\n");
    }
  }
  return out;
}

}  // namespace kolo::launcher
