// A TLS probe of a port (issue 38): one connection and one handshake, to say
// plainly why a worker's gRPC channel to its coordinator does not come up.
// gRPC's channel only retries (a refused handshake is TRANSIENT_FAILURE,
// logged nowhere the worker sees); the probe learns what the other side
// did:
// - kNoAnswer: nothing accepted the connection (the coordinator is not up
//   yet: waiting is right), or it timed out;
// - kNotTls: the port answered, but not with TLS (a plaintext coordinator,
//   or another program);
// - kPeerUnverified: the server's certificate is not one of this job's
//   (this side's CA does not sign it, it expired, or it does not name
//   kJobName): `detail` is OpenSSL's verification error;
// - kRefused: the server refused this side's certificate (or its lack of
//   one): it sent an alert (`detail` names it: kolo's coordinator, whose
//   gate runs the handshake, does) or closed the connection at the end of
//   the handshake (a server that sends no alert);
// - kAccepted: the handshake completed and the server kept the connection.
// With `material` null it offers no certificate and checks none (never
// kPeerUnverified): it only learns whether the port speaks TLS (kRefused and
// kAccepted both say yes).
//
// Thread-safety: a pure function (it blocks up to `timeout`).
#ifndef KOLO_COMMON_TLS_PROBE_H_
#define KOLO_COMMON_TLS_PROBE_H_

#include <string>

#include "absl/time/time.h"
#include "common/socket_util.h"
#include "common/tls.h"

namespace kolo::tls {

struct ProbeResult {
  enum class Kind { kNoAnswer, kNotTls, kPeerUnverified, kRefused, kAccepted };
  Kind kind = Kind::kNoAnswer;
  std::string detail;  // OpenSSL's words, for messages
};

ProbeResult ProbeTls(const net::SockAddr& addr, const TlsMaterial* material,
                     absl::Duration timeout);

}  // namespace kolo::tls

#endif  // KOLO_COMMON_TLS_PROBE_H_
