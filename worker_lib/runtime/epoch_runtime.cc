#include "worker_lib/runtime/epoch_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/transport.h"
#include "common/log.h"
#include "common/net.h"
#include "worker_lib/fault_hook.h"
#include "worker_lib/runtime/data_plane_options.h"
#include "worker_lib/session/negotiation_link.h"
#include "worker_lib/session/stream_link.h"
#include "worker_lib/timeline.h"

namespace kolo::worker {
namespace {

// Retired epochs kept so that their handles still answer.
constexpr size_t kKeptEpochs = 4;

std::shared_ptr<spdlog::logger> EpochLog() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("api"));
  return *logger;
}

void Signal(int fd) {
  if (fd < 0) return;
  const uint64_t one = 1;
  ssize_t n = ::write(fd, &one, sizeof(one));
  (void)n;  // an eventfd at its limit is readable already
}

// The negotiation link of this epoch, or the Session stream when there is
// none (KOLO_NEGOTIATION_LINK=0, the coordinator offers none, or it does not
// connect).
std::unique_ptr<CoordinatorLink> OpenCoordinatorLink(
    const EpochInputs& in, const SessionClient::EpochView& view,
    absl::Time deadline) {
  const WorkerConfig& c = *in.job->config;
  const proto::Membership& m = view.membership;
  if (c.negotiation_link && m.link_port() != 0) {
    LinkOptions lo;
    absl::StatusOr<net::HostPort> coordinator =
        net::ParseHostPort(in.job->coordinator);
    lo.host = coordinator.ok() ? coordinator->host : c.coordinator.host;
    lo.port = m.link_port();
    lo.secret = c.secret;
    lo.tls = c.tls;
    lo.job_id = c.job_id;
    lo.worker_id = c.worker_id;
    lo.incarnation = in.client->incarnation();
    lo.epoch = view.epoch;
    // The coordinator already answered on its gRPC port: a link that does
    // not connect within seconds is filtered, and the stream will do.
    lo.timeout =
        std::clamp(deadline - absl::Now(), absl::Seconds(1), absl::Seconds(5));
    auto connected = NegotiationLink::Connect(lo);
    if (connected.ok()) return *std::move(connected);
    EpochLog()->warn("{}; negotiation stays on the Session stream (slower)",
                     std::string(connected.status().message()));
  }
  return std::make_unique<StreamLink>(in.client);
}

}  // namespace

absl::StatusOr<std::shared_ptr<EpochRuntime>> BuildEpoch(
    const EpochInputs& in, const SessionClient::EpochView& view,
    absl::Time deadline, int abort_fd) {
  const WorkerConfig& c = *in.job->config;
  const proto::Membership& m = view.membership;
  auto epoch = std::make_shared<EpochRuntime>();
  epoch->number = view.epoch;
  epoch->membership = m;
  epoch->first_handle = in.first_handle;
  auto data = DataPlane::Connect(
      DataPlaneOptionsFor(c, m, view.epoch, in.client->incarnation(),
                          in.job->acceptor, abort_fd),
      deadline);
  if (!data.ok()) return data.status();
  epoch->data = *std::move(data);
  in.client->MarkEpochBuilt(view.epoch);
  // A collective that failed because of peers waits for the coordinator's
  // verdict on who failed (it judges from streams and heartbeats; a ring
  // neighbour of a stopped rank times out on a healthy peer). The
  // coordinator decides within its heartbeat timeout of the report; in an
  // elastic job the verdict is the epoch's end (the membership error).
  epoch->data->OnPeerFault([weak = std::weak_ptr<SessionClient>(in.client),
                            wait = c.knobs.heartbeat_timeout +
                                   absl::Seconds(2)](const absl::Status& e) {
    std::shared_ptr<SessionClient> session = weak.lock();
    if (session == nullptr) return e;
    return session->ReportPeerFault(e, PeersOf(e), wait);
  });
  std::unique_ptr<CoordinatorLink> link =
      OpenCoordinatorLink(in, view, deadline);
  RuntimeOptions ro;
  ro.first_handle = in.first_handle;
  ro.epoch = view.epoch;
  ro.dissolved_sets = in.dissolved_sets;
  ro.timeline = in.timeline;
  if (!c.timeline.empty() && m.rank() == 0 && in.first) {
    // As Horovod: rank 0 writes the timeline (of the first epoch). A path
    // that cannot be written is reported and the job goes on without one.
    auto timeline = Timeline::Open(c.timeline, m.rank());
    if (timeline.ok()) {
      ro.timeline = *std::move(timeline);
    } else {
      EpochLog()->warn("{}; the job goes on without a timeline",
                       std::string(timeline.status().message()));
    }
  }
  if (ro.timeline != nullptr) faults::SetTimeline(ro.timeline);
  if (ro.timeline != nullptr && view.epoch > 1) {
    // A membership change (the first epoch's start needs no mark).
    Timeline::Args args = {{"rank", absl::StrCat(m.rank())},
                           {"size", absl::StrCat(m.size())}};
    if (!in.cause.empty()) args.emplace_back("cause", in.cause);
    ro.timeline->Marker(absl::StrCat("epoch ", view.epoch, " formed"),
                        absl::Now(), std::move(args));
  }
  faults::OnEpoch(view.epoch, m.rank(), m.size());
  epoch->ops = std::make_shared<OpRuntime>(*in.job, in.client, std::move(link),
                                           epoch->data.get(), m.rank(),
                                           m.size(), std::move(ro));
  return epoch;
}

void EpochSlot::Attach(const std::shared_ptr<EpochSlot>& slot,
                       SessionClient& client) {
  std::weak_ptr<EpochSlot> weak = slot;
  client.OnPlan([weak](const proto::Plan& plan) {
    std::shared_ptr<EpochSlot> s = weak.lock();
    if (s == nullptr) return;
    std::shared_ptr<EpochRuntime> e = s->current();
    if (e != nullptr) e->ops->Deliver(plan);
  });
  // The job ending (or the coordinator lost) fails pending ops and
  // collectives at once with the coordinator's reason, rather than after
  // KOLO_TIMEOUT_SECONDS of waiting on peers that will never send; so does
  // the end of an epoch, with the membership error.
  client.OnTerminal([weak](const absl::Status& why) {
    if (std::shared_ptr<EpochSlot> s = weak.lock()) s->Abort(why, 0);
  });
  client.OnEpochEnd([weak](const absl::Status& why, uint64_t epoch) {
    if (std::shared_ptr<EpochSlot> s = weak.lock()) s->Abort(why, epoch);
  });
}

void EpochSlot::Abort(const absl::Status& why, uint64_t epoch) {
  std::shared_ptr<EpochRuntime> e;
  {
    MutexLock lock(&mu_);
    if (epoch == 0) {
      if (terminal_.ok()) terminal_ = why;
    } else {
      ended_epoch_ = std::max(ended_epoch_, epoch);
      ended_ = why;
    }
    if (building_ != 0 && (epoch == 0 || building_ == epoch)) {
      Signal(building_abort_fd_);
    }
    if (current_ != nullptr && (epoch == 0 || current_->number == epoch)) {
      e = current_;
    }
  }
  if (e == nullptr) return;
  // The ops first: a collective in flight, returning from the aborted data
  // plane, then completes with `why` rather than the transport's "data plane
  // aborted" (OpRuntime::CompleteSteps), so that its caller sees what ended
  // it (a membership change, a lost coordinator that may come back).
  e->ops->Fail(why);
  e->data->Abort(why);
}

std::shared_ptr<EpochRuntime> EpochSlot::current() const {
  MutexLock lock(&mu_);
  return current_;
}

namespace {
std::atomic<uint64_t> ops_generation{1};
}  // namespace

uint64_t OpsGeneration() {
  return ops_generation.load(std::memory_order_acquire);
}

void BumpOpsGeneration() {
  ops_generation.fetch_add(1, std::memory_order_acq_rel);
}

void EpochSlot::Install(std::shared_ptr<EpochRuntime> epoch) {
  absl::Status abort_with;
  {
    MutexLock lock(&mu_);
    building_ = 0;
    building_abort_fd_ = -1;
    if (current_ != nullptr) {
      for (int32_t id : current_->ops->ProcessSetIds()) {
        if (id != 0 && std::find(dissolved_.begin(), dissolved_.end(), id) ==
                           dissolved_.end()) {
          dissolved_.push_back(id);
        }
      }
      // Its connections close now (raw collectives in flight keep theirs
      // until they return); its handles keep answering.
      current_->data.reset();
      retired_.push_back(std::move(current_));
      if (retired_.size() > kKeptEpochs) retired_.erase(retired_.begin());
    }
    current_ = epoch;
    BumpOpsGeneration();
    if (!terminal_.ok()) {
      abort_with = terminal_;
    } else if (ended_epoch_ >= epoch->number) {
      abort_with = ended_;
    }
  }
  if (!abort_with.ok()) {
    epoch->ops->Fail(abort_with);
    epoch->data->Abort(abort_with);
  }
}

std::shared_ptr<EpochRuntime> EpochSlot::ForHandle(Handle handle) const {
  MutexLock lock(&mu_);
  if (current_ == nullptr || handle >= current_->first_handle) return current_;
  for (auto it = retired_.rbegin(); it != retired_.rend(); ++it) {
    if (handle >= (*it)->first_handle) return *it;
  }
  return current_;
}

void EpochSlot::BeginBuild(uint64_t epoch, int abort_fd) {
  MutexLock lock(&mu_);
  building_ = epoch;
  building_abort_fd_ = abort_fd;
  if (!terminal_.ok() || ended_epoch_ >= epoch) Signal(abort_fd);
}

void EpochSlot::EndBuild() {
  MutexLock lock(&mu_);
  building_ = 0;
  building_abort_fd_ = -1;
}

absl::Status EpochSlot::EndedWith(uint64_t epoch) const {
  MutexLock lock(&mu_);
  if (!terminal_.ok()) return terminal_;
  return ended_epoch_ >= epoch ? ended_ : absl::OkStatus();
}

std::vector<int32_t> EpochSlot::KnownSets() const {
  MutexLock lock(&mu_);
  std::vector<int32_t> ids = dissolved_;
  if (current_ != nullptr) {
    for (int32_t id : current_->ops->ProcessSetIds()) {
      if (id != 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) {
        ids.push_back(id);
      }
    }
  }
  return ids;
}

}  // namespace kolo::worker
