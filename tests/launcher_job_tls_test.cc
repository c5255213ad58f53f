// JobTls (launcher/job_tls.h): kolorun's TLS for a job. --tls alone makes a
// throwaway CA and certificate, 0600 files in a 0700 directory that go away
// with the JobTls, and hands their paths to workers; given files are checked
// and passed on as they are; remote workers need given files; a partial
// set is refused.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include "common/tls_generate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/job_tls.h"

namespace kolo::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;

int Mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 0777);
}

TEST(JobTlsTest, WithoutTlsThereIsNone) {
  absl::StatusOr<std::unique_ptr<JobTls>> tls =
      JobTls::Prepare(LaunchOptions{}, {}, true);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(*tls, nullptr);
}

TEST(JobTlsTest, ThrowawayFilesArePrivateAndRemovedWithTheJob) {
  LaunchOptions o;
  o.tls = true;
  std::string dir;
  tls::TlsFiles files;
  {
    absl::StatusOr<std::unique_ptr<JobTls>> tls = JobTls::Prepare(o, {}, true);
    ASSERT_TRUE(tls.ok()) << tls.status();
    ASSERT_NE(*tls, nullptr);
    EXPECT_TRUE((*tls)->throwaway());
    files = (*tls)->files();
    dir = files.ca.substr(0, files.ca.rfind('/'));
    EXPECT_EQ(Mode(dir), 0700);
    for (const std::string& f : {files.cert, files.key, files.ca}) {
      EXPECT_EQ(Mode(f), 0600) << f;
    }
    EXPECT_TRUE(tls::LoadTlsMaterial(files).ok());
    EXPECT_THAT((*tls)->WorkerEnv(),
                ::testing::ElementsAre(Pair("KOLO_TLS_CERT", files.cert),
                                       Pair("KOLO_TLS_KEY", files.key),
                                       Pair("KOLO_TLS_CA", files.ca)));
  }
  EXPECT_EQ(Mode(files.key), -1);
  EXPECT_EQ(Mode(dir), -1);
}

TEST(JobTlsTest, RemoteWorkersNeedGivenFiles) {
  LaunchOptions o;
  o.tls = true;
  absl::StatusOr<std::unique_ptr<JobTls>> tls = JobTls::Prepare(o, {}, false);
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tls.status().message(), HasSubstr("--tls-cert, --tls-key"));
}

TEST(JobTlsTest, GivenFilesAreCheckedAndPassedOn) {
  absl::StatusOr<tls::TlsMaterial> m = tls::MakeJobMaterial(absl::Hours(1));
  ASSERT_TRUE(m.ok());
  const std::string base =
      testing::TempDir() + "/job-tls-" + std::to_string(::getpid());
  std::ofstream(base + "-cert.pem") << m->cert_pem;
  std::ofstream(base + "-key.pem") << m->key_pem;
  std::ofstream(base + "-ca.pem") << m->ca_pem;
  // From kolorun's environment, no --tls needed; remote workers too.
  std::map<std::string, std::string> env = {
      {"KOLO_TLS_CERT", base + "-cert.pem"},
      {"KOLO_TLS_KEY", base + "-key.pem"},
      {"KOLO_TLS_CA", base + "-ca.pem"}};
  absl::StatusOr<std::unique_ptr<JobTls>> tls =
      JobTls::Prepare(LaunchOptions{}, env, false);
  ASSERT_TRUE(tls.ok()) << tls.status();
  ASSERT_NE(*tls, nullptr);
  EXPECT_FALSE((*tls)->throwaway());
  EXPECT_EQ((*tls)->files().ca, base + "-ca.pem");
  tls->reset();
  EXPECT_EQ(Mode(base + "-ca.pem") >= 0, true);  // the user's files stay
  // Partial: refused, naming what is missing.
  env.erase("KOLO_TLS_KEY");
  tls = JobTls::Prepare(LaunchOptions{}, env, true);
  EXPECT_THAT(tls.status().message(), HasSubstr("KOLO_TLS_KEY is missing"));
  for (const char* f : {"-cert.pem", "-key.pem", "-ca.pem"}) {
    ::unlink((base + f).c_str());
  }
}

}  // namespace
}  // namespace kolo::launcher
