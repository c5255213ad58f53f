// gRPC's SSL channel credentials from a job's certificates (common/tls.h),
// for the control plane's clients: the workers' Session channel, kolo-ctl's
// Status calls. A client pins the job's CA, presents its certificate, and
// checks the name kJobName ("kolo-job"), not the coordinator's address
// (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG).
//
// The coordinator's side of the port is not gRPC's: its gate terminates TLS
// with kolo's own OpenSSL code (TLS 1.3 only, the job's CA, the refusals
// logged with the peer's address) and hands gRPC the plaintext
// (coordinator/grpc_gate.h, issue 38). Two kolo processes (OpenSSL 3)
// negotiate TLS 1.3 through gRPC's client.
//
// Thread-safety: the functions may be called from any thread.
#ifndef KOLO_COMMON_TLS_GRPC_H_
#define KOLO_COMMON_TLS_GRPC_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/tls.h"

namespace kolo::tls {

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const TlsMaterial& m);

// The channel arguments a client under TLS needs (the target name).
void SetTlsChannelArgs(grpc::ChannelArguments& args);

// `material` set: TLS credentials, with args set; else insecure ones.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TlsMaterial* material, grpc::ChannelArguments& args);

}  // namespace kolo::tls

#endif  // KOLO_COMMON_TLS_GRPC_H_
