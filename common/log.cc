#include "common/log.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace kolo {
namespace {

// The identity tag, shared by every logger of the process.
Mutex identity_mu;
// A fixed buffer rather than a std::string: log lines may be written during
// static destruction, after a string would have been destroyed.
char identity[64] ABSL_GUARDED_BY(identity_mu) = "rank ?";
std::atomic<int> level{spdlog::level::warn};

std::string Identity() {
  MutexLock lock(&identity_mu);
  return std::string(identity);
}

// %* in the pattern: the identity tag.
class IdentityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string id = Identity();
    dest.append(id.data(), id.data() + id.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<IdentityFlag>();
  }
};

std::unique_ptr<spdlog::formatter> MakeFormatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<IdentityFlag>('*').set_pattern(
      "[%Y-%m-%d %H:%M:%S.%e] [kolo %*] [%n] [%l] %v");
  return f;
}

// kolo's loggers and their one sink. Never destroyed: threads may log
// during the process's exit (see log.h).
struct Registry {
  Mutex mu;
  std::shared_ptr<spdlog::sinks::stderr_sink_mt> sink =
      std::make_shared<spdlog::sinks::stderr_sink_mt>();
  std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers
      ABSL_GUARDED_BY(mu);
};

Registry& Loggers() {
  static Registry* const registry = new Registry();  // never destroyed
  return *registry;
}

}  // namespace

std::shared_ptr<spdlog::logger> GetLogger(absl::string_view component) {
  Registry& r = Loggers();
  MutexLock lock(&r.mu);
  if (auto it = r.loggers.find(component); it != r.loggers.end()) {
    return it->second;
  }
  auto logger =
      std::make_shared<spdlog::logger>(std::string(component), r.sink);
  logger->set_formatter(MakeFormatter());
  logger->set_level(static_cast<spdlog::level::level_enum>(level.load()));
  logger->flush_on(spdlog::level::warn);
  r.loggers.emplace(std::string(component), logger);
  return logger;
}

void FlushLogs() {
  Registry& r = Loggers();
  MutexLock lock(&r.mu);
  for (auto& [name, logger] : r.loggers) logger->flush();
}

void SetLogIdentity(absl::string_view id) {
  MutexLock lock(&identity_mu);
  size_t n = std::min(id.size(), sizeof(identity) - 1);
  id.copy(identity, n);
  identity[n] = '\0';
}

void SetLogRank(int rank) { SetLogIdentity(absl::StrCat("rank ", rank)); }

absl::Status SetLogLevel(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(name);
  if (n == "warning") n = "warn";
  if (n == "fatal") n = "critical";
  spdlog::level::level_enum l = spdlog::level::from_str(n);
  // from_str returns "off" for unknown names; only accept "off" when asked.
  if (l == spdlog::level::off && n != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown log level '", name,
        "'; use trace, debug, info, warning, error, critical or off"));
  }
  level.store(l);
  Registry& r = Loggers();
  MutexLock lock(&r.mu);
  for (auto& [logger_name, logger] : r.loggers) logger->set_level(l);
  return absl::OkStatus();
}

}  // namespace kolo
