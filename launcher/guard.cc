#include "launcher/guard.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace kolo::launcher {
namespace {

void Report(const std::string& record) {
  std::string line = record + "\n";
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(kGuardStatusFd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // kolorun is gone; nobody to tell
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// The guard's children (its worker and re-parented orphans).
std::vector<pid_t> Children() {
  std::vector<pid_t> pids;
  pid_t self = ::getpid();
  std::string path = absl::StrCat("/proc/", self, "/task/", self, "/children");
  std::string text;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return pids;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  for (absl::string_view word :
       absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    int pid = 0;
    if (absl::SimpleAtoi(word, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

void SignalAll(pid_t worker_group, int sig) {
  if (worker_group > 0) ::kill(-worker_group, sig);
  for (pid_t child : Children()) ::kill(child, sig);
}

}  // namespace

void ParseGuardRecords(absl::string_view text, GuardReport* report) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, ' ');
    int value = 0;
    if (!absl::SimpleAtoi(kv.second, &value)) continue;
    if (kv.first == "pid") {
      report->worker_pid = value;
    } else if (kv.first == "exit") {
      report->ended = true;
      report->exited = true;
      report->code = value;
    } else if (kv.first == "signal") {
      report->ended = true;
      report->exited = false;
      report->signal = value;
    }
  }
}

namespace {

// The guard's process state: the signals it handles come on the returned
// signalfd (-1 if none could be made); it gets SIGTERM when kolorun dies,
// and it adopts the worker's orphans.
int SetUpGuard() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&handled, s);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  int sfd = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  return sfd;
}

// Forks the worker (`argv`, in its own process group, killed with the
// guard `self`) and reports its pid; -1 (reported) when fork fails.
pid_t StartWorker(char** argv, int sfd, pid_t self) {
  pid_t worker = ::fork();
  if (worker == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != self) ::_exit(128 + SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (sfd >= 0) ::close(sfd);
    ::execvp(argv[0], argv);
    std::fprintf(stderr, "kolorun: cannot run '%s': %s\n", argv[0],
                 std::strerror(errno));
    ::_exit(127);
  }
  if (worker < 0) {
    std::fprintf(stderr, "kolorun: fork failed: %s\n", std::strerror(errno));
    Report("exit 127");
    return -1;
  }
  ::setpgid(worker,
            worker);  // as the child does: no window without its group
  Report(absl::StrCat("pid ", worker));
  return worker;
}

// Reaps the children that ended; the worker's end is reported once
// (`worker_done`, its status as an exit code in `result`). Returns whether
// children are still alive.
bool ReapChildren(pid_t worker, bool& worker_done, int& result) {
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(-1, &status, WNOHANG);
    if (r == 0) return true;
    if (r < 0) return false;  // ECHILD: nothing left
    if (r == worker && !worker_done) {
      worker_done = true;
      if (WIFEXITED(status)) {
        result = WEXITSTATUS(status);
        Report(absl::StrCat("exit ", result));
      } else if (WIFSIGNALED(status)) {
        result = 128 + WTERMSIG(status);
        Report(absl::StrCat("signal ", WTERMSIG(status)));
      }
    }
  }
}

}  // namespace

int RunGuard(int argc, char** argv) {
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) {
    std::fprintf(stderr, "kolorun: %s is internal to kolorun\n", kGuardFlag);
    return 127;
  }
  int parent_arg = 0;
  if (!absl::SimpleAtoi(argv[2], &parent_arg)) return 127;
  const pid_t parent = parent_arg;
  ::fcntl(kGuardStatusFd, F_SETFD, FD_CLOEXEC);

  const int sfd = SetUpGuard();
  bool terminating = ::getppid() != parent;  // kolorun already gone
  const pid_t self = ::getpid();

  pid_t worker = -1;
  if (!terminating) {
    worker = StartWorker(argv + 4, sfd, self);
    if (worker < 0) return 127;
  }

  int result = 1;  // the worker's status as an exit code
  bool worker_done = worker < 0;
  absl::Time kill_at = absl::InfiniteFuture();
  absl::Time give_up = absl::InfiniteFuture();
  auto begin_termination = [&] {
    if (kill_at != absl::InfiniteFuture()) return;
    terminating = true;
    SignalAll(worker, SIGTERM);
    kill_at = absl::Now() + kGuardGrace;
    give_up = kill_at + absl::Seconds(3);
  };
  if (terminating) begin_termination();

  while (true) {
    const bool have_children = ReapChildren(worker, worker_done, result);
    if (worker_done && !have_children) break;
    // Whatever the worker left behind goes with it; so does a worker whose
    // kolorun has gone.
    if (worker_done || ::getppid() != parent) begin_termination();
    absl::Time now = absl::Now();
    if (now >= give_up) {
      std::fprintf(stderr,
                   "kolorun: guard %d: processes still alive after SIGKILL\n",
                   static_cast<int>(self));
      break;
    }
    if (now >= kill_at) {
      SignalAll(worker, SIGKILL);
      kill_at = now + absl::Milliseconds(200);  // again, for late forks
    }
    int timeout_ms = 1000;
    if (kill_at != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(kill_at - now) + 1, 1, 1000));
    }
    pollfd p{sfd, POLLIN, 0};
    ::poll(&p, sfd >= 0 ? 1 : 0, timeout_ms);
    signalfd_siginfo info;
    while (sfd >= 0 && ::read(sfd, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo != SIGCHLD) begin_termination();
    }
  }
  return result;
}

}  // namespace kolo::launcher
