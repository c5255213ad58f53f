// kolo-ctl end to end: a real coordinator (CoordinatorServer on loopback) and
// the kolo-ctl binary, with the right secret, a wrong one, a wrong job, no
// coordinator, and --watch; plus the Status RPC's refusal of an unsigned
// request over raw gRPC. Against a coordinator with TLS: kolo-ctl with the
// job's certificates in --tls-* (over another job's in KOLO_TLS_*) shows the
// job; without them it is refused, and told to give them.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/auth.h"
#include "common/tls.h"
#include "common/tls_generate.h"
#include "coordinator/server.h"
#include "coordinator/status_auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/kolo.grpc.pb.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo::ctl {
namespace {

using ::kolo::testing::Scaled;
using ::kolo::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "ctl-end-to-end-secret";
constexpr char kJob[] = "ctl-job";

using Env = std::map<std::string, std::optional<std::string>>;

class CtlEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator::ServerOptions o;
    o.listen.bind_host = "127.0.0.1";
    o.listen.port = 0;
    o.core.expected_size = 2;
    o.core.job_id = kJob;
    o.core.secret = kSecret;
    o.listen.tls = server_tls_;
    absl::StatusOr<std::unique_ptr<coordinator::CoordinatorServer>> s =
        coordinator::CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
    secret_file_ =
        ::testing::TempDir() + "ctl_e2e_secret_" + std::to_string(getpid());
    std::ofstream(secret_file_) << kSecret << "\n";
    ASSERT_EQ(chmod(secret_file_.c_str(), 0600), 0);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(false, "test over");
    std::remove(secret_file_.c_str());
  }

  // The environment of a kolo-ctl run: none of the caller's kolo variables,
  // then `extra`.
  static Env Clean(Env extra) {
    Env env = {{"KOLO_SECRET", std::nullopt},
               {"KOLO_SECRET_FILE", std::nullopt},
               {"KOLO_COORDINATOR", std::nullopt},
               {"KOLO_JOB_ID", std::nullopt},
               {"KOLO_STALL_CHECK_TIME_SECONDS", std::nullopt},
               {"KOLO_TLS_CERT", std::nullopt},
               {"KOLO_TLS_KEY", std::nullopt},
               {"KOLO_TLS_CA", std::nullopt}};
    for (auto& [k, v] : extra) env[k] = v;
    return env;
  }

  // Runs kolo-ctl to its end; returns its exit code, output in `out`.
  static int Run(std::vector<std::string> args, Env env, std::string* out) {
    args.insert(args.begin(), testing::BinDir() + "/kolo-ctl");
    Subprocess p(args, Clean(std::move(env)));
    EXPECT_TRUE(p.Start().ok());
    absl::Status st = p.Wait(Scaled(absl::Seconds(30)));
    EXPECT_TRUE(st.ok()) << st;
    *out = p.output();
    EXPECT_TRUE(p.exit_info().exited) << p.exit_info().ToString();
    return p.exit_info().code;
  }

  // The server's certificates; none: plaintext.
  std::optional<tls::TlsMaterial> server_tls_;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::string address_;
  std::string secret_file_;
};

TEST_F(CtlEndToEndTest, RightSecretFromTheEnvironmentShowsTheJob) {
  std::string out;
  EXPECT_EQ(Run({"status"},
                {{"KOLO_COORDINATOR", address_},
                 {"KOLO_JOB_ID", kJob},
                 {"KOLO_SECRET", kSecret}},
                &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("job:         ctl-job\n"));
  EXPECT_THAT(out, HasSubstr("phase:       forming\n"));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("coordinator: ", address_)));
  EXPECT_THAT(out, HasSubstr("members:     0 (2 expected at the start)\n"));
  EXPECT_THAT(out, HasSubstr("pending tensors: none\n"));
}

TEST_F(CtlEndToEndTest, RightSecretFileAndJson) {
  std::string out;
  EXPECT_EQ(Run({"status", "--coordinator", address_, "--job-id", kJob,
                 "--secret-file", secret_file_, "--json"},
                {}, &out),
            0)
      << out;
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["job"]["id"], kJob);
  EXPECT_EQ(j["job"]["expected_size"], 2);
  EXPECT_EQ(j["coordinator"], address_);
}

TEST_F(CtlEndToEndTest, MetricsPrintsThePrometheusPage) {
  std::string out;
  EXPECT_EQ(Run({"metrics", "--coordinator", address_, "--job-id", kJob,
                 "--secret-file", secret_file_},
                {}, &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("# TYPE kolo_job_phase gauge\n"));
  EXPECT_THAT(out, HasSubstr("kolo_job_phase{phase=\"forming\"} 1\n"));
  EXPECT_THAT(out, HasSubstr("kolo_expected_workers 2\n"));
}

TEST_F(CtlEndToEndTest, WrongSecretIsRefused) {
  std::string out;
  EXPECT_EQ(Run({"status", "--coordinator", address_, "--job-id", kJob},
                {{"KOLO_SECRET", "not-the-job-secret-at-all"}}, &out),
            1)
      << out;
  EXPECT_THAT(out, HasSubstr("kolo-ctl: the coordinator at " + address_ +
                             " refused the Status call: authentication "
                             "failed"));
  EXPECT_THAT(out, HasSubstr(std::string(auth::kUnauthenticatedRefusal)));
  EXPECT_THAT(out, Not(HasSubstr("job:")));
}

TEST_F(CtlEndToEndTest, WrongJobIsRefusedAlike) {
  std::string out;
  EXPECT_EQ(Run({"status", "--coordinator", address_, "--job-id", "other"},
                {{"KOLO_SECRET", kSecret}}, &out),
            1)
      << out;
  EXPECT_THAT(out, HasSubstr("authentication failed"));
  EXPECT_THAT(out, HasSubstr("the job id 'other' is right"));
  // The coordinator does not tell which job it serves.
  EXPECT_THAT(out, Not(HasSubstr(kJob)));
}

TEST_F(CtlEndToEndTest, UnreachableCoordinator) {
  // A port nothing listens on: the server's, once it is shut down.
  server_->Shutdown(false, "test over");
  std::string out;
  EXPECT_EQ(Run({"status", "--coordinator", address_},
                {{"KOLO_SECRET", kSecret}}, &out),
            1)
      << out;
  EXPECT_THAT(
      out, HasSubstr("kolo-ctl: cannot reach the coordinator at " + address_));
}

TEST_F(CtlEndToEndTest, NoSecretIsAUsageError) {
  std::string out;
  EXPECT_EQ(Run({"status", "--coordinator", address_}, {}, &out), 2) << out;
  EXPECT_THAT(out, HasSubstr("no job secret"));
}

TEST_F(CtlEndToEndTest, WatchPollsUntilInterrupted) {
  Subprocess p({testing::BinDir() + "/kolo-ctl", "status", "--watch",
                "--interval", "0.1", "--json", "--job-id", kJob},
               Clean({{"KOLO_COORDINATOR", address_},
                      {"KOLO_SECRET_FILE", secret_file_}}));
  ASSERT_TRUE(p.Start().ok());
  // Three polls: three lines.
  absl::Time until = absl::Now() + Scaled(absl::Seconds(20));
  while (std::count(p.output().begin(), p.output().end(), '\n') < 3 &&
         absl::Now() < until) {
    // Reads the output for a while (the needle never comes).
    p.WaitForOutput("<never printed>", absl::Milliseconds(100));
    absl::SleepFor(absl::Milliseconds(10));  // in case its output closed
  }
  p.Signal(SIGINT);
  ASSERT_TRUE(p.Wait(Scaled(absl::Seconds(10))).ok());
  EXPECT_TRUE(p.exit_info().exited) << p.exit_info().ToString();
  EXPECT_EQ(p.exit_info().code, 0) << p.output();
  std::vector<std::string> lines =
      absl::StrSplit(p.output(), '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 3u) << p.output();
  for (const std::string& line : lines) {
    EXPECT_EQ(nlohmann::json::parse(line)["job"]["id"], kJob) << line;
  }
}

TEST_F(CtlEndToEndTest, UnsignedStatusRpcGetsTheGenericRefusal) {
  auto stub = proto::Coordinator::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  for (const proto::StatusRequest& request :
       {proto::StatusRequest(),
        coordinator::SignStatusRequest("a-wrong-secret-of-20b", kJob),
        coordinator::SignStatusRequest(kSecret, "other-job"),
        coordinator::SignStatusRequest(kSecret, kJob,
                                       absl::Now() - absl::Minutes(10))}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(
        absl::ToChronoTime(absl::Now() + Scaled(absl::Seconds(10))));
    proto::StatusReply reply;
    grpc::Status st = stub->Status(&ctx, request, &reply);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(st.error_message(), auth::kUnauthenticatedRefusal);
    EXPECT_EQ(reply.job_id(), "");
  }
  // A replayed good request is refused too.
  proto::StatusRequest good = coordinator::SignStatusRequest(kSecret, kJob);
  for (bool first : {true, false}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(
        absl::ToChronoTime(absl::Now() + Scaled(absl::Seconds(10))));
    proto::StatusReply reply;
    grpc::Status st = stub->Status(&ctx, good, &reply);
    EXPECT_EQ(st.ok(), first) << st.error_message();
    EXPECT_EQ(reply.job_id(), first ? kJob : "");
  }
}

// The coordinator with TLS, the job's certificates in files ("job") and
// another job's ("other").
class CtlTlsEndToEndTest : public CtlEndToEndTest {
 protected:
  void SetUp() override {
    absl::StatusOr<tls::TlsMaterial> job = tls::MakeJobMaterial(absl::Hours(1));
    absl::StatusOr<tls::TlsMaterial> other =
        tls::MakeJobMaterial(absl::Hours(1));
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_TRUE(other.ok()) << other.status();
    Write("job", *job);
    Write("other", *other);
    server_tls_ = *job;
    CtlEndToEndTest::SetUp();
  }
  void TearDown() override {
    CtlEndToEndTest::TearDown();
    for (const std::string& f : written_) std::remove(f.c_str());
  }
  std::string File(const std::string& name, const char* part) const {
    return absl::StrCat(::testing::TempDir(), "ctl_e2e_tls_", getpid(), "_",
                        name, ".", part);
  }
  // The --tls-* flags naming certificates `name`.
  std::vector<std::string> TlsFlags(const std::string& name) const {
    return {"--tls-cert",      File(name, "cert"), "--tls-key",
            File(name, "key"), "--tls-ca",         File(name, "ca")};
  }

 private:
  void Write(const std::string& name, const tls::TlsMaterial& m) {
    for (const auto& [part, pem] :
         {std::pair<const char*, const std::string*>{"cert", &m.cert_pem},
          {"key", &m.key_pem},
          {"ca", &m.ca_pem}}) {
      const std::string path = File(name, part);
      std::ofstream(path) << *pem;
      ASSERT_EQ(chmod(path.c_str(), 0600), 0);
      written_.push_back(path);
    }
  }
  std::vector<std::string> written_;
};

TEST_F(CtlTlsEndToEndTest, TheFlagsCertificatesShowTheJob) {
  std::vector<std::string> args = {"status", "--coordinator", address_,
                                   "--job-id", kJob};
  for (std::string& a : TlsFlags("job")) args.push_back(std::move(a));
  // Another job's certificates in the environment: the flags win.
  std::string out;
  EXPECT_EQ(Run(args,
                {{"KOLO_SECRET", kSecret},
                 {"KOLO_TLS_CERT", File("other", "cert")},
                 {"KOLO_TLS_KEY", File("other", "key")},
                 {"KOLO_TLS_CA", File("other", "ca")}},
                &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("job:         ctl-job\n"));
  EXPECT_THAT(out, HasSubstr("members:     0 (2 expected at the start)\n"));

  args = {"metrics", "--coordinator", address_, "--job-id", kJob};
  for (std::string& a : TlsFlags("job")) args.push_back(std::move(a));
  EXPECT_EQ(Run(args, {{"KOLO_SECRET", kSecret}}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("kolo_expected_workers 2\n"));
}

TEST_F(CtlTlsEndToEndTest, WithoutCertificatesItIsRefusedAndToldWhy) {
  std::string out;
  EXPECT_EQ(Run({"status", "--coordinator", address_, "--job-id", kJob},
                {{"KOLO_SECRET", kSecret}}, &out),
            1)
      << out;
  EXPECT_THAT(
      out, HasSubstr("kolo-ctl: cannot reach the coordinator at " + address_));
  EXPECT_THAT(out, HasSubstr("if the job runs with TLS, give kolo-ctl its "
                             "certificates with --tls-cert, --tls-key and "
                             "--tls-ca"));
  EXPECT_THAT(out, Not(HasSubstr("job:")));
}

TEST_F(CtlTlsEndToEndTest, AnotherJobsCertificatesAreRefused) {
  std::vector<std::string> args = {"status", "--coordinator", address_,
                                   "--job-id", kJob};
  for (std::string& a : TlsFlags("other")) args.push_back(std::move(a));
  std::string out;
  EXPECT_EQ(Run(args, {{"KOLO_SECRET", kSecret}}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("with TLS (--tls-* or KOLO_TLS_*): that the "
                             "coordinator speaks TLS and that the "
                             "certificates are this job's"));
  EXPECT_THAT(out, Not(HasSubstr("job:")));
}

TEST_F(CtlTlsEndToEndTest, APartialSetOfFlagsIsAUsageError) {
  std::string out;
  EXPECT_EQ(Run({"status", "--coordinator", address_, "--tls-cert",
                 File("job", "cert")},
                {{"KOLO_SECRET", kSecret}}, &out),
            2)
      << out;
  EXPECT_THAT(out, HasSubstr("kolo-ctl: TLS needs a certificate, its key and "
                             "the job's CA together: --tls-key and --tls-ca "
                             "are missing"));
}

TEST_F(CtlTlsEndToEndTest, AnUnreadableFileIsAUsageErrorNamingIt) {
  std::vector<std::string> args = {"status", "--coordinator", address_};
  for (std::string& a : TlsFlags("job")) args.push_back(std::move(a));
  args[4] = File("missing", "cert");  // --tls-cert's value
  std::string out;
  EXPECT_EQ(Run(args, {{"KOLO_SECRET", kSecret}}, &out), 2) << out;
  EXPECT_THAT(out,
              HasSubstr("kolo-ctl: cannot read the TLS certificate file '" +
                        File("missing", "cert") + "'"));
}

}  // namespace
}  // namespace kolo::ctl
