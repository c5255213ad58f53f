#include "allreduce/tcp/record_cipher.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "allreduce/tcp/wire.h"
#include "common/check.h"

namespace kolo::tcp {
namespace {

constexpr char kKeyLabel[] = "kolo-data-aes-256-gcm-v1";

EVP_CIPHER_CTX* Ctx(void* p) { return static_cast<EVP_CIPHER_CTX*>(p); }

}  // namespace

RecordKey DeriveDirectionKey(absl::string_view secret, absl::string_view job_id,
                             uint64_t epoch, uint32_t from_rank,
                             uint32_t to_rank,
                             absl::string_view connector_nonce,
                             absl::string_view acceptor_nonce) {
  // Every variable-length field is length-prefixed, so no two inputs give
  // the same info or salt.
  WireWriter info;
  info.Str(kKeyLabel);
  info.Str(job_id);
  info.U64(epoch);
  info.U32(from_rank);
  info.U32(to_rank);
  WireWriter salt;
  salt.Str(connector_nonce);
  salt.Str(acceptor_nonce);
  RecordKey key{};
  size_t key_len = key.size();
  EVP_PKEY_CTX* pctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  KOLO_CHECK(pctx != nullptr) << "OpenSSL: no HKDF context";
  const bool ok =
      EVP_PKEY_derive_init(pctx) > 0 &&
      EVP_PKEY_CTX_set_hkdf_md(pctx, EVP_sha256()) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_salt(
          pctx, reinterpret_cast<const unsigned char*>(salt.out().data()),
          static_cast<int>(salt.out().size())) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_key(
          pctx, reinterpret_cast<const unsigned char*>(secret.data()),
          static_cast<int>(secret.size())) > 0 &&
      EVP_PKEY_CTX_add1_hkdf_info(
          pctx, reinterpret_cast<const unsigned char*>(info.out().data()),
          static_cast<int>(info.out().size())) > 0 &&
      EVP_PKEY_derive(pctx, key.data(), &key_len) > 0 && key_len == key.size();
  EVP_PKEY_CTX_free(pctx);
  KOLO_CHECK(ok) << "OpenSSL: HKDF-SHA256 failed";
  return key;
}

std::array<uint8_t, kRecordNonceBytes> RecordNonce(uint64_t counter) {
  std::array<uint8_t, kRecordNonceBytes> nonce{};
  for (int i = 0; i < 8; ++i) {
    nonce[4 + i] = static_cast<uint8_t>(counter >> (8 * i));
  }
  return nonce;
}

void RecordCipher::CtxDeleter::operator()(void* ctx) const {
  EVP_CIPHER_CTX_free(Ctx(ctx));
}

RecordCipher::RecordCipher(const RecordKey& key, Direction direction)
    : direction_(direction), ctx_(EVP_CIPHER_CTX_new()) {
  KOLO_CHECK(ctx_ != nullptr) << "OpenSSL: no cipher context";
  // The key is set once; each record sets only its nonce.
  const int ok = direction == Direction::kSeal
                     ? EVP_EncryptInit_ex(Ctx(ctx_.get()), EVP_aes_256_gcm(),
                                          nullptr, key.data(), nullptr)
                     : EVP_DecryptInit_ex(Ctx(ctx_.get()), EVP_aes_256_gcm(),
                                          nullptr, key.data(), nullptr);
  KOLO_CHECK(ok == 1) << "OpenSSL: AES-256-GCM initialisation failed";
}

RecordCipher::~RecordCipher() = default;

absl::Status RecordCipher::Seal(const uint8_t* in, size_t len, uint8_t* out,
                                uint8_t tag[kTagBytes]) {
  KOLO_CHECK(direction_ == Direction::kSeal && len <= kRecordBytes);
  if (counter_ >= kMaxRecords) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the connection sealed ", counter_,
        " records, the most one key may seal; a new epoch (new keys) is "
        "needed"));
  }
  EVP_CIPHER_CTX* ctx = Ctx(ctx_.get());
  const auto nonce = RecordNonce(counter_);
  int n = 0, fin = 0;
  const bool ok =
      EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
      EVP_EncryptUpdate(ctx, out, &n, in, static_cast<int>(len)) == 1 &&
      EVP_EncryptFinal_ex(ctx, out + n, &fin) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) == 1;
  KOLO_CHECK(ok && static_cast<size_t>(n + fin) == len)
      << "OpenSSL: AES-256-GCM encryption failed";
  ++counter_;
  return absl::OkStatus();
}

bool RecordCipher::Open(const uint8_t* in, size_t len, uint8_t* out,
                        const uint8_t tag[kTagBytes]) {
  KOLO_CHECK(direction_ == Direction::kOpen && len <= kRecordBytes);
  if (counter_ >= kMaxRecords) return false;
  EVP_CIPHER_CTX* ctx = Ctx(ctx_.get());
  const auto nonce = RecordNonce(counter_);
  ++counter_;  // a failed record is never retried: the stream is abandoned
  int n = 0, fin = 0;
  return EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) ==
             1 &&
         EVP_DecryptUpdate(ctx, out, &n, in, static_cast<int>(len)) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTagBytes,
                             const_cast<uint8_t*>(tag)) == 1 &&
         EVP_DecryptFinal_ex(ctx, out + n, &fin) == 1;
}

}  // namespace kolo::tcp
