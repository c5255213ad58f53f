#include "allreduce/tcp/tcp_transport.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "allreduce/tcp/mesh.h"
#include "allreduce/tcp/record_cipher.h"
#include "common/socket_util.h"

namespace kolo {
namespace {

std::string RankName(const TcpOptions& o, int r) {
  return absl::StrCat("rank ", r, " (worker ", o.worker_ids[r], ", ",
                      o.addresses[r], ")");
}

absl::Status Validate(const TcpOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TcpTransport: rank ", o.rank, " is outside a world of size ", o.size));
  }
  if (o.worker_ids.size() != static_cast<size_t>(o.size) ||
      o.addresses.size() != static_cast<size_t>(o.size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TcpTransport: ", o.worker_ids.size(), " worker ids and ",
        o.addresses.size(), " addresses for a world of size ", o.size));
  }
  if (o.secret.empty()) {
    return absl::InvalidArgumentError(
        "TcpTransport: empty job secret; the data plane needs the job secret");
  }
  if (o.rank < o.size - 1) {
    if (o.listen_fd < 0 && o.acceptor == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("TcpTransport: rank ", o.rank,
                       " must accept connections but has no listening socket"));
    }
    if (o.acceptor == nullptr) {
      if (absl::Status s = net::EnsureNonBlocking(o.listen_fd); !s.ok()) {
        return s;
      }
    }
  }
  if (o.timeout <= absl::ZeroDuration() ||
      o.connect_timeout <= absl::ZeroDuration() ||
      o.handshake_timeout <= absl::ZeroDuration() ||
      o.spin < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "TcpTransport: timeout, connect_timeout and handshake_timeout must be "
        "positive, spin "
        "not negative");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Create(
    const TcpOptions& options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<tcp::Poller>> poller = tcp::Poller::Create();
  if (!poller.ok()) return poller.status();
  absl::StatusOr<std::vector<tcp::MeshLink>> links =
      tcp::ConnectMesh(options, absl::Now() + options.connect_timeout);
  if (!links.ok()) return links.status();
  std::vector<std::unique_ptr<tcp::PeerChannel>> channels(options.size);
  std::string self = RankName(options, options.rank);
  for (int r = 0; r < options.size; ++r) {
    if (r == options.rank) continue;
    tcp::MeshLink& link = (*links)[r];
    if (absl::Status s =
            (*poller)->Add(link.fd.get(), static_cast<uint64_t>(r));
        !s.ok()) {
      return s;
    }
    std::unique_ptr<tcp::RecordCipher> seal, open;
    if (options.encryption == DataEncryption::kAes256Gcm) {
      // One key per direction: this rank seals with (rank -> r), opens
      // with (r -> rank).
      auto key = [&](int from, int to) {
        return tcp::DeriveDirectionKey(
            options.secret, options.job_id, options.epoch,
            static_cast<uint32_t>(from), static_cast<uint32_t>(to),
            link.connector_nonce, link.acceptor_nonce);
      };
      seal = std::make_unique<tcp::RecordCipher>(
          key(options.rank, r), tcp::RecordCipher::Direction::kSeal);
      open = std::make_unique<tcp::RecordCipher>(
          key(r, options.rank), tcp::RecordCipher::Direction::kOpen);
    }
    channels[r] = std::make_unique<tcp::PeerChannel>(
        std::move(link.fd), options.epoch, self, RankName(options, r),
        std::move(seal), std::move(open));
  }
  return std::make_unique<TcpTransport>(options, std::move(*poller),
                                        std::move(channels));
}

TcpTransport::TcpTransport(
    const TcpOptions& options, std::unique_ptr<tcp::Poller> poller,
    std::vector<std::unique_ptr<tcp::PeerChannel>> channels)
    : options_(options),
      poller_(std::move(poller)),
      channels_(std::move(channels)) {}

std::string TcpTransport::Self() const {
  return RankName(options_, options_.rank);
}

absl::Status TcpTransport::AbortStatus() const {
  MutexLock lock(&abort_mu_);
  return abort_status_;
}

absl::Status TcpTransport::CutForFault(int peer) {
  int cut = 0;
  for (size_t r = 0; r < channels_.size(); ++r) {
    if (channels_[r] == nullptr) continue;
    if (peer >= 0 && static_cast<int>(r) != peer) continue;
    ::shutdown(channels_[r]->fd(), SHUT_RDWR);
    ++cut;
  }
  if (cut == 0) {
    return absl::NotFoundError(
        absl::StrCat(Self(), ": no data connection to peer ", peer, " to cut"));
  }
  return absl::OkStatus();
}

void TcpTransport::Abort(absl::Status why) {
  {
    MutexLock lock(&abort_mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    if (why.code() == absl::StatusCode::kAborted) {
      abort_status_ = std::move(why);
    } else {
      abort_status_ = absl::AbortedError(
          absl::StrCat(Self(), ": data plane aborted",
                       why.message().empty() ? "" : ": ", why.message()));
    }
    aborted_.store(true, std::memory_order_release);
  }
  poller_->Wake();
}

absl::Status TcpTransport::CheckStart(int peer) const {
  if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
  if (peer < 0 || peer >= options_.size || peer == options_.rank) {
    return absl::InvalidArgumentError(absl::StrCat(Self(), ": no peer rank ",
                                                   peer, " in a world of size ",
                                                   options_.size));
  }
  absl::Status error = channels_[peer]->error();
  SetPeers(error, {peer});
  return error;
}

OpId TcpTransport::NewOp() {
  OpId id = next_op_++;
  ops_.emplace(id, OpRecord{});
  return id;
}

absl::StatusOr<OpId> TcpTransport::StartSend(int peer, const void* data,
                                             size_t len) {
  if (absl::Status s = CheckStart(peer); !s.ok()) return s;
  OpId id = NewOp();
  channels_[peer]->PushSend(id, seq_, data, len);
  return id;
}

absl::StatusOr<OpId> TcpTransport::StartRecv(int peer, void* data, size_t len) {
  if (absl::Status s = CheckStart(peer); !s.ok()) return s;
  OpId id = NewOp();
  channels_[peer]->PushRecv(id, seq_, data, len);
  return id;
}

size_t TcpTransport::ProgressAll() {
  size_t moved = 0;
  done_scratch_.clear();
  for (size_t r = 0; r < channels_.size(); ++r) {
    tcp::PeerChannel* ch = channels_[r].get();
    if (ch != nullptr && (ch->has_sends() || ch->has_recvs())) {
      const size_t before = done_scratch_.size();
      moved += ch->Progress(&done_scratch_);
      for (size_t i = before; i < done_scratch_.size(); ++i) {
        SetPeers(done_scratch_[i].second, {static_cast<int>(r)});
      }
    }
  }
  for (auto& [id, status] : done_scratch_) {
    auto it = ops_.find(id);
    if (it == ops_.end()) continue;
    if (!status.ok() && first_error_.ok()) first_error_ = status;
    it->second.done = true;
    it->second.status = std::move(status);
  }
  return moved;
}

absl::Status TcpTransport::Poll(absl::Duration timeout) {
  epoll_event events[64];
  absl::StatusOr<int> n = poller_->Wait(timeout, absl::MakeSpan(events));
  if (!n.ok()) return n.status();
  for (int i = 0; i < *n; ++i) {
    uint64_t tag = events[i].data.u64;
    if (tag == tcp::Poller::kWakeTag) continue;  // Abort: checked by Wait
    if (tag < channels_.size() && channels_[tag] != nullptr) {
      channels_[tag]->OnEvent(events[i].events);
    }
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::InactivityError(absl::Duration idle) const {
  std::vector<std::string> from, to;
  std::vector<int> from_ranks, to_ranks;
  for (size_t r = 0; r < channels_.size(); ++r) {
    const tcp::PeerChannel* ch = channels_[r].get();
    if (ch == nullptr) continue;
    if (ch->has_recvs()) {
      from.push_back(ch->peer_name());
      from_ranks.push_back(static_cast<int>(r));
    } else if (ch->has_sends()) {
      to.push_back(ch->peer_name());
      to_ranks.push_back(static_cast<int>(r));
    }
  }
  std::string what;
  if (!from.empty()) {
    what = absl::StrCat("no data from ", absl::StrJoin(from, ", "));
  }
  if (!to.empty()) {
    absl::StrAppend(&what, what.empty() ? "" : "; ", "no data taken by ",
                    absl::StrJoin(to, ", "));
  }
  absl::Status error = absl::DeadlineExceededError(absl::StrFormat(
      "%s: %s for %.1f s (KOLO_TIMEOUT_SECONDS): is that worker alive and "
      "running the same collective?",
      Self(), what, absl::ToDoubleSeconds(idle)));
  // The peers it waited on: the ones it had nothing from first.
  SetPeers(error, from_ranks.empty() ? to_ranks : from_ranks);
  return error;
}

absl::StatusOr<size_t> TcpTransport::Drive(absl::Duration block) {
  if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
  if (absl::Status s = Poll(absl::ZeroDuration()); !s.ok()) return s;
  size_t moved = ProgressAll();
  if (!first_error_.ok()) return first_error_;
  if (moved == 0 && block > absl::ZeroDuration() && HasPending()) {
    if (absl::Status s = Poll(block); !s.ok()) return s;
    if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
    moved = ProgressAll();
    if (!first_error_.ok()) return first_error_;
  }
  return moved;
}

bool TcpTransport::Completed(OpId op) const {
  auto it = ops_.find(op);
  return it != ops_.end() && it->second.done;
}

bool TcpTransport::HasPending() const {
  for (const auto& ch : channels_) {
    if (ch != nullptr && (ch->has_sends() || ch->has_recvs())) return true;
  }
  return false;
}

absl::Status TcpTransport::Wait(OpId op) {
  if (!ops_.contains(op)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Self(), ": Wait on op ", op,
                     ", which was never started or was already waited for"));
  }
  absl::Time last_progress = absl::Now();
  const absl::Time spin_until = last_progress + options_.spin;
  while (true) {
    if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
    size_t moved = ProgressAll();
    auto it = ops_.find(op);
    if (it->second.done) {
      absl::Status status = std::move(it->second.status);
      ops_.erase(it);
      return status;
    }
    if (!first_error_.ok()) return first_error_;
    absl::Time now = absl::Now();
    if (moved > 0) last_progress = now;
    absl::Duration idle = now - last_progress;
    if (idle >= inactivity_) return InactivityError(idle);
    absl::Status s =
        Poll(now < spin_until ? absl::ZeroDuration() : inactivity_ - idle);
    if (!s.ok()) return s;
  }
}

}  // namespace kolo
