#include "launcher/spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher/guard.h"

namespace kolo::launcher {
namespace {

// Closes the fds it holds unless released.
class FdSet {
 public:
  ~FdSet() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  int Add(int fd) {
    fds_.push_back(fd);
    return fd;
  }
  void Release(int fd) {
    for (int& f : fds_) {
      if (f == fd) f = -1;
    }
  }

 private:
  std::vector<int> fds_;
};

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

void BlockSupervisorSignals(sigset_t* blocked) {
  sigemptyset(blocked);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(blocked, s);
  ::sigprocmask(SIG_BLOCK, blocked, nullptr);
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

absl::StatusOr<GuardProcess> SpawnGuard(const GuardSpec& spec,
                                        const std::string& self_exe) {
  FdSet fds;
  int out[2], err[2], status[2], in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return Errno("pipe");
  fds.Add(out[0]);
  fds.Add(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return Errno("pipe");
  fds.Add(err[0]);
  fds.Add(err[1]);
  if (::pipe2(status, O_CLOEXEC) != 0) return Errno("pipe");
  fds.Add(status[0]);
  fds.Add(status[1]);
  if (spec.stdin_line.empty()) {
    in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in[0] < 0) return Errno("open /dev/null");
    fds.Add(in[0]);
  } else {
    if (::pipe2(in, O_CLOEXEC) != 0) return Errno("pipe");
    fds.Add(in[0]);
    fds.Add(in[1]);
    // A line fits in the pipe buffer: written now, read by the worker later.
    std::string line = spec.stdin_line + "\n";
    if (line.size() > 4096 || ::write(in[1], line.data(), line.size()) !=
                                  static_cast<ssize_t>(line.size())) {
      return Errno("writing the worker's stdin");
    }
  }

  // Everything the child needs, built before fork: after it, only
  // async-signal-safe calls.
  const pid_t kolorun = ::getpid();
  std::string parent_arg = absl::StrCat(kolorun);
  std::vector<std::string> args = {"kolorun", kGuardFlag, parent_arg, "--"};
  args.insert(args.end(), spec.argv.begin(), spec.argv.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = spec.env;
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  const char* exe = self_exe.c_str();

  pid_t pid = ::fork();
  if (pid < 0) return Errno("fork");
  if (pid == 0) {
    // Move the sources above the targets first, so that no dup2 clobbers one.
    int src[4] = {in[0], out[1], err[1], status[1]};
    for (int& fd : src) fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    for (int target = 0; target < 4; ++target) {
      if (src[target] < 0 || ::dup2(src[target], target) < 0) ::_exit(127);
    }
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != kolorun) ::_exit(128 + SIGTERM);
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(exe, argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid,
            pid);  // as the child does: kolorun may signal the group at once
  GuardProcess g;
  g.pid = pid;
  g.stdout_fd = out[0];
  g.stderr_fd = err[0];
  g.status_fd = status[0];
  for (int fd : {out[0], err[0], status[0]}) {
    fds.Release(fd);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return g;
}

}  // namespace kolo::launcher
