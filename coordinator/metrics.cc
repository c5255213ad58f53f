// RenderMetrics: the coordinator's Prometheus page (see metrics.h).
#include "coordinator/metrics.h"

#include <array>

#include "absl/container/btree_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kolo::coordinator {
namespace {

using Type = MetricsText::Type;

std::string OpName(int op) {
  const std::string name =
      proto::OpType_IsValid(op)
          ? proto::OpType_Name(static_cast<proto::OpType>(op))
          : absl::StrCat("op", op);
  return absl::AsciiStrToLower(name);
}

std::string StateName(proto::MemberState state) {
  std::string name = absl::AsciiStrToLower(proto::MemberState_Name(state));
  const std::string prefix = "member_state_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

// Phase, epoch, members and the workers the coordinator knows.
void WriteJob(const proto::StatusReply& s, MetricsText& m) {
  m.Family("kolo_job_info", "The job this coordinator runs (always 1).",
           Type::kGauge);
  m.Value(1, {{"job_id", s.job_id()}});
  m.Family("kolo_job_phase", "1 for the job's current phase, 0 for the others.",
           Type::kGauge);
  for (const char* phase :
       {"forming", "running", "recovering", "short", "ended"}) {
    m.Value(s.phase() == phase ? 1 : 0, {{"phase", phase}});
  }
  m.Family("kolo_epoch", "The current epoch (0 while the first one forms).",
           Type::kGauge);
  m.Value(static_cast<double>(s.epoch()));
  int members = 0;
  absl::btree_map<std::string, int> by_state;
  for (const proto::WorkerStatus& w : s.workers()) {
    if (w.state() == proto::MEMBER_STATE_MEMBER) ++members;
    ++by_state[StateName(w.state())];
  }
  m.Family("kolo_members", "Members of the current epoch that are still in.",
           Type::kGauge);
  m.Value(members);
  m.Family("kolo_expected_workers", "Workers that form the first epoch.",
           Type::kGauge);
  m.Value(s.expected_size());
  m.Family("kolo_workers", "Workers the coordinator knows, by state.",
           Type::kGauge);
  for (const auto& [state, n] : by_state) m.Value(n, {{"state", state}});
  m.Family("kolo_worker_rank",
           "Each worker's rank in the current epoch (-1: none).", Type::kGauge);
  for (const proto::WorkerStatus& w : s.workers()) {
    m.Value(w.rank(), {{"worker", w.worker_id()}});
  }
  m.Family("kolo_worker_heard_seconds",
           "Seconds since the coordinator last heard from each worker.",
           Type::kGauge);
  for (const proto::WorkerStatus& w : s.workers()) {
    m.Value(static_cast<double>(w.millis_since_heard()) / 1000,
            {{"worker", w.worker_id()}});
  }
  m.Family("kolo_pending_tensors",
           "Tensors some ranks announced and others not yet.", Type::kGauge);
  m.Value(s.pending_size());
}

// Epochs formed, joins, leaves and losses, from the membership history.
void WriteMembership(const proto::StatusReply& s, const CoreStats& stats,
                     MetricsText& m) {
  absl::btree_map<std::string, int> formed;
  uint64_t joins = 0, leaves = 0;
  for (const proto::EpochRecord& e : s.history()) {
    ++formed[e.cause().empty() ? "start" : e.cause()];
    joins += static_cast<uint64_t>(e.joined_size());
    leaves += static_cast<uint64_t>(e.left_size());
  }
  m.Family("kolo_epochs_formed_total",
           "Epochs formed, by why the previous one ended.", Type::kCounter);
  for (const auto& [cause, n] : formed) m.Value(n, {{"cause", cause}});
  m.Family("kolo_resets_total", "Epochs that ended (elastic jobs).",
           Type::kCounter);
  m.Value(s.resets());
  m.Family("kolo_worker_joins_total",
           "Newcomers admitted into an epoch (elastic jobs).", Type::kCounter);
  m.Value(static_cast<double>(joins));
  m.Family("kolo_worker_leaves_total",
           "Members that left at a membership check (elastic jobs).",
           Type::kCounter);
  m.Value(static_cast<double>(leaves));
  absl::btree_map<std::pair<std::string, std::string>, int> lost;
  for (const proto::LostWorker& l : s.lost()) {
    ++lost[{l.worker_id(), l.detection().empty() ? "other" : l.detection()}];
  }
  m.Family("kolo_worker_losses_total",
           "Members lost (elastic jobs), by worker and by how the "
           "coordinator learnt of it.",
           Type::kCounter);
  for (const auto& [key, n] : lost) {
    m.Value(n, {{"worker", key.first}, {"detection", key.second}});
  }
  m.Family("kolo_recovery_seconds",
           "Recoveries (elastic jobs): from the end of an epoch to the next "
           "one formed.",
           Type::kHistogram);
  m.Observations(stats.recovery_seconds);
  m.Family("kolo_refusals_total", "Sessions refused, by reason.",
           Type::kCounter);
  for (const auto& [reason, n] : stats.refusals) {
    m.Value(static_cast<double>(n), {{"reason", reason}});
  }
}

// Plans, collectives, fusion, the response cache and stalls.
void WriteNegotiation(const CoreStats& stats, MetricsText& m) {
  const NegotiationStats& n = stats.negotiation;
  m.Family("kolo_plans_total", "Plans (negotiation rounds) sent.",
           Type::kCounter);
  m.Value(static_cast<double>(stats.plans));
  m.Family("kolo_fast_path_plans_total",
           "Plans the ranks derived among themselves on the fast path.",
           Type::kCounter);
  m.Value(static_cast<double>(n.fast_path_plans));
  m.Family("kolo_negotiation_wait_seconds",
           "From a tensor's first announcement to its last (every rank in).",
           Type::kHistogram);
  m.Observations(n.wait_seconds);
  struct Column {
    const char* name;
    const char* help;
    uint64_t OpStats::*field;
  };
  const std::array<Column, 4> columns{{
      {"kolo_collectives_total",
       "Collectives dispatched, by op (a fused buffer counts once).",
       &OpStats::collectives},
      {"kolo_tensors_total", "Tensors dispatched, by op.", &OpStats::tensors},
      {"kolo_collective_bytes_total",
       "Bytes dispatched, by op (allreduce and allgather).", &OpStats::bytes},
      {"kolo_collective_errors_total",
       "Error responses (disagreements, invalid requests), by op.",
       &OpStats::errors},
  }};
  for (const Column& c : columns) {
    m.Family(c.name, c.help, Type::kCounter);
    for (const auto& [op, s] : n.by_op) {
      m.Value(static_cast<double>(s.*(c.field)), {{"op", OpName(op)}});
    }
  }
  m.Family("kolo_fused_buffers_total",
           "Responses that fused more than one tensor.", Type::kCounter);
  m.Value(static_cast<double>(n.fused_buffers));
  m.Family("kolo_fused_tensors_total", "Tensors in fused responses.",
           Type::kCounter);
  m.Value(static_cast<double>(n.fused_tensors));
  m.Family("kolo_fusion_fill_ratio",
           "A fused buffer's bytes over the fusion threshold.",
           Type::kHistogram);
  m.Observations(n.fusion_fill);
  m.Family("kolo_cache_hits_total",
           "Tensors ready by a live response cache bit.", Type::kCounter);
  m.Value(static_cast<double>(n.cache_hits));
  m.Family("kolo_cache_misses_total",
           "Tensors resolved in full while the response cache was on.",
           Type::kCounter);
  m.Value(static_cast<double>(n.cache_misses));
  m.Family("kolo_stall_warnings_total", "Stall warnings.", Type::kCounter);
  m.Value(static_cast<double>(stats.stall_warnings));
  m.Family("kolo_stall_shutdowns_total", "Jobs ended by a stall.",
           Type::kCounter);
  m.Value(static_cast<double>(stats.stall_shutdowns));
}

}  // namespace

std::string RenderMetrics(const proto::StatusReply& status,
                          const CoreStats& stats) {
  MetricsText m;
  WriteJob(status, m);
  WriteMembership(status, stats, m);
  WriteNegotiation(stats, m);
  return m.text();
}

}  // namespace kolo::coordinator
