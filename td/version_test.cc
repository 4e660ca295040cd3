// td::version() spells the TD_VERSION_* macros, and TD_VERSION_AT_LEAST compares against them.
#include "td/version.h"

#include <gtest/gtest.h>

#include <string>

namespace td {
namespace {

TEST(Version, StringMatchesTheMacros) {
  const std::string want = std::to_string(TD_VERSION_MAJOR) + "." +
                           std::to_string(TD_VERSION_MINOR) + "." +
                           std::to_string(TD_VERSION_PATCH);
  EXPECT_EQ(std::string(version()), want);
  static_assert(version()[0] != '\0', "usable in constant expressions");
  EXPECT_EQ(std::string(upstream_version()), "0.14");
}

TEST(Version, AtLeast) {
  EXPECT_TRUE(TD_VERSION_AT_LEAST(TD_VERSION_MAJOR, TD_VERSION_MINOR, TD_VERSION_PATCH));
  EXPECT_TRUE(TD_VERSION_AT_LEAST(0, 0, 0));
  EXPECT_FALSE(TD_VERSION_AT_LEAST(TD_VERSION_MAJOR, TD_VERSION_MINOR, TD_VERSION_PATCH + 1));
  EXPECT_FALSE(TD_VERSION_AT_LEAST(TD_VERSION_MAJOR + 1, 0, 0));
  EXPECT_FALSE(TD_VERSION_AT_LEAST(TD_VERSION_MAJOR, TD_VERSION_MINOR + 1, 0));
}

}  // namespace
}  // namespace td
