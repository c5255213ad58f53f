#include "ctl/status_json.h"

#include <vector>

#include "ctl/names.h"
#include "ctl/pending.h"

namespace kolo::ctl {
namespace {

using Json = nlohmann::ordered_json;

Json LostToJson(const proto::LostWorker& l) {
  return Json{{"worker_id", l.worker_id()},
              {"rank", l.rank()},
              {"host", l.host_name()},
              {"cause", l.cause()}};
}

template <typename Repeated>
Json LostListToJson(const Repeated& lost) {
  Json out = Json::array();
  for (const proto::LostWorker& l : lost) out.push_back(LostToJson(l));
  return out;
}

template <typename Repeated>
Json Strings(const Repeated& values) {
  Json out = Json::array();
  for (const std::string& v : values) out.push_back(v);
  return out;
}

}  // namespace

Json StatusToJson(const proto::StatusReply& r, const FormatContext& ctx) {
  int members = 0;
  Json workers = Json::array();
  for (const proto::WorkerStatus& w : r.workers()) {
    if (w.rank() >= 0) ++members;
    workers.push_back(Json{{"worker_id", w.worker_id()},
                           {"incarnation", w.incarnation()},
                           {"rank", w.rank()},
                           {"host", w.host_name()},
                           {"data_address", w.data_address()},
                           {"state", StateName(w.state())},
                           {"heard_ms_ago", w.millis_since_heard()},
                           {"pid", w.pid()}});
  }
  Json pending = Json::array();
  for (const PendingView& p : AnalyzePending(r, ctx.stall_check)) {
    Json missing = Json::array();
    for (const RankRef& m : p.missing) {
      missing.push_back(Json{{"rank", m.rank}, {"worker_id", m.worker_id}});
    }
    pending.push_back(Json{{"name", p.name},
                           {"seconds", p.seconds},
                           {"stalled", p.stalled},
                           {"submitted_ranks", p.submitted},
                           {"missing", std::move(missing)}});
  }
  Json history = Json::array();
  for (const proto::EpochRecord& e : r.history()) {
    history.push_back(Json{{"epoch", e.epoch()},
                           {"formed_unix_ms", e.formed_unix_ms()},
                           {"cause", e.cause()},
                           {"members", Strings(e.members())},
                           {"joined", Strings(e.joined())},
                           {"left", Strings(e.left())},
                           {"lost", LostListToJson(e.lost())}});
  }
  Json job = Json{{"id", r.job_id()},
                  {"phase", r.phase()},
                  {"epoch", r.epoch()},
                  {"incarnation", IncarnationHex(r.incarnation())},
                  {"expected_size", r.expected_size()},
                  {"members", members},
                  {"plans", r.plans()},
                  {"elastic", r.elastic()},
                  {"min_size", r.min_size()},
                  {"max_size", r.max_size()},
                  {"resets", r.resets()},
                  {"end_reason", r.end_reason()},
                  {"failed_worker", r.failed_worker()}};
  return Json{{"time_unix_ms", absl::ToUnixMillis(ctx.now)},
              {"coordinator", ctx.coordinator},
              {"job", std::move(job)},
              {"workers", std::move(workers)},
              {"pending", std::move(pending)},
              {"stall_check_seconds", absl::ToDoubleSeconds(ctx.stall_check)},
              {"lost", LostListToJson(r.lost())},
              {"history", std::move(history)}};
}

Json ErrorToJson(const std::string& error, const FormatContext& ctx) {
  return Json{{"time_unix_ms", absl::ToUnixMillis(ctx.now)},
              {"coordinator", ctx.coordinator},
              {"error", error}};
}

}  // namespace kolo::ctl
