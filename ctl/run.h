// `kolo-ctl status`, once or --watch, over injected I/O: how to poll, where
// to print, the clock, and how to wait between polls (main.cc's waits end
// early on SIGINT/SIGTERM). No gRPC here, so the loop is unit-testable with
// a fake poll.
//
// Once: the status is printed (text or one JSON object) and 0 returned; a
// failed poll prints "kolo-ctl: <why>" to `err` and returns 1.
// --watch: every `interval` until `wait` says stop (then 0). In text mode the
// screen is cleared before each poll's output; a failed poll prints its
// error in place of the status and the watch goes on. With --json, one
// object per line (ctl/status_json.h), a failed poll as an "error" object.
//
// Thread-safety: RunStatus runs on the caller's thread only.
#ifndef KOLO_CTL_RUN_H_
#define KOLO_CTL_RUN_H_

#include <functional>
#include <ostream>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctl/options.h"
#include "proto/kolo.pb.h"

namespace kolo::ctl {

// What clears a terminal and puts the cursor home (ANSI).
inline constexpr char kClearScreen[] = "\x1b[H\x1b[2J";

struct RunIo {
  std::function<absl::StatusOr<proto::StatusReply>()> poll;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  std::function<absl::Time()> clock;
  // Waits `d`; false when the watch should stop (interrupted).
  std::function<bool(absl::Duration d)> wait;
};

// Returns the process's exit status.
int RunStatus(const CtlOptions& options, const RunIo& io);

}  // namespace kolo::ctl

#endif  // KOLO_CTL_RUN_H_
