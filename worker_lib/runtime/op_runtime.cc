// OpRuntime (op_runtime.h), part 1 of 4: construction, Stop and Fail,
// submission and process-set registration. The callers' handles (poll,
// synchronize, wait_any): op_runtime_handles.cc; running plans:
// op_runtime_plans.cc; talking to the coordinator: op_runtime_link.cc.
#include "worker_lib/runtime/op_runtime.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "proto/fusion_candidate.h"
#include "proto/op_names.h"
#include "worker_lib/runtime/fast_path_link.h"
#include "worker_lib/runtime/op_runtime_internal.h"
#include "worker_lib/runtime_log.h"

namespace kolo::worker {

using op_runtime_internal::Upper;

namespace {

// The CUDA executor's options: the job's (KOLO_CUDA_STAGING, and the bound
// on each wait for the device, KOLO_TIMEOUT_SECONDS), the epoch, and the
// control-plane exchange of its session (NCCL's unique id).
CudaOptions CudaOptionsFor(const WorkerConfig& job, uint64_t epoch,
                           const std::shared_ptr<SessionClient>& session) {
  CudaOptions c;
  c.epoch = epoch;
  c.force_staging = job.cuda_staging;
  c.timeout = job.knobs.data_timeout;
  std::weak_ptr<SessionClient> weak = session;
  c.exchange =
      [weak](
          const std::string& key, int32_t process_set, const std::string& value,
          absl::Duration timeout) -> absl::StatusOr<std::vector<std::string>> {
    std::shared_ptr<SessionClient> s = weak.lock();
    if (s == nullptr) return absl::AbortedError("the session ended");
    return s->Exchange(key, value, timeout, process_set);
  };
  c.nccl = nccl::RealNcclApi();
  return c;
}

// An outbox this big goes out at once.
constexpr size_t kOutboxBytes = 64 * 1024;
// Finished ops kept for reuse (a training step's tensors, and some).
constexpr size_t kPoolSize = 1024;

// "[2,3]"
std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

}  // namespace

OpRuntime::OpRuntime(const JobContext& job,
                     std::shared_ptr<SessionClient> session,
                     std::unique_ptr<CoordinatorLink> link, DataPlane* data,
                     int rank, int size, RuntimeOptions options)
    : session_(std::move(session)),
      link_(WithFastPath(std::move(link), job, data, rank)),
      data_(data),
      rank_(rank),
      size_(size),
      timeline_(std::move(options.timeline)),
      timeline_dynamic_(job.config->timeline_dynamic),
      announce_window_(job.config->knobs.cycle_time),
      data_timeout_(job.config->knobs.data_timeout),
      epoch_(options.epoch),
      dissolved_sets_(std::move(options.dissolved_sets)),
      runner_(std::make_unique<PlanRunner>(
          data,
          std::make_unique<CudaExecutor>(
              CudaOptionsFor(*job.config, options.epoch, session_)),
          PlanRunner::Place{options.epoch, rank, size})),
      cuda_(&runner_->cuda()) {
  {
    MutexLock lock(&mu_);
    next_handle_ = std::max<Handle>(1, options.first_handle);
    outbox_.settings.set_fusion_threshold(static_cast<uint64_t>(
        std::max<int64_t>(0, job.config->fusion_threshold)));
    outbox_.settings.set_fusion_direct_bytes(static_cast<uint64_t>(
        std::max<int64_t>(0, job.config->fusion_direct_bytes)));
    outbox_.settings.set_cache_capacity(static_cast<uint32_t>(
        std::clamp<int64_t>(job.config->cache_capacity, 0, UINT32_MAX)));
    outbox_.settings.set_timeline(timeline_ != nullptr || timeline_dynamic_);
    outbox_.settings.set_disable_group_fusion(job.config->disable_group_fusion);
    outbox_.settings.set_fast_path(dynamic_cast<FastPathLink*>(link_.get()) !=
                                   nullptr);
    // Where autotune may tune the data plane, and where it starts.
    const DataPlane::Tunables t = data->tunables();
    outbox_.settings.set_message_allreduce(t.message_allreduce);
    outbox_.settings.set_small_allreduce_bytes(t.small_allreduce_bytes);
    outbox_.settings.set_segment_bytes(t.segment_bytes);
    outbox_.settings.set_hierarchical_tunable(t.hierarchical_tunable);
    outbox_.settings.set_hierarchical(t.hierarchical);
  }
  thread_ = std::thread([this] { ThreadMain(); });
}

OpRuntime::~OpRuntime() { (void)Stop(); }

uint64_t OpRuntime::fast_path_rounds() const {
  const auto* fast = dynamic_cast<const FastPathLink*>(link_.get());
  return fast == nullptr ? 0 : fast->rounds();
}

std::unique_ptr<CoordinatorLink> OpRuntime::WithFastPath(
    std::unique_ptr<CoordinatorLink> link, const JobContext& job,
    DataPlane* data, int rank) {
  // The fast path reads plans and keeps announcements in the link: the
  // negotiation link, not the stream.
  if (!job.config->fast_path || !link->carries_plans() ||
      !link->coalesces_writes()) {
    return link;
  }
  FastPathLink::Hooks hooks;
  hooks.describe =
      [this](uint32_t bit,
             uint64_t direct_bytes) -> std::optional<fusion::Candidate> {
    MutexLock lock(&mu_);
    const std::string* name = cache_.NameOf(bit);
    const proto::Request* r =
        name == nullptr ? nullptr : cache_.RequestOf(*name);
    // An allreduce of every rank, not grouped, on a rank that has not
    // joined: what the ranks can run without the coordinator's rules.
    if (r == nullptr || r->op() != proto::ALLREDUCE || r->process_set() != 0 ||
        !r->group().empty() || join_handle_ != 0) {
      return std::nullopt;
    }
    proto::Response response;
    response.set_op(proto::ALLREDUCE);
    return proto::FusionCandidateOf(response, r, direct_bytes);
  };
  hooks.on_round = [this](size_t ran, bool exit) {
    std::shared_ptr<Timeline> timeline;
    {
      MutexLock lock(&mu_);
      timeline = timeline_;
    }
    if (timeline == nullptr) return;
    timeline->Marker(
        exit ? "fast path round, then the coordinator" : "fast path round",
        absl::Now(), {{"responses", absl::StrCat(ran)}});
  };
  return std::make_unique<FastPathLink>(std::move(link), data,
                                        job.config->knobs.data_timeout, rank,
                                        std::move(hooks));
}

Handle OpRuntime::next_handle() {
  MutexLock lock(&mu_);
  return next_handle_;
}

std::shared_ptr<PendingOp> OpRuntime::NewOp() {
  {
    MutexLock lock(&pool_mu_);
    if (!pool_.empty()) {
      std::shared_ptr<PendingOp> op = std::move(pool_.back());
      pool_.pop_back();
      return op;
    }
  }
  return std::make_shared<PendingOp>();
}

void OpRuntime::Recycle(std::vector<std::shared_ptr<PendingOp>>& taken) {
  size_t kept = 0;
  for (std::shared_ptr<PendingOp>& op : taken) {
    // Only a sole owner may reset it (a plan's run may still hold one, and
    // nothing can take a new reference to a taken op). Stand-ins of a joined
    // rank are never taken.
    if (op.use_count() != 1) continue;
    op->Reset();
    taken[kept++] = std::move(op);
  }
  taken.resize(kept);
  MutexLock lock(&pool_mu_);
  for (std::shared_ptr<PendingOp>& op : taken) {
    if (pool_.size() >= kPoolSize) break;
    pool_.push_back(std::move(op));
  }
}

absl::Status OpRuntime::SetFusionThreshold(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set_fusion_threshold(", bytes,
        "): the threshold is a number of bytes >= 0 (0 turns fusion off)"));
  }
  MutexLock lock(&mu_);
  if (!terminal_.ok()) return terminal_;
  outbox_.settings.set_fusion_threshold(static_cast<uint64_t>(bytes));
  outbox_.settings_changed = true;
  return absl::OkStatus();
}

absl::Status OpRuntime::SetCacheCapacity(int64_t entries) {
  if (entries < 0 || entries > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("set_cache_capacity(", entries,
                     "): the capacity is a number of entries in 0..",
                     UINT32_MAX, " (0 turns the response cache off)"));
  }
  MutexLock lock(&mu_);
  if (!terminal_.ok()) return terminal_;
  outbox_.settings.set_cache_capacity(static_cast<uint32_t>(entries));
  outbox_.settings_changed = true;
  return absl::OkStatus();
}

absl::StatusOr<Handle> OpRuntime::Submit(std::shared_ptr<PendingOp> op) {
  return SubmitOps(absl::MakeSpan(&op, 1), /*group=*/false, "");
}

absl::StatusOr<Handle> OpRuntime::SubmitGroup(
    std::vector<std::shared_ptr<PendingOp>> members, absl::string_view name) {
  if (members.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("grouped op '", name, "' on rank ", rank_,
                     ": a group needs at least one tensor"));
  }
  return SubmitOps(absl::MakeSpan(members), /*group=*/true, name);
}

absl::StatusOr<Handle> OpRuntime::SubmitOps(
    absl::Span<std::shared_ptr<PendingOp>> ops, bool group,
    absl::string_view group_name) {
  Handle result = 0;
  bool send_now = false, wake = false;
  {
    MutexLock lock(&mu_);
    if (!terminal_.ok()) return terminal_;
    SetPlace place;
    if (absl::Status s = PlaceSubmission(*ops[0], group, group_name, place);
        !s.ok()) {
      return s;
    }
    std::string group_key;
    if (absl::Status s = NameOps(ops, group, group_name, group_key); !s.ok()) {
      return s;
    }
    const absl::Time now = absl::Now();
    absl::InlinedVector<Handle, 1> handles;
    for (auto& op : ops) {
      if (group) {
        op->group = group_key;
        op->group_size = static_cast<int32_t>(ops.size());
      }
      handles.push_back(RecordOp(std::move(op), place, now));
    }
    result = handles[0];
    if (group) {
      result = next_handle_++;
      groups_[result] = std::vector<Handle>(handles.begin(), handles.end());
    }
    last_submit_ = now;
    send_now = ScheduleAnnounce(now, wake);
  }
  if (wake) {
    link_->Wake();
    plan_cv_.SignalAll();  // when parked
  }
  if (send_now) {
    // Whatever the outbox holds when this write takes it (other threads'
    // submissions too) goes in it; writes leave in the order they take it.
    absl::Status s;
    {
      MutexLock send_lock(&send_mu_);
      s = Flush();
    }
    if (s.ok()) {
      WakeQuietReader();  // the caller goes on submitting
    } else {
      OnFlushError(s);
    }
  }
  return result;
}

absl::Status OpRuntime::PlaceSubmission(const PendingOp& head, bool group,
                                        absl::string_view group_name,
                                        SetPlace& place) {
  const int32_t set = place.set = head.process_set;
  place.rank = rank_;
  place.size = size_;
  if (set == 0) return absl::OkStatus();
  // What the caller submitted, for messages: "allreduce 'x'" or
  // "grouped_allreduce 'g'" (made only for an error: not on the hot path).
  auto what = [&] {
    const std::string op_name = proto::OpTypeName(head.op);
    return group ? absl::StrCat("grouped_", op_name, " '", group_name, "'")
                 : absl::StrCat(op_name, " '", head.name, "'");
  };
  auto it = sets_.find(set);
  if (it == sets_.end() &&
      std::find(dissolved_sets_.begin(), dissolved_sets_.end(), set) !=
          dissolved_sets_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what(), " on rank ", rank_, ": process set ", set,
        " was dissolved by the membership change that formed epoch ", epoch_,
        " (its ranks no longer mean the same); add the set again with "
        "add_process_set in a reset callback and use the id it returns"));
  }
  if (it == sets_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what(), " on rank ", rank_, ": process set ", set,
        " does not exist (ids come from add_process_set; a removed set "
        "is gone)"));
  }
  place.members = &it->second;
  auto me = std::find(place.members->begin(), place.members->end(), rank_);
  if (me == place.members->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what(), " on rank ", rank_,
                     ": this rank is not a member of process set ", set,
                     " (ranks ", absl::StrJoin(*place.members, ","), ")"));
  }
  place.rank = static_cast<int>(me - place.members->begin());
  place.size = static_cast<int>(place.members->size());
  return absl::OkStatus();
}

absl::Status OpRuntime::NameOps(absl::Span<std::shared_ptr<PendingOp>> ops,
                                bool group, absl::string_view group_name,
                                std::string& group_key) {
  const PendingOp& head = *ops[0];
  const int32_t set = head.process_set;
  auto qualify = [set](std::string name) {
    if (set != 0) absl::StrAppend(&name, " (process set ", set, ")");
    return name;
  };
  // Names: made up per set when empty; a group's members are
  // "<group>.<i>".
  if (group) {
    std::string base(group_name);
    if (base.empty()) {
      base = absl::StrCat("grouped_", proto::OpTypeName(head.op), ".noname.",
                          next_noname_[set]++);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      ops[i]->name = qualify(absl::StrCat(base, ".", i));
    }
    group_key = qualify(base);
  } else if (ops[0]->name.empty()) {
    ops[0]->name = qualify(absl::StrCat(proto::OpTypeName(head.op), ".noname.",
                                        next_noname_[set]++));
  } else if (set != 0) {
    ops[0]->name = qualify(std::move(ops[0]->name));
  }
  for (const auto& op : ops) {
    if (op->name.size() > kMaxNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          proto::OpTypeName(op->op), " '", op->name.substr(0, 64),
          "...' on rank ", rank_, ": the name is ", op->name.size(),
          " bytes long; kolo takes names of at most ", kMaxNameBytes,
          " bytes (with the process set's and group's parts): use a "
          "shorter name"));
    }
  }
  // Each name goes in names_ with the handle RecordOp gives its op (one
  // hash per name); a name in flight takes back the ones put in before it.
  for (size_t i = 0; i < ops.size(); ++i) {
    auto [it, fresh] = names_.try_emplace(
        absl::string_view(ops[i]->name), next_handle_ + static_cast<Handle>(i));
    if (fresh) continue;
    const Handle in_flight = it->second;
    for (size_t j = 0; j < i; ++j) names_.erase(ops[j]->name);
    return absl::InvalidArgumentError(absl::StrCat(
        proto::OpTypeName(ops[i]->op), " '", ops[i]->name, "' on rank ", rank_,
        ": an op with this name is already in flight on this rank "
        "(handle ",
        in_flight, "); wait for it, or give each op a distinct name"));
  }
  return absl::OkStatus();
}

Handle OpRuntime::RecordOp(std::shared_ptr<PendingOp> op, const SetPlace& place,
                           absl::Time now) {
  const Handle handle = op->handle = next_handle_++;
  if (place.members != nullptr) op->members = *place.members;
  // A hit is judged against the cached Request without writing one (the
  // steady state); a Request is written only for an op that goes in full.
  std::string invalid = ValidateOp(*op, place.rank, place.size);
  std::optional<uint32_t> hit;
  if (invalid.empty()) hit = cache_.BitFor(*op);
  if (hit.has_value()) {
    outbox_.announce.add_cached(*hit);
    op->cache_bit = *hit;
    if (*hit >= by_bit_.size()) by_bit_.resize(*hit + 1, 0);
    by_bit_[*hit] = handle;
  } else {
    FillRequest(*op, std::move(invalid), &op->request);
    *outbox_.announce.add_requests() = op->request;
  }
  op->submitted = now;
  outbox_.bytes += op->name.size() + 32;  // names_ has it (NameOps)
  if (timeline_ != nullptr) {
    timeline_->Begin(
        op->name, absl::StrCat("NEGOTIATE_", Upper(proto::OpTypeName(op->op))),
        now,
        {{"dtype", std::string(DataTypeName(op->input.dtype))},
         {"shape", ShapeText(op->input.shape)}});
  }
  ops_[handle] = std::move(op);
  return handle;
}

bool OpRuntime::ScheduleAnnounce(absl::Time now, bool& wake) {
  if (!link_->coalesces_writes()) return true;
  if (!outbox_.announcing()) {  // the outbox was empty
    outbox_.flush_at = now + announce_window_;
    // The background thread sends it if nobody else does first; wake it
    // unless it will wake up in time anyway.
    wake = bg_wakes_at_ > outbox_.flush_at;
    return false;
  }
  return now >= outbox_.flush_at || outbox_.bytes > kOutboxBytes;
}

absl::StatusOr<int> OpRuntime::Join(absl::Duration timeout) {
  Handle handle = 0;
  {
    MutexLock lock(&mu_);
    handle = join_handle_;
  }
  if (handle == 0) {
    auto op = std::make_shared<PendingOp>();
    op->op = proto::JOIN;
    op->name = "join";
    absl::StatusOr<Handle> submitted = Submit(std::move(op));
    if (!submitted.ok()) return submitted.status();
    handle = *submitted;
    MutexLock lock(&mu_);
    join_handle_ = handle;
  }
  OpResult result;
  absl::Status s = Synchronize(handle, timeout, &result);
  if (absl::IsDeadlineExceeded(s)) return s;  // still joined: call again
  {
    MutexLock lock(&mu_);
    if (join_handle_ == handle) join_handle_ = 0;
  }
  if (!s.ok()) return s;
  return static_cast<int>(result.splits.at(0));
}

absl::StatusOr<int32_t> OpRuntime::AddProcessSet(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  auto op = std::make_shared<PendingOp>();
  op->op = proto::PROCESS_SET_ADD;
  op->splits.assign(ranks.begin(), ranks.end());
  {
    MutexLock lock(&mu_);
    op->name = absl::StrCat("process_set.", registrations_++);
  }
  absl::StatusOr<Handle> submitted = Submit(std::move(op));
  if (!submitted.ok()) return submitted.status();
  OpResult result;
  absl::Status s = Synchronize(*submitted, absl::InfiniteDuration(), &result);
  if (!s.ok()) return s;
  return static_cast<int32_t>(result.splits.at(0));
}

absl::Status OpRuntime::RemoveProcessSet(int32_t id) {
  auto op = std::make_shared<PendingOp>();
  op->op = proto::PROCESS_SET_REMOVE;
  op->root = id;
  {
    MutexLock lock(&mu_);
    op->name = absl::StrCat("process_set.", registrations_++);
  }
  absl::StatusOr<Handle> submitted = Submit(std::move(op));
  if (!submitted.ok()) return submitted.status();
  return Synchronize(*submitted, absl::InfiniteDuration(), nullptr);
}

absl::StatusOr<std::vector<int>> OpRuntime::ProcessSetRanks(int32_t id) {
  if (id == 0) {
    std::vector<int> all(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }
  MutexLock lock(&mu_);
  auto it = sets_.find(id);
  if (it == sets_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("process set ", id, " does not exist on rank ", rank_));
  }
  return it->second;
}

std::vector<int32_t> OpRuntime::ProcessSetIds() {
  MutexLock lock(&mu_);
  std::vector<int32_t> ids = {0};
  for (const auto& [id, members] : sets_) ids.push_back(id);
  return ids;
}

void OpRuntime::Fail(absl::Status why) {
  // First: a collective on the device returns at once (its ops are running,
  // so Fail leaves them to it).
  cuda_->Abort(why);
  MutexLock lock(&mu_);
  if (terminal_.ok()) terminal_ = std::move(why);
  int failed = 0;
  for (auto& [handle, op] : ops_) {
    // An op on the data plane completes when its collective returns (the
    // aborted data plane makes that prompt): its buffers are in use.
    if (op->done || op->running) continue;
    op->done = true;
    op->status = terminal_;
    ++failed;
  }
  names_.clear();
  std::fill(by_bit_.begin(), by_bit_.end(), 0);
  plans_.clear();
  outbox_.Drop();
  if (failed > 0) {
    RuntimeLog()->info("{} pending op(s) failed: {}", failed,
                       std::string(terminal_.message()));
  }
  plan_cv_.SignalAll();
  done_cv_.SignalAll();
  link_->Wake();
}

std::shared_ptr<Timeline> OpRuntime::timeline() {
  MutexLock lock(&mu_);
  return timeline_;
}

void OpRuntime::LeaveFastPath() {
  auto* fast = dynamic_cast<FastPathLink*>(link_.get());
  if (fast == nullptr) return;
  {
    MutexLock lock(&mu_);
    if (stop_ || link_broken_ || !terminal_.ok()) return;
  }
  if (!fast->Leave()) return;
  {
    // The background thread reads the link now (a caller reading it runs
    // the round itself).
    MutexLock lock(&mu_);
    plan_cv_.SignalAll();
  }
  const absl::Duration limit =
      RoundPatience(data_timeout_) + kFastPathPatience + absl::Seconds(2);
  if (!fast->AwaitExit(absl::Now() + limit)) {
    RuntimeLog()->warn(
        "rank {}: shutdown() could not leave the fast path together with the "
        "other ranks within {}; a rank still waiting in a round for this one "
        "fails when its round's timeout passes",
        rank_, absl::FormatDuration(limit));
  }
}

absl::Status OpRuntime::Stop(bool close_timeline) {
  std::vector<std::string> abandoned;
  {
    MutexLock lock(&mu_);
    if (stop_ && !thread_.joinable()) return absl::OkStatus();
    stop_ = true;
    if (terminal_.ok()) {  // after the job ended, the ops failed with it
      std::vector<const PendingOp*> open;
      for (const auto& [handle, op] : ops_) {
        if (!op->done) open.push_back(op.get());
      }
      std::sort(open.begin(), open.end(),
                [](const PendingOp* a, const PendingOp* b) {
                  return a->handle < b->handle;
                });
      const absl::Time now = absl::Now();
      for (const PendingOp* op : open) {
        abandoned.push_back(absl::StrCat(
            "'", op->name.substr(0, 200), "' (", proto::OpTypeName(op->op),
            ", submitted ",
            absl::StrFormat("%.3f", absl::ToDoubleSeconds(now - op->submitted)),
            " s ago, ",
            op->running ? "running on the data plane"
                        : "waiting for every rank of its process set to "
                          "submit it (the coordinator's stall warnings name "
                          "the missing ranks)",
            ")"));
      }
    }
  }
  absl::Status result;
  if (!abandoned.empty()) {
    const size_t shown = std::min<size_t>(abandoned.size(), 20);
    result = absl::FailedPreconditionError(absl::StrCat(
        "kolo::shutdown() on rank ", rank_, " abandoned ", abandoned.size(),
        " op(s) still in flight: ",
        absl::StrJoin(abandoned.begin(), abandoned.begin() + shown, "; "),
        abandoned.size() > shown ? "; ..." : "",
        ". Wait for every op (synchronize) before shutdown(); an op that "
        "only some ranks submit never completes"));
    RuntimeLog()->warn("{}", std::string(result.message()));
  }
  absl::Status why =
      absl::AbortedError(absl::StrCat("kolo::shutdown() was called on rank ",
                                      rank_, " while this op was pending"));
  Fail(why);
  data_->Abort(why);  // a collective in flight returns at once
  if (thread_.joinable()) thread_.join();
  {
    // A caller running a plan uses the data plane: it lets go promptly (the
    // link was woken, the data plane aborted).
    MutexLock lock(&mu_);
    const absl::Time by = absl::Now() + absl::Seconds(10);
    while (runner_ == nullptr) {
      if (done_cv_.WaitWithDeadline(&mu_, by)) {
        RuntimeLog()->error("a caller still runs a plan 10 s after shutdown");
        break;
      }
    }
    // Nothing runs plans any more: the process sets' data planes go now,
    // before the epoch's data plane whose connections they use (an elastic
    // job closes it when the epoch is retired; epoch_runtime.h).
    if (runner_ != nullptr) runner_->DropPlanes();
  }
  std::shared_ptr<Timeline> timeline;
  {
    MutexLock lock(&mu_);
    timeline = timeline_;
  }
  if (timeline != nullptr && close_timeline) timeline->Close();
  return result;
}

absl::Status OpRuntime::StartTimeline(const std::string& path) {
  if (!timeline_dynamic_) {
    return absl::FailedPreconditionError(
        "start_timeline: the timeline is not dynamic; start the job with "
        "KOLO_TIMELINE=DYNAMIC (or HOROVOD_TIMELINE=DYNAMIC)");
  }
  if (rank_ != 0) return absl::OkStatus();  // as Horovod: rank 0 writes it
  absl::StatusOr<std::unique_ptr<Timeline>> opened =
      Timeline::Open(path, rank_);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<Timeline> old;
  {
    MutexLock lock(&mu_);
    old =
        std::exchange(timeline_, std::shared_ptr<Timeline>(*std::move(opened)));
  }
  if (old != nullptr) old->Close();
  return absl::OkStatus();
}

absl::Status OpRuntime::StopTimeline() {
  if (!timeline_dynamic_) {
    return absl::FailedPreconditionError(
        "stop_timeline: the timeline is not dynamic; start the job with "
        "KOLO_TIMELINE=DYNAMIC (or HOROVOD_TIMELINE=DYNAMIC)");
  }
  std::shared_ptr<Timeline> old;
  {
    MutexLock lock(&mu_);
    old = std::move(timeline_);
    timeline_ = nullptr;
  }
  if (old != nullptr) old->Close();
  return absl::OkStatus();
}

}  // namespace kolo::worker
