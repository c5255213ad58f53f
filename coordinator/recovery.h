// Recovery: one elastic recovery under way in the coordinator. An epoch
// ended (members were lost, members left or newcomers wait at a membership
// check, or its data connections broke); the survivors acknowledge the end
// (phase "recovering", until the heartbeat timeout), and when too few
// workers remain the job waits for newcomers (phase "short", until the
// elastic timeout). Once the survivors acknowledged and enough workers are
// there, the next epoch forms and the recovery is over. See core.h
// ("Elastic jobs") and docs/design.md ("Elastic").
//
// This file holds the recovery's state; recovery.cc holds both its helpers
// and CoordinatorCore's recovery steps (LoseMember, ReformEpoch,
// BeginRecovery, MaybeFormNextEpoch, JudgeRecoveryDeadlines).
//
// Thread-safety: a plain value; CoordinatorCore holds it under its mutex,
// engaged exactly while its phase is kRecovering or kShort.
// Invariants: `lost` and `left` name workers of the epoch that ended.
#ifndef KOLO_COORDINATOR_RECOVERY_H_
#define KOLO_COORDINATOR_RECOVERY_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/kolo.pb.h"

namespace kolo::coordinator {

struct Recovery {
  // When the epoch ended.
  absl::Time since;
  // The survivors' acks are due by then (kRecovering); the job ends unless
  // enough workers are there by then (kShort).
  absl::Time deadline;
  // The workers lost from the epoch that ended (also during the recovery),
  // oldest first.
  std::vector<proto::LostWorker> lost;
  // The workers that left at the membership check that ended the epoch.
  std::vector<std::string> left;

  // The record of the next epoch (EpochRecord.cause, lost, left, joined;
  // the epoch's number and members are FormEpoch's): `joined` are the
  // newcomers it admits, in order.
  proto::EpochRecord NextRecord(const std::vector<std::string>& joined) const;
  // "lost: <DescribeLost>; left: a, b; joined: none", for the log.
  std::string Summary(const std::vector<std::string>& joined) const;
};

// "w2 (rank 2, host b) silent for 3.1 s; ..." for each of `lost`; "none"
// when empty.
std::string DescribeLost(const std::vector<proto::LostWorker>& lost);

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_RECOVERY_H_
