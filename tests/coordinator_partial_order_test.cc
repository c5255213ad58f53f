// PartialOrder: the negotiator's partials in announcement order.
#include <string>
#include <vector>

#include "coordinator/partial_order.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Live(const PartialOrder& o) {
  std::vector<std::string> out;
  o.ForEach([&](const PartialKey& k) {
    out.push_back(k.bit >= 0 ? "bit" + std::to_string(k.bit) : k.name);
  });
  return out;
}

TEST(PartialOrder, OldestFirstAndErasesAnywhere) {
  PartialOrder o;
  EXPECT_TRUE(o.empty());
  o.Append(3, PartialKey{-1, "a"});
  o.Append(5, PartialKey{7, ""});
  o.Append(9, PartialKey{-1, "c"});
  EXPECT_EQ(o.size(), 3u);
  EXPECT_EQ(o.oldest().name, "a");
  EXPECT_THAT(Live(o), ElementsAre("a", "bit7", "c"));
  o.Erase(5);  // from the middle
  EXPECT_THAT(Live(o), ElementsAre("a", "c"));
  EXPECT_EQ(o.Find(5), nullptr);
  o.Erase(5);  // twice: nothing
  o.Erase(4);  // never there: nothing
  EXPECT_EQ(o.size(), 2u);
  o.Erase(3);  // the oldest: the next one is the oldest
  EXPECT_EQ(o.oldest().name, "c");
  o.Erase(9);
  EXPECT_TRUE(o.empty());
  EXPECT_THAT(Live(o), IsEmpty());
}

TEST(PartialOrder, FindChangesTheKeyInPlace) {
  PartialOrder o;
  o.Append(1, PartialKey{4, ""});
  o.Append(2, PartialKey{5, ""});
  ASSERT_NE(o.Find(1), nullptr);
  *o.Find(1) = PartialKey{-1, "by name now"};
  EXPECT_THAT(Live(o), ElementsAre("by name now", "bit5"));
}

// A partial that stays (a rank never announces it) while thousands pass
// behind it: they all leave, order is kept, and lookups still work.
TEST(PartialOrder, ManyPassBehindAStuckOne) {
  PartialOrder o;
  o.Append(0, PartialKey{-1, "stuck"});
  uint64_t order = 1;
  for (int step = 0; step < 100; ++step) {
    const uint64_t first = order;
    for (int i = 0; i < 161; ++i) o.Append(order++, PartialKey{i, ""});
    // Erased in reverse, as a backward pass completes them.
    for (uint64_t k = order; k-- > first;) o.Erase(k);
    EXPECT_EQ(o.size(), 1u);
  }
  o.Append(order, PartialKey{-1, "late"});
  EXPECT_THAT(Live(o), ElementsAre("stuck", "late"));
  ASSERT_NE(o.Find(order), nullptr);
  EXPECT_EQ(o.Find(order)->name, "late");
  o.Erase(0);
  EXPECT_EQ(o.oldest().name, "late");
}

}  // namespace
}  // namespace kolo::coordinator
