#include "launcher/ctl_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher/command_line.h"

namespace kolo::launcher {

CtlAccess::CtlAccess(const std::string& secret, const std::string& job_id,
                     const std::string& coordinator, const tls::TlsFiles* tls) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/", job_id, "-XXXXXX");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {  // mode 0700
    error_ = absl::StrCat("mkdtemp(", pattern, "): ", std::strerror(errno));
    return;
  }
  dir_ = buf.data();
  const std::string path = dir_ + "/secret";
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    error_ = absl::StrCat("open(", path, "): ", std::strerror(errno));
    ::rmdir(dir_.c_str());
    dir_.clear();
    return;
  }
  const std::string line = secret + "\n";
  const bool written = ::write(fd, line.data(), line.size()) ==
                       static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) {
    error_ = absl::StrCat("write(", path, ") failed");
    ::unlink(path.c_str());
    ::rmdir(dir_.c_str());
    dir_.clear();
    return;
  }
  path_ = path;
  command_ = absl::StrCat("KOLO_SECRET_FILE=", ShellQuote(path_),
                          " kolo-ctl status --coordinator ", coordinator,
                          " --job-id ", job_id);
  if (tls != nullptr && tls->enabled()) {
    absl::StrAppend(&command_, " --tls-cert ", ShellQuote(tls->cert),
                    " --tls-key ", ShellQuote(tls->key), " --tls-ca ",
                    ShellQuote(tls->ca));
  }
}

CtlAccess::~CtlAccess() {
  if (!path_.empty()) ::unlink(path_.c_str());
  if (!dir_.empty()) ::rmdir(dir_.c_str());
}

}  // namespace kolo::launcher
