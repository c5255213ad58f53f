#include "allreduce/subset_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo {

SubsetTransport::SubsetTransport(Transport* parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  KOLO_CHECK(parent_ != nullptr) << "subset of no transport";
  KOLO_CHECK(std::is_sorted(members_.begin(), members_.end()) &&
             std::adjacent_find(members_.begin(), members_.end()) ==
                 members_.end())
      << "subset members must ascend without repeats";
  auto it = std::find(members_.begin(), members_.end(), parent_->rank());
  KOLO_CHECK(it != members_.end())
      << "rank " << parent_->rank() << " is not a member of its subset";
  rank_ = static_cast<int>(it - members_.begin());
  for (int m : members_) {
    KOLO_CHECK(m >= 0 && m < parent_->size())
        << "subset member " << m << " of " << parent_->size() << " ranks";
  }
}

absl::Status SubsetTransport::CheckPeer(int peer) const {
  if (peer >= 0 && peer < size() && peer != rank_) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("peer ", peer, " is not another rank of a subset of ",
                   size(), " ranks (this one is ", rank_, ")"));
}

absl::StatusOr<OpId> SubsetTransport::StartSend(int peer, const void* data,
                                                size_t len) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  return parent_->StartSend(members_[peer], data, len);
}

absl::StatusOr<OpId> SubsetTransport::StartRecv(int peer, void* data,
                                                size_t len) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  return parent_->StartRecv(members_[peer], data, len);
}

}  // namespace kolo
