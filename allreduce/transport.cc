#include "allreduce/transport.h"

#include <initializer_list>
#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kolo {

void SetPeers(absl::Status& status, absl::Span<const int> peers) {
  if (status.ok() || peers.empty()) return;
  status.SetPayload(kPeersPayloadUrl, absl::Cord(absl::StrJoin(peers, ",")));
}

std::vector<int> PeersOf(const absl::Status& status) {
  std::vector<int> peers;
  auto payload = status.GetPayload(kPeersPayloadUrl);
  if (!payload.has_value()) return peers;
  for (absl::string_view part :
       absl::StrSplit(std::string(*payload), ',', absl::SkipEmpty())) {
    int rank = 0;
    if (absl::SimpleAtoi(part, &rank)) peers.push_back(rank);
  }
  return peers;
}

absl::Status Transport::WaitAll(absl::Span<const OpId> ops) {
  // The first error ends the wait: the others belong to the same broken
  // collective, and waiting for each would multiply the timeout.
  for (OpId op : ops) {
    absl::Status s = Wait(op);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Transport::SendRecv(int send_peer, const void* send_data,
                                 size_t send_len, int recv_peer,
                                 void* recv_data, size_t recv_len) {
  // The receive is posted first so the peer's bytes have a home at once.
  absl::StatusOr<OpId> recv = StartRecv(recv_peer, recv_data, recv_len);
  if (!recv.ok()) return recv.status();
  absl::StatusOr<OpId> send = StartSend(send_peer, send_data, send_len);
  if (!send.ok()) return send.status();
  OpId ops[] = {*recv, *send};
  return WaitAll(ops);
}

absl::Status Transport::CutForFault(int peer) {
  return absl::UnimplementedError(
      absl::StrCat("this transport cannot cut its connection to peer ", peer,
                   " for fault injection"));
}

}  // namespace kolo
