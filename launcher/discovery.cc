#include "launcher/discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace kolo::launcher {
namespace {

// Output beyond this is an error (a runaway script), not a host list.
constexpr size_t kMaxOutput = 1 << 20;
// How much of the script's stderr an error message quotes (its end).
constexpr size_t kStderrQuote = 2000;

std::string Quote(absl::string_view s) { return absl::StrCat("'", s, "'"); }

std::string StderrTail(const std::string& err) {
  std::string tail(absl::StripAsciiWhitespace(err));
  if (tail.size() > kStderrQuote)
    tail = "..." + tail.substr(tail.size() - kStderrQuote);
  return absl::StrReplaceAll(tail, {{"\n", " | "}});  // one log line
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseDiscoveryOutput(
    absl::string_view text, int default_slots) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, " ", Quote(line), ": ", why,
                       "; expected host or host:slots, one a line"));
    };
    HostSlots h;
    h.slots = default_slots;
    size_t colon = line.rfind(':');
    absl::string_view name = line;
    if (colon != absl::string_view::npos) {
      name = line.substr(0, colon);
      absl::string_view slots = line.substr(colon + 1);
      if (!absl::SimpleAtoi(slots, &h.slots) || h.slots < 1) {
        return bad(absl::StrCat("bad slot count ", Quote(slots),
                                " (a positive integer)"));
      }
    }
    if (name.empty()) return bad("empty host name");
    for (char c : name) {
      if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == ',')
        return bad(
            absl::StrCat("host name ", Quote(name), " has a space or a comma"));
    }
    h.name = std::string(name);
    if (!seen.insert(h.name).second)
      return bad(absl::StrCat("host ", Quote(h.name), " is listed twice"));
    hosts.push_back(std::move(h));
  }
  return hosts;
}

absl::StatusOr<std::unique_ptr<DiscoveryRun>> DiscoveryRun::Start(
    const std::string& script, int default_slots, absl::Duration timeout) {
  std::unique_ptr<DiscoveryRun> run(new DiscoveryRun());
  run->script_ = script;
  run->default_slots_ = default_slots;
  run->timeout_ = timeout;
  run->deadline_ = absl::Now() + timeout;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(e)));
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Everything the child needs, built before fork: after it, only
  // async-signal-safe calls (kolorun has gRPC threads).
  std::string sh = "/bin/sh", dash_c = "-c", body = script;
  char* argv[] = {sh.data(), dash_c.data(), body.data(), nullptr};
  sigset_t none;
  sigemptyset(&none);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    int src[3] = {devnull, out[1], err[1]};
    for (int& fd : src) fd = fd < 0 ? fd : ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    for (int target = 0; target < 3; ++target) {
      if (src[target] >= 0 && ::dup2(src[target], target) < 0) ::_exit(127);
    }
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve("/bin/sh", argv, environ);
    ::_exit(127);
  }
  int fork_errno = errno;
  if (devnull >= 0) ::close(devnull);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    return absl::InternalError(
        absl::StrCat("fork: ", std::strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // as the child does: no window without its group
  run->pid_ = pid;
  run->fds_[0] = out[0];
  run->fds_[1] = err[0];
  for (int fd : run->fds_)
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return run;
}

DiscoveryRun::~DiscoveryRun() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);  // SIGKILL: bounded
  }
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

std::vector<int> DiscoveryRun::fds() const {
  std::vector<int> out;
  for (int fd : fds_) {
    if (fd >= 0) out.push_back(fd);
  }
  return out;
}

void DiscoveryRun::Read(int which) {
  char buf[8192];
  while (fds_[which] >= 0) {
    ssize_t n = ::read(fds_[which], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      ::close(fds_[which]);
      fds_[which] = -1;
      return;
    }
    if (out_[which].size() < kMaxOutput + 1)
      out_[which].append(buf, static_cast<size_t>(n));
  }
}

bool DiscoveryRun::Poll(absl::Time now) {
  if (done_) return true;
  Read(0);
  Read(1);
  // Exited? Look without reaping, so that its group id cannot be reused
  // while kolorun kills what it left behind.
  siginfo_t info = {};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info,
               WEXITED | WNOHANG | WNOWAIT) == 0 &&
      info.si_pid == pid_) {
    Read(0);
    Read(1);
    ::kill(-pid_, SIGKILL);  // leftovers holding the pipes
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    Finish(status);
    return true;
  }
  if (now >= deadline_) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    done_ = true;
    result_ = absl::DeadlineExceededError(absl::StrCat(
        "host discovery script ", Quote(script_), " did not finish within ",
        absl::FormatDuration(timeout_), "; killed it"));
    return true;
  }
  return false;
}

void DiscoveryRun::Finish(int status) {
  done_ = true;
  for (int& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  std::string prefix =
      absl::StrCat("host discovery script ", Quote(script_), " ");
  std::string err = StderrTail(out_[1]);
  std::string err_part =
      err.empty() ? " (no stderr)" : absl::StrCat("; its stderr: ", err);
  if (WIFSIGNALED(status)) {
    result_ = absl::UnavailableError(absl::StrCat(
        prefix, "was killed by signal ", WTERMSIG(status), err_part));
  } else if (WEXITSTATUS(status) != 0) {
    result_ = absl::UnavailableError(absl::StrCat(
        prefix, "exited with code ", WEXITSTATUS(status), err_part));
  } else if (out_[0].size() > kMaxOutput) {
    result_ = absl::InvalidArgumentError(
        absl::StrCat(prefix, "printed more than ", kMaxOutput, " bytes"));
  } else {
    auto hosts = ParseDiscoveryOutput(out_[0], default_slots_);
    if (hosts.ok()) {
      result_ = *std::move(hosts);
    } else {
      result_ = absl::InvalidArgumentError(
          absl::StrCat(prefix, "printed a bad ", hosts.status().message()));
    }
  }
}

absl::StatusOr<std::vector<HostSlots>> RunDiscoveryScript(
    const std::string& script, int default_slots, absl::Duration timeout) {
  auto run = DiscoveryRun::Start(script, default_slots, timeout);
  if (!run.ok()) return run.status();
  while (!(*run)->Poll(absl::Now())) {
    std::vector<pollfd> pfds;
    for (int fd : (*run)->fds()) pfds.push_back({fd, POLLIN, 0});
    // The script's exit is not a poll event when a leftover holds the
    // pipes: look again every 50 ms.
    ::poll(pfds.data(), pfds.size(), 50);
  }
  return (*run)->result();
}

}  // namespace kolo::launcher
