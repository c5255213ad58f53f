// Fuzz target: the data-plane handshake (allreduce/tcp/handshake.h), on both
// sides. The input is a byte stream as a peer would send it: messages
// (header + body) are cut from it the way tcp::Mesh reads them, and fed to
// an acceptor (rank 0 of 4) and to a connector (rank 3 dialling rank 0) that
// follow Mesh's sequence: the acceptor takes Hello then Proof, the connector
// Challenge then Accept, either may get Refuse. Every parse that succeeds must
// re-encode to the same bytes, and no proof but the right one may pass.
#include <cstddef>
#include <cstdint>
#include <string>

#include "allreduce/tcp/handshake.h"
#include "common/auth.h"
#include "common/check.h"
#include "common/version.h"

namespace {

using kolo::tcp::AcceptorView;
using kolo::tcp::MsgType;

constexpr char kSecret[] = "fuzz-secret";
// Fixed so that the fuzzer (and the seed corpus) can produce a valid proof.
const std::string& AcceptorNonce() {
  static const std::string* n = new std::string(kolo::auth::kNonceBytes, 'a');
  return *n;
}

AcceptorView View() {
  AcceptorView v;
  v.version = kolo::kProtocolVersion;
  v.epoch = 1;
  v.job_id = "job";
  v.rank = 0;
  v.size = 4;
  v.worker_ids = {"w0", "w1", "w2", "w3"};
  return v;
}

// The connector's own Hello (rank 3 dialling rank 0).
kolo::tcp::Hello ConnectorHello() {
  kolo::tcp::Hello h;
  h.version = kolo::kProtocolVersion;
  h.epoch = 1;
  h.from_rank = 3;
  h.to_rank = 0;
  h.job_id = "job";
  h.worker_id = "w3";
  h.nonce = std::string(kolo::auth::kNonceBytes, 'c');
  return h;
}

// Cuts the next message off `stream` as Mesh::OnReadable does; false when
// the stream ends or its header is refused.
bool NextMessage(absl::string_view& stream, kolo::tcp::MsgHeader* header,
                 absl::string_view* body) {
  if (stream.size() < kolo::tcp::kMsgHeaderBytes) return false;
  auto h =
      kolo::tcp::ParseMsgHeader(stream.substr(0, kolo::tcp::kMsgHeaderBytes));
  if (!h.ok()) return false;
  KOLO_CHECK(h->body_bytes <= kolo::tcp::kMaxBodyBytes);
  stream.remove_prefix(kolo::tcp::kMsgHeaderBytes);
  if (stream.size() < h->body_bytes) return false;
  *header = *h;
  *body = stream.substr(0, h->body_bytes);
  stream.remove_prefix(h->body_bytes);
  // The header re-encodes to the bytes it came from.
  KOLO_CHECK(kolo::tcp::EncodeMsg(h->type, *body).size() ==
             kolo::tcp::kMsgHeaderBytes + body->size());
  return true;
}

void Acceptor(absl::string_view stream) {
  const AcceptorView view = View();
  enum { kAwaitHello, kAwaitProof, kDone } phase = kAwaitHello;
  kolo::tcp::Hello hello;
  kolo::tcp::MsgHeader header;
  absl::string_view body;
  while (phase != kDone && NextMessage(stream, &header, &body)) {
    if (phase == kAwaitHello && header.type == MsgType::kHello) {
      auto h = kolo::tcp::ParseHello(body);
      if (!h.ok()) return;
      KOLO_CHECK(kolo::tcp::EncodeHello(*h) == body);
      if (!kolo::tcp::CheckHello(*h, view).ok()) return;
      KOLO_CHECK(h->from_rank > 0 && h->from_rank < 4);
      hello = *h;
      const std::string proof = kolo::tcp::AcceptorProof(
          kSecret, hello, view.worker_ids[0], AcceptorNonce());
      const std::string ch = kolo::tcp::EncodeChallenge(
          {view.worker_ids[0], AcceptorNonce(), proof});
      KOLO_CHECK(kolo::tcp::ParseChallenge(ch).ok());
      phase = kAwaitProof;
    } else if (phase == kAwaitProof && header.type == MsgType::kProof) {
      auto mac = kolo::tcp::ParseString(body, kolo::auth::kMacBytes);
      if (!mac.ok()) return;
      KOLO_CHECK(kolo::tcp::EncodeString(*mac) == body);
      const std::string expected = kolo::tcp::ConnectorProof(
          kSecret, hello, view.worker_ids[0], AcceptorNonce());
      if (!kolo::auth::ConstantTimeEqual(expected, *mac)) return;
      KOLO_CHECK(*mac == expected);
      phase = kDone;  // accepted
    } else {
      return;  // unexpected message: the acceptor closes
    }
  }
}

void Connector(absl::string_view stream) {
  const kolo::tcp::Hello hello = ConnectorHello();
  enum { kAwaitChallenge, kAwaitVerdict, kDone } phase = kAwaitChallenge;
  kolo::tcp::MsgHeader header;
  absl::string_view body;
  while (phase != kDone && NextMessage(stream, &header, &body)) {
    if (header.type == MsgType::kRefuse) {
      auto reason = kolo::tcp::ParseString(body, kolo::tcp::kMaxReasonBytes);
      if (reason.ok()) KOLO_CHECK(kolo::tcp::EncodeString(*reason) == body);
      return;
    }
    if (phase == kAwaitChallenge && header.type == MsgType::kChallenge) {
      auto ch = kolo::tcp::ParseChallenge(body);
      if (!ch.ok()) return;
      KOLO_CHECK(kolo::tcp::EncodeChallenge(*ch) == body);
      if (ch->worker_id != "w0") return;
      const std::string expected =
          kolo::tcp::AcceptorProof(kSecret, hello, ch->worker_id, ch->nonce);
      if (!kolo::auth::ConstantTimeEqual(expected, ch->proof)) return;
      (void)kolo::tcp::ConnectorProof(kSecret, hello, ch->worker_id, ch->nonce);
      phase = kAwaitVerdict;
    } else if (phase == kAwaitVerdict && header.type == MsgType::kAccept) {
      phase = kDone;
    } else {
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // First byte: which side hears the stream.
  const absl::string_view stream(reinterpret_cast<const char*>(data) + 1,
                                 size - 1);
  if (data[0] & 1) {
    Connector(stream);
  } else {
    Acceptor(stream);
  }
  return 0;
}
