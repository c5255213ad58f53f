// The elastic side of the CoordinatorCore harness (core_harness.h): an
// elastic epoch formed in one call, and helpers that play the workers'
// elastic messages (EpochAck, membership checks) and read the elastic
// replies. Shared by coordinator_core_elastic_test.cc and
// coordinator_core_growth_test.cc.
//
// Thread-safety: a test fixture; one test thread.
#ifndef KOLO_TESTS_TESTING_ELASTIC_HARNESS_H_
#define KOLO_TESTS_TESTING_ELASTIC_HARNESS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core.h"
#include "gtest/gtest.h"
#include "tests/testing/core_harness.h"

namespace kolo::coordinator::core_harness {

class ElasticTest : public CoreTest {
 protected:
  // Forms an elastic epoch 1 of workers w0.. (sessions 1..n) on one host
  // each.
  void FormElastic(int n, int min_size = 1, int reset_limit = -1,
                   int max_size = 0) {
    tweak_ = [=](CoreOptions& o) {
      o.elastic = true;
      o.min_size = min_size;
      o.max_size = max_size;
      o.reset_limit = reset_limit;
      o.elastic_timeout = absl::Seconds(20);
    };
    std::vector<std::string> hosts;
    for (int i = 0; i < n; ++i) hosts.push_back(absl::StrCat("h", i));
    Form(hosts);
  }

  Actions Ack(SessionId id, uint64_t epoch) {
    proto::WorkerMessage m = Fenced(epoch);
    m.mutable_epoch_ack()->set_epoch(epoch);
    return core_->OnMessage(id, m);
  }
  Actions Heartbeat(SessionId id, uint64_t epoch) {
    proto::WorkerMessage m = Fenced(epoch);
    m.mutable_heartbeat()->set_seq(1);
    return core_->OnMessage(id, m);
  }

  // Session `id` finished every plan up to `seq` of `epoch`.
  Actions Done(SessionId id, uint64_t seq, uint64_t epoch) {
    proto::WorkerMessage m = Fenced(epoch);
    m.mutable_done()->set_seq(seq);
    return core_->OnMessage(id, m);
  }

  // Session `id` announces the membership check (State::commit), leaving
  // there if `leave`.
  Actions Check(SessionId id, uint64_t epoch, bool leave = false) {
    proto::WorkerMessage m = Fenced(epoch);
    proto::Request* r = m.mutable_announce()->add_requests();
    r->set_name("kolo.membership_check");
    r->set_op(proto::MEMBERSHIP_CHECK);
    r->set_device(-1);
    r->set_root(leave ? 1 : 0);
    return core_->OnMessage(id, m);
  }

  // The first message of kind `body` to `id` in `a` (heartbeats may come
  // with it); an empty message when there is none.
  static proto::CoordinatorMessage Of(
      const Actions& a, SessionId id,
      proto::CoordinatorMessage::BodyCase body) {
    for (const proto::CoordinatorMessage& m : To(a, id)) {
      if (m.body_case() == body) return m;
    }
    return {};
  }

  // The one EpochAborted to `id` in `a`.
  static proto::EpochAborted AbortedTo(const Actions& a, SessionId id) {
    std::vector<proto::CoordinatorMessage> got = To(a, id);
    for (const proto::CoordinatorMessage& m : got) {
      if (m.has_epoch_aborted()) return m.epoch_aborted();
    }
    ADD_FAILURE() << "no EpochAborted to session " << id;
    return {};
  }
  // The one Membership to `id` in `a`, checking its fence.
  static proto::Membership MembershipTo(const Actions& a, SessionId id,
                                        uint64_t epoch) {
    for (const proto::CoordinatorMessage& m : To(a, id)) {
      if (m.has_membership()) {
        EXPECT_EQ(m.fence().epoch(), epoch);
        return m.membership();
      }
    }
    ADD_FAILURE() << "no Membership to session " << id;
    return {};
  }
  static std::vector<std::string> PeerIds(const proto::Membership& m) {
    std::vector<std::string> ids;
    for (const proto::Peer& p : m.peers()) ids.push_back(p.worker_id());
    return ids;
  }
  static bool Unbinds(const Actions& a, SessionId id) {
    for (SessionId s : a.unbind_links) {
      if (s == id) return true;
    }
    return false;
  }
};

}  // namespace kolo::coordinator::core_harness

#endif  // KOLO_TESTS_TESTING_ELASTIC_HARNESS_H_
