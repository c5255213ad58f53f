// JobRun: one job of a multi-process test (kolorun and its workers) run to
// completion, and what it left: its exit, its merged output and its wall
// time; plus picking the tagged lines a test worker printed out of that
// output.
//
// Thread-safety: free functions; RunJob blocks the calling thread.
#ifndef KOLO_TESTS_TESTING_JOB_RUN_H_
#define KOLO_TESTS_TESTING_JOB_RUN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/testing/subprocess.h"

namespace kolo::testing {

struct JobRun {
  ExitInfo exit;
  std::string output;  // stdout and stderr, merged
  double seconds = 0;
};

// The path of the kolo program `name` in the build's bin directory.
std::string Bin(const std::string& name);

// Runs `argv` with `env` on top of this process's environment (nullopt
// removes a variable) for up to Scaled(timeout). A job that cannot start or
// does not end in time fails the current test, showing its output; the
// JobRun is returned either way.
JobRun RunJob(const std::vector<std::string>& argv,
              std::map<std::string, std::optional<std::string>> env = {},
              absl::Duration timeout = absl::Seconds(120));

// The lines of `output` that contain `needle`, in order.
std::vector<std::string> Lines(const std::string& output,
                               absl::string_view needle);

// The value of ` key=` in `line` (up to the next space), or "".
std::string Field(const std::string& line, const std::string& key);

// The value after ` flag ` in `line` (up to the next space or the line's
// end), e.g. FlagValue(line, "--job-id"), or "".
std::string FlagValue(const std::string& line, const std::string& flag);
// `s` as an integer, or -1.
int64_t Int(const std::string& s);

// A command line and the environment on top of this process's.
struct Command {
  std::vector<std::string> argv;
  std::map<std::string, std::optional<std::string>> env;
};
// `kolo-ctl status --json` against the job whose kolorun printed `output`:
// from its line "job state: KOLO_SECRET_FILE=<f> kolo-ctl status
// --coordinator <a> --job-id <id>", with its --tls-cert, --tls-key and
// --tls-ca when the job runs TLS; nullopt when there is not exactly one.
std::optional<Command> CtlStatusJson(const std::string& output);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_JOB_RUN_H_
