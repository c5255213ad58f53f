// SubsetTransport: a Transport over some ranks of another one — a process
// set's view of the epoch's transport. Rank i of the subset is the parent's
// rank members[i]; messages go over the parent's connections, so a subset
// costs no connection of its own. The collectives (collectives.h) run on it
// unchanged: they see a world of members.size() ranks.
//
// Sequencing: BeginOperation stamps the parent, and every member must stamp
// the same sequence for the same collective (the plan executor derives it
// from the plan, not from a counter, so that ranks outside the set, which
// skip the set's collectives, stay in step with the others).
//
// Thread-safety: as Transport — one thread calls everything but Abort(),
// which aborts the parent (a broken set breaks the epoch's data plane).
// Lifetime: the parent must outlive the subset.
// Invariants: members are distinct ranks of the parent, in ascending order,
// and include the parent's own rank.
#ifndef KOLO_ALLREDUCE_SUBSET_TRANSPORT_H_
#define KOLO_ALLREDUCE_SUBSET_TRANSPORT_H_

#include <utility>
#include <vector>

#include "allreduce/transport.h"

namespace kolo {

class SubsetTransport : public Transport {
 public:
  // REQUIRES: the invariants above.
  SubsetTransport(Transport* parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  void BeginOperation(uint64_t seq) override { parent_->BeginOperation(seq); }
  absl::StatusOr<OpId> StartSend(int peer, const void* data,
                                 size_t len) override;
  absl::StatusOr<OpId> StartRecv(int peer, void* data, size_t len) override;
  absl::Status Wait(OpId op) override { return parent_->Wait(op); }
  absl::Status WaitAll(absl::Span<const OpId> ops) override {
    return parent_->WaitAll(ops);
  }
  void Abort(absl::Status why) override { parent_->Abort(std::move(why)); }
  void SetInactivityTimeout(absl::Duration timeout) override {
    parent_->SetInactivityTimeout(timeout);
  }
  absl::Status CutForFault(int peer) override {
    return parent_->CutForFault(peer);  // a parent rank: the hook's view
  }

 private:
  // kInvalidArgument unless 0 <= peer < size() and peer != rank().
  absl::Status CheckPeer(int peer) const;

  Transport* const parent_;
  const std::vector<int> members_;
  int rank_ = -1;
};

}  // namespace kolo

#endif  // KOLO_ALLREDUCE_SUBSET_TRANSPORT_H_
