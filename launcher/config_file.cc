// kolorun --config-file: see launcher/config_file.h.
#include "launcher/config_file.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/edit_distance.h"
#include "yaml-cpp/yaml.h"

namespace kolo::launcher {
namespace {

enum class ConfigType { kInt, kNumber, kBool, kString, kController };

struct ConfigKey {
  const char* section;  // "" for a top-level key
  const char* name;
  ConfigType type;
  const char* flag;     // the flag; for kBool, the one for true
  const char* no_flag;  // kBool: the flag for false
};

constexpr ConfigKey kConfigKeys[] = {
    {"", "controller", ConfigType::kController, "--gloo", "--mpi"},
    {"params", "fusion_threshold_mb", ConfigType::kInt, "--fusion-threshold-mb",
     ""},
    {"params", "cycle_time_ms", ConfigType::kNumber, "--cycle-time-ms", ""},
    {"params", "cache_capacity", ConfigType::kInt, "--cache-capacity", ""},
    {"params", "hierarchical_allreduce", ConfigType::kBool,
     "--hierarchical-allreduce", "--no-hierarchical-allreduce"},
    {"params", "hierarchical_allgather", ConfigType::kBool,
     "--hierarchical-allgather", "--no-hierarchical-allgather"},
    {"params", "torus_allreduce", ConfigType::kBool, "--torus-allreduce",
     "--no-torus-allreduce"},
    {"autotune", "enabled", ConfigType::kBool, "--autotune", "--no-autotune"},
    {"autotune", "log_file", ConfigType::kString, "--autotune-log-file", ""},
    {"autotune", "warmup_samples", ConfigType::kInt,
     "--autotune-warmup-samples", ""},
    {"autotune", "steps_per_sample", ConfigType::kInt,
     "--autotune-steps-per-sample", ""},
    {"autotune", "bayes_opt_max_samples", ConfigType::kInt,
     "--autotune-bayes-opt-max-samples", ""},
    {"autotune", "gaussian_process_noise", ConfigType::kNumber,
     "--autotune-gaussian-process-noise", ""},
    {"timeline", "filename", ConfigType::kString, "--timeline-filename", ""},
    {"timeline", "mark_cycles", ConfigType::kBool, "--timeline-mark-cycles",
     "--no-timeline-mark-cycles"},
    {"stall_check", "enabled", ConfigType::kBool, "--stall-check",
     "--no-stall-check"},
    {"stall_check", "warning_time_seconds", ConfigType::kNumber,
     "--stall-check-warning-time-seconds", ""},
    {"stall_check", "shutdown_time_seconds", ConfigType::kNumber,
     "--stall-check-shutdown-time-seconds", ""},
    {"library_options", "mpi_threads_disable", ConfigType::kBool,
     "--mpi-threads-disable", "--no-mpi-threads-disable"},
    {"library_options", "num_nccl_streams", ConfigType::kInt,
     "--num-nccl-streams", ""},
    {"library_options", "thread_affinity", ConfigType::kInt,
     "--thread-affinity", ""},
    {"library_options", "gloo_timeout_seconds", ConfigType::kNumber,
     "--gloo-timeout-seconds", ""},
    {"logging", "level", ConfigType::kString, "--log-level", ""},
    {"logging", "with_timestamp", ConfigType::kBool, "--log-with-timestamp",
     "--log-without-timestamp"},
};

std::string KeyName(const ConfigKey& k) {
  return *k.section == '\0' ? k.name : absl::StrCat(k.section, ".", k.name);
}

// The known key (or section) closest to `name`, within a third of its
// length, or "".
std::string ClosestKey(const std::string& name, bool section) {
  std::string best;
  size_t best_distance = name.size() / 3 + 1;
  for (const ConfigKey& k : kConfigKeys) {
    const std::string known =
        section ? std::string(*k.section ? k.section : k.name) : KeyName(k);
    const size_t d = EditDistance(name, known, EditOps::kLevenshtein);
    if (d < best_distance) {
      best = known;
      best_distance = d;
    }
  }
  return best;
}

std::string UnknownKey(absl::string_view path, const std::string& name,
                       bool section) {
  const std::string closest = ClosestKey(name, section);
  return absl::StrCat("config file ", path, ": unknown key '", name, "'",
                      closest.empty()
                          ? absl::StrCat("; the known keys are horovodrun's "
                                         "(controller, params, autotune, "
                                         "timeline, stall_check, "
                                         "library_options, logging)")
                          : absl::StrCat(" (did you mean '", closest, "'?)"));
}

const char* ExpectedType(ConfigType type) {
  switch (type) {
    case ConfigType::kInt:
      return "an integer";
    case ConfigType::kNumber:
      return "a number";
    case ConfigType::kBool:
      return "true or false";
    case ConfigType::kString:
      return "a string";
    case ConfigType::kController:
      return "gloo or mpi";
  }
  return "";
}

// The entry for `node`, the value of key `k`; false when its type is wrong.
bool ToEntry(const ConfigKey& k, const YAML::Node& node, ConfigEntry& e) {
  if (!node.IsScalar()) return false;
  e.key = KeyName(k);
  e.flag = k.flag;
  try {
    switch (k.type) {
      case ConfigType::kInt:
        e.value = absl::StrCat(node.as<int64_t>());
        return true;
      case ConfigType::kNumber:
        (void)node.as<double>();
        e.value = node.Scalar();
        return true;
      case ConfigType::kBool:
        if (!node.as<bool>()) e.flag = k.no_flag;
        return true;
      case ConfigType::kString:
        e.value = node.Scalar();
        return true;
      case ConfigType::kController: {
        const std::string c = absl::AsciiStrToLower(node.Scalar());
        if (c != "gloo" && c != "mpi") return false;
        if (c == "mpi") e.flag = k.no_flag;
        return true;
      }
    }
  } catch (const YAML::Exception&) {
  }
  return false;
}

std::string ShownNode(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return absl::StrCat("'", node.Scalar(), "'");
}

}  // namespace

absl::StatusOr<std::vector<ConfigEntry>> ParseConfigFile(
    absl::string_view path, absl::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path, ": not YAML: ", e.what()));
  }
  std::vector<ConfigEntry> entries;
  if (root.IsNull()) return entries;
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file ", path, ": expected a mapping of horovodrun's keys, got ",
        ShownNode(root)));
  }
  for (const auto& top : root) {
    const std::string name = top.first.as<std::string>();
    const YAML::Node& value = top.second;
    if (value.IsNull()) continue;
    const bool leaf = name == "controller";
    const bool section =
        std::any_of(std::begin(kConfigKeys), std::end(kConfigKeys),
                    [&](const ConfigKey& k) { return name == k.section; });
    if (!leaf && !section) {
      return absl::InvalidArgumentError(UnknownKey(path, name, true));
    }
    std::vector<std::pair<std::string, YAML::Node>> items;
    if (leaf) {
      items.emplace_back(name, value);
    } else if (!value.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config file ", path, ": ", name,
                       ": expected a mapping, got ", ShownNode(value)));
    } else {
      for (const auto& item : value) {
        items.emplace_back(
            absl::StrCat(name, ".", item.first.as<std::string>()), item.second);
      }
    }
    for (const auto& [full, node] : items) {
      const ConfigKey* key = nullptr;
      for (const ConfigKey& k : kConfigKeys) {
        if (KeyName(k) == full) key = &k;
      }
      if (key == nullptr) {
        return absl::InvalidArgumentError(UnknownKey(path, full, false));
      }
      if (node.IsNull()) continue;
      ConfigEntry e;
      if (!ToEntry(*key, node, e)) {
        return absl::InvalidArgumentError(
            absl::StrCat("config file ", path, ": ", full, ": expected ",
                         ExpectedType(key->type), ", got ", ShownNode(node)));
      }
      entries.push_back(std::move(e));
    }
  }
  return entries;
}

}  // namespace kolo::launcher
