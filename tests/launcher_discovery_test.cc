// Host discovery (launcher/discovery.h): parsing the script's output, and
// running real small scripts (exit codes, stderr in the message, bad lines,
// the deadline).
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "launcher/discovery.h"
#include "tests/testing/timeouts.h"

namespace kolo::launcher {
namespace {

using kolo::testing::Scaled;

TEST(ParseDiscoveryOutputTest, HostsSlotsBlankLinesAndComments) {
  auto hosts = ParseDiscoveryOutput(
      "# the cluster\n"
      "alpha\n"
      "\n"
      "  beta:4  \r\n"
      "10.0.0.7:2\n"
      "   # indented comment\n"
      "gamma",  // no final newline
      3);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 4u);
  EXPECT_EQ((*hosts)[0].name, "alpha");
  EXPECT_EQ((*hosts)[0].slots, 3);  // --slots-per-host
  EXPECT_EQ((*hosts)[1].name, "beta");
  EXPECT_EQ((*hosts)[1].slots, 4);
  EXPECT_EQ((*hosts)[2].name, "10.0.0.7");
  EXPECT_EQ((*hosts)[2].slots, 2);
  EXPECT_EQ((*hosts)[3].name, "gamma");
  EXPECT_EQ((*hosts)[3].slots, 3);
}

TEST(ParseDiscoveryOutputTest, EmptyOutputIsNoHosts) {
  auto hosts = ParseDiscoveryOutput("\n# nothing\n", 1);
  ASSERT_TRUE(hosts.ok());
  EXPECT_TRUE(hosts->empty());
}

TEST(ParseDiscoveryOutputTest, BadLinesAreRefusedNamingTheLine) {
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {"a\nb:x\n",
       "line 2 'b:x': bad slot count 'x' (a positive integer); expected "
       "host or host:slots, one a line"},
      {"a:0\n", "line 1 'a:0': bad slot count '0'"},
      {"a:-1\n", "line 1 'a:-1': bad slot count '-1'"},
      {"a:\n", "line 1 'a:': bad slot count ''"},
      {"\n:2\n", "line 2 ':2': empty host name"},
      {"a b\n", "line 1 'a b': host name 'a b' has a space or a comma"},
      {"a,b\n", "line 1 'a,b': host name 'a,b' has a space or a comma"},
      {"a\nb\na:2\n", "line 3 'a:2': host 'a' is listed twice"},
  };
  for (const Case& c : cases) {
    auto hosts = ParseDiscoveryOutput(c.text, 1);
    ASSERT_FALSE(hosts.ok()) << c.text;
    EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(hosts.status().message().find(c.message), absl::string_view::npos)
        << hosts.status().message() << "\nshould contain: " << c.message;
  }
}

TEST(RunDiscoveryScriptTest, ReadsTheScriptsOutput) {
  auto hosts =
      RunDiscoveryScript("echo localhost:2; echo '# c'; echo hostb", 1);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].name, "localhost");
  EXPECT_EQ((*hosts)[0].slots, 2);
  EXPECT_EQ((*hosts)[1].name, "hostb");
}

TEST(RunDiscoveryScriptTest, AFailingScriptIsAnErrorWithItsStderr) {
  auto hosts =
      RunDiscoveryScript("echo a; echo 'cloud API down' >&2; exit 3", 1);
  ASSERT_FALSE(hosts.ok());
  EXPECT_NE(hosts.status().message().find("exited with code 3"),
            absl::string_view::npos)
      << hosts.status().message();
  EXPECT_NE(hosts.status().message().find("its stderr: cloud API down"),
            absl::string_view::npos)
      << hosts.status().message();
}

TEST(RunDiscoveryScriptTest, ABadLineIsAnError) {
  auto hosts = RunDiscoveryScript("printf 'a\\nb:many\\n'", 1);
  ASSERT_FALSE(hosts.ok());
  EXPECT_NE(hosts.status().message().find("printed a bad line 2 'b:many'"),
            absl::string_view::npos)
      << hosts.status().message();
}

TEST(RunDiscoveryScriptTest, AScriptPastItsDeadlineIsKilled) {
  absl::Time start = absl::Now();
  auto hosts = RunDiscoveryScript("echo a; sleep 30", 1, absl::Seconds(1));
  ASSERT_FALSE(hosts.ok());
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(hosts.status().message().find("did not finish within 1s"),
            absl::string_view::npos)
      << hosts.status().message();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10)));
}

TEST(RunDiscoveryScriptTest, ABackgroundLeftoverDoesNotHoldTheRun) {
  // The script exits at once but leaves a child holding its stdout.
  absl::Time start = absl::Now();
  auto hosts = RunDiscoveryScript("echo a; sleep 30 &", 1, absl::Seconds(20));
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->size(), 1u);
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(10)));
}

}  // namespace
}  // namespace kolo::launcher
