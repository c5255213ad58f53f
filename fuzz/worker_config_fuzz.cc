// Fuzz target: the worker's configuration from its environment
// (worker_lib/config.h): ParseWorkerConfig and UnknownVariableWarnings. The
// input is an environment block, NAME=VALUE lines. Every variable is
// something a user (or kolorun) may set to anything, so no input may crash,
// and a success must give a config within the documented ranges.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/check.h"
#include "fuzz/fuzz_text.h"
#include "worker_lib/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  kolo::worker::EnvMap env;
  for (auto& [name, value] : kolo::fuzz::EnvLines(text)) {
    env[name] = value;
  }
  // KOLO_SECRET_FILE names a file that ParseWorkerConfig reads: the
  // environment is the user's own, and a fuzzer pointing it at /dev/zero
  // finds nothing but a slow run.
  env.erase("KOLO_SECRET_FILE");
  absl::StatusOr<kolo::worker::WorkerConfig> config =
      kolo::worker::ParseWorkerConfig(env, "fuzzhost");
  if (!config.ok()) {
    KOLO_CHECK(!config.status().message().empty());
  }
  for (const std::string& warning :
       kolo::worker::UnknownVariableWarnings(env)) {
    KOLO_CHECK(!warning.empty());
  }
  return 0;
}
