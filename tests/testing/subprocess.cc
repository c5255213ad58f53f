#include "tests/testing/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace kolo::testing {

std::string ExitInfo::ToString() const {
  if (exited) return absl::StrCat("exit code ", code);
  return absl::StrCat("killed by signal ", signal, " (", strsignal(signal),
                      ")");
}

Subprocess::Subprocess(std::vector<std::string> argv,
                       std::map<std::string, std::optional<std::string>> env)
    : argv_(std::move(argv)), env_(std::move(env)) {}

Subprocess::~Subprocess() {
  if (running()) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

absl::Status Subprocess::Start() {
  // Build argv and envp before fork: only async-signal-safe calls after it.
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env_) {
    if (v.has_value()) {
      merged[k] = *v;
    } else {
      merged.erase(k);
    }
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& s : argv_) argv.push_back(s.data());
  argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return absl::InternalError(std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0)
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execve(argv[0], argv.data(), envp.data());
    const char msg[] = "subprocess: execve failed\n";
    ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  out_fd_ = fds[0];
  ::fcntl(out_fd_, F_SETFL, ::fcntl(out_fd_, F_GETFL) | O_NONBLOCK);
  pid_ = pid;
  return absl::OkStatus();
}

void Subprocess::Drain(absl::Duration max_wait) {
  if (out_fd_ < 0) {
    if (max_wait > absl::ZeroDuration())
      absl::SleepFor(std::min(max_wait, absl::Milliseconds(10)));
    return;
  }
  pollfd p{out_fd_, POLLIN, 0};
  int ms = static_cast<int>(absl::ToInt64Milliseconds(max_wait));
  if (::poll(&p, 1, ms < 0 ? 0 : ms) <= 0) return;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(out_fd_, buf, sizeof(buf));
    if (n > 0) {
      output_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      ::close(out_fd_);
      out_fd_ = -1;
    }
    return;
  }
}

absl::Status Subprocess::Wait(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (!reaped_) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      exit_.exited = WIFEXITED(status);
      exit_.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      exit_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      break;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "process ", argv_[0], " still running after ",
          absl::FormatDuration(timeout), "; output so far:\n", output_));
    }
    Drain(absl::Milliseconds(20));
  }
  // Collect what is left in the pipe (grandchildren may still hold it open).
  absl::Time drain_deadline = absl::Now() + absl::Milliseconds(500);
  while (out_fd_ >= 0 && absl::Now() < drain_deadline)
    Drain(absl::Milliseconds(50));
  return absl::OkStatus();
}

bool Subprocess::WaitForOutput(const std::string& needle,
                               absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (output_.find(needle) == std::string::npos) {
    if (absl::Now() >= deadline) return false;
    if (out_fd_ < 0) return false;
    Drain(absl::Milliseconds(20));
  }
  return true;
}

void Subprocess::Signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

void Subprocess::SignalGroup(int sig) {
  if (running()) ::kill(-pid_, sig);
}

bool ProcessAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  // Unreadable: reaped between the two looks (a zombie's new parent reaps
  // it at any time), so gone.
  if (!std::getline(stat, line)) return false;
  size_t close = line.rfind(')');
  if (close != std::string::npos && close + 2 < line.size()) {
    char state = line[close + 2];
    if (state == 'Z' || state == 'X') return false;
  }
  return true;
}

}  // namespace kolo::testing
