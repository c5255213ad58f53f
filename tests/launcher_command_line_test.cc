// What a worker started by kolorun gets, the pure parts: the environment
// forwarded to remote workers (everything but the denylist), -x and the
// flags' worker variables (and the variables kolorun keeps for itself), the
// ssh port and identity, KOLO_IFACE; the line prefixer's timestamps and raw
// copies (--output-filename). One test runs a RemoteCommand through /bin/sh
// to show that values with any characters arrive intact.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "launcher/args.h"
#include "launcher/command_line.h"
#include "launcher/line_prefixer.h"

namespace kolo::launcher {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh directory, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = fs::path(::testing::TempDir()) /
            absl::StrCat("kolo-cmdline-", ::getpid(), "-", counter_++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(ForwardedEnvTest, EverythingButTheDenylist) {
  EnvList env = ForwardedEnv({"PATH=/bin:/usr/bin",
                              "PYTHONPATH=/opt/lib",
                              "KOLO_TIMEOUT_SCALE=4",
                              "HOROVOD_LOG_LEVEL=info",
                              "FOO=a b$c 'q' \"d\"\nline2",
                              "EMPTY=",
                              "EQ=x=y",
                              "KOLO_SECRET=x",
                              "BASH_FUNC_f%%=() {  echo hi\n}",
                              "CUDA_VISIBLE_DEVICES=0,1",
                              "HOSTNAME=here",
                              "PWD=/w",
                              "OLDPWD=/",
                              "SHLVL=2",
                              "_=/usr/bin/kolorun",
                              "HOME=/root",
                              "USER=root",
                              "LOGNAME=root",
                              "SHELL=/bin/bash",
                              "MAIL=/var/mail/root",
                              "SSH_CLIENT=10.0.0.1 5555 22",
                              "SSH_CONNECTION=10.0.0.1 5555 10.0.0.2 22",
                              "SSH_TTY=/dev/pts/0",
                              "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1",
                              "SSH_AGENT_PID=42",
                              "TERM=xterm",
                              "DISPLAY=:0",
                              "LD_LIBRARY_PATH=/opt/cuda/lib64",
                              "junk"});
  EXPECT_EQ(env, (EnvList{{"PATH", "/bin:/usr/bin"},
                          {"PYTHONPATH", "/opt/lib"},
                          {"KOLO_TIMEOUT_SCALE", "4"},
                          {"HOROVOD_LOG_LEVEL", "info"},
                          {"FOO", "a b$c 'q' \"d\"\nline2"},
                          {"EMPTY", ""},
                          {"EQ", "x=y"},
                          {"TERM", "xterm"},
                          {"DISPLAY", ":0"},
                          {"LD_LIBRARY_PATH", "/opt/cuda/lib64"}}));
}

TEST(ForwardedEnvTest, DenylistIsExact) {
  for (const char* name :
       {"KOLO_SECRET", "BASH_FUNC_x%%", "BASH_FUNC_",    "CUDA_VISIBLE_DEVICES",
        "HOSTNAME",    "PWD",           "OLDPWD",        "SHLVL",
        "_",           "HOME",          "USER",          "LOGNAME",
        "SHELL",       "MAIL",          "SSH_CLIENT",    "SSH_CONNECTION",
        "SSH_TTY",     "SSH_AUTH_SOCK", "SSH_AGENT_PID", ""}) {
    EXPECT_TRUE(NotForwarded(name)) << name;
  }
  for (const char* name :
       {"PATH", "PYTHONPATH", "HOMEDIR", "SSH_ASKPASS", "KOLO_SECRET_FILE",
        "CUDA_HOME", "HOSTNAMES", "__", "BASH_FUNCS", "TERM", "DISPLAY",
        "KOLO_RANK", "HOROVOD_RANK", "OMP_NUM_THREADS"}) {
    EXPECT_FALSE(NotForwarded(name)) << name;
  }
}

TEST(UserEnvTest, WorkerVarsThenExtraEnvLastWins) {
  LaunchOptions o;
  o.worker_vars = {{"KOLO_FUSION_THRESHOLD", "1048576"}, {"A", "flag"}};
  o.extra_env = {{"BAR", "1"}, {"A", "x"}, {"BAR", "2"}};
  EXPECT_EQ(UserEnv(o), (EnvList{{"KOLO_FUSION_THRESHOLD", "1048576"},
                                 {"A", "x"},
                                 {"BAR", "2"}}));
}

TEST(UserEnvTest, OverlayReplacesAndKeepsOneOfEach) {
  EnvList base = {{"A", "1"}, {"B", "2"}, {"C", "3"}};
  OverlayEnv(base, {{"B", "two"}, {"D", "4"}});
  EXPECT_EQ(base, (EnvList{{"A", "1"}, {"C", "3"}, {"B", "two"}, {"D", "4"}}));
}

TEST(UserEnvTest, KolorunOwnsTheWorkersIdentity) {
  for (const char* name :
       {"KOLO_RANK",          "KOLO_SIZE",          "KOLO_LOCAL_RANK",
        "KOLO_LOCAL_SIZE",    "KOLO_WORKER_ID",     "KOLO_COORDINATOR",
        "KOLO_JOB_ID",        "KOLO_SECRET",        "KOLO_HOSTNAME",
        "KOLO_LAUNCHER",      "KOLO_ELASTIC",       "KOLO_WORKER_INCARNATION",
        "KOLO_IFACE",         "HOROVOD_RANK",       "HOROVOD_SIZE",
        "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
        "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME",   "KOLO_START_TIMEOUT",
        "KOLO_CYCLE_TIME_MS"}) {
    EXPECT_TRUE(OwnedByKolorun(name)) << name;
  }
  for (const char* name : {"KOLO_LOG_LEVEL", "KOLO_FUSION_THRESHOLD",
                           "KOLO_TIMELINE", "KOLO_ADDR", "PATH", "BAR"}) {
    EXPECT_FALSE(OwnedByKolorun(name)) << name;
  }

  LaunchOptions o;
  o.extra_env = {{"BAR", "1"}, {"KOLO_LOG_LEVEL", "debug"}};
  EXPECT_TRUE(CheckUserVariables(o).ok());
  o.extra_env.emplace_back("KOLO_RANK", "3");
  EXPECT_EQ(CheckUserVariables(o).message(),
            "-x sets KOLO_RANK, which kolorun sets for each worker itself");
  o.extra_env = {{"KOLO_IFACE", "eth1"}};
  EXPECT_EQ(CheckUserVariables(o).message(),
            "-x sets KOLO_IFACE, which kolorun sets for each worker itself "
            "(use --network-interface)");
  o.extra_env = {{"KOLO_CYCLE_TIME_MS", "5"}};
  EXPECT_TRUE(absl::StrContains(CheckUserVariables(o).message(),
                                "use kolorun's flag for it"));
  o.extra_env.clear();
  o.worker_vars = {{"HOROVOD_RANK", "1"}};
  EXPECT_EQ(CheckUserVariables(o).message(),
            "a flag sets HOROVOD_RANK, which kolorun sets for each worker "
            "itself");
}

TEST(SshCommandTest, PortAndIdentity) {
  LaunchOptions o;
  EXPECT_EQ(SshCommand(o), "ssh -o BatchMode=yes");
  o.ssh_port = 2222;
  EXPECT_EQ(SshCommand(o), "ssh -o BatchMode=yes -p 2222");
  o.ssh_identity_file = "/home/me/my key's";
  EXPECT_EQ(SshCommand(o),
            "ssh -o BatchMode=yes -p 2222 -i '/home/me/my key'\\''s'");
  o.ssh_port = 0;
  o.ssh_identity_file = "/k/id";
  EXPECT_EQ(SshCommand(o), "ssh -o BatchMode=yes -i /k/id");
}

TEST(SshCommandTest, OnlyTheSshModeGetsThem) {
  LaunchOptions o;
  o.ssh_cmd = "myssh";
  o.ssh_port = 2200;
  o.ssh_identity_file = "/k/id";
  o.command = {"echo", "hi"};
  WorkerPlan w{0, "w0", "far", 0, 1, SpawnMode::kSsh};
  std::vector<std::string> ssh = LaunchArgv(o, w, {{"K", "v"}}, "/d");
  ASSERT_EQ(ssh.size(), 3u);
  EXPECT_EQ(ssh[2],
            "myssh -p 2200 -i /k/id far " +
                ShellQuote(RemoteCommand({{"K", "v"}}, "/d", {"echo", "hi"})));
  o.launcher_cmd = "ip netns exec {host}";
  w.mode = SpawnMode::kTemplate;
  std::vector<std::string> t = LaunchArgv(o, w, {{"K", "v"}}, "/d");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[2], "ip netns exec far " +
                      RemoteCommand({{"K", "v"}}, "/d", {"echo", "hi"}));
  w.mode = SpawnMode::kLocal;
  EXPECT_EQ(LaunchArgv(o, w, {}, "/d"), o.command);
}

TEST(WorkerEnvTest, InterfaceGoesToKoloIface) {
  JobInfo job;
  job.job_id = "j";
  job.coordinator = "10.0.0.1:1";
  job.size = 2;
  WorkerPlan w{1, "w1", "h", 1, 2, SpawnMode::kLocal};
  EnvList env = WorkerEnv(job, w);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m.count("KOLO_IFACE"), 0u);
  job.iface = "eth1";
  env = WorkerEnv(job, w);
  m = std::map<std::string, std::string>(env.begin(), env.end());
  EXPECT_EQ(m["KOLO_IFACE"], "eth1");
}

// The remote command through a real shell, in an empty environment (as on a
// host kolorun reaches by ssh): every value arrives byte for byte, the
// secret comes from stdin and never from the command.
TEST(RemoteCommandTest, ValuesSurviveAShellAndTheSecretComesOnStdin) {
  ScratchDir dir;
  const std::string odd = "a b$c `d` 'e' \"f\" \\g\n*?;|&<>(){}[]~#!%^\t";
  EnvList env = {{"FOO", odd}, {"EMPTY", ""}, {"KOLO_SECRET", "not-this"}};
  const std::string cmd = RemoteCommand(
      env, "/",
      {"/bin/sh", "-c",
       "printf '%s|%s|%s|%s' \"$FOO\" \"$EMPTY\" \"$KOLO_SECRET\" "
       "\"$1\"",
       "zero", "arg with 'quote'"});
  EXPECT_FALSE(absl::StrContains(cmd, "not-this")) << cmd;
  {
    std::ofstream in(dir.file("stdin"));
    in << "the-secret\n";
  }
  const std::string line =
      absl::StrCat("env -i PATH=/usr/bin:/bin /bin/sh -c ", ShellQuote(cmd),
                   " < ", dir.file("stdin"), " > ", dir.file("out"));
  ASSERT_EQ(std::system(line.c_str()), 0) << line;
  EXPECT_EQ(ReadAll(dir.file("out")), odd + "||the-secret|arg with 'quote'");
}

TEST(LinePrefixerTest, TimestampAfterThePrefix) {
  LinePrefixer::Options po;
  po.timestamp = true;
  absl::Time t = absl::FromCivil(absl::CivilSecond(2026, 11, 28, 5, 59, 1),
                                 absl::UTCTimeZone()) +
                 absl::Milliseconds(123);
  po.clock = [&t] { return t; };
  LinePrefixer p(3, "stdout", po);
  EXPECT_EQ(p.Append("hello\nwor"),
            "[3]<stdout>:2026-11-28 05:59:01.123 hello\n");
  t += absl::Seconds(1);
  EXPECT_EQ(p.Append("ld\n"), "[3]<stdout>:2026-11-28 05:59:02.123 world\n");
  EXPECT_EQ(p.Append("x"), "");
  EXPECT_EQ(p.Finish(), "[3]<stdout>:2026-11-28 05:59:02.123 x\n");
  EXPECT_EQ(LineTimestamp(absl::FromUnixMillis(7)), "1970-01-01 00:00:00.007");
}

TEST(LinePrefixerTest, CopyGetsTheRawBytes) {
  ScratchDir dir;
  absl::StatusOr<int> fd = OpenRankOutput(dir.file("out"), 2, "stderr", false);
  ASSERT_TRUE(fd.ok()) << fd.status();
  {
    LinePrefixer::Options po;
    po.copy_fd = *fd;
    LinePrefixer p(2, "stderr", po);
    EXPECT_EQ(p.Append("one\ntw"), "[2]<stderr>:one\n");
    EXPECT_EQ(p.Append("o\nno newline"), "[2]<stderr>:two\n");
    EXPECT_EQ(p.Finish(), "[2]<stderr>:no newline\n");
  }  // closes the file
  const std::string path = dir.file("out/rank.2/stderr");
  EXPECT_EQ(ReadAll(path), "one\ntwo\nno newline");

  // A replacement appends; a new job's worker truncates.
  fd = OpenRankOutput(dir.file("out"), 2, "stderr", true);
  ASSERT_TRUE(fd.ok()) << fd.status();
  {
    LinePrefixer::Options po;
    po.copy_fd = *fd;
    LinePrefixer p(2, "stderr", po);
    p.Append("again\n");
  }
  EXPECT_EQ(ReadAll(path), "one\ntwo\nno newlineagain\n");
  fd = OpenRankOutput(dir.file("out"), 2, "stderr", false);
  ASSERT_TRUE(fd.ok()) << fd.status();
  ::close(*fd);
  EXPECT_EQ(ReadAll(path), "");
}

TEST(OutputDirTest, CreatesParentsAndNamesTheFailure) {
  ScratchDir dir;
  EXPECT_TRUE(CreateOutputDir(dir.file("a/b/c")).ok());
  EXPECT_TRUE(fs::is_directory(dir.file("a/b/c")));
  EXPECT_TRUE(CreateOutputDir(dir.file("a/b/c/")).ok());  // exists: fine
  { std::ofstream f(dir.file("file")); }
  absl::Status st = CreateOutputDir(dir.file("file/sub"));
  EXPECT_EQ(st.message(), absl::StrCat("cannot create ", dir.file("file/sub"),
                                       ": Not a directory"));
  st = CreateOutputDir(dir.file("file"));
  EXPECT_EQ(st.message(), absl::StrCat("cannot create ", dir.file("file"),
                                       ": Not a directory"));
  EXPECT_FALSE(CreateOutputDir("").ok());
}

}  // namespace
}  // namespace kolo::launcher
