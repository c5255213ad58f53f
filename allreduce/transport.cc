#include "allreduce/transport.h"

#include <initializer_list>

namespace kolo {

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

}  // namespace kolo
