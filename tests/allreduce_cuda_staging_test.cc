// allreduce/cuda/staging.h on a fake device (host memory that records every
// copy): where packed tensors go, and that a fused group crosses between
// device and host in ONE copy each way.
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "allreduce/cuda/cuda_info.h"
#include "allreduce/cuda/device_ops.h"
#include "allreduce/cuda/staging.h"
#include "gtest/gtest.h"
#include "testing/fake_device.h"

namespace kolo::cuda {
namespace {

using testing::FakeDeviceOps;

TEST(StagingPack, AlignsEveryMemberAndKeepsOrder) {
  size_t total = 0;
  std::vector<size_t> at = Pack({4, 0, 300, 256, 1}, &total);
  EXPECT_EQ(at, (std::vector<size_t>{0, 256, 256, 768, 1024}));
  EXPECT_EQ(total, 1025u);
  EXPECT_TRUE(Pack({}, &total).empty());
  EXPECT_EQ(total, 0u);
}

std::vector<char> Bytes(size_t n, char first) {
  std::vector<char> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(Stager, OneTensorCrossesDirectly) {
  FakeDeviceOps dev;
  {
    Stager s(&dev);
    std::vector<char> t = Bytes(100, 1);
    auto host = s.In({t.data()}, {t.size()});
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_EQ(dev.copies.size(), 1u);
    EXPECT_EQ(dev.copies[0].kind, CopyKind::kDeviceToHost);
    EXPECT_EQ(dev.copies[0].src, t.data());
    EXPECT_EQ(std::memcmp((*host)[0], t.data(), t.size()), 0);
  }
}

TEST(Stager, FusedGroupIsPackedOnTheDeviceThenCrossesOnce) {
  FakeDeviceOps dev;
  {
    Stager s(&dev);
    std::vector<char> a = Bytes(10, 1), b = Bytes(700, 20), c = Bytes(3, 90);
    auto host = s.In({a.data(), b.data(), c.data()}, {10, 700, 3});
    ASSERT_TRUE(host.ok()) << host.status();
    // Three device-to-device packs, then one device-to-host copy of it all.
    ASSERT_EQ(dev.copies.size(), 4u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(dev.copies[i].kind, CopyKind::kDeviceToDevice) << i;
    }
    EXPECT_EQ(dev.copies[3].kind, CopyKind::kDeviceToHost);
    EXPECT_EQ(dev.copies[3].bytes, 1024u + 3u);  // b ends at 956: c at 1024
    const char* base = static_cast<const char*>((*host)[0]);
    EXPECT_EQ(static_cast<const char*>((*host)[1]) - base, 256);
    EXPECT_EQ(static_cast<const char*>((*host)[2]) - base, 1024);
    EXPECT_EQ(std::memcmp((*host)[0], a.data(), a.size()), 0);
    EXPECT_EQ(std::memcmp((*host)[1], b.data(), b.size()), 0);
    EXPECT_EQ(std::memcmp((*host)[2], c.data(), c.size()), 0);
  }
}

TEST(Stager, OutputsCrossOnceThenUnpackOnTheDevice) {
  FakeDeviceOps dev;
  {
    Stager s(&dev);
    auto host = s.OutHost({8, 300, 1});
    ASSERT_TRUE(host.ok());
    std::memcpy((*host)[0], "abcdefgh", 8);
    std::memset((*host)[1], 'x', 300);
    std::memcpy((*host)[2], "z", 1);
    std::vector<char> o0(8), o1(300), o2(1);
    ASSERT_TRUE(s.Out({o0.data(), o1.data(), o2.data()}).ok());
    ASSERT_EQ(dev.copies.size(), 4u);
    EXPECT_EQ(dev.copies[0].kind, CopyKind::kHostToDevice);
    EXPECT_EQ(dev.copies[0].bytes, 768u + 1u);
    EXPECT_EQ(dev.Count(CopyKind::kDeviceToDevice), 3);
    EXPECT_EQ(std::string(o0.begin(), o0.end()), "abcdefgh");
    EXPECT_EQ(std::string(o1.begin(), o1.end()), std::string(300, 'x'));
    EXPECT_EQ(o2[0], 'z');
  }
}

TEST(Stager, ScratchIsReusedAfterReset) {
  FakeDeviceOps dev;
  {
    Stager s(&dev);
    auto a = s.Scratch(100);
    auto b = s.Scratch(100);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NE(*a, *b);
    s.Reset();
    auto c = s.Scratch(100);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(*a, *c);
    auto big = s.Scratch(size_t{3} << 20);  // larger than a block: its own
    ASSERT_TRUE(big.ok());
  }
}

// Without a usable device (no GPU here, or a build without CUDA), opening
// one fails with a message that says what to do.
TEST(CudaInfo, NoDeviceIsExplained) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is usable here";
  const std::string why = Unusable(0);
  EXPECT_NE(why.find("kolo::kCpu"), std::string::npos) << why;
  auto dev = OpenDevice(0);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), absl::StatusCode::kFailedPrecondition);
  if (!Built()) {
    EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
    EXPECT_EQ(NcclVersion(), 0);
  } else {
    EXPECT_GT(NcclVersion(), 20000);
  }
}

}  // namespace
}  // namespace kolo::cuda
