// What kolo-ctl says about a pending tensor: a name some members announced
// and others not yet. StatusReply.pending lists the ranks that DID announce
// it; an operator wants the ones that did NOT (the ranks the others wait
// for), so they are computed here from the members of the current epoch (the
// workers with a rank), with their worker ids.
//
// Caveat: a tensor of a process set waits only for the set's ranks, but
// StatusReply does not say which set a pending name belongs to, so its
// missing ranks are counted against every member.
//
// Thread-safety: pure functions.
#ifndef KOLO_CTL_PENDING_H_
#define KOLO_CTL_PENDING_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/kolo.pb.h"

namespace kolo::ctl {

struct RankRef {
  int rank = -1;
  std::string worker_id;  // "?" when no worker of the reply has the rank
};

struct PendingView {
  std::string name;
  double seconds = 0;            // since the first announcement
  std::vector<int> submitted;    // ascending
  std::vector<RankRef> missing;  // ascending by rank
  // Pending at least `stall_check` (the coordinator's stall warning
  // threshold); never when stall_check is zero.
  bool stalled = false;
};

// The members' ranks in the reply, ascending, with their worker ids.
std::vector<RankRef> Members(const proto::StatusReply& reply);

// One view per StatusReply.pending entry, in the reply's order (oldest
// first).
std::vector<PendingView> AnalyzePending(const proto::StatusReply& reply,
                                        absl::Duration stall_check);

}  // namespace kolo::ctl

#endif  // KOLO_CTL_PENDING_H_
