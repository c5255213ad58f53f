// Subprocess: starts a program for a multi-process test, captures its stdout
// and stderr (merged) and waits for it with a deadline. The child is put in
// its own process group; the destructor kills that group, so a failing test
// leaves nothing behind.
//
// Thread-safety: one Subprocess is used from one thread.
#ifndef KOLO_TESTS_TESTING_SUBPROCESS_H_
#define KOLO_TESTS_TESTING_SUBPROCESS_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kolo::testing {

struct ExitInfo {
  bool exited =
      false;  // true: normal exit with `code`; false: killed by `signal`
  int code = -1;
  int signal = 0;
  std::string ToString() const;
};

class Subprocess {
 public:
  // `env` entries are set on top of this process's environment; a value of
  // std::nullopt removes the variable.
  Subprocess(std::vector<std::string> argv,
             std::map<std::string, std::optional<std::string>> env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  absl::Status Start();
  pid_t pid() const { return pid_; }

  // Waits until the child exits, reading its output meanwhile. Returns
  // kDeadlineExceeded (child still running) if the deadline passes.
  absl::Status Wait(absl::Duration timeout);
  // Reads output until `needle` appears (true) or the timeout passes / the
  // child closes its output (false).
  bool WaitForOutput(const std::string& needle, absl::Duration timeout);

  void Signal(int sig);       // to the child only
  void SignalGroup(int sig);  // to the child's process group

  const std::string& output() const { return output_; }
  const ExitInfo& exit_info() const { return exit_; }
  bool running() const { return pid_ > 0 && !reaped_; }

 private:
  void Drain(absl::Duration max_wait);

  std::vector<std::string> argv_;
  std::map<std::string, std::optional<std::string>> env_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  std::string output_;
  ExitInfo exit_;
};

// True if a process with this pid exists (and is not a zombie).
bool ProcessAlive(pid_t pid);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_SUBPROCESS_H_
