#include "td/core/nested_key.h"

#include <gtest/gtest.h>

#include <sstream>
#include <unordered_set>

#include "absl/container/flat_hash_set.h"
#include "td/core/errors.h"

namespace td {
namespace {

TEST(NestedKeyTest, BuildsFromStringsAndBraces) {
  NestedKey a = "a";
  EXPECT_EQ(a.size(), 1u);
  EXPECT_FALSE(a.is_nested());
  EXPECT_EQ(a.front(), "a");
  NestedKey ab = {"a", "b"};
  EXPECT_TRUE(ab.is_nested());
  EXPECT_EQ(ab.back(), "b");
  EXPECT_EQ(NestedKey(std::string("x")), NestedKey("x"));
  EXPECT_EQ(NestedKey(std::string_view("x")), NestedKey("x"));
  EXPECT_EQ(NestedKey(std::vector<std::string>{"a", "b"}), ab);
}

TEST(NestedKeyTest, BracedLiteralsBuildTheSameKeyAsBracedKeys) {
  // {"a", "b"} takes the initializer_list<const char*> constructor; mixing in a string or a
  // nested brace takes the NestedKey one: both give the same components.
  NestedKey literals = {"a", "b", "c"};
  NestedKey mixed = {std::string("a"), "b", NestedKey("c")};
  EXPECT_EQ(literals, mixed);
  EXPECT_EQ(literals.size(), 3u);
  NestedKey one = {"only"};
  EXPECT_FALSE(one.is_nested());
  EXPECT_EQ(one, NestedKey("only"));
  EXPECT_THROW(NestedKey(std::initializer_list<const char*>{}), c10::ValueError);
}

TEST(NestedKeyTest, NestedBracesFlattenLikeTuples) {
  NestedKey k = {"nested", {"supernested", {"key"}}};
  EXPECT_EQ(k, NestedKey({"nested", "supernested", "key"}));
  NestedKey k2 = {{"nested"}, "supernested", {{"key"}}};
  EXPECT_EQ(k, k2);
}

TEST(NestedKeyTest, EmptyKeyIsAnError) {
  try {
    NestedKey(std::vector<std::string>{});
    FAIL() << "expected an error";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("at least one component"), std::string::npos);
  }
}

TEST(NestedKeyTest, PrintsLikePython) {
  std::ostringstream os;
  os << NestedKey({"a", "b"});
  EXPECT_EQ(os.str(), "('a', 'b')");
  EXPECT_EQ(NestedKey("a").repr(), "'a'");
  EXPECT_EQ(NestedKey("it's").repr(), "\"it's\"");
  EXPECT_EQ(KeysRepr(std::vector<NestedKey>{"a", {"b", "c"}}), "['a', ('b', 'c')]");
}

TEST(NestedKeyTest, HashEqualityOrdering) {
  absl::flat_hash_set<NestedKey> s = {"a", {"a", "b"}};
  EXPECT_TRUE(s.contains(NestedKey({"a", "b"})));
  EXPECT_FALSE(s.contains(NestedKey({"b", "a"})));
  std::unordered_set<NestedKey> s2 = {"a", {"a", "b"}};
  EXPECT_EQ(s2.count(NestedKey("a")), 1u);
  EXPECT_LT(NestedKey("a"), NestedKey({"a", "b"}));
  EXPECT_NE(NestedKey("a"), NestedKey({"a", "b"}));
}

TEST(NestedKeyTest, JoinParentConcatStartsWith) {
  NestedKey k = {"a", "b", "c"};
  EXPECT_EQ(k.join("."), "a.b.c");
  EXPECT_EQ(k.parent(), NestedKey({"a", "b"}));
  EXPECT_EQ(NestedKey("a") + NestedKey({"b", "c"}), k);
  EXPECT_TRUE(k.starts_with({"a", "b"}));
  EXPECT_FALSE(k.starts_with("b"));
  EXPECT_THROW(NestedKey("a").parent(), c10::Error);
}

}  // namespace
}  // namespace td
