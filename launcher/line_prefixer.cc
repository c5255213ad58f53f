#include "launcher/line_prefixer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kolo::launcher {
namespace {

// Writes all of `data` to the regular file `fd`; gives up on an error (the
// copy is best effort: the terminal still gets every line).
void WriteCopy(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// mkdir -p: every missing component of `path`, mode 0755.
absl::Status MakeDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at < path.size() && path[at] != '/') continue;
    const std::string prefix = path.substr(0, at);
    if (::mkdir(prefix.c_str(), 0755) == 0 || errno == EEXIST) continue;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", prefix, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(ENOTDIR)));
  }
  return absl::OkStatus();
}

}  // namespace

LinePrefixer::LinePrefixer(int rank, absl::string_view stream)
    : LinePrefixer(rank, stream, Options()) {}

LinePrefixer::LinePrefixer(int rank, absl::string_view stream, Options options)
    : prefix_(absl::StrCat("[", rank, "]<", stream, ">:")),
      options_(std::move(options)) {
  if (options_.timestamp && !options_.clock) options_.clock = absl::Now;
}

LinePrefixer::~LinePrefixer() {
  if (options_.copy_fd >= 0) ::close(options_.copy_fd);
}

std::string LinePrefixer::LinePrefix() const {
  if (!options_.timestamp) return prefix_;
  return absl::StrCat(prefix_, LineTimestamp(options_.clock()), " ");
}

std::string LinePrefixer::Append(absl::string_view bytes) {
  if (options_.copy_fd >= 0) WriteCopy(options_.copy_fd, bytes);
  std::string out;
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == absl::string_view::npos) {
      partial_.append(bytes.data(), bytes.size());
      bytes = {};
    } else {
      partial_.append(bytes.data(), nl);
      bytes.remove_prefix(nl + 1);
      absl::StrAppend(&out, LinePrefix(), partial_, "\n");
      partial_.clear();
    }
    // Bound memory: a very long line goes out in pieces.
    while (partial_.size() >= kMaxLine) {
      absl::StrAppend(&out, LinePrefix(),
                      absl::string_view(partial_).substr(0, kMaxLine), "\n");
      partial_.erase(0, kMaxLine);
    }
  }
  return out;
}

std::string LinePrefixer::Finish() {
  if (partial_.empty()) return "";
  std::string out = absl::StrCat(LinePrefix(), partial_, "\n");
  partial_.clear();
  return out;
}

std::string LineTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", t, absl::UTCTimeZone());
}

absl::Status CreateOutputDir(const std::string& dir) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("the output directory is empty");
  }
  return MakeDirs(dir);
}

absl::StatusOr<int> OpenRankOutput(const std::string& dir, int rank,
                                   absl::string_view stream, bool append) {
  const std::string rank_dir = absl::StrCat(dir, "/rank.", rank);
  if (absl::Status st = MakeDirs(rank_dir); !st.ok()) return st;
  const std::string path = absl::StrCat(rank_dir, "/", stream);
  const int fd = ::open(
      path.c_str(),
      O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return fd;
}

}  // namespace kolo::launcher
