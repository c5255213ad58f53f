// gRPC channel credentials under TLS (common/tls_grpc.h).
#include "common/tls_grpc.h"

namespace kolo::tls {

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

}  // namespace kolo::tls
