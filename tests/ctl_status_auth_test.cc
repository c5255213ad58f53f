// Tests of the Status RPC's authentication (coordinator/status_auth.h): the
// signed request, and each refusal (wrong secret, wrong job, clock skew,
// replay, malformed nonce).
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "coordinator/status_auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr char kSecret[] = "status-auth-test-secret";
constexpr char kJob[] = "job-a";
const absl::Time kNow = absl::FromUnixSeconds(1714564800);

TEST(StatusAuthTest, SignedRequestIsAccepted) {
  proto::StatusRequest r = SignStatusRequest(kSecret, kJob, kNow);
  EXPECT_EQ(r.job_id(), kJob);
  EXPECT_EQ(r.client_nonce().size(), auth::kNonceBytes);
  EXPECT_EQ(r.unix_ms(), absl::ToUnixMillis(kNow));
  EXPECT_EQ(r.mac().size(), auth::kMacBytes);
  EXPECT_TRUE(CheckStatusRequest(r, kJob, kSecret, kNow).ok());
  // Two requests never share a nonce.
  EXPECT_NE(SignStatusRequest(kSecret, kJob, kNow).client_nonce(),
            r.client_nonce());
}

TEST(StatusAuthTest, MacCoversEveryField) {
  proto::StatusRequest r = SignStatusRequest(kSecret, kJob, kNow);
  proto::StatusRequest m = r;
  m.set_unix_ms(r.unix_ms() + 1);
  EXPECT_THAT(CheckStatusRequest(m, kJob, kSecret, kNow).message(),
              HasSubstr("wrong mac"));
  m = r;
  m.mutable_client_nonce()->at(0) ^= 1;
  EXPECT_THAT(CheckStatusRequest(m, kJob, kSecret, kNow).message(),
              HasSubstr("wrong mac"));
  m = r;
  m.set_job_id("job-b");
  EXPECT_THAT(CheckStatusRequest(m, kJob, kSecret, kNow).message(),
              HasSubstr("wrong mac"));
  // A Session proof over the same fields never passes for a Status mac.
  EXPECT_NE(r.mac(), auth::WorkerProof(kSecret, kJob, "", r.client_nonce(),
                                       absl::StrCat(r.unix_ms())));
}

TEST(StatusAuthTest, Refusals) {
  struct Case {
    proto::StatusRequest request;
    std::string why;
  } cases[] = {
      {SignStatusRequest("another-secret-of-20b", kJob, kNow), "wrong mac"},
      {SignStatusRequest(kSecret, "job-b", kNow),
       "for job 'job-b', but this coordinator serves job 'job-a'"},
      {SignStatusRequest(kSecret, kJob, kNow + absl::Minutes(6)),
       "off this coordinator's clock"},
      {SignStatusRequest(kSecret, kJob, kNow - absl::Minutes(6)),
       "off this coordinator's clock"},
      {proto::StatusRequest(), "0-byte nonce"},
  };
  for (const Case& c : cases) {
    absl::Status st = CheckStatusRequest(c.request, kJob, kSecret, kNow);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << c.why;
    EXPECT_THAT(st.message(), HasSubstr(c.why));
    EXPECT_EQ(st.message().find(kSecret), std::string::npos);
  }
  // Within the window either way is fine.
  EXPECT_TRUE(CheckStatusRequest(
                  SignStatusRequest(kSecret, kJob, kNow + absl::Minutes(4)),
                  kJob, kSecret, kNow)
                  .ok());
  EXPECT_TRUE(CheckStatusRequest(
                  SignStatusRequest(kSecret, kJob, kNow - absl::Minutes(4)),
                  kJob, kSecret, kNow)
                  .ok());
}

TEST(StatusVerifierTest, RefusesAReplay) {
  StatusVerifier v(kJob, kSecret);
  proto::StatusRequest r = SignStatusRequest(kSecret, kJob, kNow);
  EXPECT_TRUE(v.Verify(r, kNow).ok());
  absl::Status again = v.Verify(r, kNow + absl::Seconds(1));
  EXPECT_EQ(again.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(again.message(), HasSubstr("replayed"));
  // Later, the replay is refused for its time.
  EXPECT_THAT(v.Verify(r, kNow + absl::Minutes(11)).message(),
              HasSubstr("off this coordinator's clock"));
  EXPECT_TRUE(v.Verify(SignStatusRequest(kSecret, kJob, kNow), kNow).ok());
}

TEST(StatusVerifierTest, RemembersOnlyGoodRequestsAndAtMostItsBound) {
  StatusVerifier v(kJob, kSecret, /*max_nonces=*/2);
  proto::StatusRequest bad =
      SignStatusRequest("another-secret-of-20b", kJob, kNow);
  EXPECT_FALSE(v.Verify(bad, kNow).ok());
  proto::StatusRequest a = SignStatusRequest(kSecret, kJob, kNow);
  proto::StatusRequest b = SignStatusRequest(kSecret, kJob, kNow);
  proto::StatusRequest c = SignStatusRequest(kSecret, kJob, kNow);
  EXPECT_TRUE(v.Verify(a, kNow).ok());
  EXPECT_TRUE(v.Verify(b, kNow).ok());
  EXPECT_TRUE(v.Verify(c, kNow).ok());  // forgets a, the oldest
  EXPECT_FALSE(v.Verify(b, kNow).ok());
  EXPECT_FALSE(v.Verify(c, kNow).ok());
}

}  // namespace
}  // namespace kolo::coordinator
