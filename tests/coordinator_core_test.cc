// Tests of CoordinatorCore (coordinator/core.h), driven directly with events
// and a fake clock: handshake, refusals, epoch formation, fencing, exchange,
// leave, member failure and heartbeat timeout.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/version.h"
#include "coordinator/core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/core_harness.h"

namespace kolo::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using core_harness::CloseOf;
using core_harness::CoreTest;
using core_harness::kInc;
using core_harness::kJob;
using core_harness::kSecret;
using core_harness::To;

TEST_F(CoreTest, AnnouncementsBecomeOnePlanForEveryMember) {
  Form({"a", "b"});
  EXPECT_TRUE(Announce(1, "grad/x").empty());
  proto::StatusReply st = core_->Status();
  ASSERT_EQ(st.pending_size(), 1);
  EXPECT_EQ(st.pending(0).name(), "grad/x");
  EXPECT_THAT(st.pending(0).ranks(), ::testing::ElementsAre(0));
  Actions ready = Announce(2, "grad/x");
  for (SessionId id : {1, 2}) {
    std::vector<proto::CoordinatorMessage> got = To(ready, id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_plan());
    EXPECT_EQ(got[0].fence().epoch(), 1u);
    EXPECT_EQ(got[0].plan().seq(), 1u);
    ASSERT_EQ(got[0].plan().responses_size(), 1);
    EXPECT_THAT(got[0].plan().responses(0).names(),
                ::testing::ElementsAre("grad/x"));
    EXPECT_EQ(got[0].plan().responses(0).error_code(), 0);
  }
  st = core_->Status();
  EXPECT_EQ(st.pending_size(), 0);
  EXPECT_EQ(st.plans(), 1u);
  // While plan 1 is not Done everywhere, the next ready name is held for
  // the cycle time, and the tick thread is told when to come back.
  EXPECT_TRUE(Announce(1, "grad/y").empty());
  Actions held = Announce(2, "grad/y");
  EXPECT_TRUE(To(held, 1).empty());
  EXPECT_LT(held.wake_at, absl::InfiniteFuture());
  // Done from both: idle again, so the held plan goes out at once.
  proto::WorkerMessage done = Fenced(1);
  done.mutable_done()->set_seq(1);
  EXPECT_TRUE(core_->OnMessage(1, done).empty());
  Actions flushed = core_->OnMessage(2, done);
  std::vector<proto::CoordinatorMessage> got = To(flushed, 2);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].has_plan());
  EXPECT_EQ(got[0].plan().seq(), 2u);
}

TEST_F(CoreTest, AnnounceBeforeMembershipIsAProtocolError) {
  Make(2);
  Join(1, "w0", "a");
  proto::WorkerMessage m = Fenced(0);
  m.mutable_announce()->add_requests()->set_name("early");
  ExpectRefusal(core_->OnMessage(1, m), 1, proto::Refusal::PROTOCOL_ERROR);
}

TEST_F(CoreTest, StallShutdownEndsTheJobWithTheReason) {
  stall_shutdown_ = absl::Seconds(5);
  Form({"a", "b"});
  EXPECT_TRUE(Announce(1, "lonely").empty());
  now_ += absl::Seconds(3);
  // Heartbeats keep both members alive; the stall only warns so far.
  for (SessionId id : {1, 2})
    core_->OnMessage(id, [&] {
      proto::WorkerMessage hb = Fenced(1);
      hb.mutable_heartbeat()->set_seq(1);
      return hb;
    }());
  (void)core_->OnTick(now_);  // warns only
  EXPECT_FALSE(core_->ended());
  now_ += absl::Seconds(3);
  for (SessionId id : {1, 2})
    core_->OnMessage(id, [&] {
      proto::WorkerMessage hb = Fenced(1);
      hb.mutable_heartbeat()->set_seq(2);
      return hb;
    }());
  Actions ended = core_->OnTick(now_);
  ASSERT_TRUE(core_->ended_in_failure());
  EXPECT_THAT(core_->end_reason(), HasSubstr("stall shutdown"));
  EXPECT_THAT(core_->end_reason(), HasSubstr("'lonely'"));
  for (SessionId id : {1, 2}) {
    std::vector<proto::CoordinatorMessage> got = To(ended, id);
    ASSERT_FALSE(got.empty());
    EXPECT_TRUE(got.back().has_job_end());
  }
}

TEST_F(CoreTest, FullHandshakeAccepted) {
  Make(2);
  Actions a = Join(1, "w0", "a");
  EXPECT_TRUE(a.empty());  // waiting: no Membership before the epoch forms
  EXPECT_FALSE(core_->epoch_formed());
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.phase(), "forming");
  EXPECT_EQ(st.incarnation(), kInc);
  ASSERT_EQ(st.workers_size(), 1);
  EXPECT_EQ(st.workers(0).worker_id(), "w0");
  EXPECT_EQ(st.workers(0).state(), proto::MEMBER_STATE_WAITING);
  EXPECT_EQ(st.workers(0).rank(), -1);
  EXPECT_EQ(st.workers(0).pid(), 4242);
  EXPECT_THAT(core_->DescribeMissing(),
              HasSubstr("waiting for 1 of 2 workers; in: w0 (host a)"));
}

TEST_F(CoreTest, WrongSecretRefusedOthersUnaffected) {
  Make(2);
  EXPECT_TRUE(Join(1, "w0", "a").empty());
  Actions bad = Join(2, "w1", "b", "not-the-secret");
  // The details (who, from where) are for the coordinator's log only.
  ExpectGenericRefusal(bad, 2, {"w1", "host b", "w0", "127.0.0.1", "2"});
  EXPECT_TRUE(To(bad, 1).empty());  // nobody else disturbed
  EXPECT_FALSE(core_->epoch_formed());
  // The right worker still comes in and the epoch forms.
  Actions good = Join(3, "w1", "b");
  EXPECT_TRUE(core_->epoch_formed());
  EXPECT_EQ(To(good, 1).size(), 1u);
  EXPECT_EQ(To(good, 3).size(), 1u);
}

TEST_F(CoreTest, ReplayedProofRefused) {
  Make(2);
  // Session 1 authenticates w0; an eavesdropper records Hello and Proof.
  auth::ClientHandshake hs(kSecret, kJob, "w0");
  proto::WorkerMessage hello = Hello("w0", "a", hs.client_nonce());
  Actions a = OpenAndHello(1, hello);
  const proto::Challenge c = To(a, 1).at(0).challenge();
  proto::WorkerMessage proof = Fenced(0);
  proof.mutable_proof()->set_mac(
      *hs.Answer(c.server_nonce(), c.server_proof()));
  EXPECT_TRUE(core_->OnMessage(1, proof).empty());
  // w0 goes away before the epoch forms.
  EXPECT_TRUE(core_->OnClosed(1, "test").empty());
  // The recording is replayed on a new session: fresh server nonce, refused.
  Actions replay = OpenAndHello(2, hello);
  ASSERT_TRUE(To(replay, 2).at(0).has_challenge());
  EXPECT_NE(To(replay, 2).at(0).challenge().server_nonce(), c.server_nonce());
  ExpectRefusal(core_->OnMessage(2, proof), 2, proto::Refusal::AUTH_FAILED);
  // A second proof on one challenge is refused too (session 3).
  Actions a3 = OpenAndHello(3, hello);
  ASSERT_TRUE(To(a3, 3).at(0).has_challenge());
  proto::WorkerMessage garbage = Fenced(0);
  garbage.mutable_proof()->set_mac("x");
  ExpectRefusal(core_->OnMessage(3, garbage), 3, proto::Refusal::AUTH_FAILED);
  EXPECT_TRUE(core_->OnMessage(3, proof).empty());  // session 3 is gone
  EXPECT_FALSE(core_->epoch_formed());
}

TEST_F(CoreTest, VersionMismatchNamesBothVersions) {
  Make(1);
  proto::WorkerMessage hello = Hello("w3", "a", auth::RandomBytes(32));
  hello.mutable_hello()->set_protocol_version(kProtocolVersion + 1);
  Actions a = OpenAndHello(1, hello);
  proto::Refusal r = ExpectRefusal(a, 1, proto::Refusal::VERSION_MISMATCH);
  EXPECT_EQ(
      r.message(),
      absl::StrCat("protocol version mismatch: worker w3 speaks v",
                   kProtocolVersion + 1, ", coordinator speaks v",
                   kProtocolVersion, "; run the same kolo build everywhere"));
  EXPECT_TRUE(absl::IsFailedPrecondition(*CloseOf(a, 1)));
}

TEST_F(CoreTest, WrongJobRefusedOnceProven) {
  Make(1);
  proto::WorkerMessage hello = Hello("w0", "a", "");
  hello.mutable_hello()->set_job_id("other-job");
  // Without the secret: nothing about this coordinator's job.
  ExpectGenericRefusal(JoinWith(1, hello, "not-the-secret"), 1, {"job-7"});
  // With it: told precisely.
  proto::Refusal r =
      ExpectRefusal(JoinWith(2, hello), 2, proto::Refusal::WRONG_JOB);
  EXPECT_THAT(r.message(), HasSubstr("'other-job'"));
  EXPECT_THAT(r.message(), HasSubstr("'job-7'"));
}

TEST_F(CoreTest, WrongWorldSizeRefusedOnceProven) {
  Make(2);
  proto::WorkerMessage hello = Hello("w0", "a", "");
  hello.mutable_hello()->set_expected_size(4);
  ExpectGenericRefusal(JoinWith(1, hello, "not-the-secret"), 1,
                       {"2 workers", "expects"});
  proto::Refusal r =
      ExpectRefusal(JoinWith(2, hello), 2, proto::Refusal::WRONG_JOB);
  EXPECT_THAT(r.message(), HasSubstr("4 workers"));
  EXPECT_THAT(r.message(), HasSubstr("expects 2"));
}

// Issue 16 §3: a conflicting Hello is answered with a Challenge only; a peer
// that then fails the proof learns neither the worker ids nor where they are.
TEST_F(CoreTest, DuplicateWorkerNotRevealedBeforeProof) {
  Make(3);
  EXPECT_TRUE(Join(1, "w0", "vm").empty());
  Actions hello = OpenAndHello(2, Hello("w0", "b", auth::RandomBytes(32)));
  ASSERT_EQ(To(hello, 2).size(), 1u);
  EXPECT_TRUE(To(hello, 2)[0].has_challenge());
  EXPECT_EQ(CloseOf(hello, 2), nullptr);
  proto::WorkerMessage garbage = Fenced(0);
  garbage.mutable_proof()->set_mac("x");
  ExpectGenericRefusal(core_->OnMessage(2, garbage), 2,
                       {"w0", "vm", "127.0.0.1", "already"});
  // No proof at all: the handshake times out, with the same answer.
  EXPECT_TRUE(To(OpenAndHello(3, Hello("w0", "b", auth::RandomBytes(32))), 3)[0]
                  .has_challenge());
  now_ += absl::Seconds(6);
  Actions tick = core_->OnTick(now_);
  ExpectGenericRefusal(tick, 3, {"w0", "vm", "127.0.0.1"});
}

TEST_F(CoreTest, DuplicateWorkerRefusedOnceProven) {
  Make(3);
  EXPECT_TRUE(Join(1, "w0", "a").empty());
  // A legit worker started twice still learns why.
  Actions dup = Join(2, "w0", "b");
  proto::Refusal r = ExpectRefusal(dup, 2, proto::Refusal::DUPLICATE_WORKER);
  EXPECT_THAT(r.message(), HasSubstr("worker id w0 is already connected"));
  EXPECT_THAT(r.message(), HasSubstr("host a"));
  EXPECT_TRUE(absl::IsAlreadyExists(*CloseOf(dup, 2)));
  EXPECT_TRUE(To(dup, 1).empty());
}

TEST_F(CoreTest, DuplicateDetectedAtProof) {
  Make(3);
  // Two sessions for w0 both get a challenge; the second to prove loses.
  auth::ClientHandshake h1(kSecret, kJob, "w0"), h2(kSecret, kJob, "w0");
  Actions a1 = OpenAndHello(1, Hello("w0", "a", h1.client_nonce()));
  Actions a2 = OpenAndHello(2, Hello("w0", "a", h2.client_nonce()));
  auto proof = [&](const Actions& a, SessionId id,
                   const auth::ClientHandshake& h) {
    const proto::Challenge c = To(a, id).at(0).challenge();
    proto::WorkerMessage m = Fenced(0);
    m.mutable_proof()->set_mac(*h.Answer(c.server_nonce(), c.server_proof()));
    return core_->OnMessage(id, m);
  };
  EXPECT_TRUE(proof(a1, 1, h1).empty());
  ExpectRefusal(proof(a2, 2, h2), 2, proto::Refusal::DUPLICATE_WORKER);
}

TEST_F(CoreTest, JobFullRefusedOnceProven) {
  Form({"a"});
  // Without the secret: not even the job's size.
  ExpectGenericRefusal(Join(2, "w9", "a", "not-the-secret"), 2,
                       {"1 workers", "w0", "job-7"});
  Actions a = Join(3, "w9", "a");
  proto::Refusal r = ExpectRefusal(a, 3, proto::Refusal::JOB_FULL);
  EXPECT_THAT(r.message(), HasSubstr("w9"));
  EXPECT_THAT(r.message(), HasSubstr("already has its 1 workers"));
  EXPECT_TRUE(To(a, 1).empty());
}

TEST_F(CoreTest, EpochFormationSendsMemberships) {
  Make(3);
  EXPECT_TRUE(Join(1, "w0", "a").empty());
  EXPECT_TRUE(Join(2, "w1", "b").empty());
  Actions a = Join(3, "w2", "a");
  ASSERT_TRUE(core_->epoch_formed());
  EXPECT_EQ(core_->epoch(), 1u);
  // Host a first seen -> w0, w2 are ranks 0, 1; w1 (host b) rank 2.
  struct Want {
    SessionId id;
    int rank, local_rank, local_size, cross_rank, cross_size;
  };
  for (const Want& w : {Want{1, 0, 0, 2, 0, 2}, Want{3, 1, 1, 2, 0, 1},
                        Want{2, 2, 0, 1, 1, 2}}) {
    std::vector<proto::CoordinatorMessage> got = To(a, w.id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_membership());
    EXPECT_EQ(got[0].fence().incarnation(), kInc);
    EXPECT_EQ(got[0].fence().epoch(), 1u);
    const proto::Membership& m = got[0].membership();
    EXPECT_EQ(m.rank(), w.rank);
    EXPECT_EQ(m.size(), 3);
    EXPECT_EQ(m.local_rank(), w.local_rank);
    EXPECT_EQ(m.local_size(), w.local_size);
    EXPECT_EQ(m.cross_rank(), w.cross_rank);
    EXPECT_EQ(m.cross_size(), w.cross_size);
    EXPECT_EQ(m.job_id(), kJob);
    ASSERT_EQ(m.peers_size(), 3);
    EXPECT_EQ(m.peers(0).worker_id(), "w0");
    EXPECT_EQ(m.peers(1).worker_id(), "w2");
    EXPECT_EQ(m.peers(2).worker_id(), "w1");
  }
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.phase(), "running");
  EXPECT_EQ(st.epoch(), 1u);
  ASSERT_EQ(st.workers_size(), 3);
  EXPECT_EQ(st.workers(2).worker_id(), "w1");
  EXPECT_EQ(st.workers(2).rank(), 2);
  EXPECT_EQ(st.workers(2).state(), proto::MEMBER_STATE_MEMBER);
}

TEST_F(CoreTest, RequestedRanksUsed) {
  Make(2);
  EXPECT_TRUE(Join(1, "w0", "a", kSecret, 1).empty());
  Actions a = Join(2, "w1", "a", kSecret, 0);
  EXPECT_EQ(To(a, 1).at(0).membership().rank(), 1);
  EXPECT_EQ(To(a, 2).at(0).membership().rank(), 0);
}

TEST_F(CoreTest, MessagesBeforeAuthenticationRefused) {
  Make(2);
  EXPECT_TRUE(core_->OnOpen(1, "p1").empty());
  proto::WorkerMessage hb = Fenced(0);
  hb.mutable_heartbeat()->set_seq(1);
  // Refusals before the proof are generic (the details are logged).
  ExpectGenericRefusal(core_->OnMessage(1, hb), 1, {"Heartbeat"});
  // Exchange during the handshake.
  auth::ClientHandshake hs(kSecret, kJob, "w0");
  OpenAndHello(2, Hello("w0", "a", hs.client_nonce()));
  proto::WorkerMessage ex = Fenced(0);
  ex.mutable_exchange()->set_key("k");
  ExpectGenericRefusal(core_->OnMessage(2, ex), 2, {"w0", "Exchange"});
  // Exchange after authentication but before the Membership.
  EXPECT_TRUE(Join(3, "w1", "a").empty());
  ExpectRefusal(core_->OnMessage(3, ex), 3, proto::Refusal::PROTOCOL_ERROR);
  // A second Hello.
  EXPECT_TRUE(Join(4, "w2", "a").empty());
  proto::WorkerMessage again = Hello("w2", "a", auth::RandomBytes(32));
  *again.mutable_fence() = Fenced(0).fence();
  ExpectRefusal(core_->OnMessage(4, again), 4, proto::Refusal::PROTOCOL_ERROR);
  EXPECT_FALSE(core_->ended());
}

TEST_F(CoreTest, WrongIncarnationFencedDuringHandshake) {
  Make(1);
  auth::ClientHandshake hs(kSecret, kJob, "w0");
  Actions a = OpenAndHello(1, Hello("w0", "a", hs.client_nonce()));
  const proto::Challenge c = To(a, 1).at(0).challenge();
  proto::WorkerMessage proof;
  proof.mutable_fence()->set_incarnation(kInc + 1);
  proof.mutable_proof()->set_mac(
      *hs.Answer(c.server_nonce(), c.server_proof()));
  // Not proven yet (the fence is checked first): the generic refusal.
  ExpectGenericRefusal(core_->OnMessage(1, proof), 1, {"w0", "incarnation"});
}

TEST_F(CoreTest, MemberFencedEndsJob) {
  Form({"a", "b"});
  // A heartbeat stamped epoch 0 is one sent before the Membership arrived.
  proto::WorkerMessage hb = Fenced(0);
  hb.mutable_heartbeat()->set_seq(1);
  EXPECT_TRUE(core_->OnMessage(1, hb).empty());
  // Another epoch is refused, and the refused member ends the job.
  proto::WorkerMessage stale = Fenced(7);
  stale.mutable_heartbeat()->set_seq(2);
  Actions a = core_->OnMessage(2, stale);
  proto::Refusal r = ExpectRefusal(a, 2, proto::Refusal::FENCED);
  EXPECT_THAT(r.message(), HasSubstr("epoch 7"));
  std::vector<proto::CoordinatorMessage> to0 = To(a, 1);
  ASSERT_EQ(to0.size(), 1u);
  ASSERT_TRUE(to0[0].has_job_end());
  EXPECT_TRUE(to0[0].job_end().failure());
  EXPECT_THAT(to0[0].job_end().reason(),
              HasSubstr("worker w1 (rank 1, host b) refused"));
  EXPECT_TRUE(core_->ended_in_failure());
}

TEST_F(CoreTest, ExchangeGathersInRankOrder) {
  Form({"a", "b", "c"});
  auto send = [&](SessionId id, const std::string& key,
                  const std::string& value) {
    proto::WorkerMessage m = Fenced(1);
    m.mutable_exchange()->set_key(key);
    m.mutable_exchange()->set_value(value);
    return core_->OnMessage(id, m);
  };
  EXPECT_TRUE(send(3, "k", "v2").empty());
  EXPECT_TRUE(send(1, "k", "v0").empty());
  EXPECT_TRUE(send(1, "other", "x").empty());
  Actions done = send(2, "k", "v1");
  for (SessionId id : {1, 2, 3}) {
    std::vector<proto::CoordinatorMessage> got = To(done, id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_exchange_result());
    EXPECT_EQ(got[0].fence().epoch(), 1u);
    EXPECT_EQ(got[0].exchange_result().key(), "k");
    EXPECT_THAT(got[0].exchange_result().values(),
                ::testing::ElementsAre("v0", "v1", "v2"));
  }
  // The key is free again.
  EXPECT_TRUE(send(1, "k", "again").empty());
  // A second value for a pending key is a protocol error (and ends the job).
  Actions dup = send(1, "other", "y");
  proto::Refusal r = ExpectRefusal(dup, 1, proto::Refusal::PROTOCOL_ERROR);
  EXPECT_THAT(r.message(), HasSubstr("'other'"));
  EXPECT_TRUE(core_->ended_in_failure());
}

TEST_F(CoreTest, ExchangeOfAProcessSetGathersAmongItsMembers) {
  Form({"a", "b", "c"});
  // Set 1 = ranks {0, 2}, registered by a negotiated op over every rank.
  for (SessionId id : {1, 2, 3}) {
    proto::WorkerMessage m = Fenced(1);
    proto::Request* r = m.mutable_announce()->add_requests();
    r->set_name("process_set.add.0");
    r->set_op(proto::PROCESS_SET_ADD);
    r->set_device(-1);
    r->set_prescale(1);
    r->set_postscale(1);
    r->add_splits(0);
    r->add_splits(2);
    core_->OnMessage(id, m);
  }
  auto send = [&](SessionId id, const std::string& key, int32_t set,
                  const std::string& value) {
    proto::WorkerMessage m = Fenced(1);
    m.mutable_exchange()->set_key(key);
    m.mutable_exchange()->set_value(value);
    m.mutable_exchange()->set_process_set(set);
    return core_->OnMessage(id, m);
  };
  EXPECT_TRUE(send(3, "k", 1, "from rank 2").empty());
  Actions done = send(1, "k", 1, "from rank 0");
  for (SessionId id : {1, 3}) {
    std::vector<proto::CoordinatorMessage> got = To(done, id);
    ASSERT_EQ(got.size(), 1u) << id;
    ASSERT_TRUE(got[0].has_exchange_result());
    // In the set's rank order, to its members alone.
    EXPECT_THAT(got[0].exchange_result().values(),
                ::testing::ElementsAre("from rank 0", "from rank 2"));
  }
  EXPECT_TRUE(To(done, 2).empty());
  // Rank 1 is not in set 1, and set 9 does not exist: no values, at once,
  // and the job goes on.
  for (auto [id, set] : {std::pair<SessionId, int32_t>{2, 1}, {1, 9}}) {
    Actions none = send(id, "k2", set, "x");
    std::vector<proto::CoordinatorMessage> got = To(none, id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_exchange_result());
    EXPECT_EQ(got[0].exchange_result().values_size(), 0);
  }
  EXPECT_FALSE(core_->ended());
}

TEST_F(CoreTest, AllLeaveEndsWell) {
  Form({"a", "a"});
  proto::WorkerMessage leave = Fenced(1);
  leave.mutable_leave()->set_reason("done");
  Actions a = core_->OnMessage(1, leave);
  ASSERT_EQ(To(a, 1).size(), 1u);
  EXPECT_TRUE(To(a, 1)[0].has_leave_ack());
  EXPECT_FALSE(core_->ended());
  // A member that left and then disconnects is no failure.
  EXPECT_TRUE(core_->OnClosed(1, "half-closed").empty());
  EXPECT_THAT(core_->DescribeStillIn(), HasSubstr("w1 (rank 1, host a)"));
  Actions b = core_->OnMessage(2, leave);
  EXPECT_TRUE(To(b, 2).at(0).has_leave_ack());
  EXPECT_TRUE(core_->ended());
  EXPECT_FALSE(core_->ended_in_failure());
  EXPECT_EQ(core_->end_reason(), "all 2 workers left");
  EXPECT_EQ(core_->Status().phase(), "ended");
  EXPECT_TRUE(core_->OnClosed(2, "half-closed").empty());
}

// Horovod's init() after shutdown(): the workers of an epoch that every
// member left say Hello again and the job forms again, as a new epoch.
TEST_F(CoreTest, ReinitAfterEveryoneLeftFormsTheNextEpoch) {
  Form({"a", "a"});
  proto::WorkerMessage leave = Fenced(1);
  leave.mutable_leave()->set_reason("shutdown");
  core_->OnMessage(1, leave);
  core_->OnMessage(2, leave);
  core_->OnClosed(1, "half-closed");
  core_->OnClosed(2, "half-closed");
  ASSERT_TRUE(core_->ended());
  EXPECT_FALSE(core_->ended_in_failure());
  // Back in the other order, with new Sessions.
  EXPECT_TRUE(To(Join(4, "w1", "a", kSecret, 1), 4).empty());
  EXPECT_FALSE(core_->ended());
  EXPECT_EQ(core_->Status().phase(), "forming");
  Actions a = Join(3, "w0", "a", kSecret, 0);
  ASSERT_TRUE(core_->epoch_formed());
  EXPECT_EQ(core_->epoch(), 2u);  // epochs never mix
  for (auto [id, rank] : {std::pair<SessionId, int>{3, 0}, {4, 1}}) {
    std::vector<proto::CoordinatorMessage> got = To(a, id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_membership());
    EXPECT_EQ(got[0].fence().epoch(), 2u);
    EXPECT_EQ(got[0].membership().rank(), rank);
  }
  // The re-formed job ends well too.
  proto::WorkerMessage leave2 = Fenced(2);
  leave2.mutable_leave()->set_reason("done");
  core_->OnMessage(3, leave2);
  core_->OnMessage(4, leave2);
  EXPECT_TRUE(core_->ended());
  EXPECT_FALSE(core_->ended_in_failure());
}

TEST_F(CoreTest, ReinitBeforeTheOthersLeftWaitsForThem) {
  Form({"a", "a"});
  proto::WorkerMessage leave = Fenced(1);
  leave.mutable_leave()->set_reason("shutdown");
  core_->OnMessage(1, leave);
  // w0 is back while w1 still runs epoch 1: it waits, nothing is refused.
  Actions back = Join(3, "w0", "a", kSecret, 0);
  EXPECT_TRUE(To(back, 3).empty());
  EXPECT_EQ(CloseOf(back, 3), nullptr);
  EXPECT_EQ(core_->epoch(), 1u);
  EXPECT_FALSE(core_->every_member_left());
  // w1 leaves: the epoch is over, the job does not end, it forms again
  // once w1 is back. Every member left: a host may stop the coordinator.
  core_->OnMessage(2, leave);
  EXPECT_FALSE(core_->ended());
  EXPECT_TRUE(core_->every_member_left());
  Actions a = Join(4, "w1", "a", kSecret, 1);
  ASSERT_TRUE(core_->epoch_formed());
  EXPECT_EQ(core_->epoch(), 2u);
  ASSERT_EQ(To(a, 3).size(), 1u);
  EXPECT_EQ(To(a, 3)[0].membership().rank(), 0);
  EXPECT_EQ(To(a, 4)[0].membership().rank(), 1);
}

TEST_F(CoreTest, NoReinitAfterAFailure) {
  Form({"a", "a"});
  core_->OnClosed(2, "crashed");  // w1 failed: the job ended in failure
  ASSERT_TRUE(core_->ended_in_failure());
  proto::WorkerMessage leave = Fenced(1);
  leave.mutable_leave()->set_reason("shutdown");
  core_->OnMessage(1, leave);
  ExpectRefusal(Join(3, "w0", "a", kSecret, 0), 3, proto::Refusal::JOB_FULL);
}

TEST_F(CoreTest, MemberDisconnectEndsJob) {
  Form({"a", "b", "c"});
  Actions a = core_->OnClosed(2, "its stream ended");
  for (SessionId id : {1, 3}) {
    std::vector<proto::CoordinatorMessage> got = To(a, id);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(got[0].has_job_end());
    EXPECT_TRUE(got[0].job_end().failure());
    EXPECT_THAT(got[0].job_end().reason(),
                HasSubstr("worker w1 (rank 1, host b) disconnected without "
                          "leaving"));
    ASSERT_NE(CloseOf(a, id), nullptr);
    EXPECT_TRUE(absl::IsAborted(*CloseOf(a, id)));
  }
  EXPECT_TRUE(core_->ended_in_failure());
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.phase(), "ended");
  EXPECT_EQ(st.workers(1).state(), proto::MEMBER_STATE_FAILED);
  // Later events for the closed sessions are ignored.
  EXPECT_TRUE(core_->OnClosed(1, "x").empty());
  EXPECT_TRUE(core_->OnTick(now_ + absl::Hours(1)).empty());
}

TEST_F(CoreTest, DisconnectBeforeEpochOnlyRemoves) {
  Make(2);
  EXPECT_TRUE(Join(1, "w0", "a").empty());
  EXPECT_TRUE(core_->OnClosed(1, "gone").empty());
  EXPECT_FALSE(core_->ended());
  EXPECT_TRUE(Join(2, "w0", "a").empty());  // may reconnect
  Join(3, "w1", "a");
  EXPECT_TRUE(core_->epoch_formed());
}

TEST_F(CoreTest, HeartbeatsAndSilenceTimeout) {
  Form({"a", "b"});
  absl::Time t0 = now_;
  Actions a = core_->OnTick(t0);
  ASSERT_EQ(To(a, 1).size(), 1u);
  EXPECT_EQ(To(a, 1)[0].heartbeat().seq(), 1u);
  EXPECT_EQ(To(a, 2)[0].fence().epoch(), 1u);
  // Not due yet.
  EXPECT_TRUE(core_->OnTick(t0 + absl::Milliseconds(100)).empty());
  // Worker 0 speaks at t0+3s, worker 1 never does.
  now_ = t0 + absl::Seconds(3);
  proto::WorkerMessage hb = Fenced(1);
  hb.mutable_heartbeat()->set_seq(1);
  EXPECT_TRUE(core_->OnMessage(1, hb).empty());
  Actions b = core_->OnTick(now_);
  EXPECT_EQ(To(b, 1).at(0).heartbeat().seq(), 2u);
  EXPECT_FALSE(core_->ended());
  EXPECT_GE(core_->Status().workers(1).millis_since_heard(), 3000);
  now_ = t0 + absl::Milliseconds(5500);
  Actions c = core_->OnTick(now_);
  EXPECT_TRUE(core_->ended_in_failure());
  EXPECT_THAT(core_->end_reason(),
              HasSubstr("worker w1 (rank 1, host b) silent for 5.5 s"));
  bool job_end_to_0 = false;
  for (const auto& m : To(c, 1)) job_end_to_0 |= m.has_job_end();
  EXPECT_TRUE(job_end_to_0);
  EXPECT_NE(CloseOf(c, 1), nullptr);
  EXPECT_NE(CloseOf(c, 2), nullptr);
}

TEST_F(CoreTest, StalledHandshakeDropped) {
  Make(2);
  EXPECT_TRUE(core_->OnOpen(1, "p").empty());
  now_ += absl::Seconds(6);
  ExpectGenericRefusal(core_->OnTick(now_), 1, {"did not complete"});
}

TEST_F(CoreTest, ShutdownSendsJobEnd) {
  Make(3);
  EXPECT_TRUE(Join(1, "w0", "a").empty());
  EXPECT_TRUE(core_->OnOpen(2, "p").empty());
  Actions a = core_->Shutdown(true, "kolorun was interrupted");
  for (SessionId id : {1, 2}) {
    ASSERT_EQ(To(a, id).size(), 1u);
    EXPECT_NE(CloseOf(a, id), nullptr);
  }
  EXPECT_EQ(To(a, 1)[0].job_end().reason(), "kolorun was interrupted");
  // Session 2 has not proven the secret: it is not told why.
  EXPECT_EQ(To(a, 2)[0].job_end().reason(),
            "the job ended during the handshake");
  EXPECT_TRUE(core_->ended_in_failure());
  EXPECT_TRUE(core_->Shutdown(true, "again").empty());
  EXPECT_EQ(core_->end_reason(), "kolorun was interrupted");
  // A late worker is told the job ended, once it proved the secret.
  proto::Refusal r =
      ExpectRefusal(Join(3, "w5", "a"), 3, proto::Refusal::JOB_FULL);
  EXPECT_THAT(r.message(), HasSubstr("has ended"));
}

// Events from many threads at once (as gRPC reactions arrive): every worker
// gets exactly one Membership, with distinct ranks.
TEST_F(CoreTest, ConcurrentEventsFromManyThreads) {
  constexpr int kWorkers = 8;
  Make(kWorkers);
  std::vector<std::vector<Actions>> seen(kWorkers);
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      core_->OnTick(now_);
      core_->Status();
      absl::SleepFor(absl::Microseconds(100));
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      seen[i].push_back(
          Join(i + 1, absl::StrCat("w", i), absl::StrCat("h", i % 3)));
    });
  }
  for (auto& t : threads) t.join();
  stop.store(true);
  ticker.join();
  ASSERT_TRUE(core_->epoch_formed());
  int memberships = 0;
  std::vector<bool> rank_seen(kWorkers, false);
  for (const auto& per_thread : seen) {
    for (const Actions& a : per_thread) {
      for (const auto& send : a.sends) {
        if (!send.message.has_membership()) continue;
        ++memberships;
        int r = send.message.membership().rank();
        ASSERT_GE(r, 0);
        ASSERT_LT(r, kWorkers);
        EXPECT_FALSE(rank_seen[r]);
        rank_seen[r] = true;
      }
    }
  }
  EXPECT_EQ(memberships, kWorkers);
}

// Blame (issue 16 point 2): only the coordinator decides who failed.
class BlameTest : public CoreTest {
 protected:
  // Ranks 0..2 (sessions 1..3) of hosts a, b, c.
  void SetUp() override { Form({"a", "b", "c"}); }

  Actions Heartbeat(SessionId id) {
    proto::WorkerMessage m = Fenced(1);
    m.mutable_heartbeat()->set_seq(1);
    return core_->OnMessage(id, m);
  }
  Actions Report(SessionId id, std::vector<int> peers,
                 const std::string& error = "no data from rank X") {
    proto::WorkerMessage m = Fenced(1);
    for (int p : peers) m.mutable_peer_fault()->add_peers(p);
    m.mutable_peer_fault()->set_error(error);
    return core_->OnMessage(id, m);
  }
  // Time passes; sessions in `alive` keep sending heartbeats.
  void Pass(absl::Duration d, const std::vector<SessionId>& alive) {
    for (absl::Duration t; t < d; t += absl::Milliseconds(500)) {
      now_ += absl::Milliseconds(500);
      for (SessionId id : alive) (void)Heartbeat(id);
    }
  }
};

// A survivor's data-plane timeout names a healthy neighbour (a ring): the
// coordinator waits for silence, and blames the silent worker once a
// report names it.
TEST_F(BlameTest, ReportsAreJudgedByHeartbeats) {
  Pass(absl::Seconds(2), {1, 3});  // rank 1 (session 2) stopped
  // Rank 0 blames rank 2, which is alive: no verdict.
  EXPECT_TRUE(Report(1, {2}).sends.empty());
  EXPECT_FALSE(core_->ended());
  // Rank 2 blames rank 1, silent for 2 s: the verdict, at once.
  Actions a = Report(3, {1}, "no data from rank 1 for 3.0 s");
  EXPECT_TRUE(core_->ended_in_failure());
  EXPECT_EQ(core_->failed_worker(), "w1");
  EXPECT_THAT(core_->end_reason(),
              HasSubstr("worker w1 (rank 1, host b) silent for 2.0 s "
                        "(stopped, hung or cut off; rank 2's data plane "
                        "reported: no data from rank 1 for 3.0 s)"));
  for (SessionId id : {1, 3}) {
    std::vector<proto::CoordinatorMessage> got = To(a, id);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].job_end().failed_worker(), "w1");
  }
  EXPECT_EQ(core_->Status().failed_worker(), "w1");
  // The survivors' disconnects that follow are consequences.
  EXPECT_TRUE(core_->OnClosed(1, "gone").empty());
  EXPECT_EQ(core_->failed_worker(), "w1");
  proto::StatusReply st = core_->Status();
  EXPECT_EQ(st.workers(1).state(), proto::MEMBER_STATE_FAILED);
  EXPECT_NE(st.workers(0).state(), proto::MEMBER_STATE_FAILED);
}

// A report about a peer that is not yet silent long enough is judged on
// the next ticks.
TEST_F(BlameTest, ASuspectIsJudgedWhenItsSilenceIsLongEnough) {
  Pass(absl::Milliseconds(500), {1, 3});
  EXPECT_TRUE(Report(1, {1}).sends.empty());
  EXPECT_FALSE(core_->ended());
  Pass(absl::Seconds(1), {1, 3});
  (void)core_->OnTick(now_);
  EXPECT_TRUE(core_->ended_in_failure());
  EXPECT_EQ(core_->failed_worker(), "w1");
}

// A reporter that gives up and disconnects is not blamed: the peer it
// reported is.
TEST_F(BlameTest, AReporterThatDisconnectsIsNotBlamed) {
  EXPECT_TRUE(Report(1, {1}).sends.empty());
  EXPECT_TRUE(core_->OnClosed(1, "the worker exited").sends.empty());
  EXPECT_FALSE(core_->ended());
  Pass(absl::Seconds(2), {3});
  (void)core_->OnTick(now_);
  EXPECT_TRUE(core_->ended_in_failure());
  EXPECT_EQ(core_->failed_worker(), "w1");
}

// Reports that no silence explains (every worker heartbeats: the data
// connections themselves broke) end the job after the heartbeat timeout,
// naming the connections and blaming no worker.
TEST_F(BlameTest, ReportsWithEveryoneAliveNameTheConnections) {
  EXPECT_TRUE(Report(1, {1}, "connection reset").sends.empty());
  Pass(absl::Seconds(4), {1, 2, 3});
  (void)core_->OnTick(now_);
  EXPECT_FALSE(core_->ended());
  Pass(absl::Seconds(1), {1, 2, 3});
  (void)core_->OnTick(now_);
  EXPECT_TRUE(core_->ended_in_failure());
  EXPECT_EQ(core_->failed_worker(), "");
  EXPECT_THAT(core_->end_reason(),
              HasSubstr("the data connections w0 (rank 0) - w1 (rank 1) "
                        "failed while every worker stayed in touch"));
}

// Once the job ended, a later member failure does not change the verdict.
TEST_F(BlameTest, TheFirstVerdictStays) {
  (void)core_->OnClosed(2, "killed");
  EXPECT_EQ(core_->failed_worker(), "w1");
  (void)core_->OnClosed(3, "its stream ended");
  EXPECT_EQ(core_->failed_worker(), "w1");
  EXPECT_THAT(core_->end_reason(), HasSubstr("worker w1 (rank 1, host b)"));
}

// The launcher's own end (SIGTERM) is the verdict, not the disconnects that
// follow.
TEST_F(BlameTest, TheLaunchersEndIsTheVerdict) {
  (void)core_->Shutdown(true,
                        "the job was stopped by the launcher (kolorun "
                        "received SIGTERM)");
  (void)core_->OnClosed(1, "killed");
  EXPECT_EQ(core_->end_reason(),
            "the job was stopped by the launcher (kolorun received SIGTERM)");
  EXPECT_EQ(core_->failed_worker(), "");
}

}  // namespace
}  // namespace kolo::coordinator
