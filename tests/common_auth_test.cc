// HMAC challenge-response: accept, refuse a wrong secret, refuse replays,
// refuse role confusion, refuse an impostor coordinator.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/auth.h"
#include "gtest/gtest.h"

namespace kolo::auth {
namespace {

TEST(Auth, HandshakeAccepts) {
  ClientHandshake client("s3cret", "job", "w0");
  ServerHandshake server("s3cret", "job", "w0", client.client_nonce());
  absl::StatusOr<std::string> mac =
      client.Answer(server.server_nonce(), server.server_proof());
  ASSERT_TRUE(mac.ok()) << mac.status();
  EXPECT_EQ(mac->size(), kMacBytes);
  EXPECT_TRUE(server.Verify(*mac).ok());
}

TEST(Auth, WrongSecretRefusedByCoordinator) {
  ClientHandshake client("wrong", "job", "w0");
  ServerHandshake server("s3cret", "job", "w0", client.client_nonce());
  // The client checks the coordinator's proof first: it fails, as the secrets
  // differ.
  absl::StatusOr<std::string> answer =
      client.Answer(server.server_nonce(), server.server_proof());
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(answer.status().message().find("different secrets"),
            std::string::npos);
  // A worker that answers anyway (a forged mac) is refused by the coordinator.
  std::string forged = WorkerProof("wrong", "job", "w0", client.client_nonce(),
                                   server.server_nonce());
  absl::Status st = server.Verify(forged);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(st.message().find("wrong job secret"), std::string::npos);
}

TEST(Auth, ReplayedProofRefused) {
  ClientHandshake client("s3cret", "job", "w0");
  ServerHandshake first("s3cret", "job", "w0", client.client_nonce());
  std::string mac = *client.Answer(first.server_nonce(), first.server_proof());
  ASSERT_TRUE(first.Verify(mac).ok());
  // Same proof again on the same challenge.
  EXPECT_EQ(first.Verify(mac).code(), absl::StatusCode::kFailedPrecondition);
  // The recorded hello + proof replayed on a new stream: a fresh server nonce.
  ServerHandshake second("s3cret", "job", "w0", client.client_nonce());
  EXPECT_NE(first.server_nonce(), second.server_nonce());
  EXPECT_EQ(second.Verify(mac).code(), absl::StatusCode::kUnauthenticated);
}

TEST(Auth, ProofBoundToJobAndWorker) {
  ClientHandshake client("s3cret", "job", "w0");
  ServerHandshake other_worker("s3cret", "job", "w1", client.client_nonce());
  std::string mac = WorkerProof("s3cret", "job", "w0", client.client_nonce(),
                                other_worker.server_nonce());
  EXPECT_FALSE(other_worker.Verify(mac).ok());
  ServerHandshake other_job("s3cret", "job2", "w0", client.client_nonce());
  mac = WorkerProof("s3cret", "job", "w0", client.client_nonce(),
                    other_job.server_nonce());
  EXPECT_FALSE(other_job.Verify(mac).ok());
}

TEST(Auth, CoordinatorProofIsNotAWorkerProof) {
  // Reflecting the coordinator's own proof back must not authenticate.
  ClientHandshake client("s3cret", "job", "w0");
  ServerHandshake server("s3cret", "job", "w0", client.client_nonce());
  EXPECT_FALSE(server.Verify(server.server_proof()).ok());
}

TEST(Auth, ImpostorCoordinatorRefused) {
  ClientHandshake client("s3cret", "job", "w0");
  ServerHandshake impostor("guess", "job", "w0", client.client_nonce());
  EXPECT_FALSE(
      client.Answer(impostor.server_nonce(), impostor.server_proof()).ok());
  EXPECT_FALSE(client.Answer("short", impostor.server_proof()).ok());
}

TEST(Auth, BadClientNonceRefused) {
  ServerHandshake server("s3cret", "job", "w0", "too-short");
  std::string mac =
      WorkerProof("s3cret", "job", "w0", "too-short", server.server_nonce());
  EXPECT_EQ(server.Verify(mac).code(), absl::StatusCode::kUnauthenticated);
}

TEST(Auth, HmacFieldsAreLengthPrefixed) {
  // ("ab","c") and ("a","bc") must not collide.
  EXPECT_NE(Hmac("k", {"ab", "c"}), Hmac("k", {"a", "bc"}));
  EXPECT_EQ(Hmac("k", {"ab", "c"}), Hmac("k", {"ab", "c"}));
  EXPECT_EQ(RandomHex(16).size(), 32u);
  EXPECT_NE(RandomBytes(32), RandomBytes(32));
}

TEST(Auth, LoadSecretFile) {
  std::string path =
      ::testing::TempDir() + "/kolo_secret_" + std::to_string(getpid());
  {
    std::ofstream out(path);
    out << "abcdef0123456789\n";
  }
  absl::StatusOr<std::string> s = LoadSecretFile(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "abcdef0123456789");
  {
    std::ofstream out(path);
    out << "\n";
  }
  s = LoadSecretFile(path);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("empty"), std::string::npos);
  std::remove(path.c_str());
  s = LoadSecretFile(path);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find(path), std::string::npos);
}

// Issue 16 §3: a secret too short to resist guessing is refused, saying how
// long it must be and how to make one.
TEST(Auth, ShortSecretFileRefused) {
  std::string path =
      ::testing::TempDir() + "/kolo_short_secret_" + std::to_string(getpid());
  {
    std::ofstream out(path);
    out << "x\n";
  }
  absl::StatusOr<std::string> s = LoadSecretFile(path);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("only 1 bytes long"), std::string::npos)
      << s.status();
  EXPECT_NE(s.status().message().find("at least 16 bytes"), std::string::npos);
  EXPECT_NE(s.status().message().find("head -c 32 /dev/urandom | base64"),
            std::string::npos);
  EXPECT_NE(s.status().message().find(path), std::string::npos);
  std::remove(path.c_str());
}

TEST(Auth, CheckSecretStrength) {
  EXPECT_TRUE(CheckSecretStrength(std::string(kMinSecretBytes, 'a'), "t").ok());
  // kolorun's secret: 32 random bytes as hex.
  EXPECT_TRUE(CheckSecretStrength(RandomHex(32), "t").ok());
  absl::Status st =
      CheckSecretStrength(std::string(kMinSecretBytes - 1, 'a'), "KOLO_SECRET");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("KOLO_SECRET"), std::string::npos);
  EXPECT_NE(CheckSecretStrength("", "t").message().find("empty"),
            std::string::npos);
}

// Issue 16 §3: a secret file readable by others is accepted with a warning,
// like ssh's for keys.
TEST(Auth, SecretFileModeWarning) {
  std::string path =
      ::testing::TempDir() + "/kolo_mode_secret_" + std::to_string(getpid());
  {
    std::ofstream out(path);
    out << RandomHex(16) << "\n";
  }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  std::optional<std::string> warning = SecretFileModeWarning(path);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("0644"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("chmod 600"), std::string::npos);
  EXPECT_TRUE(LoadSecretFile(path).ok());  // warned, not refused
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_FALSE(SecretFileModeWarning(path).has_value());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo::auth
