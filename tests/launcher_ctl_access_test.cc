// Tests of CtlAccess (launcher/ctl_access.h): the job secret kolo-ctl reads
// is in a private file for the job's lifetime, and gone afterwards; under
// TLS the command names the job's certificates with kolo-ctl's flags.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/ctl_access.h"

namespace kolo::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CtlAccess, SecretIsPrivateWhileTheJobRunsAndRemovedAfter) {
  std::string path, dir;
  {
    CtlAccess access("s3cret-s3cret-s3cret", "kolo-ab12", "127.0.0.1:4242");
    ASSERT_FALSE(access.path().empty()) << access.error();
    path = access.path();
    dir = path.substr(0, path.rfind('/'));
    struct stat st = {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::string line;
    std::getline(std::ifstream(path), line);
    EXPECT_EQ(line, "s3cret-s3cret-s3cret");
    EXPECT_EQ(access.command(),
              "KOLO_SECRET_FILE=" + path +
                  " kolo-ctl status --coordinator 127.0.0.1:4242 --job-id "
                  "kolo-ab12");
    EXPECT_THAT(dir, HasSubstr("kolo-ab12-"));
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  EXPECT_NE(::access(dir.c_str(), F_OK), 0);
}

// Under TLS the command carries the job's certificates as kolo-ctl's flags,
// quoted for a shell where a path needs it.
TEST(CtlAccess, UnderTlsTheCommandCarriesKoloCtlsTlsFlags) {
  tls::TlsFiles files{"/certs/job.pem", "/certs/job key.pem", "/certs/ca.pem"};
  CtlAccess access("s3cret-s3cret-s3cret", "kolo-ab12", "127.0.0.1:4242",
                   &files);
  ASSERT_FALSE(access.path().empty()) << access.error();
  EXPECT_EQ(access.command(),
            "KOLO_SECRET_FILE=" + access.path() +
                " kolo-ctl status --coordinator 127.0.0.1:4242 --job-id "
                "kolo-ab12 --tls-cert /certs/job.pem --tls-key "
                "'/certs/job key.pem' --tls-ca /certs/ca.pem");
  EXPECT_THAT(access.command(), Not(HasSubstr("KOLO_TLS_")));
}

TEST(CtlAccess, UnwritableDirectoryIsReportedNotFatal) {
  ::setenv("TMPDIR", "/nonexistent-kolo-dir", 1);
  CtlAccess access("secret", "kolo-x", "h:1");
  ::unsetenv("TMPDIR");
  EXPECT_TRUE(access.path().empty());
  EXPECT_TRUE(access.command().empty());
  EXPECT_THAT(access.error(), HasSubstr("/nonexistent-kolo-dir"));
}

}  // namespace
}  // namespace kolo::launcher
