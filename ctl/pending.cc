#include "ctl/pending.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_set.h"

namespace kolo::ctl {

std::vector<RankRef> Members(const proto::StatusReply& reply) {
  std::map<int, std::string> by_rank;
  for (const proto::WorkerStatus& w : reply.workers()) {
    if (w.rank() >= 0) by_rank.emplace(w.rank(), w.worker_id());
  }
  std::vector<RankRef> out;
  for (const auto& [rank, id] : by_rank) out.push_back(RankRef{rank, id});
  return out;
}

std::vector<PendingView> AnalyzePending(const proto::StatusReply& reply,
                                        absl::Duration stall_check) {
  const std::vector<RankRef> members = Members(reply);
  std::vector<PendingView> out;
  for (const proto::PendingTensor& p : reply.pending()) {
    PendingView v;
    v.name = p.name();
    v.seconds = p.seconds();
    v.submitted.assign(p.ranks().begin(), p.ranks().end());
    std::sort(v.submitted.begin(), v.submitted.end());
    v.submitted.erase(std::unique(v.submitted.begin(), v.submitted.end()),
                      v.submitted.end());
    absl::flat_hash_set<int> did(v.submitted.begin(), v.submitted.end());
    for (const RankRef& m : members) {
      if (!did.contains(m.rank)) v.missing.push_back(m);
    }
    v.stalled = stall_check > absl::ZeroDuration() &&
                absl::Seconds(p.seconds()) >= stall_check;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace kolo::ctl
