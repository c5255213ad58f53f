// Horovod's environment variables: see launcher/horovod_variables.h.
#include "launcher/horovod_variables.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kolo::launcher {
namespace {

using Use = HorovodVariableUse;

constexpr char kVariableNoMpi[] =
    "kolo does not use MPI; its controller is its coordinator and its data "
    "plane its own (TCP, shared memory, NCCL)";
constexpr char kVariableNoGloo[] =
    "kolo does not use Gloo; workers find kolorun's coordinator through "
    "KOLO_COORDINATOR";

constexpr HorovodVariable kVariables[] = {
    // Read by kolo, as aliases of its own variables.
    {"HOROVOD_FUSION_THRESHOLD", Use::kHonoured, "KOLO_FUSION_THRESHOLD"},
    {"HOROVOD_CYCLE_TIME", Use::kHonoured, "KOLO_CYCLE_TIME_MS"},
    {"HOROVOD_CACHE_CAPACITY", Use::kHonoured, "KOLO_CACHE_CAPACITY"},
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", Use::kHonoured, "KOLO_HIERARCHICAL"},
    {"HOROVOD_DISABLE_GROUP_FUSION", Use::kHonoured,
     "KOLO_DISABLE_GROUP_FUSION"},
    {"HOROVOD_TIMELINE", Use::kHonoured, "KOLO_TIMELINE"},
    {"HOROVOD_STALL_CHECK_TIME_SECONDS", Use::kHonoured,
     "KOLO_STALL_CHECK_TIME_SECONDS"},
    {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", Use::kHonoured,
     "KOLO_STALL_SHUTDOWN_TIME_SECONDS"},
    {"HOROVOD_STALL_CHECK_DISABLE", Use::kHonoured,
     "kolorun: 1 is --no-stall-check"},
    {"HOROVOD_GLOO_TIMEOUT_SECONDS", Use::kHonoured, "KOLO_TIMEOUT_SECONDS"},
    {"HOROVOD_START_TIMEOUT", Use::kHonoured, "KOLO_START_TIMEOUT"},
    {"HOROVOD_ELASTIC_TIMEOUT", Use::kHonoured, "KOLO_ELASTIC_TIMEOUT"},
    {"HOROVOD_LOG_LEVEL", Use::kHonoured, "KOLO_LOG_LEVEL"},
    {"HOROVOD_AUTOTUNE", Use::kHonoured, "KOLO_AUTOTUNE"},
    {"HOROVOD_AUTOTUNE_LOG", Use::kHonoured, "KOLO_AUTOTUNE_LOG"},
    {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", Use::kHonoured,
     "KOLO_AUTOTUNE_WARMUP_SAMPLES"},
    {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", Use::kHonoured,
     "KOLO_AUTOTUNE_STEPS_PER_SAMPLE"},
    {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", Use::kHonoured,
     "KOLO_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"},
    {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", Use::kHonoured,
     "KOLO_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"},
    {"HOROVOD_ELASTIC", Use::kHonoured, "KOLO_ELASTIC (DistributedOptimizer)"},
    // Set by kolorun for every worker.
    {"HOROVOD_RANK", Use::kSetByLauncher, "the worker's rank"},
    {"HOROVOD_SIZE", Use::kSetByLauncher, "the number of workers"},
    {"HOROVOD_LOCAL_RANK", Use::kSetByLauncher, "the rank on its host"},
    {"HOROVOD_LOCAL_SIZE", Use::kSetByLauncher, "the workers on its host"},
    {"HOROVOD_CROSS_RANK", Use::kSetByLauncher,
     "its index among the workers of its local rank"},
    {"HOROVOD_CROSS_SIZE", Use::kSetByLauncher,
     "the workers of its local rank"},
    {"HOROVOD_HOSTNAME", Use::kSetByLauncher, "its host name"},
    // Not used: one notice each.
    {"HOROVOD_HIERARCHICAL_ALLGATHER", Use::kNotUsed,
     "KOLO_HIERARCHICAL governs allgather together with allreduce, "
     "broadcast and reducescatter"},
    {"HOROVOD_TORUS_ALLREDUCE", Use::kNotUsed,
     "kolo has no torus allreduce; its two-level algorithm is "
     "KOLO_HIERARCHICAL's"},
    {"HOROVOD_TIMELINE_MARK_CYCLES", Use::kNotUsed,
     "kolo's timeline has no cycles to mark; it marks every negotiated plan"},
    {"HOROVOD_MPI_THREADS_DISABLE", Use::kNotUsed, kVariableNoMpi},
    {"HOROVOD_CONTROLLER", Use::kNotUsed, kVariableNoMpi},
    {"HOROVOD_CPU_OPERATIONS", Use::kNotUsed, kVariableNoMpi},
    {"HOROVOD_ADASUM_MPI_CHUNK_SIZE", Use::kNotUsed, kVariableNoMpi},
    {"HOROVOD_CCL_CACHE", Use::kNotUsed,
     "kolo does not use oneCCL; CPU collectives run on its own data plane"},
    {"HOROVOD_NUM_NCCL_STREAMS", Use::kNotUsed,
     "kolo's NCCL path manages its own CUDA streams; their number is not a "
     "setting"},
    {"HOROVOD_BATCH_D2D_MEMCOPIES", Use::kNotUsed,
     "kolo packs fused GPU tensors its own way; there is nothing to batch"},
    {"HOROVOD_ENABLE_ASYNC_COMPLETION", Use::kNotUsed,
     "kolo's GPU ops complete asynchronously already"},
    {"HOROVOD_DISABLE_NVTX_RANGES", Use::kNotUsed,
     "kolo emits no NVTX ranges; its timeline is KOLO_TIMELINE"},
    {"HOROVOD_ENABLE_XLA_OPS", Use::kNotUsed,
     "kolo has no TensorFlow or XLA support"},
    {"HOROVOD_THREAD_AFFINITY", Use::kNotUsed,
     "kolo does not pin its background threads; pin the whole worker "
     "(taskset or numactl in front of the command)"},
    {"HOROVOD_DYNAMIC_PROCESS_SETS", Use::kNotUsed,
     "kolo's process sets may always be added and removed after init()"},
    {"HOROVOD_GLOO_IFACE", Use::kNotUsed,
     "use kolorun --network-interface IF (or KOLO_IFACE)"},
    {"HOROVOD_GLOO_RENDEZVOUS_ADDR", Use::kNotUsed, kVariableNoGloo},
    {"HOROVOD_GLOO_RENDEZVOUS_PORT", Use::kNotUsed, kVariableNoGloo},
    {"HOROVOD_LOG_HIDE_TIME", Use::kNotUsed,
     "kolo's log lines have a fixed format; for timestamps on the workers' "
     "output use kolorun --prefix-output-with-timestamp"},
    {"HOROVOD_SECRET_KEY", Use::kNotUsed,
     "kolorun makes a job secret of its own and gives it to each worker on "
     "its stdin; for starts without kolorun use KOLO_SECRET_FILE"},
};

}  // namespace

absl::Span<const HorovodVariable> HorovodVariables() { return kVariables; }

std::vector<std::string> HorovodVariableNotices(
    const std::map<std::string, std::string>& env) {
  std::vector<std::string> notices;
  for (const HorovodVariable& v : kVariables) {
    if (v.use != Use::kNotUsed) continue;
    auto it = env.find(v.name);
    if (it == env.end() || it->second.empty()) continue;
    notices.push_back(absl::StrCat(v.name, " is not used by kolo: ", v.text));
  }
  return notices;
}

}  // namespace kolo::launcher
