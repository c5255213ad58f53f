#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "common/log.h"

namespace kolo::auth {
namespace {
constexpr absl::string_view kCoordinatorRole = "kolo/session/coordinator/v1";
constexpr absl::string_view kWorkerRole = "kolo/session/worker/v1";
}  // namespace

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  KOLO_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()),
                        static_cast<int>(n)) == 1)
      << "OpenSSL RAND_bytes failed: no entropy";
  return out;
}

std::string RandomHex(size_t n) {
  return absl::BytesToHexString(RandomBytes(n));
}

std::string Hmac(absl::string_view key,
                 std::initializer_list<absl::string_view> fields) {
  std::string msg;
  for (absl::string_view f : fields) {
    uint64_t len = f.size();
    for (int i = 7; i >= 0; --i)
      msg.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    msg.append(f.data(), f.size());
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  KOLO_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(msg.data()),
                  msg.size(), out, &out_len) != nullptr);
  return std::string(reinterpret_cast<char*>(out), out_len);
}

bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string CoordinatorProof(absl::string_view secret, absl::string_view job_id,
                             absl::string_view worker_id,
                             absl::string_view client_nonce,
                             absl::string_view server_nonce) {
  return Hmac(secret, {kCoordinatorRole, job_id, worker_id, client_nonce,
                       server_nonce});
}

std::string WorkerProof(absl::string_view secret, absl::string_view job_id,
                        absl::string_view worker_id,
                        absl::string_view client_nonce,
                        absl::string_view server_nonce) {
  return Hmac(secret,
              {kWorkerRole, job_id, worker_id, client_nonce, server_nonce});
}

ServerHandshake::ServerHandshake(std::string secret, std::string job_id,
                                 std::string worker_id,
                                 std::string client_nonce)
    : secret_(std::move(secret)),
      job_id_(std::move(job_id)),
      worker_id_(std::move(worker_id)),
      client_nonce_(std::move(client_nonce)),
      server_nonce_(RandomBytes(kNonceBytes)) {}

std::string ServerHandshake::server_proof() const {
  return CoordinatorProof(secret_, job_id_, worker_id_, client_nonce_,
                          server_nonce_);
}

absl::Status ServerHandshake::Verify(absl::string_view mac) {
  if (used_) {
    return absl::FailedPreconditionError(
        "a proof was already presented for this challenge (replay refused)");
  }
  used_ = true;
  if (client_nonce_.size() != kNonceBytes) {
    return absl::UnauthenticatedError(
        absl::StrCat("client nonce has ", client_nonce_.size(),
                     " bytes, expected ", kNonceBytes));
  }
  std::string expected =
      WorkerProof(secret_, job_id_, worker_id_, client_nonce_, server_nonce_);
  if (!ConstantTimeEqual(expected, mac)) {
    return absl::UnauthenticatedError(
        "wrong job secret: the worker's proof does not match this job's "
        "secret");
  }
  return absl::OkStatus();
}

ClientHandshake::ClientHandshake(std::string secret, std::string job_id,
                                 std::string worker_id)
    : secret_(std::move(secret)),
      job_id_(std::move(job_id)),
      worker_id_(std::move(worker_id)),
      client_nonce_(RandomBytes(kNonceBytes)) {}

absl::StatusOr<std::string> ClientHandshake::Answer(
    absl::string_view server_nonce, absl::string_view server_proof) const {
  if (server_nonce.size() != kNonceBytes) {
    return absl::UnauthenticatedError(
        absl::StrCat("coordinator sent a ", server_nonce.size(),
                     "-byte nonce, expected ", kNonceBytes));
  }
  std::string expected = CoordinatorProof(secret_, job_id_, worker_id_,
                                          client_nonce_, server_nonce);
  if (!ConstantTimeEqual(expected, server_proof)) {
    return absl::UnauthenticatedError(
        "the coordinator could not prove it knows this job's secret: the "
        "worker and the "
        "coordinator were given different secrets (check KOLO_SECRET_FILE on "
        "both)");
  }
  return WorkerProof(secret_, job_id_, worker_id_, client_nonce_, server_nonce);
}

absl::Status CheckSecretStrength(absl::string_view secret,
                                 absl::string_view source) {
  if (secret.size() >= kMinSecretBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the job secret from ", source, " is ",
      secret.empty() ? std::string("empty")
                     : absl::StrCat("only ", secret.size(), " bytes long"),
      "; a secret needs at least ", kMinSecretBytes,
      " bytes to resist guessing: ", kMakeSecretHint,
      " and give the same one to the coordinator and every worker"));
}

std::optional<std::string> SecretFileModeWarning(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) == 0) return std::nullopt;
  return absl::StrFormat(
      "the job secret file '%s' is accessible by group or others (mode "
      "%04o): anyone who can read it can join the job; restrict it with "
      "`chmod 600 %s`",
      path, st.st_mode & 07777, path);
}

absl::StatusOr<std::string> LoadSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read the job secret file '", path, "': ", std::strerror(errno),
        "; point KOLO_SECRET_FILE at a readable file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  while (!secret.empty() &&
         absl::ascii_isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (std::optional<std::string> warning = SecretFileModeWarning(path)) {
    GetLogger("auth")->warn("{}", *warning);
  }
  absl::Status strong = CheckSecretStrength(
      secret, absl::StrCat("the job secret file '", path, "'"));
  if (!strong.ok()) return strong;
  return secret;
}

}  // namespace kolo::auth
