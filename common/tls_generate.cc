// Throwaway CAs and certificates (common/tls_generate.h), with OpenSSL 3's
// EVP and X509 APIs.
#include "common/tls_generate.h"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/tls_internal.h"

namespace kolo::tls {
namespace {

using internal::BioPtr;
using internal::OpenSslError;
using internal::X509Ptr;

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

absl::Status Failed(absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("cannot make a TLS certificate: ", what, " failed (",
                   OpenSslError(), ")"));
}

std::string ReadOut(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr,
                               nullptr) != 1) {
    return Failed("writing the key");
  }
  return ReadOut(bio.get());
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) != 1) {
    return Failed("writing the certificate");
  }
  return ReadOut(bio.get());
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid,
                          const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return Failed(absl::StrCat("extension ", value));
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? absl::OkStatus() : Failed("adding an extension");
}

// An unsigned certificate of `key` for `spec`, issued by `issuer_name`
// (nullptr: itself).
absl::StatusOr<X509Ptr> NewCertificate(const CertSpec& spec, EVP_PKEY* key,
                                       const X509_NAME* issuer_name) {
  X509Ptr cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), 2) != 1) {
    return Failed("X509_new");
  }
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), &BN_free);
  if (serial == nullptr ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) ==
          nullptr) {
    return Failed("the serial number");
  }
  if (ASN1_TIME_set(X509_getm_notBefore(cert.get()),
                    absl::ToTimeT(spec.not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()),
                    absl::ToTimeT(spec.not_after)) == nullptr) {
    return Failed("the validity dates");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(
          name, "CN", MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1,
          -1, 0) != 1) {
    return Failed("the subject name");
  }
  if (X509_set_issuer_name(cert.get(),
                           issuer_name != nullptr ? issuer_name : name) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Failed("the issuer and key");
  }
  return cert;
}

absl::StatusOr<KeyAndCert> Finish(X509* cert, EVP_PKEY* key, EVP_PKEY* signer) {
  if (X509_sign(cert, signer, EVP_sha256()) == 0) return Failed("signing");
  absl::StatusOr<std::string> key_pem = KeyPem(key);
  if (!key_pem.ok()) return key_pem.status();
  absl::StatusOr<std::string> cert_pem = CertPem(cert);
  if (!cert_pem.ok()) return cert_pem.status();
  return KeyAndCert{*std::move(key_pem), *std::move(cert_pem)};
}

absl::StatusOr<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return Failed("making a P-256 key");
  return key;
}

}  // namespace

absl::StatusOr<KeyAndCert> MakeCa(const CertSpec& spec) {
  absl::StatusOr<PkeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<X509Ptr> cert = NewCertificate(spec, key->get(), nullptr);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
        std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
        std::pair{NID_subject_key_identifier, "hash"}}) {
    if (absl::Status st = AddExtension(c, c, nid, value); !st.ok()) return st;
  }
  return Finish(c, key->get(), key->get());
}

absl::StatusOr<KeyAndCert> MakeLeaf(const KeyAndCert& ca,
                                    const CertSpec& spec) {
  std::vector<X509Ptr> ca_certs = internal::ReadCertificates(ca.cert_pem);
  BioPtr ca_key_bio = internal::ReadBio(ca.key_pem);
  PkeyPtr ca_key(
      PEM_read_bio_PrivateKey(ca_key_bio.get(), nullptr, nullptr, nullptr));
  if (ca_certs.empty() || ca_key == nullptr) return Failed("reading the CA");
  X509* issuer = ca_certs.front().get();
  absl::StatusOr<PkeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<X509Ptr> cert =
      NewCertificate(spec, key->get(), X509_get_subject_name(issuer));
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  const std::string san = absl::StrCat("DNS:", spec.dns_name);
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
        std::pair{NID_key_usage, "critical,digitalSignature"},
        std::pair{NID_ext_key_usage, "serverAuth,clientAuth"},
        std::pair{NID_authority_key_identifier, "keyid:always"},
        std::pair{NID_subject_alt_name, san.c_str()}}) {
    if (absl::Status st = AddExtension(c, issuer, nid, value); !st.ok()) {
      return st;
    }
  }
  return Finish(c, key->get(), ca_key.get());
}

absl::StatusOr<TlsMaterial> MakeJobMaterial(absl::Duration validity) {
  CertSpec spec;
  spec.not_before = absl::Now() - absl::Minutes(5);
  spec.not_after = absl::Now() + validity;
  spec.common_name = "kolo job CA (throwaway)";
  absl::StatusOr<KeyAndCert> ca = MakeCa(spec);
  if (!ca.ok()) return ca.status();
  spec.common_name = kJobName;
  absl::StatusOr<KeyAndCert> leaf = MakeLeaf(*ca, spec);
  if (!leaf.ok()) return leaf.status();
  return TlsMaterial{std::move(leaf->cert_pem), std::move(leaf->key_pem),
                     std::move(ca->cert_pem)};
}

}  // namespace kolo::tls
