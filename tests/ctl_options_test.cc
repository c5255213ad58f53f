// Tests of kolo-ctl's command line (ctl/options.h) and where it finds the
// job secret (ctl/secret.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/auth.h"
#include "ctl/options.h"
#include "ctl/secret.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::ctl {
namespace {

using ::testing::HasSubstr;
using Kind = ParseOutcome::Kind;
using Env = std::map<std::string, std::string>;

ParseOutcome Parse(std::vector<std::string> args, const Env& env = {}) {
  std::vector<const char*> argv = {"kolo-ctl"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseCtlArgs(static_cast<int>(argv.size()), argv.data(), InMap(env));
}

TEST(CtlOptionsTest, DefaultsFromTheEnvironment) {
  ParseOutcome p = Parse({"status"}, {{"KOLO_COORDINATOR", "10.0.0.1:29400"},
                                      {"KOLO_JOB_ID", "train"}});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.options.coordinator, "10.0.0.1:29400");
  EXPECT_EQ(p.options.job_id, "train");
  EXPECT_FALSE(p.options.watch);
  EXPECT_FALSE(p.options.json);
  EXPECT_EQ(p.options.interval, absl::Seconds(1));
  EXPECT_EQ(p.options.knobs.stall_check, absl::Seconds(60));
  EXPECT_EQ(p.options.secret_file, "");
}

// TLS: the three --tls-* flags on either command, over KOLO_TLS_* (not
// mixed with them); a partial set of either is refused naming what is
// missing.
TEST(CtlOptionsTest, TlsFilesFromFlagsElseTheEnvironment) {
  const Env env = {{"KOLO_COORDINATOR", "10.0.0.1:29400"}};
  ParseOutcome p = Parse({"status"}, env);
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_FALSE(p.options.tls_files.enabled());

  Env with_tls = env;
  with_tls["KOLO_TLS_CERT"] = "env-c";
  with_tls["KOLO_TLS_KEY"] = "env-k";
  with_tls["KOLO_TLS_CA"] = "env-a";
  p = Parse({"status"}, with_tls);
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.options.tls_files.cert, "env-c");
  EXPECT_EQ(p.options.tls_files.key, "env-k");
  EXPECT_EQ(p.options.tls_files.ca, "env-a");

  for (const char* command : {"status", "metrics"}) {
    p = Parse({command, "--tls-cert", "c", "--tls-key=k", "--tls-ca", "a"},
              with_tls);
    ASSERT_EQ(p.kind, Kind::kRun) << command << ": " << p.text;
    EXPECT_EQ(p.options.tls_files.cert, "c") << command;
    EXPECT_EQ(p.options.tls_files.key, "k") << command;
    EXPECT_EQ(p.options.tls_files.ca, "a") << command;
  }
}

TEST(CtlOptionsTest, APartialTlsSetIsRefused) {
  const Env env = {{"KOLO_COORDINATOR", "10.0.0.1:29400"}};
  // One flag, even with all three variables set: flags are not mixed with
  // them.
  Env with_tls = env;
  with_tls["KOLO_TLS_CERT"] = "env-c";
  with_tls["KOLO_TLS_KEY"] = "env-k";
  with_tls["KOLO_TLS_CA"] = "env-a";
  ParseOutcome p = Parse({"status", "--tls-cert", "c"}, with_tls);
  ASSERT_EQ(p.kind, Kind::kError);
  EXPECT_EQ(p.text,
            "kolo-ctl: TLS needs a certificate, its key and the job's CA "
            "together: --tls-key and --tls-ca are missing (--tls-cert, "
            "--tls-key and --tls-ca are given all three or not at all)");
  p = Parse({"metrics", "--tls-key", "k", "--tls-ca", "a"}, env);
  ASSERT_EQ(p.kind, Kind::kError);
  EXPECT_THAT(p.text, HasSubstr("--tls-cert is missing"));
  Env partial = env;
  partial["KOLO_TLS_CA"] = "env-a";
  p = Parse({"status"}, partial);
  ASSERT_EQ(p.kind, Kind::kError);
  EXPECT_THAT(p.text, HasSubstr("KOLO_TLS_CERT and KOLO_TLS_KEY are missing"));
}

TEST(CtlOptionsTest, FlagsWinOverTheEnvironment) {
  ParseOutcome p =
      Parse({"status", "--coordinator", "[::1]:5000", "--job-id=other",
             "--watch", "--interval", "0.5", "--json", "--secret-file", "/s",
             "--stall-check-time-seconds", "0"},
            {{"KOLO_COORDINATOR", "10.0.0.1:29400"},
             {"KOLO_JOB_ID", "train"},
             {"KOLO_STALL_CHECK_TIME_SECONDS", "30"}});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.options.coordinator, "[::1]:5000");
  EXPECT_EQ(p.options.job_id, "other");
  EXPECT_TRUE(p.options.watch);
  EXPECT_EQ(p.options.interval, absl::Milliseconds(500));
  EXPECT_TRUE(p.options.json);
  EXPECT_EQ(p.options.secret_file, "/s");
  EXPECT_EQ(p.options.knobs.stall_check, absl::ZeroDuration());
}

TEST(CtlOptionsTest, JobIdDefaultsToKoloCoordinatorsDefault) {
  ParseOutcome p = Parse({"status", "--coordinator", "h:1"});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.options.job_id, "default");
}

TEST(CtlOptionsTest, StallThresholdFromTheCoordinatorsVariables) {
  ParseOutcome p = Parse({"status", "--coordinator", "h:1"},
                         {{"HOROVOD_STALL_CHECK_TIME_SECONDS", "15"}});
  ASSERT_EQ(p.kind, Kind::kRun) << p.text;
  EXPECT_EQ(p.options.knobs.stall_check, absl::Seconds(15));
  p = Parse({"status", "--coordinator", "h:1"},
            {{"KOLO_STALL_CHECK_TIME_SECONDS", "soon"}});
  ASSERT_EQ(p.kind, Kind::kError);
  EXPECT_THAT(p.text, HasSubstr("KOLO_STALL_CHECK_TIME_SECONDS='soon'"));
}

TEST(CtlOptionsTest, Help) {
  ParseOutcome p = Parse({"--help"});
  ASSERT_EQ(p.kind, Kind::kHelp);
  EXPECT_THAT(p.text, HasSubstr("status"));
  EXPECT_THAT(p.text, HasSubstr("KOLO_COORDINATOR"));
  p = Parse({"status", "--help"});
  ASSERT_EQ(p.kind, Kind::kHelp);
  EXPECT_THAT(p.text, HasSubstr("--coordinator"));
  EXPECT_THAT(p.text, HasSubstr("--watch"));
  EXPECT_THAT(p.text, HasSubstr("--secret-file"));
  EXPECT_THAT(p.text, HasSubstr("default: $KOLO_STALL_CHECK_TIME_SECONDS"));
}

TEST(CtlOptionsTest, Errors) {
  const Env env = {{"KOLO_COORDINATOR", "h:1"}};
  struct Case {
    std::vector<std::string> args;
    Env env;
    std::string message;
  } cases[] = {
      {{}, env, "subcommand"},
      {{"stats"}, env, "stats"},
      {{"status", "--bogus"}, env, "--bogus"},
      {{"status"}, {}, "give --coordinator HOST:PORT or set KOLO_COORDINATOR"},
      {{"status", "--coordinator", "localhost"}, {}, "is not HOST:PORT"},
      {{"status", "--coordinator", "h:99999"}, {}, "is not HOST:PORT"},
      {{"status", "--interval", "2"}, env, "--watch"},
      {{"status", "--watch", "--interval", "0"},
       env,
       "--interval must be a number of seconds from 0.1 to 86400, got '0'"},
      {{"status", "--watch", "--interval", "x"}, env, "got 'x'"},
      {{"status", "--stall-check-time-seconds", "-1"},
       env,
       "--stall-check-time-seconds: expected"},
      {{"status", "--secret", "s3cr3t"}, env, "no secret on the command line"},
      {{"status", "--secret=s3cr3t"}, env, "no secret on the command line"},
      {{"status", "--job-id", ""}, env, "--job-id must not be empty"},
  };
  for (const Case& c : cases) {
    ParseOutcome p = Parse(c.args, c.env);
    EXPECT_EQ(p.kind, Kind::kError) << testing::PrintToString(c.args);
    EXPECT_THAT(p.text, HasSubstr(c.message)) << testing::PrintToString(c.args);
    EXPECT_EQ(p.text.find("s3cr3t"), std::string::npos) << p.text;
  }
}

// A private secret file, removed at the end of the test.
class SecretFile {
 public:
  explicit SecretFile(const std::string& content) {
    path_ = ::testing::TempDir() + "ctl_secret_" + std::to_string(getpid()) +
            "_" + std::to_string(counter_++);
    std::ofstream(path_) << content << "\n";
    chmod(path_.c_str(), 0600);
  }
  ~SecretFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

TEST(CtlSecretTest, FileFlagThenVariableThenFileVariable) {
  const std::string a(20, 'a'), b(20, 'b'), c(20, 'c');
  SecretFile fa(a), fc(c);
  CtlOptions o;
  o.secret_file = fa.path();
  Env env = {{"KOLO_SECRET", b}, {"KOLO_SECRET_FILE", fc.path()}};
  EXPECT_EQ(LoadSecret(o, InMap(env)).value(), a);
  o.secret_file = "";
  EXPECT_EQ(LoadSecret(o, InMap(env)).value(), b);
  env.erase("KOLO_SECRET");
  EXPECT_EQ(LoadSecret(o, InMap(env)).value(), c);
}

TEST(CtlSecretTest, Errors) {
  CtlOptions o;
  Env none;
  absl::StatusOr<std::string> s = LoadSecret(o, InMap(none));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("no job secret"));
  EXPECT_THAT(s.status().message(), HasSubstr("--secret-file"));
  Env weak = {{"KOLO_SECRET", "short"}};
  s = LoadSecret(o, InMap(weak));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("KOLO_SECRET"));
  EXPECT_EQ(s.status().message().find("short"), std::string::npos);
  o.secret_file = "/nonexistent/kolo-secret";
  s = LoadSecret(o, InMap(none));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("/nonexistent/kolo-secret"));
}

}  // namespace
}  // namespace kolo::ctl
