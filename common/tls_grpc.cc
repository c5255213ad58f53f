// gRPC credentials under TLS and the refusal log (common/tls_grpc.h).
#include "common/tls_grpc.h"

#include <grpc/support/log.h>

#include <atomic>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/rate_limited_log.h"

namespace kolo::tls {
namespace {

// Set once by InstallHandshakeRefusalLog; never freed (gRPC may log while
// the process exits).
std::atomic<const std::string*> g_refusal_logger{nullptr};

bool IsHandshakeRefusal(const char* message) {
  return absl::StrContains(message, "Handshake failed") ||
         absl::StrContains(message, "SSL_ERROR_SSL");
}

void RouteGrpcLog(gpr_log_func_args* args) {
  const std::string* name = g_refusal_logger.load();
  if (name != nullptr && IsHandshakeRefusal(args->message)) {
    LogRefusal(*GetLogger(*name), "tls",
               absl::StrCat("TLS handshake refused (", args->message,
                            "): a peer without this job's certificate "
                            "(another job's or CA's, expired, or plaintext) "
                            "tried to connect (gRPC does not say from which "
                            "address)"));
    return;
  }
  auto log = GetLogger("grpc");
  switch (args->severity) {
    case GPR_LOG_SEVERITY_ERROR:
      log->error("{}:{}: {}", args->file, args->line, args->message);
      break;
    case GPR_LOG_SEVERITY_INFO:
      log->info("{}:{}: {}", args->file, args->line, args->message);
      break;
    default:
      log->debug("{}:{}: {}", args->file, args->line, args->message);
      break;
  }
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const TlsMaterial& m) {
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = m.ca_pem;
  options.pem_key_cert_pairs.push_back({m.key_pem, m.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const TlsMaterial& m) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = m.ca_pem;
  options.pem_private_key = m.key_pem;
  options.pem_cert_chain = m.cert_pem;
  return grpc::SslCredentials(options);
}

void SetTlsChannelArgs(grpc::ChannelArguments& args) {
  args.SetSslTargetNameOverride(kJobName);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TlsMaterial* material, grpc::ChannelArguments& args) {
  if (material == nullptr) return grpc::InsecureChannelCredentials();
  SetTlsChannelArgs(args);
  return ChannelCredentials(*material);
}

void InstallHandshakeRefusalLog(const std::string& logger) {
  // The first caller's name stays (reachable: not a leak).
  static const std::string* const name = new std::string(logger);
  g_refusal_logger.store(name);
  gpr_set_log_function(&RouteGrpcLog);
}

}  // namespace kolo::tls
