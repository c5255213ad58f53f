#include "ctl/status_text.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ctl/names.h"
#include "ctl/pending.h"
#include "ctl/table.h"

namespace kolo::ctl {
namespace {

using Align = Table::Align;

// "0.5s", "12.0s", "3m05s", "2h03m".
std::string Age(double seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return absl::StrFormat("%.1fs", seconds);
  int64_t s = static_cast<int64_t>(seconds);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
}

std::string JobBlock(const proto::StatusReply& r, const FormatContext& ctx) {
  int members = 0;
  for (const proto::WorkerStatus& w : r.workers()) {
    if (w.rank() >= 0) ++members;
  }
  std::string out;
  absl::StrAppend(&out, "job:         ", r.job_id(), "\n");
  absl::StrAppend(&out, "coordinator: ", ctx.coordinator, " (incarnation ",
                  IncarnationHex(r.incarnation()), ")\n");
  absl::StrAppend(&out, "phase:       ", r.phase(), "\n");
  absl::StrAppend(&out, "epoch:       ", r.epoch(), " (", r.plans(),
                  " plans dispatched in it)\n");
  absl::StrAppend(&out, "members:     ", members, " (", r.expected_size(),
                  " expected at the start)\n");
  if (r.elastic()) {
    absl::StrAppend(&out, "elastic:     min ", r.min_size(), ", max ",
                    r.max_size() > 0 ? absl::StrCat(r.max_size()) : "no cap",
                    "; ", r.resets(), r.resets() == 1 ? " reset" : " resets",
                    "\n");
  } else {
    absl::StrAppend(&out, "elastic:     no\n");
  }
  if (!r.end_reason().empty() || !r.failed_worker().empty()) {
    absl::StrAppend(
        &out, "ended:       ", r.end_reason().empty() ? "-" : r.end_reason());
    if (!r.failed_worker().empty()) {
      absl::StrAppend(&out, " (failed worker ", r.failed_worker(), ")");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string WorkersBlock(const proto::StatusReply& r) {
  if (r.workers().empty()) return "workers: none\n";
  Table t({{"WORKER"},
           {"INC", Align::kRight},
           {"RANK", Align::kRight},
           {"HOST"},
           {"STATE"},
           {"HEARD", Align::kRight},
           {"PID", Align::kRight}});
  for (const proto::WorkerStatus& w : r.workers()) {
    t.AddRow(
        {w.worker_id(), absl::StrCat(w.incarnation()),
         w.rank() >= 0 ? absl::StrCat(w.rank()) : "-",
         w.host_name().empty() ? "-" : w.host_name(), StateName(w.state()),
         absl::StrCat(Age(static_cast<double>(w.millis_since_heard()) / 1000.0),
                      " ago"),
         w.pid() > 0 ? absl::StrCat(w.pid()) : "-"});
  }
  return absl::StrCat("workers:\n", t.Render("  "));
}

std::string PendingBlock(const proto::StatusReply& r,
                         const FormatContext& ctx) {
  const std::vector<PendingView> pending = AnalyzePending(r, ctx.stall_check);
  if (pending.empty()) return "pending tensors: none\n";
  int stalled = 0;
  for (const PendingView& p : pending) stalled += p.stalled ? 1 : 0;
  std::string title = absl::StrCat("pending tensors: ", pending.size());
  if (ctx.stall_check > absl::ZeroDuration()) {
    absl::StrAppend(&title, ", ", stalled, " stalled (pending for ",
                    absl::FormatDuration(ctx.stall_check), " or more)");
  }
  Table t({{"NAME"},
           {"PENDING", Align::kRight},
           {"STALLED"},
           {"NOT SUBMITTED BY"}});
  for (const PendingView& p : pending) {
    std::vector<std::string> missing;
    for (const RankRef& m : p.missing) {
      missing.push_back(absl::StrCat("rank ", m.rank, " (", m.worker_id, ")"));
    }
    t.AddRow({p.name, Age(p.seconds), p.stalled ? "yes" : "no",
              missing.empty() ? "-" : absl::StrJoin(missing, ", ")});
  }
  return absl::StrCat(title, "\n", t.Render("  "));
}

std::string LostText(
    const google::protobuf::RepeatedPtrField<proto::LostWorker>& lost) {
  std::vector<std::string> parts;
  for (const proto::LostWorker& l : lost) parts.push_back(DescribeLost(l));
  return absl::StrJoin(parts, ", ");
}

std::string HistoryBlock(const proto::StatusReply& r) {
  if (r.history().empty()) {
    // A coordinator that keeps no history may still name its losses.
    if (r.lost().empty()) return "membership history: none\n";
    return absl::StrCat("lost workers: ", LostText(r.lost()), "\n");
  }
  Table t({{"EPOCH", Align::kRight},
           {"FORMED (UTC)"},
           {"CAUSE"},
           {"MEMBERS"},
           {"CHANGES"}});
  for (const proto::EpochRecord& e : r.history()) {
    std::vector<std::string> changes;
    if (!e.joined().empty()) {
      changes.push_back(
          absl::StrCat("joined ", absl::StrJoin(e.joined(), ", ")));
    }
    if (!e.left().empty()) {
      changes.push_back(absl::StrCat("left ", absl::StrJoin(e.left(), ", ")));
    }
    if (!e.lost().empty()) {
      changes.push_back(absl::StrCat("lost ", LostText(e.lost())));
    }
    t.AddRow({absl::StrCat(e.epoch()), FormatUnixMillis(e.formed_unix_ms()),
              e.cause().empty() ? "-" : e.cause(),
              e.members().empty() ? "-" : absl::StrJoin(e.members(), ", "),
              changes.empty() ? "-" : absl::StrJoin(changes, "; ")});
  }
  return absl::StrCat("membership history:\n", t.Render("  "));
}

}  // namespace

std::string FormatStatusText(const proto::StatusReply& reply,
                             const FormatContext& context) {
  return absl::StrCat(JobBlock(reply, context), "\n", WorkersBlock(reply), "\n",
                      PendingBlock(reply, context), "\n", HistoryBlock(reply));
}

}  // namespace kolo::ctl
