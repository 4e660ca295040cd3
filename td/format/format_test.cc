// The registry of format drivers (NOTE [ Format drivers ] in td/format/format.h): lookup by id,
// by suffix and by detection, with test drivers of their own ids (no format library is linked).
#include "td/format/format.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "td/core/testing.h"

namespace td {
namespace {

format::Driver PathDriver(std::string id, std::vector<std::string> suffixes,
                          std::function<bool(const std::string&)> detect) {
  format::Driver d;
  d.id = std::move(id);
  d.summary = "a test format";
  d.suffixes = std::move(suffixes);
  d.detect = std::move(detect);
  d.save = [](const TensorDict&, const std::string&) {};
  d.load = [](const std::string&) { return TensorDict({}, {}); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(PathDriver("test_a", {".ta"}, [](const std::string& p) {
  return p.rfind("/a/", 0) == 0 || p.rfind("/ab/", 0) == 0;
}));
TD_REGISTER_FORMAT_DRIVER(PathDriver("test_b", {".tb", ".tbb"}, [](const std::string& p) {
  return p.rfind("/ab/", 0) == 0;
}));
TD_REGISTER_FORMAT_DRIVER([] {
  format::Driver d;
  d.id = "test_bytes";
  d.summary = "bytes only";
  d.encode = [](const TensorDict&) { return std::string("x"); };
  d.decode = [](const std::string&) { return TensorDict({}, {}); };
  return d;
}());

TEST(FormatRegistry, FindsRegisteredDriversById) {
  const std::vector<std::string> ids = format::RegisteredDrivers();
  EXPECT_EQ(ids, (std::vector<std::string>{"test_a", "test_b", "test_bytes"}));
  EXPECT_EQ(format::GetDriver("test_b").suffixes, (std::vector<std::string>{".tb", ".tbb"}));
  EXPECT_TRUE(format::GetDriver("test_a").is_path_format());
  EXPECT_FALSE(format::GetDriver("test_bytes").is_path_format());
}

TEST(FormatRegistry, UnknownIdNamesTheRegisteredOnes) {
  TD_EXPECT_THROW_MSG(format::GetDriver("zarr"), KeyError,
                      {"'zarr'", "[test_a, test_b, test_bytes]", "linking its library"});
}

TEST(FormatRegistry, DuplicateIdKeepsTheFirst) {
  EXPECT_FALSE(format::RegisterDriver(PathDriver("test_a", {".other"}, nullptr)));
  EXPECT_EQ(format::GetDriver("test_a").suffixes, (std::vector<std::string>{".ta"}));
}

TEST(FormatRegistry, SuffixSelectsAPathDriver) {
  EXPECT_EQ(format::DriverForSuffix("/x/y.tbb")->id, "test_b");
  EXPECT_EQ(format::DriverForSuffix("y.ta")->id, "test_a");
  EXPECT_EQ(format::DriverForSuffix("y.tc"), nullptr);
  EXPECT_EQ(format::DriverForSuffix(""), nullptr);
}

TEST(FormatRegistry, DetectionFindsOneDriverOrNamesBoth) {
  EXPECT_EQ(format::DetectDriver("/a/file")->id, "test_a");
  EXPECT_EQ(format::DetectDriver("/c/file"), nullptr);
  TD_EXPECT_THROW_MSG(format::DetectDriver("/ab/file"), ValueError,
                      {"/ab/file", "'test_a'", "'test_b'", "LoadOptions::format"});
}

TEST(FormatRegistry, ProbesNeverThrow) {
  const std::string dir = ::testing::TempDir() + "/probes";
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir + "/d").c_str()), 0);
  ASSERT_EQ(std::system(("printf 0123456789 > " + dir + "/f && touch " + dir + "/d/meta.json")
                            .c_str()),
            0);
  EXPECT_TRUE(format::DirectoryHolds(dir + "/d", "meta.json"));
  EXPECT_FALSE(format::DirectoryHolds(dir + "/d", "other.json"));
  EXPECT_FALSE(format::DirectoryHolds(dir + "/f", "meta.json"));
  EXPECT_EQ(format::FileBytes(dir + "/f", 2, 3), "234");
  EXPECT_EQ(format::FileBytes(dir + "/f", 3, 3, /*from_end=*/true), "789");
  EXPECT_EQ(format::FileBytes(dir + "/f", 8, 3), std::nullopt);
  EXPECT_EQ(format::FileBytes(dir + "/f", 11, 1, /*from_end=*/true), std::nullopt);
  EXPECT_EQ(format::FileBytes(dir + "/f", -1, 1), std::nullopt);
  EXPECT_EQ(format::FileBytes(dir + "/d", 0, 1), std::nullopt);
  EXPECT_EQ(format::FileBytes(dir + "/missing", 0, 1), std::nullopt);
}

}  // namespace
}  // namespace td
