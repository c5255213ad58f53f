// Fuzz target: kolorun's command-line parser (launcher/args.h). The input is
// argv (NUL-separated arguments), then optionally a byte 0x01 and an
// environment block (NAME=VALUE lines) for the KOLO_* defaults ParseArgs
// reads. A bad command line must be an error, never a crash, and a success
// must describe a launchable job.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/check.h"
#include "fuzz/fuzz_text.h"
#include "launcher/args.h"
#include "launcher/hostfile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::string_view env_text;
  if (const size_t cut = text.find('\x01'); cut != absl::string_view::npos) {
    env_text = text.substr(cut + 1);
    text = text.substr(0, cut);
  }
  std::vector<std::string> args;
  if (!text.empty()) args = kolo::fuzz::Split(text, '\0');
  std::map<std::string, std::string> env;
  for (auto& [name, value] : kolo::fuzz::EnvLines(env_text)) {
    env[name] = value;
  }
  absl::StatusOr<kolo::launcher::LaunchOptions> options =
      kolo::launcher::ParseArgs(args, env);
  if (options.ok() && !options->help && !options->version &&
      !options->check_build) {
    KOLO_CHECK(!options->command.empty());
    // With a host-discovery script the hosts (and -np) come from the
    // script at run time.
    if (!options->discovery_script.empty()) return 0;
    KOLO_CHECK(options->np > 0);
    for (const kolo::launcher::HostSlots& h : options->hosts) {
      KOLO_CHECK(h.slots > 0);
    }
    // The slots hold every worker: PlanWorkers places all np of them (only
    // for small jobs, to keep each run fast).
    if (options->np <= 4096) {
      const std::vector<kolo::launcher::WorkerPlan> plan =
          kolo::launcher::PlanWorkers(*options, "fuzzhost");
      KOLO_CHECK(static_cast<int>(plan.size()) == options->np);
      for (size_t r = 0; r < plan.size(); ++r) {
        KOLO_CHECK(plan[r].rank == static_cast<int>(r));
        KOLO_CHECK(plan[r].local_rank < plan[r].local_size);
      }
    }
  }
  // -H's parser on its own, on the whole argv text.
  (void)kolo::launcher::ParseHosts(text);
  return 0;
}
