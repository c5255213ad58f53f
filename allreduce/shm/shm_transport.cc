#include "allreduce/shm/shm_transport.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "allreduce/shm/futex.h"
#include "common/check.h"

namespace kolo {
namespace {

constexpr size_t kHeaderBytes = 32;
// Bytes read by one process_vm_readv.
constexpr size_t kAttachPieceBytes = 4 << 20;
// Bytes copied between two publications of a ring position: the peer starts
// copying a large message out while the rest is still being copied in.
constexpr size_t kPieceBytes = 64 * 1024;
// A sleeping wait re-checks that the peers it waits on are alive this often.
constexpr absl::Duration kLivenessSlice = absl::Milliseconds(20);

void PutU64(unsigned char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t GetU64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

ShmTransport::ShmTransport(std::unique_ptr<shm::Segment> segment,
                           ShmOptions options)
    : segment_(std::move(segment)),
      options_(std::move(options)),
      my_bell_(segment_->bell(options_.rank)),
      peers_(static_cast<size_t>(segment_->ranks())),
      probe_value_(0x6b6f6c6f00000000ull ^
                   (static_cast<uint64_t>(::getpid()) << 8) ^
                   static_cast<uint64_t>(options_.rank) ^
                   reinterpret_cast<uintptr_t>(this)) {
  const size_t n = peers_.size();
  KOLO_CHECK(options_.rank >= 0 && static_cast<size_t>(options_.rank) < n);
  KOLO_CHECK(options_.names.empty() || options_.names.size() == n);
  KOLO_CHECK(options_.epoch_ranks.empty() || options_.epoch_ranks.size() == n);
  KOLO_CHECK(options_.pids.empty() || options_.pids.size() == n);
  const pid_t self = ::getpid();
  for (size_t r = 0; r < options_.pids.size(); ++r) {
    if (static_cast<int>(r) == options_.rank || options_.pids[r] == self) {
      continue;
    }
    // Without a pidfd (an old kernel, another pid namespace) the peer is
    // watched by the epoch's abort and the inactivity deadline only.
    peers_[r].pidfd = net::UniqueFd(
        static_cast<int>(::syscall(SYS_pidfd_open, options_.pids[r], 0)));
  }
  my_bell_->probe_value.store(probe_value_, std::memory_order_relaxed);
  my_bell_->probe_address.store(reinterpret_cast<uintptr_t>(&probe_value_),
                                std::memory_order_release);
}

pid_t ShmTransport::Pid(int r) const {
  return options_.pids.empty() ? ::getpid() : options_.pids[r];
}

void ShmTransport::ProbeAttach(int peer) {
  shm::RingControl* ctl = segment_->control(peer, options_.rank);
  if (ctl->attach.load(std::memory_order_relaxed) != 0) return;
  if (options_.attach_min_bytes == 0) {
    ctl->attach.store(2, std::memory_order_release);
    return;
  }
  shm::Doorbell* bell = segment_->bell(peer);
  const uint64_t address = bell->probe_address.load(std::memory_order_acquire);
  if (address == 0) return;  // not published yet: ask again later
  uint64_t value = 0;
  iovec local{&value, sizeof(value)};
  iovec remote{reinterpret_cast<void*>(address), sizeof(value)};
  const bool ok = ::process_vm_readv(Pid(peer), &local, 1, &remote, 1, 0) ==
                      static_cast<ssize_t>(sizeof(value)) &&
                  value == bell->probe_value.load(std::memory_order_relaxed);
  ctl->attach.store(ok ? 1 : 2, std::memory_order_release);
}

ShmTransport::~ShmTransport() {
  my_bell_->gone.store(1, std::memory_order_seq_cst);
}

std::string ShmTransport::Name(int r) const {
  return options_.names.empty() ? absl::StrCat("rank ", r) : options_.names[r];
}

int ShmTransport::EpochRank(int r) const {
  return options_.epoch_ranks.empty() ? r : options_.epoch_ranks[r];
}

absl::Status ShmTransport::AbortStatus() const {
  MutexLock lock(&abort_mu_);
  return abort_status_;
}

void ShmTransport::Abort(absl::Status why) {
  {
    MutexLock lock(&abort_mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    if (why.code() == absl::StatusCode::kAborted) {
      abort_status_ = std::move(why);
    } else {
      abort_status_ = absl::AbortedError(absl::StrCat(
          Name(options_.rank), ": shared-memory data plane aborted",
          why.message().empty() ? "" : ": ", why.message()));
    }
    // Before any Wait can return the abort, and so before the caller may
    // touch a buffer that a peer reads by reference.
    my_bell_->gone.store(1, std::memory_order_seq_cst);
    aborted_.store(true, std::memory_order_seq_cst);
  }
  my_bell_->word.fetch_add(1, std::memory_order_seq_cst);
  shm::FutexWakeAll(&my_bell_->word);
}

absl::Status ShmTransport::CheckStart(int peer) const {
  if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
  if (peer < 0 || peer >= size() || peer == options_.rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(options_.rank), ": no peer rank ", peer,
                     " among the ", size(), " ranks sharing memory"));
  }
  if (peers_[peer].cut) return CutError(peer);
  return absl::OkStatus();
}

absl::Status ShmTransport::CutError(int peer) const {
  absl::Status error = absl::UnavailableError(
      absl::StrCat(Name(options_.rank), ": the shared-memory connection to ",
                   Name(peer), " was cut (fault injection)"));
  SetPeers(error, {EpochRank(peer)});
  return error;
}

absl::Status ShmTransport::CutForFault(int peer) {
  int cut = 0;
  for (int r = 0; r < size(); ++r) {
    if (r == options_.rank || (peer >= 0 && r != peer)) continue;
    Peer& p = peers_[r];
    p.cut = true;
    const absl::Status error = CutError(r);
    for (const Msg& m : p.sends) Complete(m.id, error);
    for (const Msg& m : p.recvs) Complete(m.id, error);
    for (const auto& [ticket, id] : p.awaiting) Complete(id, error);
    p.sends.clear();
    p.recvs.clear();
    p.awaiting.clear();
    ++cut;
  }
  if (cut == 0) {
    return absl::NotFoundError(absl::StrCat(
        Name(options_.rank), ": no shared-memory peer ", peer, " to cut"));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpId> ShmTransport::StartSend(int peer, const void* data,
                                             size_t len) {
  if (absl::Status s = CheckStart(peer); !s.ok()) return s;
  const OpId id = next_op_++;
  ops_.emplace(id, std::make_pair(false, absl::OkStatus()));
  ++pending_;
  Msg m;
  m.id = id;
  m.data = static_cast<uint8_t*>(const_cast<void*>(data));
  m.len = len;
  m.seq = seq_;
  PutU64(m.header, options_.epoch);
  PutU64(m.header + 8, seq_);
  PutU64(m.header + 16, len);
  peers_[peer].sends.push_back(m);
  return id;
}

absl::StatusOr<OpId> ShmTransport::StartRecv(int peer, void* data, size_t len) {
  if (absl::Status s = CheckStart(peer); !s.ok()) return s;
  const OpId id = next_op_++;
  ops_.emplace(id, std::make_pair(false, absl::OkStatus()));
  ++pending_;
  Msg m;
  m.id = id;
  m.data = static_cast<uint8_t*>(data);
  m.len = len;
  m.seq = seq_;
  peers_[peer].recvs.push_back(m);
  return id;
}

void ShmTransport::Complete(OpId id, absl::Status status) {
  auto it = ops_.find(id);
  KOLO_CHECK(it != ops_.end() && !it->second.first);
  --pending_;
  if (!status.ok() && first_error_.ok()) first_error_ = status;
  it->second = std::make_pair(true, std::move(status));
}

void ShmTransport::Ring(int peer) {
  shm::Doorbell* bell = segment_->bell(peer);
  // Pairs with the waiter's waiters.fetch_add before its last look.
  if (bell->waiters.load(std::memory_order_seq_cst) == 0) return;
  bell->word.fetch_add(1, std::memory_order_seq_cst);
  shm::FutexWakeAll(&bell->word);
}

size_t ShmTransport::ProgressSends(int peer) {
  Peer& p = peers_[peer];
  shm::RingControl* ctl = segment_->control(options_.rank, peer);
  uint8_t* ring = segment_->ring(options_.rank, peer);
  const uint64_t cap = segment_->ring_bytes();
  size_t moved = 0;
  while (!p.sends.empty()) {
    Msg& m = p.sends.front();
    if (m.header_done == 0 && options_.attach_min_bytes > 0 &&
        m.len >= options_.attach_min_bytes &&
        ctl->attach.load(std::memory_order_acquire) == 1) {
      m.remote = reinterpret_cast<uintptr_t>(m.data);
      PutU64(m.header + 24, m.remote);
    }
    bool full = false;
    while (!full && (m.header_done < kHeaderBytes ||
                     (m.remote == 0 && m.done < m.len))) {
      const uint64_t tail = ctl->tail.load(std::memory_order_acquire);
      const uint64_t used = p.head - tail;
      if (used > cap) {
        absl::Status error = absl::DataLossError(absl::StrCat(
            Name(options_.rank), ": the shared-memory ring to ", Name(peer),
            " is corrupt (its reader claims more than was written)"));
        SetPeers(error, {EpochRank(peer)});
        while (!p.sends.empty()) {
          Complete(p.sends.front().id, error);
          p.sends.pop_front();
        }
        return moved;
      }
      const unsigned char* src;
      size_t want;
      if (m.header_done < kHeaderBytes) {
        src = m.header + m.header_done;
        want = kHeaderBytes - m.header_done;
      } else {
        src = m.data + m.done;
        want = std::min(m.len - m.done, kPieceBytes);
      }
      const size_t k = std::min<uint64_t>(want, cap - used);
      if (k == 0) {
        full = true;
        break;
      }
      const size_t off = p.head % cap;
      const size_t first = std::min<size_t>(k, cap - off);
      std::memcpy(ring + off, src, first);
      if (k > first) std::memcpy(ring, src + first, k - first);
      p.head += k;
      ctl->head.store(p.head, std::memory_order_seq_cst);
      Ring(peer);
      moved += k;
      if (m.header_done < kHeaderBytes) {
        m.header_done += k;
      } else {
        m.done += k;
      }
    }
    if (full) break;
    if (m.remote != 0) {
      p.awaiting.emplace_back(++p.refs_sent, m.id);  // done when acked
    } else {
      Complete(m.id, absl::OkStatus());
    }
    p.sends.pop_front();
  }
  return moved;
}

size_t ShmTransport::ProgressRecvs(int peer) {
  Peer& p = peers_[peer];
  shm::RingControl* ctl = segment_->control(peer, options_.rank);
  const uint8_t* ring = segment_->ring(peer, options_.rank);
  const uint64_t cap = segment_->ring_bytes();
  ProbeAttach(peer);
  size_t moved = 0;
  auto fail_all = [&](absl::Status error) {
    SetPeers(error, {EpochRank(peer)});
    while (!p.recvs.empty()) {
      Complete(p.recvs.front().id, error);
      p.recvs.pop_front();
    }
  };
  // Copies up to `want` bytes out of the ring; 0 when it is empty.
  auto take = [&](unsigned char* dst, size_t want) -> size_t {
    const uint64_t avail = ctl->head.load(std::memory_order_acquire) - p.tail;
    if (avail > cap) {
      fail_all(absl::DataLossError(absl::StrCat(
          Name(options_.rank), ": the shared-memory ring from ", Name(peer),
          " is corrupt (it claims more bytes than the ring holds)")));
      return 0;
    }
    const size_t k = std::min<uint64_t>(want, avail);
    if (k == 0) return 0;
    const size_t off = p.tail % cap;
    const size_t first = std::min<size_t>(k, cap - off);
    std::memcpy(dst, ring + off, first);
    if (k > first) std::memcpy(dst + first, ring, k - first);
    p.tail += k;
    ctl->tail.store(p.tail, std::memory_order_seq_cst);
    Ring(peer);
    return k;
  };
  while (!p.recvs.empty()) {
    Msg& m = p.recvs.front();
    while (m.header_done < kHeaderBytes) {
      const size_t k =
          take(m.header + m.header_done, kHeaderBytes - m.header_done);
      if (k == 0) return moved;
      moved += k;
      m.header_done += k;
      if (m.header_done < kHeaderBytes) continue;
      const uint64_t epoch = GetU64(m.header);
      const uint64_t seq = GetU64(m.header + 8);
      const uint64_t len = GetU64(m.header + 16);
      m.remote = GetU64(m.header + 24);
      if (epoch != options_.epoch || seq != m.seq || len != m.len) {
        // The stream cannot be trusted past a mismatch: every receive from
        // this peer fails.
        fail_all(absl::FailedPreconditionError(absl::StrCat(
            Name(options_.rank), " expected ", m.len, " bytes of operation ",
            m.seq, " (epoch ", options_.epoch, ") from ", Name(peer),
            " but got ", len, " bytes of operation ", seq, " (epoch ", epoch,
            "): the ranks ran different collectives")));
        return moved;
      }
    }
    if (m.remote != 0) {
      // By reference: straight out of the sender's memory, then the ack.
      while (m.done < m.len) {
        const size_t k = std::min(m.len - m.done, kAttachPieceBytes);
        iovec local{m.data + m.done, k};
        iovec remote{reinterpret_cast<void*>(m.remote + m.done), k};
        const ssize_t n =
            ::process_vm_readv(Pid(peer), &local, 1, &remote, 1, 0);
        if (n <= 0) {
          fail_all(absl::UnavailableError(absl::StrCat(
              Name(options_.rank), ": could not read a message from ",
              Name(peer), " in its memory (process_vm_readv: ",
              std::strerror(errno), "); has it exited?")));
          return moved;
        }
        m.done += static_cast<size_t>(n);
        moved += static_cast<size_t>(n);
      }
      if (segment_->bell(peer)->gone.load(std::memory_order_seq_cst) != 0) {
        fail_all(absl::AbortedError(
            absl::StrCat(Name(options_.rank), ": ", Name(peer),
                         " aborted while its message was being read")));
        return moved;
      }
      ctl->acks.store(++p.acks_given, std::memory_order_seq_cst);
      Ring(peer);
    } else {
      while (m.done < m.len) {
        const size_t k =
            take(m.data + m.done, std::min(m.len - m.done, kPieceBytes));
        if (k == 0) return moved;
        moved += k;
        m.done += k;
      }
    }
    Complete(m.id, absl::OkStatus());
    p.recvs.pop_front();
  }
  return moved;
}

size_t ShmTransport::ProgressAcks(int peer) {
  Peer& p = peers_[peer];
  const uint64_t acks = segment_->control(options_.rank, peer)
                            ->acks.load(std::memory_order_acquire);
  size_t moved = 0;
  while (!p.awaiting.empty() && p.awaiting.front().first <= acks) {
    Complete(p.awaiting.front().second, absl::OkStatus());
    p.awaiting.pop_front();
    ++moved;
  }
  return moved;
}

size_t ShmTransport::ProgressAll() {
  size_t moved = 0;
  for (int r = 0; r < size(); ++r) {
    if (r == options_.rank) continue;
    if (!peers_[r].sends.empty()) moved += ProgressSends(r);
    if (!peers_[r].recvs.empty()) moved += ProgressRecvs(r);
    if (!peers_[r].awaiting.empty()) moved += ProgressAcks(r);
  }
  return moved;
}

absl::Status ShmTransport::CheckPeersAlive() {
  for (int r = 0; r < size(); ++r) {
    Peer& p = peers_[r];
    if (!p.pidfd.valid() ||
        (p.sends.empty() && p.recvs.empty() && p.awaiting.empty())) {
      continue;
    }
    pollfd pfd{p.pidfd.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) != 1) continue;
    // It exited; what it wrote before may still be in the ring.
    ProgressAll();
    if (p.sends.empty() && p.recvs.empty() && p.awaiting.empty()) continue;
    absl::Status error = absl::UnavailableError(absl::StrCat(
        Name(options_.rank), ": ", Name(r), " (process ", options_.pids[r],
        ") exited during a shared-memory transfer with it"));
    SetPeers(error, {EpochRank(r)});
    return error;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ShmTransport::Drive(absl::Duration block) {
  if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
  size_t moved = ProgressAll();
  if (!first_error_.ok()) return first_error_;
  if (moved > 0 || block <= absl::ZeroDuration() || pending_ == 0) {
    return moved;
  }
  const absl::Time now = absl::Now();
  if (now >= next_liveness_check_) {
    next_liveness_check_ = now + kLivenessSlice;
    if (absl::Status s = CheckPeersAlive(); !s.ok()) {
      if (first_error_.ok()) first_error_ = s;
      return s;
    }
  }
  // The word is read before the last look at the rings: a peer that
  // publishes after that look sees our waiter count and bumps the word, so
  // FutexWait returns at once instead of sleeping through it.
  const uint32_t word = my_bell_->word.load(std::memory_order_seq_cst);
  my_bell_->waiters.fetch_add(1, std::memory_order_seq_cst);
  moved = ProgressAll();
  if (moved == 0 && first_error_.ok() &&
      !aborted_.load(std::memory_order_seq_cst)) {
    shm::FutexWait(
        &my_bell_->word, word,
        options_.pids.empty() ? block : std::min(block, kLivenessSlice));
  }
  my_bell_->waiters.fetch_sub(1, std::memory_order_seq_cst);
  if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
  moved += ProgressAll();
  if (!first_error_.ok()) return first_error_;
  return moved;
}

bool ShmTransport::Completed(OpId op) const {
  auto it = ops_.find(op);
  return it != ops_.end() && it->second.first;
}

bool ShmTransport::HasPending() const { return pending_ > 0; }

absl::Status ShmTransport::InactivityError(absl::Duration idle) const {
  std::vector<std::string> from, to;
  std::vector<int> from_ranks, to_ranks;
  for (int r = 0; r < size(); ++r) {
    if (!peers_[r].recvs.empty()) {
      from.push_back(Name(r));
      from_ranks.push_back(EpochRank(r));
    } else if (!peers_[r].sends.empty() || !peers_[r].awaiting.empty()) {
      to.push_back(Name(r));
      to_ranks.push_back(EpochRank(r));
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
      "%s: %s over shared memory for %.1f s (KOLO_TIMEOUT_SECONDS): is that "
      "worker alive and running the same collective?",
      Name(options_.rank), what, absl::ToDoubleSeconds(idle)));
  SetPeers(error, from_ranks.empty() ? to_ranks : from_ranks);
  return error;
}

absl::Status ShmTransport::Wait(OpId op) {
  if (!ops_.contains(op)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(options_.rank), ": Wait on op ", op,
                     ", which was never started or was already waited for"));
  }
  absl::Time last_progress = absl::Now();
  const absl::Time spin_until = last_progress + options_.spin;
  while (true) {
    auto it = ops_.find(op);
    if (it->second.first && !aborted_.load(std::memory_order_acquire)) {
      absl::Status status = std::move(it->second.second);
      ops_.erase(it);
      return status;
    }
    const absl::Time now = absl::Now();
    const absl::Duration idle = now - last_progress;
    if (idle >= inactivity_) return InactivityError(idle);
    absl::StatusOr<size_t> moved =
        Drive(now < spin_until ? absl::ZeroDuration() : inactivity_ - idle);
    if (!moved.ok()) return moved.status();
    if (*moved > 0) last_progress = absl::Now();
  }
}

void ShmTransport::NotifyPeers() {
  for (int r = 0; r < size(); ++r) {
    if (r != options_.rank) Ring(r);
  }
}

absl::Status ShmTransport::WaitFor(absl::FunctionRef<int()> laggard,
                                   absl::string_view what) {
  int late = laggard();
  if (late < 0) return absl::OkStatus();
  absl::Time since = absl::Now();  // the last time a peer arrived
  const absl::Time spin_until = since + options_.spin;
  absl::Time next_liveness_check = since + kLivenessSlice;
  while (true) {
    if (aborted_.load(std::memory_order_acquire)) return AbortStatus();
    int now_late = laggard();
    // Spinning: a tight look between two reads of the clock.
    for (int i = 0; i < 64 && now_late >= 0; ++i) now_late = laggard();
    if (now_late < 0) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now_late != late) {
      late = now_late;
      since = now;
    }
    if (now < spin_until) continue;
    const absl::Duration idle = now - since;
    if (idle >= inactivity_) {
      absl::Status error = absl::DeadlineExceededError(absl::StrFormat(
          "%s: %s waited %.1f s over shared memory for %s "
          "(KOLO_TIMEOUT_SECONDS): is that worker alive and running the same "
          "collective?",
          Name(options_.rank), what, absl::ToDoubleSeconds(idle), Name(late)));
      SetPeers(error, {EpochRank(late)});
      return error;
    }
    const net::UniqueFd& pidfd = peers_[late].pidfd;
    if (pidfd.valid() && now >= next_liveness_check) {
      next_liveness_check = now + kLivenessSlice;
      pollfd pfd{pidfd.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 0) == 1 && laggard() == late) {
        absl::Status error = absl::UnavailableError(absl::StrCat(
            Name(options_.rank), ": ", Name(late), " (process ",
            options_.pids[late], ") exited during a shared-memory ", what));
        SetPeers(error, {EpochRank(late)});
        return error;
      }
    }
    // As in Drive: the word is read before the last look, so a peer that
    // arrives after it sees the waiter and bumps the word.
    const uint32_t word = my_bell_->word.load(std::memory_order_seq_cst);
    my_bell_->waiters.fetch_add(1, std::memory_order_seq_cst);
    if (laggard() >= 0 && !aborted_.load(std::memory_order_seq_cst)) {
      absl::Duration block = inactivity_ - idle;
      if (pidfd.valid()) block = std::min(block, kLivenessSlice);
      shm::FutexWait(&my_bell_->word, word, block);
    }
    my_bell_->waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace kolo
