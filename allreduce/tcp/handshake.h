// Handshake: the messages that open every data-plane TCP connection, and
// the proofs they carry.
//
// The connecting rank (the higher one) is the connector, the other the
// acceptor. Both prove knowledge of the job secret with HMAC-SHA256 over
// fresh nonces of both sides (common/auth.h), so a proof is good for one
// connection only (no replay); role labels differ from each other and from
// the Session's, so no proof passes as another. The acceptor proves first, so
// the connector never answers an impostor.
//
//   connector -> acceptor  Hello     version, epoch, job, from/to rank,
//                                    worker id, connector nonce,
//                                    data encryption (KOLO_DATA_ENCRYPTION)
//   acceptor  -> connector Challenge acceptor worker id, acceptor nonce,
//                                    acceptor proof        (or Refuse)
//   connector -> acceptor  Proof     connector proof
//   acceptor  -> connector Accept                          (or Refuse)
//
// The acceptor checks only the version at the Hello; the job, epoch, ranks,
// worker id and encryption setting once the Proof is good (the proofs cover the
// Hello), so a peer without the secret learns nothing about the job: its Refuse
// carries auth::kUnauthenticatedRefusal and the reason is only logged.
//
// Every message is  magic u32 | type u8 | body length u32 | body  (big
// endian); bodies are at most kMaxBodyBytes, ids at most kMaxIdBytes, so
// garbage is refused before anything is allocated for it.
//
// Thread-safety: pure functions on plain values.
#ifndef KOLO_ALLREDUCE_TCP_HANDSHAKE_H_
#define KOLO_ALLREDUCE_TCP_HANDSHAKE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kolo::tcp {

inline constexpr uint32_t kHandshakeMagic = 0x4b4f4c48;  // "KOLH"
inline constexpr size_t kMsgHeaderBytes = 9;
inline constexpr size_t kMaxBodyBytes = 4096;
inline constexpr size_t kMaxIdBytes = 256;
inline constexpr size_t kMaxReasonBytes = 1024;

enum class MsgType : uint8_t {
  kHello = 1,
  kChallenge = 2,
  kProof = 3,
  kAccept = 4,
  kRefuse = 5,
};

struct MsgHeader {
  MsgType type = MsgType::kHello;
  uint32_t body_bytes = 0;
};

// kInvalidArgument for a wrong magic, an unknown type or an oversized body.
absl::StatusOr<MsgHeader> ParseMsgHeader(absl::string_view header);
// Header + body.
std::string EncodeMsg(MsgType type, absl::string_view body);

struct Hello {
  uint32_t version = 0;
  uint64_t epoch = 0;
  uint32_t from_rank = 0;
  uint32_t to_rank = 0;
  std::string job_id;
  std::string worker_id;
  std::string nonce;
  // DataEncryption (tcp_options.h) as a byte; both ends must agree. The
  // proofs cover it, so it cannot be changed on the way.
  uint8_t encryption = 0;
};
std::string EncodeHello(const Hello& h);
absl::StatusOr<Hello> ParseHello(absl::string_view body);

struct Challenge {
  std::string worker_id;
  std::string nonce;
  std::string proof;
};
std::string EncodeChallenge(const Challenge& c);
absl::StatusOr<Challenge> ParseChallenge(absl::string_view body);

// Proof and Refuse carry one string (a mac or a reason).
std::string EncodeString(absl::string_view s);
absl::StatusOr<std::string> ParseString(absl::string_view body, size_t max_len);

// What an acceptor knows about the epoch, to judge a Hello.
struct AcceptorView {
  uint32_t version = 0;
  uint64_t epoch = 0;
  std::string job_id;
  int rank = 0;
  int size = 0;
  std::vector<std::string> worker_ids;
  uint8_t encryption = 0;
};
// OK, or kPermissionDenied / kFailedPrecondition saying why the Hello is
// refused, e.g. "peer is in epoch 3, this transport is epoch 4".
absl::Status CheckHello(const Hello& h, const AcceptorView& me);

// The two proofs. `acceptor_worker` and `acceptor_nonce` come from the
// Challenge; the rest from the Hello.
std::string AcceptorProof(absl::string_view secret, const Hello& h,
                          absl::string_view acceptor_worker,
                          absl::string_view acceptor_nonce);
std::string ConnectorProof(absl::string_view secret, const Hello& h,
                           absl::string_view acceptor_worker,
                           absl::string_view acceptor_nonce);

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_HANDSHAKE_H_
