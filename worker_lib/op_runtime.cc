#include "worker_lib/op_runtime.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "allreduce/kernels.h"
#include "common/log.h"
#include "proto/op_names.h"
#include "worker_lib/plan_executor.h"

namespace kolo::worker {
namespace {

// How long a Done on the link waits for a submission to travel with (one
// write, one wake-up of the coordinator instead of two) before it goes alone.
// A tight submit/synchronize loop resubmits well within it; when nothing
// follows, the coordinator learns that this rank is idle this much later.
constexpr absl::Duration kDoneDelay = absl::Microseconds(200);

// The background thread keeps waking once per announce window for this
// long after the last submission (see NextPlanFromLink).
constexpr absl::Duration kActive = absl::Seconds(1);
// An outbox this big goes out at once.
constexpr size_t kOutboxBytes = 64 * 1024;
// Finished ops kept for reuse (a training step's tensors, and some).
constexpr size_t kPoolSize = 1024;

// "[2,3]"
std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// "ALLREDUCE": the timeline's activity names, as Horovod's.
std::string Upper(absl::string_view op) { return absl::AsciiStrToUpper(op); }

std::shared_ptr<spdlog::logger> Log() {
  // Never destroyed: used by threads that may run while the process exits.
  static const auto* const logger =
      new std::shared_ptr<spdlog::logger>(GetLogger("runtime"));
  return *logger;
}

}  // namespace

OpRuntime::OpRuntime(std::shared_ptr<SessionClient> session,
                     std::unique_ptr<NegotiationLink> link, DataPlane* data,
                     int rank, int size, RuntimeOptions options)
    : session_(std::move(session)),
      link_(std::move(link)),
      data_(data),
      rank_(rank),
      size_(size),
      timeline_(std::move(options.timeline)),
      announce_window_(options.announce_window),
      epoch_(options.epoch),
      dissolved_sets_(std::move(options.dissolved_sets)) {
  {
    MutexLock lock(&mu_);
    next_handle_ = std::max<Handle>(1, options.first_handle);
    settings_.set_fusion_threshold(
        static_cast<uint64_t>(std::max<int64_t>(0, options.fusion_threshold)));
    settings_.set_fusion_direct_bytes(static_cast<uint64_t>(
        std::max<int64_t>(0, options.fusion_direct_bytes)));
    settings_.set_cache_capacity(static_cast<uint32_t>(
        std::clamp<int64_t>(options.cache_capacity, 0, UINT32_MAX)));
    settings_.set_timeline(timeline_ != nullptr);
    settings_.set_disable_group_fusion(options.disable_group_fusion);
  }
  thread_ = std::thread([this] { ThreadMain(); });
}

OpRuntime::~OpRuntime() { (void)Stop(); }

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
  settings_.set_fusion_threshold(static_cast<uint64_t>(bytes));
  settings_changed_ = true;
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
  settings_.set_cache_capacity(static_cast<uint32_t>(entries));
  settings_changed_ = true;
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
  absl::Time now;
  {
    MutexLock lock(&mu_);
    if (!terminal_.ok()) return terminal_;
    const PendingOp& head = *ops[0];
    const int32_t set = head.process_set;
    // What the caller submitted, for messages: "allreduce 'x'" or
    // "grouped_allreduce 'g'" (made only for an error: not on the hot path).
    auto what = [&] {
      const std::string op_name = proto::OpTypeName(head.op);
      return group ? absl::StrCat("grouped_", op_name, " '", group_name, "'")
                   : absl::StrCat(op_name, " '", head.name, "'");
    };
    // The set: this rank's place in it.
    int set_rank = rank_, set_size = size_;
    const std::vector<int>* members = nullptr;
    if (set != 0) {
      auto it = sets_.find(set);
      if (it == sets_.end() &&
          std::find(dissolved_sets_.begin(), dissolved_sets_.end(), set) !=
              dissolved_sets_.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            what(), " on rank ", rank_, ": process set ", set,
            " was dissolved by the membership change that formed epoch ",
            epoch_,
            " (its ranks no longer mean the same); add the set again with "
            "add_process_set in a reset callback and use the id it returns"));
      }
      if (it == sets_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            what(), " on rank ", rank_, ": process set ", set,
            " does not exist (ids come from add_process_set; a removed set "
            "is gone)"));
      }
      members = &it->second;
      auto me = std::find(members->begin(), members->end(), rank_);
      if (me == members->end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what(), " on rank ", rank_,
                         ": this rank is not a member of process set ", set,
                         " (ranks ", absl::StrJoin(*members, ","), ")"));
      }
      set_rank = static_cast<int>(me - members->begin());
      set_size = static_cast<int>(members->size());
    }
    auto qualify = [set](std::string name) {
      if (set != 0) absl::StrAppend(&name, " (process set ", set, ")");
      return name;
    };
    // Names: made up per set when empty; a group's members are
    // "<group>.<i>".
    std::string group_key;
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
      ops[0]->name = qualify(absl::StrCat(proto::OpTypeName(head.op),
                                          ".noname.", next_noname_[set]++));
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
      if (auto it = names_.find(op->name); it != names_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            proto::OpTypeName(op->op), " '", op->name, "' on rank ", rank_,
            ": an op with this name is already in flight on this rank "
            "(handle ",
            it->second, "); wait for it, or give each op a distinct name"));
      }
    }
    now = absl::Now();
    absl::InlinedVector<Handle, 1> handles;
    for (auto& op : ops) {
      const Handle handle = op->handle = next_handle_++;
      handles.push_back(handle);
      if (members != nullptr) op->members = *members;
      if (group) {
        op->group = group_key;
        op->group_size = static_cast<int32_t>(ops.size());
      }
      // Built in the reused scratch Request (no allocation in the steady
      // state); kept in the op only when it goes in full.
      FillRequest(*op, set_rank, set_size, &scratch_);
      if (std::optional<uint32_t> bit = cache_.BitFor(scratch_)) {
        outbox_.add_cached(*bit);
        op->cache_bit = *bit;
      } else {
        op->request = scratch_;
        *outbox_.add_requests() = scratch_;
      }
      op->submitted = now;
      outbox_bytes_ += op->name.size() + 32;
      std::shared_ptr<PendingOp> shared = std::move(op);
      names_[absl::string_view(shared->name)] = handle;
      if (shared->cache_bit >= 0) {
        const auto bit = static_cast<size_t>(shared->cache_bit);
        if (bit >= by_bit_.size()) by_bit_.resize(bit + 1, 0);
        by_bit_[bit] = handle;
      }
      if (timeline_ != nullptr) {
        timeline_->Begin(
            shared->name,
            absl::StrCat("NEGOTIATE_", Upper(proto::OpTypeName(shared->op))),
            now,
            {{"dtype", std::string(DataTypeName(shared->input.dtype))},
             {"shape", ShapeText(shared->input.shape)}});
      }
      ops_[handle] = std::move(shared);
    }
    result = handles[0];
    if (group) {
      result = next_handle_++;
      groups_[result] = std::vector<Handle>(handles.begin(), handles.end());
    }
    last_submit_ = now;
    if (link_ == nullptr) {
      send_now = true;
    } else if (flush_at_ == absl::InfiniteFuture()) {  // the outbox was empty
      flush_at_ = now + announce_window_;
      // The background thread sends it if nobody else does first; wake it
      // unless it will wake up in time anyway.
      wake = bg_wakes_at_ > flush_at_;
    } else {
      send_now = now >= flush_at_ || outbox_bytes_ > kOutboxBytes;
    }
  }
  if (wake) {
    link_->Wake();
    plan_cv_.SignalAll();  // when parked
  }
  if (send_now) {
    // Whatever the outbox holds when this write takes it (other threads'
    // submissions too) goes in it; writes leave in the order they take it.
    MutexLock send_lock(&send_mu_);
    if (absl::Status s = Flush(); !s.ok()) {
      Fail(s);  // the session ended: nothing can be negotiated any more
    }
  }
  return result;
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

std::optional<proto::WorkerMessage> OpRuntime::TakeOutbox() {
  if (outbox_.requests_size() == 0 && outbox_.cached_size() == 0) {
    return std::nullopt;
  }
  proto::WorkerMessage msg;
  proto::Announce& announce = *msg.mutable_announce();
  announce.Swap(&outbox_);
  if (settings_changed_) {
    *announce.mutable_settings() = settings_;
    settings_changed_ = false;
  }
  flush_at_ = absl::InfiniteFuture();
  outbox_bytes_ = 0;
  return msg;
}

absl::Status OpRuntime::Flush() {
  std::optional<proto::WorkerMessage> announce;
  uint64_t done = 0;
  {
    MutexLock lock(&mu_);
    announce = TakeOutbox();
    done = std::exchange(unsent_done_, 0);
  }
  if (link_ == nullptr) {
    if (announce.has_value()) {
      absl::Status s =
          session_->Announce(std::move(*announce->mutable_announce()));
      if (!s.ok()) return s;
    }
    return done != 0 ? session_->Done(done) : absl::OkStatus();
  }
  proto::WorkerMessage msgs[2];
  size_t n = 0;
  if (announce.has_value()) msgs[n++] = std::move(*announce);
  if (done != 0) msgs[n++].mutable_done()->set_seq(done);
  if (n == 0) return absl::OkStatus();
  return link_->SendAll(absl::MakeSpan(msgs, n));
}

void OpRuntime::FlushFromUnderLock() {
  mu_.Unlock();  // send_mu_ is taken before mu_
  {
    MutexLock send_lock(&send_mu_);
    (void)Flush();
  }
  mu_.Lock();
}

void OpRuntime::FlushOutbox() {
  {
    MutexLock lock(&mu_);
    // Nothing to announce and no Done held back for the announcements.
    if (flush_at_ == absl::InfiniteFuture() && unsent_done_ == 0) return;
  }
  MutexLock send_lock(&send_mu_);
  if (absl::Status s = Flush(); !s.ok()) Fail(s);
}

void OpRuntime::Deliver(const proto::Plan& plan) {
  MutexLock lock(&mu_);
  if (!terminal_.ok()) return;
  plans_.push_back(plan);
  plan_cv_.SignalAll();
  if (link_ != nullptr) link_->Wake();
}

void OpRuntime::Fail(absl::Status why) {
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
  outbox_.Clear();
  outbox_bytes_ = 0;
  flush_at_ = absl::InfiniteFuture();
  if (failed > 0) {
    Log()->info("{} pending op(s) failed: {}", failed,
                std::string(terminal_.message()));
  }
  plan_cv_.SignalAll();
  done_cv_.SignalAll();
  if (link_ != nullptr) link_->Wake();
}

absl::Status OpRuntime::Stop() {
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
    Log()->warn("{}", std::string(result.message()));
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
    while (reader_busy_) {
      if (done_cv_.WaitWithDeadline(&mu_, by)) {
        Log()->error("a caller still runs a plan 10 s after shutdown");
        break;
      }
    }
  }
  if (timeline_ != nullptr) timeline_->Close();
  return result;
}

std::optional<proto::Plan> OpRuntime::NextPlanFromLink() {
  while (true) {
    bool done_waits = false;
    absl::Duration timeout = absl::Seconds(1);
    {
      MutexLock lock(&mu_);
      while (true) {
        if (stop_) {
          unsent_done_ = 0;  // shutting down: nothing follows
          return std::nullopt;
        }
        const absl::Time now = absl::Now();
        if (flush_at_ <= now) {  // the outbox's window ended: it goes
          FlushFromUnderLock();
          continue;
        }
        // Off the link while a waiting caller reads it; for kDoneDelay after
        // this thread ran a plan that left nothing pending here (the caller
        // comes back with its next step); and while the caller is submitting
        // (the outbox waits). The caller then waits for the plan and reads
        // the link itself, and runs the plan without a wake-up of this
        // thread and one of its own. The outbox's window bounds the park:
        // then this thread sends the outbox and reads again, so that plans
        // that come while the caller keeps submitting run within one
        // announce window.
        const bool after_plan = now < bg_park_until_;
        if (!reader_busy_) {
          if (!plans_.empty()) {
            proto::Plan plan = std::move(plans_.front());
            plans_.pop_front();
            reader_busy_ = true;  // let go in ThreadMain after the run
            return plan;
          }
          if (flush_at_ == absl::InfiniteFuture() && !after_plan) break;
        }
        absl::Time until = flush_at_;
        if (after_plan) until = std::min(until, bg_park_until_);
        if (reader_busy_) {
          // A caller that lets go of the link does not wake this thread:
          // it comes back by the end of the park.
          until = std::min(
              until, now + (now - last_submit_ < kActive ? announce_window_
                                                         : absl::Seconds(1)));
        }
        bg_wakes_at_ = until;
        const bool ended = plan_cv_.WaitWithDeadline(&mu_, until);
        bg_wakes_at_ = absl::InfinitePast();
        // A Done with nothing to ride with (no submission since its plan)
        // goes at the end of the park.
        if (ended && !stop_ && !reader_busy_ && unsent_done_ != 0 &&
            flush_at_ == absl::InfiniteFuture() &&
            absl::Now() >= bg_park_until_) {
          FlushFromUnderLock();
        }
      }
      reader_busy_ = true;
      // A Done waits for the caller's next announcement (see RunPlan): up to
      // kDoneDelay for the first, then with the outbox.
      done_waits = unsent_done_ != 0;
      if (done_waits && flush_at_ == absl::InfiniteFuture()) {
        timeout = kDoneDelay;
      }
      const absl::Time now = absl::Now();
      // While the caller submits, wake at least once per announce window,
      // so that a submission never needs a wake-up of its own (a Wake per
      // op costs a context switch on a busy host).
      if (now - last_submit_ < kActive) {
        timeout = std::min(timeout, announce_window_);
      }
      if (flush_at_ != absl::InfiniteFuture()) {
        timeout =
            std::min(timeout, std::max(absl::ZeroDuration(), flush_at_ - now));
      }
      bg_wakes_at_ = now + timeout;
    }
    absl::StatusOr<std::optional<proto::CoordinatorMessage>> msg =
        link_->Receive(timeout);
    const bool got_plan = msg.ok() && msg->has_value() && (*msg)->has_plan();
    bool flush = false;
    {
      MutexLock lock(&mu_);
      reader_busy_ = got_plan;  // a plan: let go in ThreadMain after the run
      bg_wakes_at_ = absl::InfinitePast();  // awake
      const absl::Time now = absl::Now();
      if (flush_at_ <= now) {
        flush = true;  // the outbox's window ended: everything goes
      } else if (done_waits && unsent_done_ != 0 &&
                 flush_at_ == absl::InfiniteFuture()) {
        // No submission came to take the Done along: it goes alone. While
        // the caller is submitting, it stays with the outbox (the caller's
        // wait or the window's end sends both): the coordinator holds what
        // becomes ready until it comes, so the step's tensors go in one
        // plan and one write.
        flush = true;
      }
      if (stop_) flush = false;
    }
    if (flush) {
      MutexLock send_lock(&send_mu_);
      (void)Flush();
    }
    if (msg.ok()) {
      if (got_plan) return std::move(*(*msg)->mutable_plan());
      if (msg->has_value()) {
        Log()->warn("ignored a message of kind {} on the negotiation link",
                    (*msg)->body_case());
      }
      continue;
    }
    // The link broke: wait for the Session's verdict a little, then give
    // ours (announcements cannot reach the coordinator any more either).
    bool verdict = false;
    {
      MutexLock lock(&mu_);
      const absl::Time verdict_by = absl::Now() + absl::Seconds(2);
      while (terminal_.ok() && !stop_) {
        if (plan_cv_.WaitWithDeadline(&mu_, verdict_by)) break;
      }
      verdict = !terminal_.ok() || stop_;
    }
    if (!verdict) {
      Fail(absl::UnavailableError(
          absl::StrCat("rank ", rank_, ": ", msg.status().message(),
                       "; no plan can reach this rank any more")));
    }
    MutexLock lock(&mu_);
    while (!stop_) plan_cv_.Wait(&mu_);  // Fail cleared the queue for good
    return std::nullopt;
  }
}

bool OpRuntime::AwaitProgress(absl::Time deadline) {
  if (link_ == nullptr || reader_busy_ || link_broken_ || stop_ ||
      !terminal_.ok() || !plans_.empty()) {
    return done_cv_.WaitWithDeadline(&mu_, deadline);
  }
  // The link is free: this caller reads it and runs what comes (a Done
  // this caller leaves unsent is the background thread's, see
  // NextPlanFromLink).
  reader_busy_ = true;
  absl::Time now = absl::Now();
  const absl::Time until =
      std::min({deadline, flush_at_, now + absl::Seconds(1)});
  mu_.Unlock();
  absl::StatusOr<std::optional<proto::CoordinatorMessage>> msg =
      link_->Receive(std::max(absl::ZeroDuration(), until - now));
  std::optional<proto::Plan> plan;
  if (msg.ok() && msg->has_value()) {
    if ((*msg)->has_plan()) {
      plan = std::move(*(*msg)->mutable_plan());
    } else {
      Log()->warn("ignored a message of kind {} on the negotiation link",
                  (*msg)->body_case());
    }
  }
  if (plan.has_value()) RunPlan(*plan, absl::Now());
  mu_.Lock();
  reader_busy_ = false;
  now = absl::Now();
  const bool flush = !stop_ && flush_at_ <= now;  // another thread's outbox
  if (!msg.ok()) {
    // The background thread gives the verdict (NextPlanFromLink).
    link_broken_ = true;
    plan_cv_.SignalAll();
  }
  // Others waiting may take the link now; Stop may be waiting for it. The
  // background thread runs queued plans, and sends a Done left unsent here
  // when nothing comes to take it along: it comes back by itself within an
  // announce window, else it is woken.
  done_cv_.SignalAll();
  if (!plans_.empty() ||
      (unsent_done_ != 0 && bg_wakes_at_ > now + announce_window_)) {
    plan_cv_.SignalAll();
  }
  if (flush) {
    FlushFromUnderLock();
  }
  return absl::Now() >= deadline;
}

void OpRuntime::ThreadMain() {
  if (link_ != nullptr) {
    while (std::optional<proto::Plan> plan = NextPlanFromLink()) {
      RunPlan(*plan, absl::Now());
      MutexLock lock(&mu_);
      reader_busy_ = false;
      // Its Done waits for the caller's next step (see NextPlanFromLink).
      if (unsent_done_ != 0) bg_park_until_ = absl::Now() + kDoneDelay;
    }
    return;
  }
  while (true) {
    proto::Plan plan;
    {
      MutexLock lock(&mu_);
      while (plans_.empty() && !stop_) plan_cv_.Wait(&mu_);
      if (stop_) return;
      plan = std::move(plans_.front());
      plans_.pop_front();
    }
    RunPlan(plan, absl::Now());
  }
}

void OpRuntime::TracePlan(const proto::Plan& plan, absl::Time arrived,
                          const absl::flat_hash_set<std::string>& mine) {
  size_t tensors = 0;
  for (const proto::Response& r : plan.responses()) {
    tensors += static_cast<size_t>(r.names_size());
    for (int i = 0; i < r.names_size(); ++i) {
      const std::string& name = r.names(i);
      if (!mine.contains(name)) continue;  // another set's, or joined
      // Each rank's ready tick, placed back from the arrival by how much
      // earlier than the last rank it announced (the coordinator's clock).
      if (r.ready_us_size() == r.names_size() * size_) {
        int64_t last = 0;
        for (int k = 0; k < size_; ++k) {
          last = std::max(last, r.ready_us(i * size_ + k));
        }
        for (int k = 0; k < size_; ++k) {
          timeline_->Instant(
              name, absl::StrCat("rank ", k, " ready"),
              arrived - absl::Microseconds(last - r.ready_us(i * size_ + k)));
        }
      }
      timeline_->End(name, arrived);  // NEGOTIATE_*
      timeline_->Begin(name, "QUEUE", arrived);
    }
  }
  timeline_->Marker(absl::StrCat("plan ", plan.seq()), arrived,
                    {{"responses", absl::StrCat(plan.responses_size())},
                     {"tensors", absl::StrCat(tensors)}});
}

namespace {

// An allreduce this rank runs without having submitted it (it has joined):
// its input and output are a buffer of the reduce op's identity.
struct JoinedOp : PendingOp {
  std::vector<char> buffer;
};

// The op a joined rank runs for names(i) of `r`, or null when it cannot.
std::shared_ptr<PendingOp> MakeJoinedOp(const proto::Response& r, int i) {
  if (r.counts_size() != r.names_size() || r.dtype() < 0 ||
      r.dtype() >= kNumDataTypes || r.reduce_op() < 0 ||
      r.reduce_op() >= kNumReduceOps) {
    return nullptr;
  }
  auto op = std::make_shared<JoinedOp>();
  op->name = r.names(i);
  op->op = proto::ALLREDUCE;
  const auto dtype = static_cast<DataType>(r.dtype());
  const int64_t count = r.counts(i);
  if (count < 0) return nullptr;
  op->buffer.resize(static_cast<size_t>(count) * DataTypeSize(dtype));
  op->input = Tensor{dtype, {count}, op->buffer.data(), kCpu};
  op->output = op->input;
  op->reduce.op = static_cast<ReduceOp>(r.reduce_op());
  op->reduce.postscale = r.postscale();  // the prescale is for real inputs
  if (!FillIdentity(dtype, op->reduce.op, op->buffer.data(),
                    static_cast<size_t>(count))
           .ok()) {
    return nullptr;
  }
  return op;
}

// The sequence number a response's first collective is stamped with: the
// same on every rank that runs it (see the header).
uint64_t StampOf(uint64_t plan_seq, size_t response) {
  return (plan_seq << 32) | (static_cast<uint64_t>(response) << 8);
}

}  // namespace

DataPlane& OpRuntime::PlaneFor(int32_t set, const std::vector<int>& members) {
  if (set == 0) return *data_;
  std::unique_ptr<DataPlane>& plane = set_planes_[set];
  if (plane == nullptr) plane = data_->Subset(members);
  return *plane;
}

void OpRuntime::RunPlan(proto::Plan& plan, absl::Time arrived) {
  // Resolve the names first (the table may change meanwhile: only this
  // thread completes ops, but Fail may complete them all). ops[i] is the op
  // of names(i), null when it is not pending here.
  struct Step {
    const proto::Response* response;
    std::vector<std::shared_ptr<PendingOp>> ops;
    bool member = true;  // of the response's process set
    std::vector<int> members;
    int rank = 0, size = 0;  // in the set
  };
  std::vector<Step> steps;
  size_t in_plan = 0;
  absl::flat_hash_set<std::string> traced;  // this rank's ops (timeline)
  {
    MutexLock lock(&mu_);
    if (!terminal_.ok()) return;
    if (plan.seq() != last_seq_ + 1) {
      Log()->error("plan {} arrived after plan {}; plans must arrive in order",
                   plan.seq(), last_seq_);
    }
    last_seq_ = plan.seq();
    // The cache changes apply before this plan can be reported done (see
    // cache_mirror.h).
    // A plan of hits lists them by bit (Response.by_bit); they resolve to
    // this rank's ops by the bits they were announced by. Names are filled
    // in only for the timeline, or when a bit names no op pending here (the
    // error message).
    bool need_names = timeline_ != nullptr;
    for (const proto::Response& r : plan.responses()) {
      if (need_names) break;
      if (!r.by_bit() || r.names_size() != 0) continue;
      for (int32_t bit : r.cache_bits()) {
        if (bit < 0 || static_cast<size_t>(bit) >= by_bit_.size() ||
            by_bit_[static_cast<size_t>(bit)] == 0) {
          need_names = true;
          break;
        }
      }
    }
    if (need_names) cache_.NameByBit(plan);
    cache_.Apply(plan, [&](const std::string& name) -> const proto::Request* {
      mu_.AssertHeld();  // called by Apply, under the lock above
      auto it = names_.find(name);
      if (it == names_.end()) return nullptr;
      const proto::Request& request = ops_.at(it->second)->request;
      // Announced by its bit: the mirror holds the same Request.
      return request.name().empty() ? cache_.RequestOf(name) : &request;
    });
    const bool joined = join_handle_ != 0;
    for (const proto::Response& r : plan.responses()) {
      Step step{&r, {}, true, {}, rank_, size_};
      if (const int32_t set = r.process_set(); set != 0) {
        auto it = sets_.find(set);
        if (it != sets_.end()) step.members = it->second;
        auto me = std::find(step.members.begin(), step.members.end(), rank_);
        if (me == step.members.end()) {
          step.member = false;  // another set's names: nothing to do here
          steps.push_back(std::move(step));
          continue;
        }
        step.rank = static_cast<int>(me - step.members.begin());
        step.size = static_cast<int>(step.members.size());
      }
      if (r.by_bit() && r.names_size() == 0) {  // every bit resolves here
        for (int32_t bit : r.cache_bits()) {
          std::shared_ptr<PendingOp> op =
              ops_.at(by_bit_[static_cast<size_t>(bit)]);
          op->running = true;
          step.ops.push_back(std::move(op));
          ++in_plan;
        }
        steps.push_back(std::move(step));
        continue;
      }
      const bool joined_here = std::find(r.joined().begin(), r.joined().end(),
                                         rank_) != r.joined().end();
      for (int i = 0; i < r.names_size(); ++i) {
        const std::string& name = r.names(i);
        auto it = names_.find(name);
        if (it == names_.end()) {
          std::shared_ptr<PendingOp> stand_in;
          if (joined_here) stand_in = MakeJoinedOp(r, i);
          // An error for a name this rank never submitted (a group whose
          // members the ranks disagree on) concerns the ranks that did.
          if (stand_in == nullptr && !joined && r.error_code() == 0) {
            Log()->error("plan {} names '{}', which is not pending on rank {}",
                         plan.seq(), name, rank_);
          }
          step.ops.push_back(std::move(stand_in));
          continue;
        }
        std::shared_ptr<PendingOp> op = ops_.at(it->second);
        op->running = true;
        if (timeline_ != nullptr) traced.insert(name);
        step.ops.push_back(std::move(op));
        ++in_plan;
      }
      steps.push_back(std::move(step));
    }
  }
  if (timeline_ != nullptr) TracePlan(plan, arrived, traced);
  std::vector<std::vector<absl::Status>> results;
  for (size_t k = 0; k < steps.size(); ++k) {
    Step& step = steps[k];
    std::vector<absl::Status>& out = results.emplace_back();
    if (!step.member) continue;
    const int32_t set = step.response->process_set();
    DataPlane& plane = PlaneFor(set, step.members);
    plane.Stamp(StampOf(plan.seq(), k));
    // Stand-ins of a joined rank (handle 0) have no timeline rows.
    const bool stand_ins = std::any_of(
        step.ops.begin(), step.ops.end(),
        [](const auto& op) { return op != nullptr && op->handle == 0; });
    Timeline* const timeline = stand_ins ? nullptr : timeline_.get();
    if (timeline != nullptr) {
      const absl::Time now = absl::Now();
      for (auto& op : step.ops) {
        if (op != nullptr) timeline->End(op->name, now);  // QUEUE
      }
    }
    if (IsFused(*step.response)) {
      std::vector<PendingOp*> ops;
      for (auto& op : step.ops) ops.push_back(op.get());
      out = ExecuteFused(*step.response, ops, plane, step.rank, step.size,
                         fusion_buffer_, timeline);
      continue;
    }
    for (auto& op : step.ops) {
      if (op == nullptr) {
        out.emplace_back();
        continue;
      }
      const bool trace =
          timeline != nullptr && step.response->error_code() == 0;
      if (trace) {
        timeline->Begin(op->name, Upper(proto::OpTypeName(op->op)),
                        absl::Now());
      }
      out.push_back(Execute(*step.response, *op, plane, step.rank, step.size,
                            &op->result));
      if (trace) timeline->End(op->name, absl::Now());
    }
  }
  // A removed process set's data plane goes (this thread's).
  for (size_t k = 0; k < steps.size(); ++k) {
    for (size_t i = 0; i < steps[k].ops.size(); ++i) {
      const PendingOp* op = steps[k].ops[i].get();
      if (op != nullptr && op->op == proto::PROCESS_SET_REMOVE &&
          results[k][i].ok()) {
        set_planes_.erase(op->root);
      }
    }
  }
  // Done(seq). On the stream, and whenever ops of this rank still wait for
  // plans (the coordinator may hold their responses until this rank is
  // idle), it goes now, before the callers wake: their next announcement
  // must not reach the coordinator ahead of it (the coordinator would think
  // this rank busy). Otherwise, on a link, it waits (unsent_done_) to go in
  // the same write as the callers' next announcements (up to one announce
  // window), or alone after kDoneDelay when none comes.
  bool send_done;
  {
    MutexLock lock(&mu_);
    unsent_done_ = plan.seq();
    send_done = link_ == nullptr || names_.size() > in_plan;
  }
  if (send_done) {
    MutexLock send_lock(&send_mu_);
    (void)Flush();
  }
  {
    MutexLock lock(&mu_);
    for (size_t k = 0; k < steps.size(); ++k) {
      for (size_t i = 0; i < steps[k].ops.size(); ++i) {
        PendingOp* op = steps[k].ops[i].get();
        if (op == nullptr) continue;
        op->running = false;
        op->done = true;
        op->status = std::move(results[k][i]);
        if (op->status.ok() && op->op == proto::PROCESS_SET_ADD) {
          sets_[static_cast<int32_t>(op->result.splits.at(0))] =
              std::vector<int>(op->splits.begin(), op->splits.end());
        } else if (op->status.ok() && op->op == proto::PROCESS_SET_REMOVE) {
          sets_.erase(op->root);
        }
        if (auto it = names_.find(op->name);
            it != names_.end() && it->second == op->handle) {
          names_.erase(it);
        }
        if (op->cache_bit >= 0 &&
            by_bit_[static_cast<size_t>(op->cache_bit)] == op->handle) {
          by_bit_[static_cast<size_t>(op->cache_bit)] = 0;
        }
      }
    }
  }
  // After the unlock: a caller woken under the lock would block on it at
  // once and need a second wake-up.
  done_cv_.SignalAll();
}

absl::Status OpRuntime::Unknown(Handle handle) const {
  return absl::NotFoundError(
      absl::StrCat("handle ", handle, " is not pending on rank ", rank_,
                   ": it was never returned by a *_async call of this job, or "
                   "synchronize() already released it"));
}

std::optional<bool> OpRuntime::Finished(Handle handle) const {
  if (auto g = groups_.find(handle); g != groups_.end()) {
    for (Handle member : g->second) {
      if (!ops_.at(member)->done) return false;
    }
    return true;
  }
  auto it = ops_.find(handle);
  if (it == ops_.end()) return std::nullopt;
  return it->second->done;
}

absl::Status OpRuntime::Take(Handle handle, OpResult* result,
                             std::vector<std::shared_ptr<PendingOp>>* taken) {
  if (auto g = groups_.find(handle); g != groups_.end()) {
    const std::vector<Handle> members = std::move(g->second);
    groups_.erase(g);
    absl::Status first;
    if (result != nullptr) *result = OpResult{};
    for (Handle member : members) {
      OpResult r;
      absl::Status s = Take(member, &r, taken);
      if (first.ok()) first = s;
      if (result != nullptr) result->members.push_back(std::move(r));
    }
    return first;
  }
  auto it = ops_.find(handle);
  std::shared_ptr<PendingOp> op = std::move(it->second);
  ops_.erase(it);
  if (result != nullptr) *result = std::move(op->result);
  absl::Status status = op->status;
  if (taken != nullptr) taken->push_back(std::move(op));
  return status;
}

absl::StatusOr<bool> OpRuntime::Poll(Handle handle) {
  FlushOutbox();  // the caller waits: nothing more comes soon
  MutexLock lock(&mu_);
  std::optional<bool> finished = Finished(handle);
  if (!finished.has_value()) return Unknown(handle);
  return *finished;
}

absl::Status OpRuntime::Synchronize(Handle handle, absl::Duration timeout,
                                    OpResult* result) {
  FlushOutbox();  // the caller waits: nothing more comes soon
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  return SynchronizeLocked(handle, deadline, timeout, result);
}

absl::Status OpRuntime::SynchronizeLocked(
    Handle handle, absl::Time deadline, absl::Duration timeout,
    OpResult* result, std::vector<std::shared_ptr<PendingOp>>* taken) {
  std::optional<bool> finished = Finished(handle);
  if (!finished.has_value()) return Unknown(handle);
  while (!*finished) {
    if (AwaitProgress(deadline)) {
      finished = Finished(handle);
      if (*finished) break;
      auto g = groups_.find(handle);
      const PendingOp& op =
          *ops_.at(g == groups_.end() ? handle : g->second[0]);
      return absl::DeadlineExceededError(absl::StrCat(
          g == groups_.end() ? "" : "grouped ", proto::OpTypeName(op.op), " '",
          op.name, "' on rank ", rank_, " did not finish within ",
          absl::FormatDuration(timeout),
          "; the handle stays valid (the coordinator's stall warnings name "
          "ranks that have not submitted it)"));
    }
    finished = Finished(handle);
  }
  return Take(handle, result, taken);
}

std::vector<absl::Status> OpRuntime::SynchronizeAll(
    absl::Span<const Handle> handles, absl::Duration timeout) {
  FlushOutbox();  // the caller waits: nothing more comes soon
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<absl::Status> out;
  out.reserve(handles.size());
  // Recycled after the unlock: resetting or freeing hundreds of ops under
  // the lock would hold up the background thread.
  std::vector<std::shared_ptr<PendingOp>> taken;
  taken.reserve(handles.size());
  {
    // One lock for all: a step's hundreds of handles usually complete in one
    // plan, and each wake-up then releases every handle it finished.
    MutexLock lock(&mu_);
    for (Handle h : handles) {
      out.push_back(SynchronizeLocked(h, deadline, timeout, nullptr, &taken));
    }
  }
  Recycle(taken);
  return out;
}

absl::StatusOr<size_t> OpRuntime::WaitAny(absl::Span<const Handle> handles,
                                          absl::Duration timeout) {
  FlushOutbox();  // the caller waits: nothing more comes soon
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  if (handles.empty()) {
    return absl::InvalidArgumentError("wait_any() needs at least one handle");
  }
  bool timed_out = false;
  while (true) {
    for (size_t i = 0; i < handles.size(); ++i) {
      std::optional<bool> finished = Finished(handles[i]);
      if (!finished.has_value()) return Unknown(handles[i]);
      if (*finished) return i;
    }
    if (timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat("none of ", handles.size(), " ops on rank ", rank_,
                       " finished within ", absl::FormatDuration(timeout)));
    }
    timed_out = AwaitProgress(deadline);
  }
}

}  // namespace kolo::worker
