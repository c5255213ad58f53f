// The plan that puts a job's ranks on host slots (declared in
// launcher/args.h, beside the options it reads): which host each worker
// runs on, its local and cross ranks, and how it is started.
//
// Pure functions; thread-safe.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "launcher/args.h"

namespace kolo::launcher {

bool IsLocalHostName(absl::string_view host,
                     absl::string_view kernel_hostname) {
  return host == "localhost" || host == "127.0.0.1" ||
         (!kernel_hostname.empty() && host == kernel_hostname);
}

SpawnMode ModeFor(const LaunchOptions& options, absl::string_view host,
                  absl::string_view kernel_hostname) {
  if (!options.launcher_cmd.empty()) return SpawnMode::kTemplate;
  if (IsLocalHostName(host, kernel_hostname)) return SpawnMode::kLocal;
  return SpawnMode::kSsh;
}

std::vector<WorkerPlan> PlanWorkers(const LaunchOptions& options,
                                    absl::string_view kernel_hostname) {
  std::vector<WorkerPlan> plan;
  std::map<std::string, int> per_host;
  for (const HostSlots& h : options.hosts) {
    for (int s = 0; s < h.slots && static_cast<int>(plan.size()) < options.np;
         ++s) {
      WorkerPlan w;
      w.rank = static_cast<int>(plan.size());
      w.worker_id = absl::StrCat("w", w.rank);
      w.host = h.name;
      w.local_rank = per_host[h.name]++;
      w.mode = ModeFor(options, h.name, kernel_hostname);
      plan.push_back(std::move(w));
    }
  }
  std::map<int, int> per_local_rank;
  for (WorkerPlan& w : plan) {
    w.local_size = per_host[w.host];
    w.cross_rank = per_local_rank[w.local_rank]++;
  }
  for (WorkerPlan& w : plan) w.cross_size = per_local_rank[w.local_rank];
  return plan;
}

bool AllLocal(const std::vector<WorkerPlan>& plan) {
  for (const WorkerPlan& w : plan) {
    if (w.mode != SpawnMode::kLocal) return false;
  }
  return true;
}

}  // namespace kolo::launcher
