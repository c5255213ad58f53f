// The control plane under TLS with real processes (issue 38): kolorun --tls
// (its own throwaway CA, removed with the job) and kolorun with the job's
// certificates given as files run 2 workers whose collectives are exact;
// kolorun's "job state:" command (kolo-ctl with --tls-* flags) reads the
// job;
// against a standalone kolo-coordinator with TLS, refused workers (another
// job's certificate, an expired one, no TLS) exit non-zero with the message
// well within their start timeout, and the coordinator logs the refusal; a
// TLS worker against a plaintext coordinator likewise.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/tls.h"
#include "common/tls_generate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/job_run.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo {
namespace {

using ::kolo::testing::Bin;
using ::kolo::testing::Command;
using ::kolo::testing::CtlStatusJson;
using ::kolo::testing::FlagValue;
using ::kolo::testing::JobRun;
using ::kolo::testing::Lines;
using ::kolo::testing::RunJob;
using ::kolo::testing::Scaled;
using ::kolo::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;
using Env = std::map<std::string, std::optional<std::string>>;

// A directory of PEM files for the tests: the job's CA and certificate, an
// expired one, another job's CA and certificate.
class TlsFilesDir {
 public:
  TlsFilesDir() {
    char tmpl[] = "/tmp/kolo-tls-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const absl::Time now = absl::Now();
    auto spec = [](const char* cn, absl::Time from, absl::Time to) {
      tls::CertSpec s;
      s.common_name = cn;
      s.not_before = from;
      s.not_after = to;
      return s;
    };
    const absl::Duration h = absl::Hours(1);
    tls::KeyAndCert ca = *tls::MakeCa(spec("job CA", now - h, now + h));
    tls::KeyAndCert other_ca = *tls::MakeCa(spec("other CA", now - h, now + h));
    Write("ca", ca);
    Write("other-ca", other_ca);
    Write("job", *tls::MakeLeaf(ca, spec(tls::kJobName, now - h, now + h)));
    Write("expired",
          *tls::MakeLeaf(ca, spec(tls::kJobName, now - 3 * h, now - 2 * h)));
    Write("other",
          *tls::MakeLeaf(other_ca, spec(tls::kJobName, now - h, now + h)));
    std::ofstream(Path("secret")) << "tls-multiprocess-secret-0123456789\n";
    ::chmod(Path("secret").c_str(), 0600);
  }
  ~TlsFilesDir() {
    for (const char* name :
         {"ca", "other-ca", "job", "expired", "other", "secret"}) {
      ::unlink(Path(name).c_str());
      ::unlink(Path(absl::StrCat(name, ".key")).c_str());
    }
    ::rmdir(dir_.c_str());
  }
  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }
  // KOLO_TLS_* of certificate `name`, trusting CA `ca`.
  Env TlsEnv(const std::string& name, const std::string& ca = "ca") const {
    return {{"KOLO_TLS_CERT", Path(name)},
            {"KOLO_TLS_KEY", Path(name + ".key")},
            {"KOLO_TLS_CA", Path(ca)}};
  }

 private:
  void Write(const std::string& name, const tls::KeyAndCert& kc) const {
    std::ofstream(Path(name)) << kc.cert_pem;
    std::ofstream(Path(name + ".key")) << kc.key_pem;
    ::chmod(Path(name + ".key").c_str(), 0600);
  }
  std::string dir_;
};

const Env kNoTlsEnv = {{"KOLO_TLS_CERT", std::nullopt},
                       {"KOLO_TLS_KEY", std::nullopt},
                       {"KOLO_TLS_CA", std::nullopt}};

TEST(TlsJob, KolorunTlsRunsExactCollectivesAndRemovesItsFiles) {
  JobRun run = RunJob({Bin("kolorun"), "-np", "2", "--tls", "--log-level",
                       "info", Bin("kolo-mp-worker"), "collectives"},
                      kNoTlsEnv);
  EXPECT_EQ(run.exit.code, 0) << run.output;
  EXPECT_EQ(Lines(run.output, "COLL_OK").size(), 2u) << run.output;
  EXPECT_THAT(run.output, HasSubstr("with TLS"));
  // The throwaway files were in kolo-ctl's command, as its flags (not as
  // KOLO_TLS_* assignments); gone now.
  std::vector<std::string> state = Lines(run.output, "job state:");
  ASSERT_EQ(state.size(), 1u) << run.output;
  EXPECT_THAT(state[0], Not(HasSubstr("KOLO_TLS_")));
  const std::string ca = FlagValue(state[0], "--tls-ca");
  ASSERT_FALSE(ca.empty()) << state[0];
  EXPECT_FALSE(FlagValue(state[0], "--tls-cert").empty()) << state[0];
  EXPECT_FALSE(FlagValue(state[0], "--tls-key").empty()) << state[0];
  EXPECT_NE(::access(ca.c_str(), F_OK), 0) << ca << " is still there";
}

// kolorun's "job state:" line under TLS is a command that works: kolo-ctl
// with the line's --tls-* flags reads the job's state.
TEST(TlsJob, TheJobStateLineReachesTheJobWithKoloCtlsFlags) {
  Subprocess job({Bin("kolorun"), "-np", "1", "--tls", "--log-level", "info",
                  Bin("kolo-mp-worker"), "hold", "10"},
                 kNoTlsEnv);
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.WaitForOutput("INITIALISED", Scaled(absl::Seconds(30))))
      << job.output();
  std::optional<Command> status = CtlStatusJson(job.output());
  ASSERT_TRUE(status.has_value()) << job.output();
  for (const auto& [k, v] : kNoTlsEnv) status->env[k] = v;
  Subprocess ctl(status->argv, status->env);
  ASSERT_TRUE(ctl.Start().ok());
  ASSERT_TRUE(ctl.Wait(Scaled(absl::Seconds(30))).ok()) << ctl.output();
  EXPECT_EQ(ctl.exit_info().code, 0) << ctl.output();
  EXPECT_THAT(ctl.output(), HasSubstr("{")) << ctl.output();
  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(60))).ok()) << job.output();
  EXPECT_EQ(job.exit_info().code, 0) << job.output();
}

TEST(TlsJob, KolorunWithTheJobsFilesRunsExactCollectives) {
  TlsFilesDir files;
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "2", "--tls-cert", files.Path("job"),
              "--tls-key", files.Path("job.key"), "--tls-ca", files.Path("ca"),
              Bin("kolo-mp-worker"), "collectives"},
             kNoTlsEnv);
  EXPECT_EQ(run.exit.code, 0) << run.output;
  EXPECT_EQ(Lines(run.output, "COLL_OK").size(), 2u) << run.output;
  // The user's files stay.
  EXPECT_EQ(::access(files.Path("ca").c_str(), F_OK), 0);
}

TEST(TlsJob, KolorunRefusesAnExpiredCertificateAtStart) {
  TlsFilesDir files;
  JobRun run =
      RunJob({Bin("kolorun"), "-np", "2", "--tls-cert", files.Path("expired"),
              "--tls-key", files.Path("expired.key"), "--tls-ca",
              files.Path("ca"), Bin("kolo-mp-worker"), "collectives"},
             kNoTlsEnv, absl::Seconds(30));
  EXPECT_EQ(run.exit.code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("has expired (valid from"));
}

// A standalone coordinator for one worker, with the job's certificates or
// without; returns its port.
int StartCoordinator(Subprocess& coord) {
  EXPECT_TRUE(coord.Start().ok());
  EXPECT_TRUE(coord.WaitForOutput("(job", Scaled(absl::Seconds(30))))
      << coord.output();
  const std::string& out = coord.output();
  size_t at = out.find("listening on ");
  if (at == std::string::npos) return 0;
  std::string rest = out.substr(at + 13);
  std::string hostport = rest.substr(0, rest.find(' '));
  int port = 0;
  EXPECT_TRUE(
      absl::SimpleAtoi(hostport.substr(hostport.rfind(':') + 1), &port));
  return port;
}

std::vector<std::string> CoordinatorArgv(const TlsFilesDir& f, bool tls) {
  std::vector<std::string> argv = {Bin("kolo-coordinator"),
                                   "--port",
                                   "0",
                                   "--np",
                                   "1",
                                   "--bind",
                                   "127.0.0.1",
                                   "--secret-file",
                                   f.Path("secret"),
                                   "--log-level",
                                   "info"};
  if (tls) {
    for (const char* a :
         {"--tls-cert", "job", "--tls-key", "job.key", "--tls-ca", "ca"}) {
      argv.push_back(a[0] == '-' ? std::string(a) : f.Path(a));
    }
  }
  return argv;
}

// One worker (init only) against the coordinator at `port`: it must be
// refused, exit non-zero and say `said` well within its start timeout.
void ExpectRefused(const TlsFilesDir& f, int port, Env env,
                   const std::string& said) {
  env["KOLO_COORDINATOR"] = absl::StrCat("127.0.0.1:", port);
  env["KOLO_HOST_COORDINATOR"] = "0";
  env["KOLO_SECRET_FILE"] = f.Path("secret");
  env["KOLO_START_TIMEOUT"] = "60";
  env["RANK"] = "0";
  env["WORLD_SIZE"] = "1";
  const absl::Time start = absl::Now();
  Subprocess worker({Bin("kolo-mp-worker"), "init-only"}, env);
  ASSERT_TRUE(worker.Start().ok());
  ASSERT_TRUE(worker.Wait(Scaled(absl::Seconds(30))).ok())
      << "the refused worker hangs: " << worker.output();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(20)));
  EXPECT_NE(worker.exit_info().code, 0) << worker.output();
  EXPECT_THAT(worker.output(), HasSubstr(said));
}

TEST(TlsRefusals, EachIsSaidOnTheWorkerAndLoggedOnTheCoordinator) {
  TlsFilesDir f;
  Subprocess coord(CoordinatorArgv(f, true), kNoTlsEnv);
  const int port = StartCoordinator(coord);
  ASSERT_GT(port, 0);
  // Another job's certificate and CA: the worker distrusts the coordinator.
  ExpectRefused(f, port, f.TlsEnv("other", "other-ca"), "does not trust");
  // Logged naming the worker's address (issue 38).
  EXPECT_TRUE(coord.WaitForOutput("to the gRPC port from ipv4:127.0.0.1:",
                                  Scaled(absl::Seconds(10))))
      << coord.output();
  EXPECT_THAT(coord.output(), HasSubstr("TLS handshake"));
  // An expired certificate: refused by the worker itself, before connecting.
  ExpectRefused(f, port, f.TlsEnv("expired"), "has expired");
  // No TLS at all.
  Env plain = kNoTlsEnv;
  ExpectRefused(f, port, plain, "requires TLS");
  // The coordinator is still there for the job's own worker.
  Env good = f.TlsEnv("job");
  good["KOLO_COORDINATOR"] = absl::StrCat("127.0.0.1:", port);
  good["KOLO_HOST_COORDINATOR"] = "0";
  good["KOLO_SECRET_FILE"] = f.Path("secret");
  good["RANK"] = "0";
  good["WORLD_SIZE"] = "1";
  Subprocess worker({Bin("kolo-mp-worker"), "collectives"}, good);
  ASSERT_TRUE(worker.Start().ok());
  ASSERT_TRUE(worker.Wait(Scaled(absl::Seconds(60))).ok()) << worker.output();
  EXPECT_EQ(worker.exit_info().code, 0) << worker.output();
  EXPECT_THAT(worker.output(), HasSubstr("COLL_OK"));
  ASSERT_TRUE(coord.Wait(Scaled(absl::Seconds(30))).ok()) << coord.output();
}

TEST(TlsRefusals, ATlsWorkerAgainstAPlaintextCoordinator) {
  TlsFilesDir f;
  Subprocess coord(CoordinatorArgv(f, false), kNoTlsEnv);
  const int port = StartCoordinator(coord);
  ASSERT_GT(port, 0);
  ExpectRefused(f, port, f.TlsEnv("job"), "does not speak TLS");
  EXPECT_TRUE(
      coord.WaitForOutput("does not speak gRPC", Scaled(absl::Seconds(10))))
      << coord.output();
  coord.Signal(SIGTERM);
  EXPECT_TRUE(coord.Wait(Scaled(absl::Seconds(30))).ok());
}

}  // namespace
}  // namespace kolo
