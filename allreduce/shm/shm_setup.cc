#include "allreduce/shm/shm_setup.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/shm/segment.h"
#include "common/auth.h"
#include "common/check.h"
#include "common/log.h"
#include "common/unique_fd.h"

namespace kolo {
namespace {

// The sequence stamped on the set-up messages: plans never use it.
constexpr uint64_t kSetupSeq = ~uint64_t{0};
constexpr size_t kNameBytes = 32;  // abstract socket name, NUL padded
// The leader waits at most this long for its peers to fetch the descriptor
// (a peer that could not connect says so only afterwards, over TCP).
constexpr absl::Duration kHandOver = absl::Seconds(5);
// The report and verdict messages: a reason, NUL padded (empty: all well).
constexpr size_t kReasonBytes = 256;

struct Offer {
  uint8_t ok = 0;
  char nonce[shm::kNonceBytes] = {};
  char name[kNameBytes] = {};
};

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

sockaddr_un AbstractAddress(const char* name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = ::strnlen(name, kNameBytes);
  std::memcpy(a.sun_path + 1, name, n);  // sun_path[0] = 0: abstract
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

int PollMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000));
}

absl::Status Exchange(Transport& t,
                      const std::vector<std::pair<int, std::string>>& sends,
                      std::vector<std::pair<int, std::string*>> recvs) {
  std::vector<OpId> ops;
  for (auto& [peer, bytes] : recvs) {
    absl::StatusOr<OpId> op = t.StartRecv(peer, bytes->data(), bytes->size());
    if (!op.ok()) return op.status();
    ops.push_back(*op);
  }
  for (const auto& [peer, bytes] : sends) {
    absl::StatusOr<OpId> op = t.StartSend(peer, bytes.data(), bytes.size());
    if (!op.ok()) return op.status();
    ops.push_back(*op);
  }
  return t.WaitAll(ops);
}

// Leader: accepts until every peer in `pids` (by local index, 0 = leader)
// fetched the descriptor or the deadline passed.
absl::Status HandOut(int listen_fd, const std::vector<pid_t>& pids, int memfd,
                     absl::Time deadline) {
  std::vector<bool> served(pids.size(), false);
  served[0] = true;
  size_t left = pids.size() - 1;
  auto log = GetLogger("transport");
  while (left > 0) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          left, " local rank(s) did not fetch the shared-memory segment"));
    }
    pollfd pfd{listen_fd, POLLIN, 0};
    if (::poll(&pfd, 1, PollMs(deadline)) <= 0) continue;
    net::UniqueFd conn(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      continue;
    }
    // The first peer with that process id not served yet (ranks run as
    // threads of one process in tests share one).
    size_t who = 1;
    while (who < pids.size() && (pids[who] != cred.pid || served[who])) ++who;
    if (cred.uid != ::geteuid() || who == pids.size()) {
      log->warn(
          "shared memory: refused a connection from process {} (uid {}), "
          "which is not a local rank of this epoch",
          cred.pid, cred.uid);
      continue;
    }
    char byte = 'k';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &memfd, sizeof(int));
    if (::sendmsg(conn.get(), &msg, MSG_NOSIGNAL) != 1) continue;
    served[who] = true;
    --left;
  }
  return absl::OkStatus();
}

// Peer: fetches the descriptor from the leader's socket `name`.
absl::StatusOr<net::UniqueFd> Fetch(const char* name, pid_t leader,
                                    absl::Time deadline) {
  net::UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Errno("socket");
  socklen_t alen;
  sockaddr_un a = AbstractAddress(name, &alen);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), alen) != 0) {
    return Errno(
        "connecting to the leader's socket (another network "
        "namespace?)");
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
      cred.pid != leader || cred.uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the socket is served by process ", cred.pid,
                     ", not the leader ", leader));
  }
  while (true) {
    pollfd pfd{s.get(), POLLIN, 0};
    const int n = ::poll(&pfd, 1, PollMs(deadline));
    if (n > 0) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("the leader sent no descriptor");
    }
  }
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (::recvmsg(s.get(), &msg, MSG_CMSG_CLOEXEC) != 1) {
    return Errno("receiving the descriptor");
  }
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_level != SOL_SOCKET ||
      c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) {
    return absl::InternalError("the leader's message carried no descriptor");
  }
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return net::UniqueFd(fd);
}

// What one rank holds while the segment is set up.
struct SetupState {
  Offer offer;
  net::UniqueFd listener;  // the leader's hand-over socket
  std::unique_ptr<shm::Segment> segment;
  std::string why;  // why this rank cannot use the segment ("": it can)
};

// The leader creates the segment and binds the hand-over socket its peers
// fetch the descriptor from; `st.offer` says where (or that it failed).
void CreateSegment(const ShmSetupOptions& o, int n, SetupState& st) {
  const std::string nonce = auth::RandomBytes(shm::kNonceBytes);
  const std::string name = absl::StrCat("kolo-", auth::RandomHex(13));
  absl::StatusOr<shm::SegmentPlan> plan = shm::Segment::PlanFor(n, o.bytes);
  absl::StatusOr<std::unique_ptr<shm::Segment>> created =
      plan.ok() ? shm::Segment::Create(n, plan->ring_bytes, o.epoch, nonce,
                                       plan->slot_bytes)
                : absl::StatusOr<std::unique_ptr<shm::Segment>>(plan.status());
  if (!created.ok()) {
    st.why = std::string(created.status().message());
    return;
  }
  st.listener = net::UniqueFd(
      ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  socklen_t alen;
  sockaddr_un a = AbstractAddress(name.c_str(), &alen);
  if (!st.listener.valid() ||
      ::bind(st.listener.get(), reinterpret_cast<sockaddr*>(&a), alen) != 0 ||
      ::listen(st.listener.get(), n + 8) != 0) {
    st.why = Errno("binding the hand-over socket").ToString();
    return;
  }
  st.segment = *std::move(created);
  st.offer.ok = 1;
  std::memcpy(st.offer.nonce, nonce.data(), shm::kNonceBytes);
  std::memcpy(st.offer.name, name.data(), name.size());
}

// Step 1, the leader's side: every peer's process id up; the offer (socket
// name, nonce, every pid) down.
absl::Status SendOffer(Transport& control, const ShmSetupOptions& o, int n,
                       ShmJoin& join, SetupState& st) {
  std::vector<std::string> hellos(n, std::string(sizeof(pid_t), '\0'));
  std::vector<std::pair<int, std::string*>> recvs;
  for (int i = 1; i < n; ++i) recvs.emplace_back(o.local[i], &hellos[i]);
  if (absl::Status s = Exchange(control, {}, recvs); !s.ok()) return s;
  for (int i = 1; i < n; ++i) {
    std::memcpy(&join.pids[i], hellos[i].data(), sizeof(pid_t));
  }
  CreateSegment(o, n, st);
  std::string offer_bytes(sizeof(Offer) + sizeof(pid_t) * n, '\0');
  std::memcpy(offer_bytes.data(), &st.offer, sizeof(Offer));
  std::memcpy(offer_bytes.data() + sizeof(Offer), join.pids.data(),
              sizeof(pid_t) * n);
  std::vector<std::pair<int, std::string>> sends;
  for (int i = 1; i < n; ++i) sends.emplace_back(o.local[i], offer_bytes);
  return Exchange(control, sends, {});
}

// Step 1, a peer's side: its process id up, the offer down.
absl::Status TakeOffer(Transport& control, const ShmSetupOptions& o, int n,
                       ShmJoin& join, SetupState& st) {
  const int leader_rank = o.local[0];
  std::string offer_bytes(sizeof(Offer) + sizeof(pid_t) * n, '\0');
  std::string hello(sizeof(pid_t), '\0');
  std::memcpy(hello.data(), &join.pids[join.local_rank], sizeof(pid_t));
  if (absl::Status s = Exchange(control, {{leader_rank, hello}},
                                {{leader_rank, &offer_bytes}});
      !s.ok()) {
    return s;
  }
  std::memcpy(&st.offer, offer_bytes.data(), sizeof(Offer));
  std::memcpy(join.pids.data(), offer_bytes.data() + sizeof(Offer),
              sizeof(pid_t) * n);
  if (!st.offer.ok) st.why = "the leader could not create the segment";
  return absl::OkStatus();
}

// Step 2: the descriptor, over the abstract socket; each peer maps it.
void ShareDescriptor(const ShmSetupOptions& o, int n, bool leader,
                     const ShmJoin& join, SetupState& st) {
  if (leader && st.segment != nullptr) {
    absl::Status s = HandOut(st.listener.get(), join.pids, st.segment->fd(),
                             std::min(o.deadline, absl::Now() + kHandOver));
    st.listener.Reset();
    if (!s.ok()) st.why = std::string(s.message());
  } else if (!leader && st.offer.ok) {
    char name[kNameBytes + 1] = {};
    std::memcpy(name, st.offer.name, kNameBytes);
    absl::StatusOr<net::UniqueFd> fd = Fetch(
        name, join.pids[0], std::min(o.deadline, absl::Now() + kHandOver));
    absl::StatusOr<std::unique_ptr<shm::Segment>> mapped =
        fd.ok()
            ? shm::Segment::Map(*std::move(fd), n, o.epoch,
                                std::string(st.offer.nonce, shm::kNonceBytes))
            : absl::StatusOr<std::unique_ptr<shm::Segment>>(fd.status());
    if (mapped.ok()) {
      st.segment = *std::move(mapped);
    } else {
      st.why = std::string(mapped.status().message());
    }
  }
  if (st.segment != nullptr) st.segment->CloseFd();
}

// Step 3, the leader's side: every peer's report up; the verdict (its own
// failure, else the first peer's) down. `why` becomes the verdict.
absl::Status Decide(Transport& control, const ShmSetupOptions& o, int n,
                    std::string& why) {
  std::vector<std::string> reports(n, std::string(kReasonBytes, '\0'));
  std::vector<std::pair<int, std::string*>> recvs;
  for (int i = 1; i < n; ++i) recvs.emplace_back(o.local[i], &reports[i]);
  if (absl::Status s = Exchange(control, {}, recvs); !s.ok()) return s;
  std::string verdict(kReasonBytes, '\0');
  if (!why.empty()) {
    verdict =
        absl::StrCat("rank ", o.rank, ": ", why).substr(0, kReasonBytes - 1);
  }
  for (int i = 1; i < n && why.empty(); ++i) {
    if (reports[i][0] != '\0') {
      why = std::string(reports[i].c_str());
      verdict = why.substr(0, kReasonBytes - 1);
    }
  }
  verdict.resize(kReasonBytes, '\0');
  std::vector<std::pair<int, std::string>> sends;
  for (int i = 1; i < n; ++i) sends.emplace_back(o.local[i], verdict);
  return Exchange(control, sends, {});
}

// Step 3, a peer's side: its report up, the leader's verdict down (into
// `why` when it is a failure).
absl::Status AwaitVerdict(Transport& control, const ShmSetupOptions& o,
                          std::string& why) {
  const int leader_rank = o.local[0];
  std::string report(kReasonBytes, '\0');
  if (!why.empty()) {
    report =
        absl::StrCat("rank ", o.rank, ": ", why).substr(0, kReasonBytes - 1);
    report.resize(kReasonBytes, '\0');
  }
  std::string verdict(kReasonBytes, '\0');
  if (absl::Status s =
          Exchange(control, {{leader_rank, report}}, {{leader_rank, &verdict}});
      !s.ok()) {
    return s;
  }
  if (verdict[0] != '\0') why = std::string(verdict.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShmJoin> JoinSegment(Transport& control,
                                    const ShmSetupOptions& o) {
  KOLO_CHECK(o.local.size() >= 2);
  const int n = static_cast<int>(o.local.size());
  ShmJoin join;
  join.local_rank = static_cast<int>(
      std::find(o.local.begin(), o.local.end(), o.rank) - o.local.begin());
  KOLO_CHECK(join.local_rank < n);
  const bool leader = join.local_rank == 0;
  control.BeginOperation(kSetupSeq);
  join.pids.assign(n, 0);
  join.pids[join.local_rank] = ::getpid();
  SetupState st;
  if (absl::Status s = leader ? SendOffer(control, o, n, join, st)
                              : TakeOffer(control, o, n, join, st);
      !s.ok()) {
    return s;
  }
  ShareDescriptor(o, n, leader, join, st);
  if (absl::Status s = leader ? Decide(control, o, n, st.why)
                              : AwaitVerdict(control, o, st.why);
      !s.ok()) {
    return s;
  }
  if (!st.why.empty()) {
    join.why = st.why;
    return join;
  }
  join.segment = std::move(st.segment);
  return join;
}

}  // namespace kolo
