#include "allreduce/tcp/handshake.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "allreduce/tcp/tcp_options.h"
#include "allreduce/tcp/wire.h"
#include "common/auth.h"

namespace kolo::tcp {
namespace {

absl::Status Malformed(absl::string_view what, const WireReader& r) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed ", what, ": ", r.error()));
}

std::string Proof(absl::string_view label, absl::string_view secret,
                  const Hello& h, absl::string_view acceptor_worker,
                  absl::string_view acceptor_nonce) {
  std::string version = absl::StrCat(h.version);
  std::string epoch = absl::StrCat(h.epoch);
  std::string from = absl::StrCat(h.from_rank);
  std::string to = absl::StrCat(h.to_rank);
  std::string encryption = absl::StrCat(h.encryption);
  return auth::Hmac(secret,
                    {label, h.job_id, version, epoch, from, h.worker_id, to,
                     acceptor_worker, h.nonce, acceptor_nonce, encryption});
}

std::string EncryptionName(uint8_t e) {
  if (e <= static_cast<uint8_t>(DataEncryption::kAes256Gcm)) {
    return std::string(DataEncryptionName(static_cast<DataEncryption>(e)));
  }
  return absl::StrCat("unknown (", e, ")");
}

}  // namespace

absl::StatusOr<MsgHeader> ParseMsgHeader(absl::string_view header) {
  WireReader r(header);
  uint32_t magic = 0, len = 0;
  uint8_t type = 0;
  if (!r.U32(&magic) || !r.U8(&type) || !r.U32(&len)) {
    return Malformed("handshake header", r);
  }
  if (magic != kHandshakeMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not a kolo data-plane handshake (magic 0x%08x, expected 0x%08x)",
        magic, kHandshakeMagic));
  }
  if (type < static_cast<uint8_t>(MsgType::kHello) ||
      type > static_cast<uint8_t>(MsgType::kRefuse)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown handshake message type ", type));
  }
  if (len > kMaxBodyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("oversized handshake message: ", len,
                     " bytes, the limit is ", kMaxBodyBytes));
  }
  return MsgHeader{static_cast<MsgType>(type), len};
}

std::string EncodeMsg(MsgType type, absl::string_view body) {
  WireWriter w;
  w.U32(kHandshakeMagic);
  w.U8(static_cast<uint8_t>(type));
  w.U32(static_cast<uint32_t>(body.size()));
  w.out().append(body.data(), body.size());
  return std::move(w.out());
}

std::string EncodeHello(const Hello& h) {
  WireWriter w;
  w.U32(h.version);  // first, so any version can parse it
  w.U64(h.epoch);
  w.U32(h.from_rank);
  w.U32(h.to_rank);
  w.Str(h.job_id);
  w.Str(h.worker_id);
  w.Str(h.nonce);
  w.U8(h.encryption);
  return std::move(w.out());
}

absl::StatusOr<Hello> ParseHello(absl::string_view body) {
  WireReader r(body);
  Hello h;
  if (!r.U32(&h.version) || !r.U64(&h.epoch) || !r.U32(&h.from_rank) ||
      !r.U32(&h.to_rank) || !r.Str(kMaxIdBytes, &h.job_id) ||
      !r.Str(kMaxIdBytes, &h.worker_id) ||
      !r.Str(auth::kNonceBytes, &h.nonce) || !r.U8(&h.encryption)) {
    return Malformed("hello", r);
  }
  if (!r.AtEnd() || h.nonce.size() != auth::kNonceBytes) {
    return absl::InvalidArgumentError(
        "malformed hello: trailing bytes or short nonce");
  }
  return h;
}

std::string EncodeChallenge(const Challenge& c) {
  WireWriter w;
  w.Str(c.worker_id);
  w.Str(c.nonce);
  w.Str(c.proof);
  return std::move(w.out());
}

absl::StatusOr<Challenge> ParseChallenge(absl::string_view body) {
  WireReader r(body);
  Challenge c;
  if (!r.Str(kMaxIdBytes, &c.worker_id) ||
      !r.Str(auth::kNonceBytes, &c.nonce) ||
      !r.Str(auth::kMacBytes, &c.proof)) {
    return Malformed("challenge", r);
  }
  if (!r.AtEnd() || c.nonce.size() != auth::kNonceBytes) {
    return absl::InvalidArgumentError(
        "malformed challenge: trailing bytes or short nonce");
  }
  return c;
}

std::string EncodeString(absl::string_view s) {
  WireWriter w;
  w.Str(s);
  return std::move(w.out());
}

absl::StatusOr<std::string> ParseString(absl::string_view body,
                                        size_t max_len) {
  WireReader r(body);
  std::string s;
  if (!r.Str(max_len, &s)) return Malformed("handshake message", r);
  if (!r.AtEnd()) {
    return absl::InvalidArgumentError(
        "malformed handshake message: trailing bytes");
  }
  return s;
}

absl::Status CheckHello(const Hello& h, const AcceptorView& me) {
  if (h.version != me.version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "peer speaks protocol version ", h.version, ", this transport speaks ",
        me.version, " (mixed kolo versions in one job: install one version)"));
  }
  if (h.job_id != me.job_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("peer belongs to job '", h.job_id,
                     "', this transport to job '", me.job_id, "'"));
  }
  if (h.epoch != me.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "peer is in epoch ", h.epoch, ", this transport is epoch ", me.epoch));
  }
  if (h.to_rank != static_cast<uint32_t>(me.rank)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "peer wants rank ", h.to_rank, ", this is rank ", me.rank));
  }
  if (h.from_rank <= static_cast<uint32_t>(me.rank) ||
      h.from_rank >= static_cast<uint32_t>(me.size)) {
    return absl::FailedPreconditionError(
        absl::StrCat("unexpected rank ", h.from_rank, ": rank ", me.rank,
                     " accepts connections from ranks ", me.rank + 1, "..",
                     me.size - 1, " only"));
  }
  if (h.encryption != me.encryption) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", h.from_rank,
        " uses KOLO_DATA_ENCRYPTION=", EncryptionName(h.encryption), ", rank ",
        me.rank, " uses ", EncryptionName(me.encryption),
        ": every worker of a job must set the same KOLO_DATA_ENCRYPTION"));
  }
  const std::string& expected = me.worker_ids[h.from_rank];
  if (h.worker_id != expected) {
    return absl::PermissionDeniedError(
        absl::StrCat("peer claims rank ", h.from_rank, " as worker '",
                     h.worker_id, "', but rank ", h.from_rank, " is worker '",
                     expected, "' in epoch ", me.epoch));
  }
  return absl::OkStatus();
}

std::string AcceptorProof(absl::string_view secret, const Hello& h,
                          absl::string_view acceptor_worker,
                          absl::string_view acceptor_nonce) {
  return Proof("kolo-data-acceptor-v1", secret, h, acceptor_worker,
               acceptor_nonce);
}

std::string ConnectorProof(absl::string_view secret, const Hello& h,
                           absl::string_view acceptor_worker,
                           absl::string_view acceptor_nonce) {
  return Proof("kolo-data-connector-v1", secret, h, acceptor_worker,
               acceptor_nonce);
}

}  // namespace kolo::tcp
