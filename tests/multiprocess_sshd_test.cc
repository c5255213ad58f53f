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
#include "tests/testing/netns.h"
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
  // One sshd per namespace, in the order of net_.hosts().
  struct Sshd {
    std::unique_ptr<Subprocess> process;
    std::string log;
  };

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns, sshd)";
    if (!RunQuietly("ip netns list"))
      GTEST_SKIP() << "needs iproute2's ip netns";
    if (!fs::exists("/usr/sbin/sshd"))
      GTEST_SKIP() << "needs OpenSSH's server (/usr/sbin/sshd)";
    if (!RunQuietly("command -v ssh") || !RunQuietly("command -v ssh-keygen"))
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
    ASSERT_TRUE(RunQuietly(
        absl::StrCat("ssh-keygen -q -t ed25519 -N '' -f ", dir_, "/host_key")));
    ASSERT_TRUE(RunQuietly(absl::StrCat("ssh-keygen -q -t ed25519 -N '' -f ",
                                        dir_, "/client_key")));
    fs::copy_file(dir_ + "/client_key.pub", dir_ + "/authorized_keys");

    if (absl::Status st = net_.Create("kolossh", "ks", id, net); !st.ok()) {
      GTEST_SKIP() << st.message();
    }
    for (const TwoNamespaces::Host& x : net_.hosts()) {
      ASSERT_NO_FATAL_FAILURE(StartSshd(x));
    }
  }

  void StartSshd(const TwoNamespaces::Host& x) {
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
    Sshd& d = sshd_.emplace_back();
    d.log = absl::StrCat(dir_, "/sshd.", x.ns, ".log");
    d.process = std::make_unique<Subprocess>(std::vector<std::string>{
        "/usr/sbin/ip", "netns", "exec", x.ns, "/usr/sbin/sshd", "-D", "-f",
        config, "-E", d.log});
    ASSERT_TRUE(d.process->Start().ok());
    const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(15));
    while (!absl::StrContains(ReadAll(d.log), "Server listening on")) {
      ASSERT_TRUE(d.process->running())
          << "sshd in " << x.ns << " ended: " << ReadAll(d.log)
          << d.process->output();
      ASSERT_LT(absl::Now(), deadline)
          << "sshd in " << x.ns << " did not listen: " << ReadAll(d.log);
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  void TearDown() override {
    // (net_'s destructor then deletes the namespaces.)
    for (Sshd& d : sshd_) {
      if (d.process != nullptr && d.process->running()) {
        d.process->Signal(SIGTERM);
        if (!d.process->Wait(Scaled(absl::Seconds(5))).ok())
          d.process->Signal(SIGKILL);
      }
      d.process.reset();  // kills and reaps what is left
    }
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  TwoNamespaces net_;
  std::string dir_;
  int port_ = 0;
  std::vector<Sshd> sshd_;
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
      absl::StrCat(net_.hosts()[0].ip, ":2,", net_.hosts()[1].ip, ":2")};
  args.insert(args.end(),
              {"--ssh-cmd", ssh_cmd, "-p", port, "-i", key, "-x", "BAR=1"});
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
        absl::StrContains(cmdline, net_.hosts()[0].ip)) {
      ++ssh_seen;
    }
    EXPECT_FALSE(absl::StrContains(cmdline, secret))
        << "the secret is on a command line: " << cmdline;
  }
  std::printf(
      "searched %d command lines for the secret (%d ssh commands "
      "to %s among them): not found\n",
      scanned, ssh_seen, net_.hosts()[0].ip.c_str());
  EXPECT_GE(ssh_seen, 2) << "kolorun's two ssh commands to host a";
  { std::ofstream(dir_ + "/scanned"); }

  ASSERT_TRUE(job.Wait(Scaled(absl::Seconds(120))).ok()) << job.output();
  const std::string& out = job.output();
  EXPECT_TRUE(job.exit_info().exited && job.exit_info().code == 0)
      << job.exit_info().ToString() << "\n"
      << out;
  for (int r = 0; r < 4; ++r) {
    const TwoNamespaces::Host& h = net_.hosts()[r / 2];
    const std::string env_line = absl::StrCat(
        "[", r, "]<stdout>:ENV rank=", r, " host=", h.ip,
        " pythonpath=[/some/value] foo=[a b$c] bar=[1] cuda=[unset] "
        "secret_len=64 ssh=[",
        net_.bridge_ip(), " ");
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
  for (const Sshd& d : sshd_) {
    const std::string log = ReadAll(d.log);
    EXPECT_TRUE(absl::StrContains(log, "Accepted publickey for root")) << log;
    EXPECT_FALSE(absl::StrContains(log, secret)) << log;
  }
  std::printf("%s", out.c_str());
}

}  // namespace
}  // namespace kolo::testing
