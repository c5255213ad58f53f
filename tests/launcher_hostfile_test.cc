// Unit tests of kolorun --hostfile (launcher/hostfile.h) and how ParseArgs
// uses it.
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "launcher/args.h"
#include "launcher/hostfile.h"

namespace kolo::launcher {
namespace {

std::vector<std::string> Names(const std::vector<HostSlots>& hosts) {
  std::vector<std::string> out;
  for (const HostSlots& h : hosts) {
    out.push_back(h.name + ":" + std::to_string(h.slots));
  }
  return out;
}

TEST(HostfileTest, EveryForm) {
  auto hosts = ParseHostfile("/x/h",
                             "# the cluster\n"
                             "\n"
                             "node1 slots=4\n"
                             "  node2   slots=2 max_slots=8  # two GPUs\n"
                             "node3:3\n"
                             "node4\n"
                             "\tnode5\tslots=1\n");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(Names(*hosts),
            (std::vector<std::string>{"node1:4", "node2:2", "node3:3",
                                      "node4:1", "node5:1"}));
  auto defaults = ParseHostfile("/x/h", "a\nb slots=3", 2);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(Names(*defaults), (std::vector<std::string>{"a:2", "b:3"}));
}

TEST(HostfileTest, BadLinesNameFileLineAndExpectation) {
  auto message = [](const std::string& text) {
    return std::string(ParseHostfile("/x/h", text).status().message());
  };
  EXPECT_EQ(message("a slots=1\n\nnode1 slots=abc\n"),
            "hostfile /x/h, line 3: 'node1 slots=abc': expected 'host "
            "slots=N' with N a positive integer (or host:N, or a bare host)");
  EXPECT_EQ(message("node1 slots=0"),
            "hostfile /x/h, line 1: 'node1 slots=0': expected 'host slots=N' "
            "with N a positive integer (or host:N, or a bare host)");
  EXPECT_EQ(message("node1:x"),
            "hostfile /x/h, line 1: 'node1:x': expected 'host slots=N' with "
            "N a positive integer (or host:N, or a bare host)");
  EXPECT_EQ(message("node1 cpus=4"),
            "hostfile /x/h, line 1: 'node1 cpus=4': unknown 'cpus=4'; "
            "expected 'host slots=N' with N a positive integer (or host:N, or "
            "a bare host)");
  EXPECT_EQ(message("node1 max_slots=x"),
            "hostfile /x/h, line 1: 'node1 max_slots=x': expected "
            "max_slots=M with M a positive integer");
  EXPECT_EQ(message("slots=2"),
            "hostfile /x/h, line 1: 'slots=2': expected 'host slots=N' with "
            "N a positive integer (or host:N, or a bare host)");
  EXPECT_EQ(message("# nothing\n\n"),
            "hostfile /x/h: no hosts; expected lines 'host slots=N'");
}

absl::StatusOr<LaunchOptions> Parse(const std::vector<std::string>& args) {
  return ParseArgs(args, {},
                   [](const std::string& path) -> absl::StatusOr<std::string> {
                     if (path == "h") return std::string("a slots=2\nb:1\n");
                     return absl::NotFoundError("cannot read it: no such file");
                   });
}

TEST(HostfileTest, ParseArgsReadsIt) {
  for (const char* flag : {"--hostfile", "-hostfile"}) {
    auto o = Parse({"-np", "3", flag, "h", "cmd"});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->hostfile, "h");
    EXPECT_EQ(Names(o->hosts), (std::vector<std::string>{"a:2", "b:1"}));
  }
  EXPECT_EQ(Parse({"-np", "4", "--hostfile", "h", "cmd"}).status().message(),
            "-np 4 is more than the 3 slots of hostfile h; add hosts or slots "
            "(host:slots), or lower -np");
  EXPECT_EQ(Parse({"-np", "1", "--hostfile", "h", "-H", "a", "cmd"})
                .status()
                .message(),
            "--hostfile and -H are exclusive: give the hosts one way");
  EXPECT_EQ(Parse({"-np", "1", "--hostfile", "h", "--host-discovery-script",
                   "d.sh", "cmd"})
                .status()
                .message(),
            "--hostfile and --host-discovery-script are exclusive: give the "
            "hosts one way");
  EXPECT_EQ(Parse({"-np", "1", "--hostfile", "gone", "cmd"}).status().message(),
            "hostfile gone: cannot read it: no such file");
  EXPECT_EQ(Parse({"--hostfile", "h", "cmd"}).status().message(),
            "missing -np N (the number of workers to start)");
}

}  // namespace
}  // namespace kolo::launcher
