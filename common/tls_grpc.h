// gRPC's SSL credentials from a job's certificates (common/tls.h), for the
// control plane: the coordinator's server, the workers' Session channel,
// kolo-ctl's Status calls.
//
// - The server requires and verifies a client certificate from the job's CA
//   (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY): a peer
//   without one (plaintext, another job's, expired) is refused in the
//   handshake, before any call.
// - A client pins the job's CA and checks the name kJobName ("kolo-job"),
//   not the coordinator's address (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG).
// - Versions: TLS 1.2 and 1.3; two kolo processes (OpenSSL 3) negotiate
//   TLS 1.3. gRPC 1.51 has no public minimum-version setter (not on the SSL
//   credentials, not on grpc::experimental::TlsCredentialsOptions, not in
//   the C API: grpc_tls_version is only an enum there), so a TLS 1.2 client
//   with the job's certificate completes the handshake (docs/security.md).
// - gRPC logs a refused handshake through gpr_log, once per connection, with
//   no peer address. InstallHandshakeRefusalLog sends those lines to kolo's
//   `logger` at warn, rate-limited (LogRefusal, key "tls"), and gRPC's other
//   lines to spdlog's "grpc" logger. The line cannot name the peer: gRPC
//   1.51 gives an application nothing of a refused handshake but that text
//   (ssl_transport_security.cc's "Handshake failed with fatal error ...";
//   the handshaker's own lines, at debug, carry no address either). Its
//   hooks come too late or see no address: a certificate verifier
//   (TlsServerCredentialsOptions::set_certificate_verifier) gets a request
//   with the certificate and its names, not the connection's address (and
//   with the chain verified, a wrong CA or an expired certificate never
//   reaches it, nor does plaintext); an AuthMetadataProcessor and
//   ServerContext::peer() exist only for calls, after a handshake
//   succeeded; the socket mutator (GRPC_ARG_SOCKET_MUTATOR) is declared in
//   gRPC's internal headers only. A peer that passes TLS and is refused by
//   kolo (a wrong secret) is logged with its address (coordinator/core.cc,
//   coordinator/service.cc).
//
// Thread-safety: the functions may be called from any thread;
// InstallHandshakeRefusalLog changes process-wide state (call it once,
// before gRPC is used).
#ifndef KOLO_COMMON_TLS_GRPC_H_
#define KOLO_COMMON_TLS_GRPC_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/tls.h"

namespace kolo::tls {

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const TlsMaterial& m);

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(
    const TlsMaterial& m);

// The channel arguments a client under TLS needs (the target name).
void SetTlsChannelArgs(grpc::ChannelArguments& args);

// `material` set: TLS credentials, with args set; else insecure ones.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(
    const TlsMaterial* material, grpc::ChannelArguments& args);

// See the header comment. `logger`: the component whose port refuses
// ("coordinator"). Idempotent.
void InstallHandshakeRefusalLog(const std::string& logger);

}  // namespace kolo::tls

#endif  // KOLO_COMMON_TLS_GRPC_H_
