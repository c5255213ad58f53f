// kolorun over real ssh: two "hosts" are network namespaces on one bridge
// (10.231.x.y), each running its own OpenSSH sshd (a config, host key and
// authorized key of this test's, in a temporary directory). kolorun runs a
// 2 hosts x 2 slots job through `ssh`, from this namespace. Checks what a
// remote worker gets: kolorun's environment (PYTHONPATH, a value with a space
// and a `$`), -x, not the denylist (CUDA_VISIBLE_DEVICES), its rank, the job
// secret (set, and on no process's command line nor in sshd's log), and
// that the workers join and run every collective with exact results
// (tests/workers/mp_worker.cc, behind tests/workers/env_report.sh).
//
// Skipped (with the reason) when not root, without `ip netns`, or without
// /usr/sbin/sshd, ssh or ssh-keygen. Every wait has a deadline; the daemons
// and the namespaces go away in TearDown, on failure too.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/timeouts.h"

#ifndef KOLO_ENV_REPORT_SH
#error "KOLO_ENV_REPORT_SH (tests/workers/env_report.sh) must be defined"
#endif

namespace kolo::testing {
namespace {

namespace fs = std::filesystem;

std::string Bin(const std::string& name) {
  return fs::absolute(fs::path(BinDir()) / name).string();
}

// Runs a shell command quietly; true on exit status 0.
bool Sh(const std::string& cmd) {
  int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every process's command line (NULs between the words).
std::vector<std::string> AllCommandLines() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !absl::ascii_isdigit(name[0])) continue;
    out.push_back(ReadAll((entry.path() / "cmdline").string()));
  }
  return out;
}

class SshdTest : public ::testing::Test {
 protected:
  struct Host {
    std::string ns, outer_if, inner_if, ip;
    std::unique_ptr<Subprocess> sshd;
    std::string log;
  };

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns, sshd)";
    if (!Sh("ip netns list")) GTEST_SKIP() << "needs iproute2's ip netns";
    if (!fs::exists("/usr/sbin/sshd"))
      GTEST_SKIP() << "needs OpenSSH's server (/usr/sbin/sshd)";
    if (!Sh("command -v ssh") || !Sh("command -v ssh-keygen"))
      GTEST_SKIP() << "needs OpenSSH's client (ssh, ssh-keygen)";
    const int id = getpid() % 100000;
    const int net = 10 + (id + 97) % 200;
    port_ = 20000 + id % 20000;
    dir_ =
        (fs::temp_directory_path() / absl::StrCat("kolo-sshd-", id)).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // sshd's privilege separation directory (Debian's package makes it at
    // boot, which a container may not have done).
    std::error_code ec;
    fs::create_directories("/run/sshd", ec);
    ASSERT_TRUE(Sh(
        absl::StrCat("ssh-keygen -q -t ed25519 -N '' -f ", dir_, "/host_key")));
    ASSERT_TRUE(Sh(absl::StrCat("ssh-keygen -q -t ed25519 -N '' -f ", dir_,
                                "/client_key")));
    fs::copy_file(dir_ + "/client_key.pub", dir_ + "/authorized_keys");

    bridge_ = absl::StrCat("ks", id);
    bridge_ip_ = absl::StrCat("10.231.", net, ".1");
    if (!Sh("ip link add " + bridge_ + " type bridge") ||
        !Sh(absl::StrCat("ip addr add ", bridge_ip_, "/24 dev ", bridge_)) ||
        !Sh("ip link set " + bridge_ + " up")) {
      GTEST_SKIP() << "cannot create bridge " << bridge_;
    }
    for (int h = 0; h < 2; ++h) {
      const char* tag = h == 0 ? "a" : "b";
      hosts_.push_back(Host{
          absl::StrCat("kolossh", id, tag), absl::StrCat("ks", id, tag, "0"),
          absl::StrCat("ks", id, tag, "1"),
          absl::StrCat("10.231.", net, ".", 2 + h), nullptr, ""});
      Host& x = hosts_.back();
      const bool ok =
          Sh("ip netns add " + x.ns) &&
          Sh(absl::StrCat("ip link add ", x.outer_if, " type veth peer name ",
                          x.inner_if)) &&
          Sh(absl::StrCat("ip link set ", x.inner_if, " netns ", x.ns)) &&
          Sh(absl::StrCat("ip link set ", x.outer_if, " master ", bridge_)) &&
          Sh(absl::StrCat("ip link set ", x.outer_if, " up")) &&
          Sh(absl::StrCat("ip netns exec ", x.ns, " ip addr add ", x.ip,
                          "/24 dev ", x.inner_if)) &&
          Sh(absl::StrCat("ip netns exec ", x.ns, " ip link set ", x.inner_if,
                          " up")) &&
          Sh(absl::StrCat("ip netns exec ", x.ns, " ip link set lo up"));
      if (!ok) GTEST_SKIP() << "cannot create network namespace " << x.ns;
      ASSERT_NO_FATAL_FAILURE(StartSshd(x));
    }
  }

  void StartSshd(Host& x) {
    const std::string config = absl::StrCat(dir_, "/sshd_config.", x.ns);
    {
      std::ofstream f(config);
      f << "ListenAddress " << x.ip << ":" << port_ << "\n"
        << "HostKey " << dir_ << "/host_key\n"
        << "AuthorizedKeysFile " << dir_ << "/authorized_keys\n"
        << "PermitRootLogin prohibit-password\n"
        << "PasswordAuthentication no\n"
        << "KbdInteractiveAuthentication no\n"
        << "StrictModes no\n"
        << "UsePAM no\n"
        << "PrintMotd no\n"
        << "LogLevel VERBOSE\n"
        << "PidFile " << dir_ << "/sshd." << x.ns << ".pid\n";
    }
    x.log = absl::StrCat(dir_, "/sshd.", x.ns, ".log");
    x.sshd = std::make_unique<Subprocess>(std::vector<std::string>{
        "/usr/sbin/ip", "netns", "exec", x.ns, "/usr/sbin/sshd", "-D", "-f",
        config, "-E", x.log});
    ASSERT_TRUE(x.sshd->Start().ok());
    const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(15));
    while (!absl::StrContains(ReadAll(x.log), "Server listening on")) {
      ASSERT_TRUE(x.sshd->running())
          << "sshd in " << x.ns << " ended: " << ReadAll(x.log)
          << x.sshd->output();
      ASSERT_LT(absl::Now(), deadline)
          << "sshd in " << x.ns << " did not listen: " << ReadAll(x.log);
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  void TearDown() override {
    for (Host& x : hosts_) {
      if (x.sshd != nullptr && x.sshd->running()) {
        x.sshd->Signal(SIGTERM);
        if (!x.sshd->Wait(Scaled(absl::Seconds(5))).ok())
          x.sshd->Signal(SIGKILL);
      }
      x.sshd.reset();  // kills and reaps what is left
      Sh("ip link del " + x.outer_if);
      Sh("ip netns del " + x.ns);
    }
    if (!bridge_.empty()) Sh("ip link del " + bridge_);
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  // kolorun parses `flags` (horovodrun's -x, -p, -i may not be in this
  // build yet).
  static bool KolorunTakes(std::vector<std::string> flags) {
    flags.insert(flags.begin(), Bin("kolorun"));
    flags.push_back("--version");
    Subprocess p(flags);
    if (!p.Start().ok() || !p.Wait(Scaled(absl::Seconds(10))).ok())
      return false;
    return p.exit_info().exited && p.exit_info().code == 0;
  }

  std::string dir_, bridge_, bridge_ip_;
  int port_ = 0;
  std::vector<Host> hosts_;
};

TEST_F(SshdTest, TwoHostsTwoSlotsOverRealSsh) {
  const std::string key = dir_ + "/client_key";
  const std::string port = absl::StrCat(port_);
  // -F /dev/null: no user ssh config (no ControlMaster, no aliases).
  std::string ssh_cmd =
      "ssh -F /dev/null -o StrictHostKeyChecking=no "
      "-o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR";
  std::vector<std::string> args = {
      Bin("kolorun"), "-np", "4", "-H",
      absl::StrCat(hosts_[0].ip, ":2,", hosts_[1].ip, ":2")};
  const bool new_flags = KolorunTakes({"-x", "BAR=1", "-p", port, "-i", key});
  if (new_flags) {
    args.insert(args.end(),
                {"--ssh-cmd", ssh_cmd, "-p", port, "-i", key, "-x", "BAR=1"});
  } else {
    std::printf(
        "note: this kolorun does not parse -x/-p/-i yet: the port and key go "
        "in --ssh-cmd, and BAR is not set\n");
    args.insert(args.end(), {"--ssh-cmd",
                             absl::StrCat(ssh_cmd, " -i ", key, " -p ", port)});
  }
  args.insert(args.end(),
              {KOLO_ENV_REPORT_SH, dir_, Bin("kolo-mp-worker"), "collectives"});
  Subprocess job(args, {{"PYTHONPATH", "/some/value"},
                        {"FOO", "a b$c"},
                        {"CUDA_VISIBLE_DEVICES", "5"}});
  std::string command;
  for (const std::string& a : args) absl::StrAppend(&command, a, " ");
  std::printf("kolorun command: %s\n", command.c_str());
  ASSERT_TRUE(job.Start().ok());

  // Every worker has its secret: look for it on every command line (ssh,
  // the remote shells, sshd's session processes: one PID namespace), then
  // let the workers go on.
  std::set<std::string> secrets;
  const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(60));
  for (int r = 0; r < 4; ++r) {
    const std::string file = absl::StrCat(dir_, "/secret.", r);
    while (ReadAll(file).size() < 64 && absl::Now() < deadline) {
      job.WaitForOutput("\x01never", absl::Milliseconds(100));  // drains
      absl::SleepFor(absl::Milliseconds(20));
    }
    secrets.insert(ReadAll(file));
  }
  ASSERT_EQ(secrets.size(), 1u) << job.output();
  const std::string secret = *secrets.begin();
  ASSERT_EQ(secret.size(), 64u) << job.output();
  int scanned = 0, ssh_seen = 0;
  for (const std::string& cmdline : AllCommandLines()) {
    ++scanned;
    // kolorun's `/bin/sh -c "ssh ..."`, or the ssh it became.
    if (absl::StrContains(cmdline, "BatchMode=yes") &&
        absl::StrContains(cmdline, hosts_[0].ip)) {
      ++ssh_seen;
    }
    EXPECT_FALSE(absl::StrContains(cmdline, secret))
        << "the secret is on a command line: " << cmdline;
  }
  std::printf(
      "searched %d command lines for the secret (%d ssh commands "
      "to %s among them): not found\n",
      scanned, ssh_seen, hosts_[0].ip.c_str());
  EXPECT_GE(ssh_seen, 2) << "kolorun's two ssh commands to host a";
  { std::ofstream(dir_ + "/scanned"); }

  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(120))).ok()) << job.output();
  const std::string& out = job.output();
  EXPECT_TRUE(job.exit_info().exited && job.exit_info().code == 0)
      << job.exit_info().ToString() << "\n"
      << out;
  for (int r = 0; r < 4; ++r) {
    const Host& h = hosts_[r / 2];
    const std::string env_line =
        absl::StrCat("[", r, "]<stdout>:ENV rank=", r, " host=", h.ip,
                     " pythonpath=[/some/value] foo=[a b$c] bar=[",
                     new_flags ? "1" : "unset",
                     "] cuda=[unset] secret_len=64 ssh=[", bridge_ip_, " ");
    const size_t at = out.find(env_line);
    ASSERT_NE(at, std::string::npos) << env_line << "\n" << out;
    // sshd's SSH_CONNECTION: client ip and port, then its own ip and port.
    const std::string rest = out.substr(
        at + env_line.size(), out.find('\n', at) - at - env_line.size());
    EXPECT_TRUE(absl::EndsWith(rest, absl::StrCat(" ", h.ip, " ", port, "]")))
        << rest;
    EXPECT_NE(out.find(absl::StrCat("[", r, "]<stdout>:COLL_OK rank=", r,
                                    " size=4\n")),
              std::string::npos)
        << out;
  }
  EXPECT_EQ(out.find("COLL_FAIL"), std::string::npos) << out;
  EXPECT_FALSE(absl::StrContains(out, secret));
  for (const Host& h : hosts_) {
    const std::string log = ReadAll(h.log);
    EXPECT_TRUE(absl::StrContains(log, "Accepted publickey for root")) << log;
    EXPECT_FALSE(absl::StrContains(log, secret)) << log;
  }
  std::printf("%s", out.c_str());
}

}  // namespace
}  // namespace kolo::testing
