// Host discovery (kolorun --host-discovery-script, as Horovod's): running
// the user's script and reading its output.
//
// The script runs through /bin/sh -c, with kolorun's environment, stdin
// /dev/null, in a process group of its own that dies with kolorun
// (PR_SET_PDEATHSIG), and prints the hosts that may run workers, one a line:
//   host          (slots: --slots-per-host, default 1)
//   host:slots    (slots a positive integer)
// Blank lines and lines starting with '#' are skipped; surrounding spaces
// are ignored. Anything else (a space inside a name, a bad slot count, a
// host listed twice) makes the whole output invalid: the message names the
// line, so that a half-written list is never taken for a shrunken cluster.
//
// DiscoveryRun is one asynchronous run: its fds go into the caller's poll(),
// Poll() reads them, reaps the script and enforces the deadline (past it,
// the script's group is killed and the run fails). RunDiscoveryScript is the
// blocking form (kolorun's first call, before the job starts).
//
// Thread-safety: ParseDiscoveryOutput is pure and thread-safe. A
// DiscoveryRun is used by one thread, which must be kolorun's main thread
// (PR_SET_PDEATHSIG follows the thread that forked).
#ifndef KOLO_LAUNCHER_DISCOVERY_H_
#define KOLO_LAUNCHER_DISCOVERY_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "launcher/args.h"

namespace kolo::launcher {

// How long one run of the script may take.
inline constexpr absl::Duration kDiscoveryTimeout = absl::Seconds(30);

// Parses the script's output (see the file comment). Errors
// (kInvalidArgument) name the line number and its text.
absl::StatusOr<std::vector<HostSlots>> ParseDiscoveryOutput(
    absl::string_view text, int default_slots);

class DiscoveryRun {
 public:
  // Starts `script`. Errors: the pipes or the fork failed.
  static absl::StatusOr<std::unique_ptr<DiscoveryRun>> Start(
      const std::string& script, int default_slots,
      absl::Duration timeout = kDiscoveryTimeout);
  // Kills and reaps the script if it still runs.
  ~DiscoveryRun();
  DiscoveryRun(const DiscoveryRun&) = delete;
  DiscoveryRun& operator=(const DiscoveryRun&) = delete;

  // The open fds to poll for input (stdout, stderr).
  std::vector<int> fds() const;

  // Reads what is there, reaps the script when it ended, and enforces the
  // deadline. Returns true once the run is over (then result() holds).
  bool Poll(absl::Time now);

  // The hosts, or why there are none: the script exited non-zero or was
  // killed (with its stderr), timed out, or printed a bad line.
  // REQUIRES: Poll returned true.
  const absl::StatusOr<std::vector<HostSlots>>& result() const {
    return result_;
  }

 private:
  DiscoveryRun() = default;
  void Read(int which);
  void Finish(int wait_status);

  std::string script_;
  int default_slots_ = 1;
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string out_[2];
  absl::Duration timeout_;
  absl::Time deadline_;
  bool done_ = false;
  absl::StatusOr<std::vector<HostSlots>> result_;
};

// Runs the script to its end (at most `timeout`).
absl::StatusOr<std::vector<HostSlots>> RunDiscoveryScript(
    const std::string& script, int default_slots,
    absl::Duration timeout = kDiscoveryTimeout);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_DISCOVERY_H_
