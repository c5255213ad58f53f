#include "tests/testing/job_run.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {

std::string Bin(const std::string& name) { return BinDir() + "/" + name; }

JobRun RunJob(const std::vector<std::string>& argv,
              std::map<std::string, std::optional<std::string>> env,
              absl::Duration timeout) {
  Subprocess p(argv, std::move(env));
  const absl::Time start = absl::Now();
  JobRun run;
  EXPECT_TRUE(p.Start().ok()) << "cannot start " << argv.at(0);
  absl::Status st = p.Wait(Scaled(timeout));
  EXPECT_TRUE(st.ok()) << st << "\n" << p.output();
  run.exit = p.exit_info();
  run.output = p.output();
  run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return run;
}

std::optional<Command> CtlStatusJson(const std::string& output) {
  std::vector<std::string> how = Lines(output, "job state: ");
  if (how.size() != 1) return std::nullopt;
  const std::string file = Field(how[0], "KOLO_SECRET_FILE");
  const std::string coordinator = FlagValue(how[0], "--coordinator");
  const std::string job_id = FlagValue(how[0], "--job-id");
  if (file.empty() || coordinator.empty() || job_id.empty()) {
    return std::nullopt;
  }
  Command c;
  c.argv = {Bin("kolo-ctl"), "status",   "--json", "--coordinator",
            coordinator,     "--job-id", job_id};
  for (const char* flag : {"--tls-cert", "--tls-key", "--tls-ca"}) {
    const std::string value = FlagValue(how[0], flag);
    if (value.empty()) continue;
    c.argv.push_back(flag);
    c.argv.push_back(value);
  }
  c.env = {{"KOLO_SECRET_FILE", file}, {"KOLO_SECRET", std::nullopt}};
  return c;
}

std::vector<std::string> Lines(const std::string& output,
                               absl::string_view needle) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    std::string line = output.substr(start, end - start);
    if (absl::StrContains(line, needle)) lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::string Field(const std::string& line, const std::string& key) {
  size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  size_t end = line.find(' ', at);
  return line.substr(at, end == std::string::npos ? end : end - at);
}

std::string FlagValue(const std::string& line, const std::string& flag) {
  size_t at = line.find(" " + flag + " ");
  if (at == std::string::npos) return "";
  at += flag.size() + 2;
  const size_t end = line.find_first_of(" \n", at);
  return line.substr(at, end == std::string::npos ? end : end - at);
}

int64_t Int(const std::string& s) {
  int64_t v = -1;
  return absl::SimpleAtoi(s, &v) ? v : -1;
}

}  // namespace kolo::testing
