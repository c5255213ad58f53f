// JobHistory (job_history.h): the job's past as the Status reply shows it.
#include "coordinator/job_history.h"

#include <string>

namespace kolo::coordinator {

std::string JobHistory::last_lost_worker() const {
  return lost_.empty() ? "" : lost_.back().worker_id();
}

void JobHistory::AddTo(proto::StatusReply& reply) const {
  reply.set_resets(static_cast<uint32_t>(resets_));
  for (const proto::EpochRecord& e : epochs_) *reply.add_history() = e;
  for (const proto::LostWorker& l : lost_) *reply.add_lost() = l;
}

}  // namespace kolo::coordinator
