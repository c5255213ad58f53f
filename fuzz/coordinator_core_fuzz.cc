// Fuzz target: the coordinator's state machine (coordinator/core.h) fed
// WorkerMessages from up to four fake workers, with no gRPC. The input is a
// script of events read with FuzzedDataProvider: open or close a worker's
// Session, tick the (fake) clock, send a message whose bytes come from the
// input (a serialized WorkerMessage, optionally re-stamped with the current
// fence), or send one of three scripted messages that a fuzzer could hardly
// forge: a valid Hello, the right HMAC proof for the Challenge the core sent
// (computed here from the fixed secret), a Done for the last plan received.
// So inputs get past the handshake into membership and negotiation.
//
// An input picks a fixed job or an elastic one with a minimum of 1..N
// workers (a lost worker then ends its epoch, and EpochAck matters).
//
// Checks: the core never crashes, and never sends to or closes a Session
// that was not opened or that it already closed.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/check.h"
#include "common/log.h"
#include "common/version.h"
#include "coordinator/core.h"
#include "fuzz/byte_reader.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/kolo.pb.h"

namespace {

using kolo::coordinator::Actions;
using kolo::coordinator::CoordinatorCore;
using kolo::coordinator::SessionId;

constexpr char kJob[] = "job";
constexpr char kSecret[] = "fuzz-secret";
constexpr uint64_t kIncarnation = 42;
constexpr int kWorkers = 4;

struct FakeWorker {
  SessionId session = 0;  // 0: no open Session
  std::string server_nonce;
  uint64_t last_plan = 0;
};

struct Harness {
  // min_size 0: not elastic; else an elastic job with that minimum.
  Harness(int expected_size, int min_size)
      : core(MakeOptions(expected_size, min_size, &now)) {}

  static kolo::coordinator::CoreOptions MakeOptions(int expected_size,
                                                    int min_size,
                                                    absl::Time* now) {
    kolo::coordinator::CoreOptions o;
    o.expected_size = expected_size;
    o.elastic = min_size > 0;
    o.min_size = std::max(1, min_size);
    o.elastic_timeout = absl::Seconds(30);
    o.job_id = kJob;
    o.secret = kSecret;
    o.incarnation = kIncarnation;
    o.link_port = 1234;
    o.negotiator.stall_check = absl::Seconds(2);
    o.negotiator.stall_shutdown = absl::Seconds(20);
    o.clock = [now] { return *now; };
    return o;
  }

  void Apply(const Actions& a) {
    for (const Actions::Send& s : a.sends) {
      KOLO_CHECK(open.contains(s.session));
      for (FakeWorker& w : workers) {
        if (w.session != s.session) continue;
        if (s.message.has_challenge()) {
          w.server_nonce = s.message.challenge().server_nonce();
        }
        if (s.message.has_plan()) w.last_plan = s.message.plan().seq();
      }
    }
    for (const Actions::Close& c : a.closes) {
      KOLO_CHECK(open.contains(c.session));
      open.erase(c.session);
      for (FakeWorker& w : workers) {
        if (w.session == c.session) w = FakeWorker{};
      }
    }
  }

  void Stamp(kolo::proto::WorkerMessage& m) {
    m.mutable_fence()->set_incarnation(kIncarnation);
    m.mutable_fence()->set_epoch(core.epoch());
  }

  absl::Time now = absl::FromUnixSeconds(1'000'000);
  CoordinatorCore core;
  std::array<FakeWorker, kWorkers> workers;
  absl::flat_hash_set<SessionId> open;
  SessionId next_session = 1;
};

std::string ClientNonce(int w) {
  return std::string(kolo::auth::kNonceBytes, static_cast<char>('a' + w));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)kolo::SetLogLevel("off");
  // Strings with invalid UTF-8 are logged by protobuf on every parse.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::ByteReader in(data, size);
  const int expected = in.Pick(1, 3);
  Harness h(expected, in.Pick(0, expected));
  int events = 0;
  while (in.remaining() > 0 && ++events < 256) {
    const int op = in.Pick(0, 7);
    const int wi = in.Pick(0, kWorkers - 1);
    FakeWorker& w = h.workers[wi];
    const std::string worker_id = absl::StrCat("w", wi);
    switch (op) {
      case 0: {  // a Session opens
        if (w.session != 0) break;
        w.session = h.next_session++;
        h.open.insert(w.session);
        h.Apply(h.core.OnOpen(w.session, absl::StrCat("peer", wi)));
        break;
      }
      case 1: {  // a valid Hello
        if (w.session == 0) break;
        kolo::proto::WorkerMessage m;
        kolo::proto::Hello& hello = *m.mutable_hello();
        hello.set_protocol_version(kolo::kProtocolVersion);
        hello.set_job_id(kJob);
        hello.set_worker_id(worker_id);
        hello.set_host_name(wi < 2 ? "hostA" : "hostB");
        hello.set_data_address(absl::StrCat("127.0.0.1:", 5000 + wi));
        hello.set_requested_rank((in.U8() & 1) ? wi : -1);
        hello.set_expected_size(h.core.expected_size());
        hello.set_client_nonce(ClientNonce(wi));
        hello.set_pid(100 + wi);
        h.Apply(h.core.OnMessage(w.session, m));
        break;
      }
      case 2: {  // the right proof for the last Challenge
        if (w.session == 0) break;
        kolo::proto::WorkerMessage m;
        h.Stamp(m);
        m.mutable_proof()->set_mac(kolo::auth::WorkerProof(
            kSecret, kJob, worker_id, ClientNonce(wi), w.server_nonce));
        h.Apply(h.core.OnMessage(w.session, m));
        break;
      }
      case 3:
      case 4: {  // a message from the input's bytes
        const bool stamp = in.U8() & 1;
        const std::string bytes = in.Blob();
        if (w.session == 0) break;
        kolo::proto::WorkerMessage m;
        if (!m.ParseFromString(bytes)) break;
        if (stamp) h.Stamp(m);
        h.Apply(h.core.OnMessage(w.session, m));
        break;
      }
      case 5: {  // time passes
        h.now += absl::Milliseconds(in.U16() % 8001);
        h.Apply(h.core.OnTick(h.now));
        break;
      }
      case 6: {  // Done for the last plan received
        if (w.session == 0) break;
        kolo::proto::WorkerMessage m;
        h.Stamp(m);
        m.mutable_done()->set_seq(w.last_plan);
        h.Apply(h.core.OnMessage(w.session, m));
        break;
      }
      case 7: {  // the stream ends
        if (w.session == 0) break;
        const SessionId id = w.session;
        h.Apply(h.core.OnClosed(id, "fuzz"));
        w = FakeWorker{};
        h.open.erase(id);
        break;
      }
    }
  }
  (void)h.core.Status();
  (void)h.core.DescribeMissing();
  h.Apply(h.core.Shutdown(/*failure=*/false, "fuzz input ended"));
  KOLO_CHECK(h.core.ended());
  return 0;
}
