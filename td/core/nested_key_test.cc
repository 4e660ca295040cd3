#include "td/core/nested_key.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>
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

// KeyRef (NOTE [ Key parameters ]) views every form of key as the same parts, and owns nothing.
std::vector<std::string> PartsOf(KeyRef k) {
  return std::vector<std::string>(k.begin(), k.end());
}
// Keys longer than KeyRef's inline room (four parts) from every constructor, and their copies.
TEST(KeyRefTest, KeysPastTheInlineRoomKeepEveryPart) {
  using V = std::vector<std::string>;
  const V six{"a", "b", "c", "d", "e", "f"};
  EXPECT_EQ(PartsOf({"a", "b", "c", "d", "e", "f"}), six);
  EXPECT_EQ(PartsOf(NestedKey({"a", "b", "c", "d", "e", "f"})), six);
  EXPECT_EQ(PartsOf({"a", {"b", "c", "d"}, "e", {"f"}}), six);  // spills while appending
  const KeyRef ref({"a", "b", "c", "d", "e", "f"});
  const KeyRef copy = ref;
  EXPECT_EQ(PartsOf(copy), six);
  EXPECT_EQ(copy.back(), "f");
  EXPECT_EQ(copy.key(), NestedKey({"a", "b", "c", "d", "e", "f"}));
}

TEST(KeyRefTest, ViewsEveryFormOfKeyAsItsParts) {
  using V = std::vector<std::string>;
  const std::string long_name(100, 'x');  // no small-string buffer would hold it
  EXPECT_EQ(PartsOf("a"), V{"a"});
  EXPECT_EQ(PartsOf(long_name), V{long_name});
  EXPECT_EQ(PartsOf(std::string_view("ab").substr(1)), V{"b"});
  EXPECT_EQ(PartsOf({"a", "b"}), (V{"a", "b"}));
  EXPECT_EQ(PartsOf({"a", {"b", "c"}}), (V{"a", "b", "c"}));
  const NestedKey prefix = {"p", "q"};
  EXPECT_EQ(PartsOf(prefix), (V{"p", "q"}));
  EXPECT_EQ(PartsOf({prefix, long_name}), (V{"p", "q", long_name}));
  EXPECT_EQ(PartsOf(std::string("temp")), V{"temp"});  // lives until the call returns
  // The view points at the caller's string, not at a copy.
  const KeyRef ref(long_name);
  EXPECT_EQ(ref.front().data(), long_name.data());
  EXPECT_EQ(KeyRef({"a", "b"}).key(), NestedKey({"a", "b"}));
  EXPECT_EQ(KeyRef({"a", {"it's"}}).repr(), "('a', \"it's\")");
  EXPECT_THROW(KeyRef(std::initializer_list<const char*>{}), c10::ValueError);
  EXPECT_THROW(KeyRef(std::initializer_list<KeyRef>{}), c10::ValueError);
}

}  // namespace
}  // namespace td
