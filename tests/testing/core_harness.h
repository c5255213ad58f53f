// The test harness of CoordinatorCore (coordinator/core.h): a core driven
// directly with events and a fake clock, and helpers that play workers
// (handshake, announcements) and read its actions. Shared by
// coordinator_core_test.cc and coordinator_core_elastic_test.cc.
//
// Thread-safety: a test fixture; one test thread.
#ifndef KOLO_TESTS_TESTING_CORE_HARNESS_H_
#define KOLO_TESTS_TESTING_CORE_HARNESS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/version.h"
#include "coordinator/core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::coordinator::core_harness {

using ::testing::HasSubstr;
using ::testing::Not;

inline constexpr uint64_t kInc = 0xfeedface12345678ull;
inline constexpr char kSecret[] = "the-job-secret";
inline constexpr char kJob[] = "job-7";

// Messages in `a` addressed to `id`.
inline std::vector<proto::CoordinatorMessage> To(const Actions& a,
                                                 SessionId id) {
  std::vector<proto::CoordinatorMessage> out;
  for (const auto& s : a.sends) {
    if (s.session == id) out.push_back(s.message);
  }
  return out;
}

// The close status of `id` in `a`, or nullptr.
inline const absl::Status* CloseOf(const Actions& a, SessionId id) {
  for (const auto& c : a.closes) {
    if (c.session == id) return &c.status;
  }
  return nullptr;
}

class CoreTest : public ::testing::Test {
 protected:
  void Make(int n) {
    CoreOptions o;
    o.expected_size = n;
    o.job_id = kJob;
    o.secret = kSecret;
    o.incarnation = kInc;
    o.heartbeat_interval = absl::Milliseconds(500);
    o.heartbeat_timeout = absl::Seconds(5);
    o.clock = [this] { return now_; };
    o.negotiator.stall_check = absl::Seconds(2);
    o.negotiator.stall_shutdown = stall_shutdown_;
    if (tweak_) tweak_(o);
    core_ = std::make_unique<CoordinatorCore>(std::move(o));
  }

  static proto::WorkerMessage Hello(const std::string& worker,
                                    const std::string& host,
                                    const std::string& nonce,
                                    int requested_rank = -1) {
    proto::WorkerMessage m;
    proto::Hello* h = m.mutable_hello();
    h->set_protocol_version(kProtocolVersion);
    h->set_feature_bits(kFeatureBits);
    h->set_job_id(kJob);
    h->set_worker_id(worker);
    h->set_host_name(host);
    h->set_data_address(absl::StrCat("10.1.1.1:", 5000 + worker.size()));
    h->set_requested_rank(requested_rank);
    h->set_client_nonce(nonce);
    h->set_pid(4242);
    return m;
  }

  static proto::WorkerMessage Fenced(uint64_t epoch) {
    proto::WorkerMessage m;
    m.mutable_fence()->set_incarnation(kInc);
    m.mutable_fence()->set_epoch(epoch);
    return m;
  }

  // Opens `id` and sends a Hello; returns the Hello's actions.
  Actions OpenAndHello(SessionId id, const proto::WorkerMessage& hello) {
    EXPECT_TRUE(core_->OnOpen(id, absl::StrCat("ipv4:127.0.0.1:", id)).empty());
    return core_->OnMessage(id, hello);
  }

  // Full handshake with `secret`; returns the actions of the Proof.
  Actions Join(SessionId id, const std::string& worker, const std::string& host,
               const std::string& secret = kSecret, int requested_rank = -1) {
    return JoinWith(id, Hello(worker, host, "", requested_rank), secret);
  }

  // Full handshake of `hello` (its client nonce is set here) with `secret`;
  // returns the actions of the Proof.
  Actions JoinWith(SessionId id, proto::WorkerMessage hello,
                   const std::string& secret = kSecret) {
    const std::string job = hello.hello().job_id();
    const std::string worker = hello.hello().worker_id();
    auth::ClientHandshake hs(secret, job, worker);
    hello.mutable_hello()->set_client_nonce(hs.client_nonce());
    Actions a = OpenAndHello(id, hello);
    std::vector<proto::CoordinatorMessage> got = To(a, id);
    EXPECT_EQ(got.size(), 1u);
    if (got.size() != 1 || !got[0].has_challenge()) {
      ADD_FAILURE() << "no challenge for " << worker;
      return a;
    }
    EXPECT_EQ(got[0].fence().incarnation(), kInc);
    EXPECT_EQ(got[0].fence().epoch(), 0u);
    const proto::Challenge& c = got[0].challenge();
    // A worker with the wrong secret would refuse the coordinator here; the
    // test answers anyway to exercise the coordinator's check.
    std::string mac = auth::WorkerProof(secret, job, worker, hs.client_nonce(),
                                        c.server_nonce());
    if (secret == kSecret) {
      absl::StatusOr<std::string> answer =
          hs.Answer(c.server_nonce(), c.server_proof());
      EXPECT_TRUE(answer.ok()) << answer.status();
      if (answer.ok()) {
        EXPECT_EQ(*answer, mac);
      }
    }
    proto::WorkerMessage proof = Fenced(0);
    proof.mutable_proof()->set_mac(mac);
    return core_->OnMessage(id, proof);
  }

  // Expects the one generic refusal of an unauthenticated peer to `id`, and
  // that it names nothing in `secrets` (worker ids, hosts, sizes, addresses).
  void ExpectGenericRefusal(const Actions& a, SessionId id,
                            std::vector<std::string> secrets) {
    proto::Refusal r = ExpectRefusal(a, id, proto::Refusal::AUTH_FAILED);
    EXPECT_EQ(r.message(), auth::kUnauthenticatedRefusal);
    const absl::Status* close = CloseOf(a, id);
    ASSERT_NE(close, nullptr);
    EXPECT_TRUE(absl::IsUnauthenticated(*close)) << *close;
    for (const std::string& s : secrets) {
      EXPECT_THAT(r.message(), Not(HasSubstr(s)));
      EXPECT_THAT(std::string(close->message()), Not(HasSubstr(s)));
    }
  }

  // Expects exactly one Refusal to `id` with `reason`, and its close.
  proto::Refusal ExpectRefusal(const Actions& a, SessionId id,
                               proto::Refusal::Reason reason) {
    std::vector<proto::CoordinatorMessage> got = To(a, id);
    EXPECT_EQ(got.size(), 1u);
    EXPECT_NE(CloseOf(a, id), nullptr);
    if (got.empty() || !got[0].has_refusal()) {
      ADD_FAILURE() << "no refusal to session " << id;
      return {};
    }
    EXPECT_EQ(got[0].refusal().reason(), reason) << got[0].refusal().message();
    return got[0].refusal();
  }

  // Forms an epoch of workers w0.. on `hosts`; returns the formation actions.
  Actions Form(const std::vector<std::string>& hosts) {
    Make(static_cast<int>(hosts.size()));
    Actions last;
    for (size_t i = 0; i < hosts.size(); ++i) {
      last = Join(i + 1, absl::StrCat("w", i), hosts[i]);
    }
    EXPECT_TRUE(core_->epoch_formed());
    return last;
  }

  // Session `id` announces an allreduce of `name`, fenced with `epoch`.
  Actions Announce(SessionId id, const std::string& name, uint64_t epoch = 1) {
    proto::WorkerMessage m = Fenced(epoch);
    proto::Request* r = m.mutable_announce()->add_requests();
    r->set_name(name);
    r->set_op(proto::ALLREDUCE);
    r->add_shape(4);
    r->set_device(-1);
    r->set_prescale(1);
    r->set_postscale(1);
    return core_->OnMessage(id, m);
  }

  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  absl::Duration stall_shutdown_ = absl::ZeroDuration();
  // Changes the options Make() builds (elastic settings, say).
  std::function<void(CoreOptions&)> tweak_;
  std::unique_ptr<CoordinatorCore> core_;
};

}  // namespace kolo::coordinator::core_harness

#endif  // KOLO_TESTS_TESTING_CORE_HARNESS_H_
