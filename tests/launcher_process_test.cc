// The real kolorun binary running plain shell commands (no kolo inside):
// output prefixes, exit codes, failure messages, signals, no orphans, the
// secret kept off command lines, launcher host names with --launcher-cmd, and
// the ssh path through a fake ssh.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Subprocess> StartKolorun(std::vector<std::string> args) {
  args.insert(args.begin(), BinDir() + "/kolorun");
  auto p = std::make_unique<Subprocess>(args);
  absl::Status st = p->Start();
  EXPECT_TRUE(st.ok()) << st;
  return p;
}

std::unique_ptr<Subprocess> RunKolorun(
    std::vector<std::string> args, absl::Duration timeout = absl::Seconds(30)) {
  auto p = StartKolorun(std::move(args));
  absl::Status st = p->Wait(Scaled(timeout));
  EXPECT_TRUE(st.ok()) << st;
  return p;
}

// The whole file ("" if it cannot be read). Plain read(): /proc files have
// no size.
std::string ReadRaw(const fs::path& path) {
  std::string s;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    s.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return s;
}

std::string ReadFile(const fs::path& path) {
  return std::string(absl::StripAsciiWhitespace(ReadRaw(path)));
}

// A fresh directory for one test's files, removed afterwards.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            absl::StrCat("kolo-launcher-test-", ::getpid(), "-", counter_++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Waits until every file exists and is non-empty; returns their pids.
std::vector<pid_t> WaitForPidFiles(const std::vector<std::string>& files,
                                   absl::Duration timeout) {
  absl::Time deadline = absl::Now() + Scaled(timeout);
  std::vector<pid_t> pids;
  while (absl::Now() < deadline) {
    pids.clear();
    for (const std::string& f : files) {
      int pid = 0;
      if (absl::SimpleAtoi(ReadFile(f), &pid) && pid > 0) pids.push_back(pid);
    }
    if (pids.size() == files.size()) return pids;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ADD_FAILURE() << "pid files did not all appear within " << timeout;
  return pids;
}

// True once none of `pids` is alive (bounded).
bool AllGone(const std::vector<pid_t>& pids, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + Scaled(timeout);
  while (true) {
    bool any = false;
    for (pid_t p : pids) any = any || ProcessAlive(p);
    if (!any) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// The children of `pid` (kolorun's guards).
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::string text =
      ReadFile(absl::StrCat("/proc/", pid, "/task/", pid, "/children"));
  for (absl::string_view w :
       absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    int p = 0;
    if (absl::SimpleAtoi(w, &p)) out.push_back(p);
  }
  return out;
}

void KillAll(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) ::kill(p, SIGKILL);
}

TEST(KolorunProcessTest, EveryWorkerExitsZero) {
  auto p = RunKolorun({"-np", "3", "--", "sh", "-c", "echo hi"});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(p->output().find(absl::StrCat("[", r, "]<stdout>:hi\n")),
              std::string::npos)
        << p->output();
  }
}

TEST(KolorunProcessTest, StderrAndPartialLastLines) {
  auto p = RunKolorun(
      {"-np", "1", "sh", "-c", "echo oops >&2; printf 'no newline'"});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  EXPECT_NE(p->output().find("[0]<stderr>:oops\n"), std::string::npos)
      << p->output();
  EXPECT_NE(p->output().find("[0]<stdout>:no newline\n"), std::string::npos)
      << p->output();
}

TEST(KolorunProcessTest, WorkerEnvironment) {
  auto p =
      RunKolorun({"-np", "2", "sh", "-c",
                  "echo \"$KOLO_LAUNCHER $KOLO_WORKER_ID $KOLO_RANK/$KOLO_SIZE "
                  "$KOLO_LOCAL_RANK/$KOLO_LOCAL_SIZE $KOLO_HOSTNAME "
                  "${#KOLO_SECRET} $KOLO_COORDINATOR\""});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  EXPECT_NE(p->output().find(
                "[0]<stdout>:kolorun w0 0/2 0/2 localhost 64 127.0.0.1:"),
            std::string::npos)
      << p->output();
  EXPECT_NE(p->output().find(
                "[1]<stdout>:kolorun w1 1/2 1/2 localhost 64 127.0.0.1:"),
            std::string::npos)
      << p->output();
}

TEST(KolorunProcessTest, FailingWorkerEndsTheJobNamingIt) {
  absl::Time start = absl::Now();
  auto p = RunKolorun({"-np", "3", "--", "sh", "-c",
                       "if [ \"$KOLO_RANK\" = 1 ]; then exit 3; fi; sleep 60"});
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(15)));
  EXPECT_TRUE(p->exit_info().exited) << p->exit_info().ToString();
  EXPECT_EQ(p->exit_info().code, 3) << p->output();
  EXPECT_NE(
      p->output().find("worker w1 (rank 1, host localhost) exited with code 3"),
      std::string::npos)
      << p->output();
}

TEST(KolorunProcessTest, KilledWorkerEndsTheJobNamingTheSignal) {
  auto p =
      RunKolorun({"-np", "2", "sh", "-c",
                  "if [ \"$KOLO_RANK\" = 0 ]; then kill -9 $$; fi; sleep 60"});
  EXPECT_TRUE(p->exit_info().exited) << p->exit_info().ToString();
  EXPECT_EQ(p->exit_info().code, 128 + 9) << p->output();
  EXPECT_NE(p->output().find("worker w0 (rank 0, host localhost) was killed by "
                             "signal 9 (SIGKILL)"),
            std::string::npos)
      << p->output();
}

TEST(KolorunProcessTest, MissingCommandIsReported) {
  auto p = RunKolorun({"-np", "1", "/nonexistent/kolo-no-such-command"});
  EXPECT_EQ(p->exit_info().code, 127) << p->output();
  EXPECT_NE(p->output().find("cannot run '/nonexistent/kolo-no-such-command'"),
            std::string::npos)
      << p->output();
}

TEST(KolorunProcessTest, UsageErrorsExit2AndHelpWorks) {
  auto bad = RunKolorun({"-np", "2", "--frobnicate", "true"});
  EXPECT_EQ(bad->exit_info().code, 2);
  EXPECT_NE(bad->output().find("unknown flag '--frobnicate'"),
            std::string::npos)
      << bad->output();
  auto help = RunKolorun({"--help"});
  EXPECT_EQ(help->exit_info().code, 0);
  EXPECT_NE(help->output().find("Usage: kolorun -np N"), std::string::npos);
  auto version = RunKolorun({"--version"});
  EXPECT_EQ(version->exit_info().code, 0);
  EXPECT_NE(version->output().find("kolorun (kolo)"), std::string::npos);
}

// Workers and their grandchildren write their pids; returns all of them.
std::vector<pid_t> SleeperPids(const TempDir& dir, int n) {
  std::vector<std::string> files;
  for (int r = 0; r < n; ++r) {
    files.push_back(dir.file(absl::StrCat("w.", r)));
    files.push_back(dir.file(absl::StrCat("gc.", r)));
  }
  return WaitForPidFiles(files, absl::Seconds(20));
}

std::vector<std::string> SleeperArgs(const TempDir& dir, int n) {
  return {"-np", std::to_string(n), "sh", "-c",
          absl::StrCat("sleep 300 & echo $! > ", dir.path(),
                       "/gc.$KOLO_RANK; echo $$ > ", dir.path(),
                       "/w.$KOLO_RANK; wait")};
}

TEST(KolorunProcessTest, SigkillOfKolorunLeavesNothingBehind) {
  TempDir dir;
  auto p = StartKolorun(SleeperArgs(dir, 3));
  std::vector<pid_t> pids = SleeperPids(dir, 3);
  ASSERT_EQ(pids.size(), 6u) << p->output();
  std::vector<pid_t> guards = ChildrenOf(p->pid());
  EXPECT_EQ(guards.size(), 3u);
  pids.insert(pids.end(), guards.begin(), guards.end());
  for (pid_t pid : pids) EXPECT_TRUE(ProcessAlive(pid)) << pid;
  p->Signal(SIGKILL);
  ASSERT_TRUE(p->Wait(Scaled(absl::Seconds(10))).ok());
  EXPECT_TRUE(AllGone(pids, absl::Seconds(10)))
      << "orphans left after SIGKILL of kolorun";
  KillAll(pids);
}

TEST(KolorunProcessTest, SigtermEndsEveryWorker) {
  TempDir dir;
  auto p = StartKolorun(SleeperArgs(dir, 2));
  std::vector<pid_t> pids = SleeperPids(dir, 2);
  ASSERT_EQ(pids.size(), 4u) << p->output();
  p->Signal(SIGTERM);
  ASSERT_TRUE(p->Wait(Scaled(absl::Seconds(15))).ok()) << p->output();
  EXPECT_TRUE(p->exit_info().exited);
  EXPECT_EQ(p->exit_info().code, 143) << p->output();
  EXPECT_NE(p->output().find("received SIGTERM"), std::string::npos)
      << p->output();
  EXPECT_TRUE(AllGone(pids, absl::Seconds(5)));
  KillAll(pids);
}

TEST(KolorunProcessTest, SigintEndsEveryWorkerEvenIfTheyIgnoreSigterm) {
  TempDir dir;
  // The workers ignore SIGTERM: the guards' SIGKILL after the grace ends them.
  std::vector<std::string> args = {
      "-np", "2", "sh", "-c",
      absl::StrCat("trap '' TERM; echo $$ > ", dir.path(), "/w.$KOLO_RANK; ",
                   "while true; do sleep 0.1; done")};
  auto p = StartKolorun(args);
  std::vector<pid_t> pids =
      WaitForPidFiles({dir.file("w.0"), dir.file("w.1")}, absl::Seconds(20));
  ASSERT_EQ(pids.size(), 2u) << p->output();
  p->Signal(SIGINT);
  ASSERT_TRUE(p->Wait(Scaled(absl::Seconds(20))).ok()) << p->output();
  EXPECT_EQ(p->exit_info().code, 130) << p->output();
  EXPECT_TRUE(AllGone(pids, absl::Seconds(5)));
  KillAll(pids);
}

TEST(KolorunProcessTest, LauncherHostNamesWithATemplate) {
  auto p =
      RunKolorun({"-np", "3", "-H", "hostA:2,hostB:1", "--launcher-cmd",
                  "env KOLO_TEST_FAKE_HOST={host}", "sh", "-c",
                  "echo \"$KOLO_HOSTNAME/$KOLO_TEST_FAKE_HOST/$KOLO_LOCAL_RANK/"
                  "$KOLO_LOCAL_SIZE/${#KOLO_SECRET}\""});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  for (const char* line :
       {"[0]<stdout>:hostA/hostA/0/2/64\n", "[1]<stdout>:hostA/hostA/1/2/64\n",
        "[2]<stdout>:hostB/hostB/0/1/64\n"}) {
    EXPECT_NE(p->output().find(line), std::string::npos) << line << "\n"
                                                         << p->output();
  }
}

// Every process's command line, for the secret check.
std::vector<std::string> AllCommandLines() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.empty() || !absl::ascii_isdigit(name[0])) continue;
    out.push_back(ReadRaw(entry.path() / "cmdline"));
  }
  return out;
}

TEST(KolorunProcessTest, SecretNeverOnACommandLine) {
  TempDir dir;
  auto p =
      StartKolorun({"-np", "2", "-H", "fakeA,fakeB", "--launcher-cmd",
                    "env KOLO_TEST_FAKE_HOST={host}", "sh", "-c",
                    absl::StrCat("printf %s \"$KOLO_SECRET\" > ", dir.path(),
                                 "/secret.$KOLO_RANK; echo $$ > ", dir.path(),
                                 "/w.$KOLO_RANK; sleep 60")});
  std::vector<pid_t> pids =
      WaitForPidFiles({dir.file("w.0"), dir.file("w.1")}, absl::Seconds(20));
  ASSERT_EQ(pids.size(), 2u) << p->output();
  std::string secret = ReadFile(dir.file("secret.0"));
  EXPECT_EQ(secret.size(), 64u);
  EXPECT_EQ(secret, ReadFile(dir.file("secret.1")));
  ASSERT_FALSE(secret.empty());
  for (const std::string& cmdline : AllCommandLines()) {
    EXPECT_EQ(cmdline.find(secret), std::string::npos)
        << "secret visible in: " << cmdline;
  }
  p->Signal(SIGTERM);
  EXPECT_TRUE(p->Wait(Scaled(absl::Seconds(15))).ok());
  EXPECT_TRUE(AllGone(pids, absl::Seconds(5)));
  KillAll(pids);
}

TEST(KolorunProcessTest, SshPathCarriesEnvironmentAndSecretOnStdin) {
  TempDir dir;
  std::string fake_ssh = dir.file("fake-ssh");
  {
    std::ofstream f(fake_ssh);
    f << "#!/bin/sh\nhost=$1; shift; echo \"fake-ssh to $host\" >&2; exec sh "
         "-c \"$*\"\n";
  }
  fs::permissions(fake_ssh, fs::perms::owner_all);
  auto p = RunKolorun(
      {"-np", "2", "-H", "remote1,remote2", "--ssh-cmd", fake_ssh, "sh", "-c",
       "echo \"$KOLO_HOSTNAME ${#KOLO_SECRET} $KOLO_WORKER_ID $0\"",
       "two 'words'"});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  EXPECT_NE(p->output().find("[0]<stdout>:remote1 64 w0 two 'words'\n"),
            std::string::npos)
      << p->output();
  EXPECT_NE(p->output().find("[1]<stdout>:remote2 64 w1 two 'words'\n"),
            std::string::npos)
      << p->output();
  EXPECT_NE(p->output().find("[1]<stderr>:fake-ssh to remote2"),
            std::string::npos)
      << p->output();
}

// A fake ssh that runs the remote command in an empty environment, as a
// fresh login on another host would (only PATH, and ssh's own variables).
std::string WriteBareSsh(const TempDir& dir) {
  std::string fake_ssh = dir.file("bare-ssh");
  {
    std::ofstream f(fake_ssh);
    f << "#!/bin/sh\n"
         "# args: [-p N] [-i FILE] host command\n"
         "echo \"bare-ssh $*\" > \"$(dirname \"$0\")/ssh-args.$$\"\n"
         "while [ \"$1\" = -p ] || [ \"$1\" = -i ]; do shift 2; done\n"
         "shift\n"
         "exec env -i PATH=/usr/bin:/bin HOME=/remote-home "
         "SSH_CONNECTION='1 2 3 4' sh -c \"$*\"\n";
  }
  fs::permissions(fake_ssh, fs::perms::owner_all);
  return fake_ssh;
}

TEST(KolorunProcessTest, SshWorkersGetKolorunsEnvironmentLessTheDenylist) {
  TempDir dir;
  const std::string odd = "a b$c 'd' \"e\" `f` \\g;h";
  Subprocess p(
      {BinDir() + "/kolorun", "-np", "2", "-H", "remote1,remote2", "--ssh-cmd",
       WriteBareSsh(dir), "sh", "-c",
       "printf 'SEEN %s|%s|%s|%s|%s|%s|%s|%s|%s\\n' \"$FOO\" \"$PYTHONPATH\" "
       "\"${HOSTNAME-unset}\" \"${CUDA_VISIBLE_DEVICES-unset}\" \"$HOME\" "
       "\"$SSH_CONNECTION\" \"${MAIL-unset}\" \"$KOLO_RANK\" "
       "\"${#KOLO_SECRET}\""},
      {{"FOO", odd},
       {"PYTHONPATH", "/some/value"},
       {"HOSTNAME", "kolorun-host"},
       {"CUDA_VISIBLE_DEVICES", "3"},
       {"MAIL", "/var/mail/k"},
       {"KOLO_RANK", "7"}});
  ASSERT_TRUE(p.Start().ok());
  ASSERT_TRUE(p.Wait(Scaled(absl::Seconds(30))).ok()) << p.output();
  EXPECT_TRUE(p.exit_info().exited && p.exit_info().code == 0) << p.output();
  for (int r = 0; r < 2; ++r) {
    const std::string line = absl::StrCat(
        "[", r, "]<stdout>:SEEN ", odd,
        "|/some/value|unset|unset|/remote-home|1 2 3 4|unset|", r, "|64\n");
    EXPECT_NE(p.output().find(line), std::string::npos) << line << "\n"
                                                        << p.output();
  }
}

// An environment too large for one argument (Linux: 128 KiB) cannot reach
// a remote worker: kolorun says why before the worker fails with 127.
TEST(KolorunProcessTest, AnEnvironmentTooLargeForTheRemoteCommandIsNamed) {
  std::map<std::string, std::optional<std::string>> env;
  for (int i = 0; i < 20; ++i)
    env[absl::StrCat("KOLO_TEST_BIG", i)] = std::string(8000, 'x');
  Subprocess p({BinDir() + "/kolorun", "-np", "1", "-H", "fakeh",
                "--launcher-cmd", "env X={host}", "true"},
               env);
  ASSERT_TRUE(p.Start().ok());
  ASSERT_TRUE(p.Wait(Scaled(absl::Seconds(30))).ok()) << p.output();
  EXPECT_TRUE(p.exit_info().exited && p.exit_info().code == 127) << p.output();
  EXPECT_NE(p.output().find("over Linux's limit of 131072 for one argument"),
            std::string::npos)
      << p.output();
}

TEST(KolorunProcessTest, ExtraEnvForEveryWorkerButNotKolorunsOwn) {
  TempDir dir;
  auto p = RunKolorun({"-np", "2", "-H", "localhost,remote1", "--ssh-cmd",
                       WriteBareSsh(dir), "-x", "BAR=1", "-x", "BAZ=x y", "sh",
                       "-c", "echo \"X $BAR|$BAZ|$KOLO_RANK\""});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  EXPECT_NE(p->output().find("[0]<stdout>:X 1|x y|0\n"), std::string::npos)
      << p->output();
  EXPECT_NE(p->output().find("[1]<stdout>:X 1|x y|1\n"), std::string::npos)
      << p->output();

  auto bad =
      RunKolorun({"-np", "1", "-x", "KOLO_RANK=3", "sh", "-c", "echo started"});
  EXPECT_TRUE(bad->exit_info().exited && bad->exit_info().code == 2)
      << bad->output();
  EXPECT_NE(bad->output().find("-x sets KOLO_RANK, which kolorun sets for "
                               "each worker itself"),
            std::string::npos)
      << bad->output();
  EXPECT_EQ(bad->output().find("started"), std::string::npos) << bad->output();
}

TEST(KolorunProcessTest, SshPortAndIdentityGoToTheSshCommand) {
  TempDir dir;
  auto p =
      RunKolorun({"-np", "1", "-H", "remote1", "--ssh-cmd", WriteBareSsh(dir),
                  "-p", "2222", "-i", dir.file("my key"), "true"});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  std::string args;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (absl::StartsWith(e.path().filename().string(), "ssh-args."))
      args = ReadFile(e.path());
  }
  EXPECT_TRUE(
      absl::StartsWith(args, absl::StrCat("bare-ssh -p 2222 -i ",
                                          dir.file("my key"), " remote1 env ")))
      << args;
}

TEST(KolorunProcessTest, OutputFilesPerRankAndTimestamps) {
  TempDir dir;
  const std::string out = dir.file("logs/run1");
  auto p = RunKolorun({"-np", "2", "--output-filename", out,
                       "--prefix-output-with-timestamp", "sh", "-c",
                       "echo \"hello $KOLO_RANK\"; echo oops >&2; "
                       "printf 'tail'"});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  for (int r = 0; r < 2; ++r) {
    const std::string rank_dir = absl::StrCat(out, "/rank.", r);
    EXPECT_EQ(ReadRaw(rank_dir + "/stdout"),
              absl::StrCat("hello ", r, "\ntail"));
    EXPECT_EQ(ReadRaw(rank_dir + "/stderr"), "oops\n");
    // The terminal: [r]<stdout>:YYYY-MM-DD HH:MM:SS.mmm hello r
    const std::string lead = absl::StrCat("[", r, "]<stdout>:");
    size_t at = p->output().find(lead + "20");
    ASSERT_NE(at, std::string::npos) << p->output();
    const std::string line =
        p->output().substr(at, p->output().find('\n', at) - at);
    ASSERT_EQ(line.size(), lead.size() + 24 + absl::StrCat("hello ", r).size())
        << line;
    const std::string stamp = line.substr(lead.size(), 23);
    EXPECT_EQ(stamp[4], '-') << line;
    EXPECT_EQ(stamp[10], ' ') << line;
    EXPECT_EQ(stamp[19], '.') << line;
    EXPECT_EQ(line.substr(lead.size() + 23), absl::StrCat(" hello ", r));
  }

  // A directory that cannot be made: exit 2 before any worker, naming it.
  { std::ofstream f(dir.file("plain-file")); }
  auto bad =
      RunKolorun({"-np", "1", "--output-filename", dir.file("plain-file/sub"),
                  "sh", "-c", "echo started"});
  EXPECT_TRUE(bad->exit_info().exited && bad->exit_info().code == 2)
      << bad->output();
  EXPECT_NE(
      bad->output().find(absl::StrCat(
          "cannot create ", dir.file("plain-file/sub"), ": Not a directory")),
      std::string::npos)
      << bad->output();
  EXPECT_EQ(bad->output().find("started"), std::string::npos) << bad->output();
}

TEST(KolorunProcessTest, NetworkInterfaceGoesToTheWorkersAndMustExist) {
  auto p = RunKolorun({"-np", "2", "--network-interface", "lo", "sh", "-c",
                       "echo \"IF $KOLO_IFACE $KOLO_COORDINATOR\""});
  EXPECT_TRUE(p->exit_info().exited && p->exit_info().code == 0) << p->output();
  EXPECT_NE(p->output().find("[1]<stdout>:IF lo 127.0.0.1:"), std::string::npos)
      << p->output();

  auto bad = RunKolorun({"-np", "1", "--network-interface", "nosuchif0", "sh",
                         "-c", "echo started"});
  EXPECT_TRUE(bad->exit_info().exited && bad->exit_info().code == 2)
      << bad->output();
  EXPECT_NE(bad->output().find("--network-interface nosuchif0: no IPv4 "
                               "address on that interface; this host has "
                               "lo=127.0.0.1"),
            std::string::npos)
      << bad->output();
  EXPECT_EQ(bad->output().find("started"), std::string::npos) << bad->output();
}

}  // namespace
}  // namespace kolo::testing
