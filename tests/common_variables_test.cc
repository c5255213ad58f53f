#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/knob_defaults.h"
#include "common/knobs.h"
#include "common/variables.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

std::string ReadPage() {
  std::ifstream in(KOLO_SOURCE_DIR "/docs/configuration.md");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// docs/configuration.md's tables of variables are the table's: a change to
// one without the other fails here, printing the table the page needs.
TEST(Variables, ConfigurationPageHasEveryTableAsGenerated) {
  const std::string page = ReadPage();
  ASSERT_FALSE(page.empty()) << "cannot read docs/configuration.md";
  for (const std::string& section : VariableSections()) {
    const std::string heading = absl::StrCat("\n## ", section, "\n");
    const size_t at = page.find(heading);
    ASSERT_NE(at, std::string::npos) << "no section '" << section << "'";
    const std::string table = VariablesMarkdown(section);
    EXPECT_EQ(page.find(table, at), page.find('|', at))
        << "docs/configuration.md's table of '" << section
        << "' differs from common/variables.cc's; it should read:\n"
        << table;
  }
}

TEST(Variables, NamesAreUniqueAndRowsComplete) {
  std::set<std::string> names;
  for (const Variable& v : Variables()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
    EXPECT_NE(std::string(v.read_by), "") << v.name;
    if (v.internal) {
      EXPECT_EQ(v.section, nullptr) << v.name;
    } else {
      EXPECT_NE(v.section, nullptr) << v.name;
      EXPECT_NE(v.meaning, nullptr) << v.name;
    }
  }
}

TEST(Variables, EveryKnobHasItsRow) {
  for (const Knob& knob : kKnobTable) {
    int rows = 0;
    for (const Variable& v : Variables()) {
      if (v.knob != &knob) continue;
      ++rows;
      EXPECT_EQ(std::string(v.name), knob.variable);
      EXPECT_EQ(v.alias, nullptr) << v.name << ": the knob table gives it";
      EXPECT_EQ(v.default_text, nullptr)
          << v.name << ": the knob table gives it";
    }
    EXPECT_EQ(rows, 1) << knob.variable;
  }
}

// The rows of worker variables outside the knob table document the defaults
// the structs start from (common/knobs.h, knob_defaults).
TEST(Variables, RowsDocumentTheSharedDefaults) {
  auto text = [](absl::string_view name) -> std::string {
    for (const Variable& v : Variables()) {
      if (name == v.name) return v.default_text ? v.default_text : "";
    }
    return "";
  };
  EXPECT_EQ(text("KOLO_LEASE_SECONDS"),
            absl::StrCat(absl::ToInt64Seconds(knob_defaults::kLease)));
  EXPECT_EQ(text("KOLO_FUSION_THRESHOLD"),
            absl::StrCat(knob_defaults::kFusionThreshold, " (",
                         knob_defaults::kFusionThreshold >> 20, " MiB)"));
  EXPECT_EQ(text("KOLO_FUSION_DIRECT_BYTES"),
            absl::StrCat(knob_defaults::kFusionDirectBytes, " (",
                         knob_defaults::kFusionDirectBytes >> 20, " MiB)"));
  EXPECT_EQ(text("KOLO_CACHE_CAPACITY"),
            absl::StrCat(knob_defaults::kCacheCapacity));
}

}  // namespace
}  // namespace kolo
