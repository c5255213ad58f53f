// common/tls.h and common/tls_generate.h: which files, and every refusal of
// a job's certificates (unreadable, key of another certificate, not yet
// valid, expired, of another CA, without the job's name), with certificates
// made here.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/tls.h"
#include "common/tls_generate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::tls {
namespace {

using ::testing::HasSubstr;

CertSpec Valid(const std::string& cn) {
  CertSpec s;
  s.common_name = cn;
  s.not_before = absl::Now() - absl::Hours(1);
  s.not_after = absl::Now() + absl::Hours(1);
  return s;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<KeyAndCert> ca = MakeCa(Valid("test CA"));
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    absl::StatusOr<KeyAndCert> leaf = MakeLeaf(ca_, Valid(kJobName));
    ASSERT_TRUE(leaf.ok()) << leaf.status();
    leaf_ = *leaf;
  }
  TlsMaterial Material(const KeyAndCert& leaf) const {
    return TlsMaterial{leaf.cert_pem, leaf.key_pem, ca_.cert_pem};
  }
  KeyAndCert ca_, leaf_;
};

TEST_F(TlsTest, AGoodCertificatePasses) {
  EXPECT_TRUE(CheckTlsMaterial(Material(leaf_), absl::Now()).ok());
}

TEST_F(TlsTest, MakeJobMaterialPasses) {
  absl::StatusOr<TlsMaterial> m = MakeJobMaterial(absl::Hours(24));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(CheckTlsMaterial(*m, absl::Now()).ok());
  // ... and not a day and an hour later, naming the dates.
  absl::Status later = CheckTlsMaterial(*m, absl::Now() + absl::Hours(25));
  EXPECT_THAT(later.message(), HasSubstr("has expired (valid from"));
}

TEST_F(TlsTest, AnExpiredCertificateIsRefusedNamingItsDates) {
  CertSpec s = Valid(kJobName);
  s.not_before = absl::FromUnixSeconds(1600000000);  // 2020-09-13
  s.not_after = absl::FromUnixSeconds(1600086400);
  absl::StatusOr<KeyAndCert> expired = MakeLeaf(ca_, s);
  ASSERT_TRUE(expired.ok()) << expired.status();
  absl::Status st = CheckTlsMaterial(Material(*expired), absl::Now());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("has expired"));
  EXPECT_THAT(st.message(), HasSubstr("Sep 13"));
  EXPECT_THAT(st.message(), HasSubstr("2020 GMT"));
}

TEST_F(TlsTest, ACertificateNotYetValidIsRefused) {
  CertSpec s = Valid(kJobName);
  s.not_before = absl::Now() + absl::Hours(2);
  s.not_after = absl::Now() + absl::Hours(3);
  absl::StatusOr<KeyAndCert> future = MakeLeaf(ca_, s);
  ASSERT_TRUE(future.ok()) << future.status();
  absl::Status st = CheckTlsMaterial(Material(*future), absl::Now());
  EXPECT_THAT(st.message(), HasSubstr("is not valid yet"));
  EXPECT_THAT(st.message(), HasSubstr("clock"));
}

TEST_F(TlsTest, ACertificateOfAnotherCaIsRefused) {
  absl::StatusOr<KeyAndCert> other_ca = MakeCa(Valid("another job's CA"));
  ASSERT_TRUE(other_ca.ok());
  absl::StatusOr<KeyAndCert> other = MakeLeaf(*other_ca, Valid(kJobName));
  ASSERT_TRUE(other.ok());
  absl::Status st = CheckTlsMaterial(Material(*other), absl::Now());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("is not signed by the TLS CA"));
  EXPECT_THAT(st.message(), HasSubstr("unable to get local issuer"));
}

TEST_F(TlsTest, AKeyOfAnotherCertificateIsRefused) {
  absl::StatusOr<KeyAndCert> other = MakeLeaf(ca_, Valid(kJobName));
  ASSERT_TRUE(other.ok());
  TlsMaterial m = Material(leaf_);
  m.key_pem = other->key_pem;
  absl::Status st = CheckTlsMaterial(m, absl::Now());
  EXPECT_THAT(st.message(), HasSubstr("is not the key of"));
}

TEST_F(TlsTest, ACertificateWithoutTheJobNameIsRefused) {
  CertSpec s = Valid("somehost");
  s.dns_name = "somehost.example";
  absl::StatusOr<KeyAndCert> other = MakeLeaf(ca_, s);
  ASSERT_TRUE(other.ok());
  absl::Status st = CheckTlsMaterial(Material(*other), absl::Now());
  EXPECT_THAT(st.message(), HasSubstr("subjectAltName=DNS:kolo-job"));
}

TEST_F(TlsTest, GarbageIsRefused) {
  TlsMaterial m = Material(leaf_);
  m.cert_pem = "not a certificate";
  EXPECT_THAT(CheckTlsMaterial(m, absl::Now()).message(),
              HasSubstr("holds no PEM certificate"));
  m = Material(leaf_);
  m.key_pem = "not a key";
  EXPECT_THAT(CheckTlsMaterial(m, absl::Now()).message(),
              HasSubstr("holds no unencrypted PEM private key"));
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/kolo-tls-",
                                  ::getpid(), "-", name);
  std::ofstream(path) << text;
  return path;
}

TEST_F(TlsTest, LoadReadsTheFilesAndNamesThemInErrors) {
  TlsFiles files{WriteTemp("cert.pem", leaf_.cert_pem),
                 WriteTemp("key.pem", leaf_.key_pem),
                 WriteTemp("ca.pem", ca_.cert_pem)};
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(files);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cert_pem, leaf_.cert_pem);

  TlsFiles missing = files;
  missing.key = files.key + ".missing";
  absl::Status st = LoadTlsMaterial(missing).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr(missing.key));
  EXPECT_THAT(st.message(), HasSubstr("not readable"));

  absl::StatusOr<KeyAndCert> other_ca = MakeCa(Valid("other"));
  ASSERT_TRUE(other_ca.ok());
  TlsFiles wrong_ca = files;
  wrong_ca.ca = WriteTemp("other-ca.pem", other_ca->cert_pem);
  st = LoadTlsMaterial(wrong_ca).status();
  EXPECT_THAT(st.message(), HasSubstr(wrong_ca.ca));
  EXPECT_THAT(st.message(), HasSubstr(files.cert));
  for (const std::string& p : {files.cert, files.key, files.ca, wrong_ca.ca}) {
    ::unlink(p.c_str());
  }
}

TEST(TlsFilesTest, AllThreeOrNone) {
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  absl::StatusOr<TlsFiles> none = TlsFilesFromEnvironment(getenv);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled());

  env["KOLO_TLS_CERT"] = "/c";
  absl::StatusOr<TlsFiles> partial = TlsFilesFromEnvironment(getenv);
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(partial.status().message(),
              HasSubstr("KOLO_TLS_KEY and KOLO_TLS_CA are missing"));

  env["KOLO_TLS_KEY"] = "/k";
  env["KOLO_TLS_CA"] = "/a";
  absl::StatusOr<TlsFiles> all = TlsFilesFromEnvironment(getenv);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->enabled());
  EXPECT_EQ(all->ca, "/a");

  absl::StatusOr<TlsFiles> flags =
      MakeTlsFiles("", "/k", "", "--tls-cert", "--tls-key", "--tls-ca");
  EXPECT_THAT(flags.status().message(),
              HasSubstr("--tls-cert and --tls-ca are missing"));
}

}  // namespace
}  // namespace kolo::tls
