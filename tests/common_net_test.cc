#include "common/net.h"
#include "gtest/gtest.h"

namespace kolo::net {
namespace {

TEST(Net, ParseHostPort) {
  auto hp = ParseHostPort("127.0.0.1:29500");
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 29500);
  EXPECT_EQ(hp->ToString(), "127.0.0.1:29500");
  hp = ParseHostPort("[::1]:80");
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->ToString(), "[::1]:80");
  hp = ParseHostPort("node-3:7");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "node-3");
  EXPECT_FALSE(ParseHostPort("nohost").ok());
  EXPECT_FALSE(ParseHostPort("h:0").ok());
  EXPECT_TRUE(ParseHostPort("h:0", /*allow_zero=*/true).ok());
  EXPECT_FALSE(ParseHostPort("h:65536").ok());
  EXPECT_FALSE(ParseHostPort("h:x").ok());
  EXPECT_FALSE(ParseHostPort(":80").ok());
  EXPECT_FALSE(ParseHostPort("[::1]80").ok());
}

TEST(Net, LocalAddressTowardLoopback) {
  auto a = LocalAddressToward("127.0.0.1", 9);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
  EXPECT_FALSE(LocalAddressToward("no-such-host.invalid", 9).ok());
}

TEST(Net, InterfaceAddress) {
  auto lo = InterfaceAddress("lo");
  ASSERT_TRUE(lo.ok()) << lo.status();
  EXPECT_EQ(*lo, "127.0.0.1");
  auto missing = InterfaceAddress("nosuchif0");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("lo=127.0.0.1"), std::string::npos);
}

TEST(Net, Misc) {
  EXPECT_TRUE(IsIpLiteral("10.1.2.3"));
  EXPECT_TRUE(IsIpLiteral("::1"));
  EXPECT_FALSE(IsIpLiteral("localhost"));
  EXPECT_FALSE(KernelHostName().empty());
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
}

}  // namespace
}  // namespace kolo::net
