// TlsFiles and the checks of a job's certificates (common/tls.h), with
// OpenSSL's X509 API.
#include "common/tls.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tls_internal.h"

namespace kolo::tls {
namespace {

using internal::OpenSslError;
using internal::X509Ptr;

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read the TLS ", what, " file '", path,
        "': it does not exist or is not readable by this user; check the "
        "path (KOLO_TLS_* or --tls-*) and the file's permissions"));
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Named(const std::string& path, absl::string_view what) {
  return path.empty() ? std::string("the ") + std::string(what)
                      : absl::StrCat("the ", what, " '", path, "'");
}

// The certificate's validity at `now`, naming its dates when it is not.
absl::Status CheckDates(X509* cert, absl::Time now, const std::string& name) {
  time_t t = absl::ToTimeT(now);
  const ASN1_TIME* before = X509_get0_notBefore(cert);
  const ASN1_TIME* after = X509_get0_notAfter(cert);
  const std::string dates =
      absl::StrCat("valid from ", internal::TimeText(before), " to ",
                   internal::TimeText(after));
  if (X509_cmp_time(before, &t) > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " is not valid yet (", dates,
        "); check this host's clock, or make a certificate valid now"));
  }
  if (X509_cmp_time(after, &t) < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, " has expired (", dates,
                     "); give this job a fresh certificate from its CA"));
  }
  return absl::OkStatus();
}

// `leaf` (with `chain` after it) signed by one of `cas`, at `now`.
absl::Status CheckSignedBy(X509* leaf, const std::vector<X509Ptr>& chain,
                           const std::vector<X509Ptr>& cas, absl::Time now,
                           const std::string& name,
                           const std::string& ca_name) {
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(
      X509_STORE_new(), &X509_STORE_free);
  for (const X509Ptr& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<STACK_OF(X509), void (*)(STACK_OF(X509)*)> untrusted(
      sk_X509_new_null(), [](STACK_OF(X509) * s) { sk_X509_free(s); });
  for (const X509Ptr& c : chain) sk_X509_push(untrusted.get(), c.get());
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(
      X509_STORE_CTX_new(), &X509_STORE_CTX_free);
  if (X509_STORE_CTX_init(ctx.get(), store.get(), leaf, untrusted.get()) != 1) {
    return absl::InternalError(absl::StrCat("cannot check ", name, " against ",
                                            ca_name, ": ", OpenSslError()));
  }
  X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx.get()),
                             absl::ToTimeT(now));
  if (X509_verify_cert(ctx.get()) == 1) return absl::OkStatus();
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  return absl::FailedPreconditionError(absl::StrCat(
      name, " is not signed by ", ca_name,
      " (OpenSSL: ", X509_verify_cert_error_string(err),
      "); give every process of the job a certificate from the job's CA, and "
      "that CA's certificate"));
}

}  // namespace

absl::StatusOr<TlsFiles> MakeTlsFiles(std::string cert, std::string key,
                                      std::string ca,
                                      absl::string_view cert_name,
                                      absl::string_view key_name,
                                      absl::string_view ca_name) {
  std::vector<std::string> missing;
  if (cert.empty()) missing.emplace_back(cert_name);
  if (key.empty()) missing.emplace_back(key_name);
  if (ca.empty()) missing.emplace_back(ca_name);
  if (missing.size() == 3) return TlsFiles{};
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS needs a certificate, its key and the job's CA together: ",
        absl::StrJoin(missing, " and "), " ",
        missing.size() == 1 ? "is" : "are", " missing (", cert_name, ", ",
        key_name, " and ", ca_name, " are given all three or not at all)"));
  }
  return TlsFiles{std::move(cert), std::move(key), std::move(ca)};
}

absl::StatusOr<TlsFiles> TlsFilesFromEnvironment(
    absl::FunctionRef<const char*(const char*)> getenv) {
  auto get = [&](const char* name) {
    const char* v = getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  return MakeTlsFiles(get("KOLO_TLS_CERT"), get("KOLO_TLS_KEY"),
                      get("KOLO_TLS_CA"), "KOLO_TLS_CERT", "KOLO_TLS_KEY",
                      "KOLO_TLS_CA");
}

absl::StatusOr<TlsFiles> TlsFilesFromFlagsOrEnvironment(
    const TlsFiles& flags,
    absl::FunctionRef<std::optional<std::string>(const char*)> env) {
  if (!flags.cert.empty() || !flags.key.empty() || !flags.ca.empty()) {
    return MakeTlsFiles(flags.cert, flags.key, flags.ca, "--tls-cert",
                        "--tls-key", "--tls-ca");
  }
  return MakeTlsFiles(env("KOLO_TLS_CERT").value_or(""),
                      env("KOLO_TLS_KEY").value_or(""),
                      env("KOLO_TLS_CA").value_or(""), "KOLO_TLS_CERT",
                      "KOLO_TLS_KEY", "KOLO_TLS_CA");
}

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files,
                                            absl::Time now) {
  TlsMaterial m;
  absl::StatusOr<std::string> cert = ReadFile(files.cert, "certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(files.key, "key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> ca = ReadFile(files.ca, "CA");
  if (!ca.ok()) return ca.status();
  m.cert_pem = *std::move(cert);
  m.key_pem = *std::move(key);
  m.ca_pem = *std::move(ca);
  if (absl::Status st = CheckTlsMaterial(m, now, files); !st.ok()) return st;
  return m;
}

absl::Status CheckTlsMaterial(const TlsMaterial& m, absl::Time now,
                              const TlsFiles& files) {
  const std::string cert_name = Named(files.cert, "TLS certificate");
  const std::string key_name = Named(files.key, "TLS key");
  const std::string ca_name = Named(files.ca, "TLS CA");
  std::vector<X509Ptr> chain = internal::ReadCertificates(m.cert_pem);
  if (chain.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_name, " holds no PEM certificate"));
  }
  std::vector<X509Ptr> cas = internal::ReadCertificates(m.ca_pem);
  if (cas.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ca_name, " holds no PEM certificate"));
  }
  internal::PrivateKeyPtr key = internal::ReadPrivateKey(m.key_pem);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_name, " holds no unencrypted PEM private key (",
                     OpenSslError(), ")"));
  }
  X509* leaf = chain.front().get();
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(key_name, " is not the key of ", cert_name,
                     "; give the key the certificate was made for"));
  }
  if (absl::Status st = CheckDates(leaf, now, cert_name); !st.ok()) return st;
  for (const X509Ptr& ca : cas) {
    if (absl::Status st = CheckDates(ca.get(), now, ca_name); !st.ok()) {
      return st;
    }
  }
  std::vector<X509Ptr> intermediates;
  for (size_t i = 1; i < chain.size(); ++i) {
    intermediates.push_back(std::move(chain[i]));
  }
  if (absl::Status st =
          CheckSignedBy(leaf, intermediates, cas, now, cert_name, ca_name);
      !st.ok()) {
    return st;
  }
  if (X509_check_host(leaf, kJobName, sizeof(kJobName) - 1, 0, nullptr) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        cert_name, " does not name '", kJobName,
        "' as a DNS subjectAltName; kolo's peers check that name (not an "
        "address): make the certificate with subjectAltName=DNS:",
        kJobName));
  }
  return absl::OkStatus();
}

}  // namespace kolo::tls
