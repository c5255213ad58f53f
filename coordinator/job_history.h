// JobHistory: what an elastic job's coordinator remembers of the job's past,
// for the Status reply (StatusReply.resets, .lost, .history) and the
// messages that end the job: how many epochs ended (resets), every worker
// lost, and every epoch formed, each oldest first.
//
// Thread-safety: none of its own; CoordinatorCore holds it under its mutex.
// Invariants: it only grows (nothing is forgotten while the job lives).
#ifndef KOLO_COORDINATOR_JOB_HISTORY_H_
#define KOLO_COORDINATOR_JOB_HISTORY_H_

#include <string>
#include <utility>
#include <vector>

#include "proto/kolo.pb.h"

namespace kolo::coordinator {

class JobHistory {
 public:
  // An epoch ended (a loss, a membership check, a reform).
  void CountReset() { ++resets_; }
  // Whether the job has had more epoch changes than `reset_limit` allows
  // (CoreOptions::reset_limit; -1: any number).
  bool PastResetLimit(int reset_limit) const {
    return reset_limit >= 0 && resets_ > reset_limit;
  }
  void RecordLoss(const proto::LostWorker& lost) { lost_.push_back(lost); }
  void RecordEpoch(proto::EpochRecord record) {
    epochs_.push_back(std::move(record));
  }

  int resets() const { return resets_; }
  // Every worker lost, oldest first.
  const std::vector<proto::LostWorker>& lost() const { return lost_; }
  // The worker id of the last worker lost; "" when none was.
  std::string last_lost_worker() const;
  // Every epoch formed, oldest first.
  const std::vector<proto::EpochRecord>& epochs() const { return epochs_; }
  // Sets resets, history and lost of `reply`.
  void AddTo(proto::StatusReply& reply) const;

 private:
  int resets_ = 0;
  std::vector<proto::LostWorker> lost_;
  std::vector<proto::EpochRecord> epochs_;
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_JOB_HISTORY_H_
