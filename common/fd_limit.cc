// RaiseOpenFileLimit (common/fd_limit.h).
#include "common/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace kolo {
namespace {

// /proc/sys/fs/nr_open: the most a process may ask for when the hard limit
// is unlimited (setrlimit refuses more).
rlim_t NrOpen() {
  std::ifstream in("/proc/sys/fs/nr_open");
  uint64_t n = 0;
  if (in >> n && n > 0) return static_cast<rlim_t>(n);
  return 1048576;  // the kernel's default
}

}  // namespace

absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return absl::InternalError(
        absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  OpenFileLimit out;
  out.before = static_cast<uint64_t>(lim.rlim_cur);
  const rlim_t target = lim.rlim_max == RLIM_INFINITY ? NrOpen() : lim.rlim_max;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < target) {
    lim.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot raise the open-files limit from ", out.before, " to ",
          static_cast<uint64_t>(target), ": ", std::strerror(errno)));
    }
  }
  out.after = static_cast<uint64_t>(lim.rlim_cur);
  return out;
}

void RaiseOpenFileLimitAndLog(const char* logger) {
  absl::StatusOr<OpenFileLimit> raised = RaiseOpenFileLimit();
  if (!raised.ok()) {
    GetLogger(logger)->warn("{}", std::string(raised.status().message()));
  } else if (raised->after != raised->before) {
    GetLogger(logger)->info("open-files limit raised from {} to {}",
                            raised->before, raised->after);
  }
}

}  // namespace kolo
