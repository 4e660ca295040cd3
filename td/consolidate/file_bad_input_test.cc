// load_consolidated() over hostile metadata (td/consolidate/metadata.h): deep nesting, names
// that collide, empty keys, numbers out of range and leaves that do not fit their batch size are
// a MemmapError naming the file; cases that used to crash run in a child process.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/consolidate/consolidate.h"
#include "td/consolidate/file.h"
#include "td/core/testing.h"

namespace td {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." + std::to_string(::getpid());
}

// A consolidated file of `data_bytes` zero bytes and the metadata `meta`.
std::string WriteFile(const std::string& name, int64_t data_bytes, const std::string& meta) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << std::string(static_cast<size_t>(data_bytes), '\0') << meta;
  const int64_t n = static_cast<int64_t>(meta.size());
  out.write(reinterpret_cast<const char*>(&n), 8);
  return path;
}

std::string Level(const std::string& batch, const std::string& leaves = "",
                  const std::string& non_tensors = "", const std::string& subs = "") {
  return "{\"cls\": \"TensorDict\", \"non_tensors\": {" + non_tensors + "}, \"leaves\": {" +
         leaves + "}, \"cls_metadata\": {\"device\": \"cpu\", \"batch_size\": [" + batch +
         "], \"is_locked\": false}" + (subs.empty() ? "" : ", " + subs) + "}";
}

// `levels` sub-TensorDicts "d" inside one another below the root (Level("", "", "", "\"d\": "
// + inner) each, written front to back).
std::string Nested(int levels) {
  const std::string level = Level("", "", "", "\"d\": ");
  const std::string open = level.substr(0, level.size() - 1);  // without the closing brace
  std::string m;
  m.reserve(static_cast<size_t>(levels) * (open.size() + 1) + level.size());
  for (int i = 0; i < levels; ++i) m += open;
  m += Level("");
  m.append(static_cast<size_t>(levels), '}');
  return m;
}

const char* kFloatLeaf = "[\"torch.float32\", [], 0, 4, 0]";

TEST(ConsolidatedFileBadInput, HundredThousandLevelsIsAnErrorNotACrash) {
  const std::string path = WriteFile("deep.td", 0, Nested(100000));
  test::ChildOutcome o = test::ErrorInChild<MemmapError>([&] { load_consolidated(path); });
  ASSERT_EQ(o.kind, "error") << o;
  EXPECT_NE(o.message.find(path), std::string::npos) << o;
  EXPECT_NE(o.message.find("nested deeper than 512"), std::string::npos) << o;
  EXPECT_NE(o.message.find("td::kMaxNestingDepth"), std::string::npos) << o;
}

TEST(ConsolidatedFileBadInput, LevelsNestAtMostTheLimit) {
  TensorDict t = load_consolidated(WriteFile("limit.td", 0, Nested(kMaxNestingDepth)));
  int depth = 0;
  while (t.contains("d")) {
    t = t.get_tensordict("d");
    ++depth;
  }
  EXPECT_EQ(depth, kMaxNestingDepth);
  const std::string path = WriteFile("limit1.td", 0, Nested(kMaxNestingDepth + 1));
  test::ChildOutcome o = test::ErrorInChild<MemmapError>([&] { load_consolidated(path); });
  ASSERT_EQ(o.kind, "error") << o;
  EXPECT_NE(o.message.find(path), std::string::npos) << o;
  EXPECT_NE(o.message.find("nested 129 levels deep"), std::string::npos) << o;
}

TEST(ConsolidatedFileBadInput, DeepNonTensorValueIsRefused) {
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  const std::string path = WriteFile("deepnt.td", 0, Level("", "", "\"v\": [" + deep + ", []]"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {path, "nested deeper than 512"});
}

TEST(ConsolidatedFileBadInput, LeafAndSubTensorDictWithOneName) {
  const std::string path =
      WriteFile("leafsub.td", 4, Level("", std::string("\"x\": ") + kFloatLeaf, "",
                                       "\"x\": " + Level("")));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError,
                      {path, "'x'", "both a leaf and a sub-TensorDict"});
}

TEST(ConsolidatedFileBadInput, NonTensorAndLeafWithOneName) {
  const std::string path = WriteFile(
      "ntleaf.td", 4, Level("", std::string("\"x\": ") + kFloatLeaf, "\"x\": [\"text\", []]"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError,
                      {path, "'x'", "both a non-tensor entry and a leaf"});
  const std::string sub = WriteFile(
      "ntsub.td", 0, Level("", "", "\"n\": [1, []]", "\"n\": " + Level("")));
  TD_EXPECT_THROW_MSG(load_consolidated(sub), MemmapError,
                      {sub, "'n'", "both a non-tensor entry and a sub-TensorDict"});
}

TEST(ConsolidatedFileBadInput, EmptyKeys) {
  const std::string leaf =
      WriteFile("emptyleaf.td", 4, Level("", std::string("\"\": ") + kFloatLeaf));
  TD_EXPECT_THROW_MSG(load_consolidated(leaf), MemmapError, {leaf, "a leaf with an empty key"});
  const std::string nt = WriteFile("emptynt.td", 0, Level("", "", "\"\": [1, []]"));
  TD_EXPECT_THROW_MSG(load_consolidated(nt), MemmapError,
                      {nt, "a non-tensor entry with an empty key"});
  const std::string sub = WriteFile("emptysub.td", 0, Level("", "", "", "\"\": " + Level("")));
  TD_EXPECT_THROW_MSG(load_consolidated(sub), MemmapError,
                      {sub, "a sub-TensorDict with an empty key"});
}

TEST(ConsolidatedFileBadInput, KeyTwiceInOneObject) {
  const std::string path = WriteFile(
      "dup.td", 8,
      Level("", std::string("\"a\": ") + kFloatLeaf + ", \"a\": [\"torch.int32\", [], 4, 8, 0]"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {path, "'a' twice"});
}

TEST(ConsolidatedFileBadInput, LeafThatDoesNotFitTheBatchSize) {
  const std::string path =
      WriteFile("batch.td", 12, Level("4", "\"a\": [\"torch.float32\", [3], 0, 12, 0]"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError,
                      {path, "leaf 'a'", "torch.Size([3])", "torch.Size([4])"});
  const std::string sub =
      WriteFile("batchsub.td", 0, Level("4", "", "", "\"n\": " + Level("5")));
  TD_EXPECT_THROW_MSG(load_consolidated(sub), MemmapError,
                      {sub, "sub-TensorDict 'n'", "torch.Size([5])", "torch.Size([4])"});
}

TEST(ConsolidatedFileBadInput, DimOutOfInt64Range) {
  const std::string path = WriteFile(
      "huge.td", 4, Level("", "\"a\": [\"torch.float32\", [18446744073709551615], 0, 4, 0]"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError,
                      {path, "leaf 'a'", "not an integer in [0, 2^63-1]", "18446744073709551615"});
  const std::string batch = WriteFile("hugebatch.td", 0, Level("9223372036854775808"));
  TD_EXPECT_THROW_MSG(load_consolidated(batch), MemmapError,
                      {batch, "batch_size", "not an integer in [0, 2^63-1]", "9223372036854775808"});
}

// Level(batch) with cls_metadata's "names" set to `names` (JSON text).
std::string Named(const std::string& batch, const std::string& names,
                  const std::string& subs = "") {
  std::string level = Level(batch, "", "", subs);
  const std::string at = "\"is_locked\"";
  return level.insert(level.find(at), "\"names\": " + names + ", ");
}

// Bad dim names are a MemmapError naming the file and level.
TEST(ConsolidatedFileBadInput, BadDimNames) {
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {Named("2, 3", "[\"a\"]"), {"(root)", "[\"a\"]", "not a list of 2 names"}},
      {Named("2", "\"a\""), {"(root)", "not a list of 1 names"}},
      {Named("2", "[1]"), {"(root)", "dim name 0 is 1", "not a string or null"}},
      {Named("2, 3", "[\"a\", \"a\"]"), {"(root)", "'a' repeats", "unique"}},
      {Named("2", "[\"...\"]"), {"(root)", "\"...\" is not a dim name"}},
      // A nested level takes its parent's names on its leading dims: "b" would repeat.
      {Named("2", "[\"b\"]", "\"n\": " + Named("2, 3", "[null, \"b\"]")),
       {"level 'n'", "'b' repeats", "['b', 'b']"}},
  };
  int i = 0;
  for (const auto& [meta, want] : cases) {
    const std::string path = WriteFile("names" + std::to_string(i++) + ".td", 0, meta);
    std::vector<std::string> parts = want;
    parts.push_back(path);
    TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {parts});
  }
  // Null names and no names load unnamed.
  EXPECT_FALSE(load_consolidated(WriteFile("nonames.td", 0, Named("2", "[null]"))).has_names());
  EXPECT_FALSE(load_consolidated(WriteFile("nokey.td", 0, Level("2"))).has_names());
}

// A stack level (LazyStackedTensorDict, NonTensorStack) with "cls_metadata" `meta` and the
// members `members` (sub-level or non-tensor text keyed "0", "1", ...).
std::string Stack(const std::string& cls, const std::string& meta, const std::string& members,
                  const std::string& non_tensors = "") {
  return "{\"cls\": \"" + cls + "\", \"non_tensors\": {" + non_tensors +
         "}, \"leaves\": {}, \"cls_metadata\": {" + meta + "}" +
         (members.empty() ? "" : ", " + members) + "}";
}

TEST(ConsolidatedFileBadInput, BadLazyStacks) {
  const std::string ls = "LazyStackedTensorDict";
  const std::string m = "\"stack_dim\": 0, \"stack_dim_name\": null, \"is_locked\": false";
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {Stack(ls, m, ""), {"lazy stack (root) has no members"}},
      {Stack(ls, m, "\"1\": " + Level("2")), {"member key '1'", "'0' to '0'"}},
      {Stack(ls, m, "\"00\": " + Level("2")), {"member key '00'"}},
      {Stack(ls, m, "\"0\": " + Level("2") + ", \"1\": " + Level("3")),
       {"member 1 has batch size torch.Size([3])", "torch.Size([2])"}},
      {Stack(ls, "\"stack_dim\": 2", "\"0\": " + Level("2")),
       {"stack_dim 2 is out of range", "1 batch dims"}},
      {Stack(ls, "\"is_locked\": false", "\"0\": " + Level("2")), {"has no stack_dim"}},
      {Stack(ls, m, "\"0\": " + Level("2"), "\"x\": [1, [2]]"),
       {"its non_tensors must be an empty object"}},
      {Stack(ls, "\"stack_dim\": 0, \"stack_dim_name\": 7", "\"0\": " + Level("2")),
       {"stack_dim_name 7"}},
      {Stack(ls, "\"stack_dim\": 0, \"stack_dim_name\": \"t\"",
             "\"0\": " + Named("2", "[\"t\"]")),
       {"'t' repeats"}},
      {Level("3", "", "", "\"ls\": " + Stack(ls, m, "\"0\": " + Level("2"))),
       {"lazy stack 'ls'", "torch.Size([1, 2])", "torch.Size([3])"}},
  };
  int i = 0;
  for (const auto& [meta, want] : cases) {
    const std::string path = WriteFile("ls" + std::to_string(i++) + ".td", 0, meta);
    std::vector<std::string> parts = want;
    parts.push_back(path);
    TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {parts});
  }
}

TEST(ConsolidatedFileBadInput, BadNonTensorStacks) {
  const std::string nts = "NonTensorStack";
  const std::string m = "\"stack_dim\": 0, \"stack_dim_name\": null, \"is_locked\": false";
  auto in_level = [](const std::string& batch, const std::string& stack) {
    return Level(batch, "", "", "\"s\": " + stack);
  };
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {Stack(nts, m, "", "\"0\": [1, []]"), {"the root is a NonTensorStack"}},
      {in_level("1", Stack(nts, m, "", "\"0\": [1, []], \"0x\": [2, []]")),
       {"NonTensorStack 's'", "member key '0x'"}},
      {in_level("2", Stack(nts, m, "", "\"0\": [1, []], \"1\": [2, [3]]")),
       {"member 1 has batch size torch.Size([3])"}},
      {in_level("1", Stack(nts, m, "\"0\": " + Level(""))),
       {"member 0 is a \"TensorDict\"", "NonTensorData or NonTensorStacks"}},
      {in_level("2", Stack(nts, m, "", "\"0\": [1, []]")),
       {"NonTensorStack 's'", "torch.Size([1])", "torch.Size([2])"}},
      // A few bytes asking for 2^40 values.
      {in_level("2", Stack(nts, m, "", "\"0\": [1, [1099511627776]], \"1\": [1, [1099511627776]]")),
       {"NonTensorStack 's'", "4194304 values"}},
  };
  int i = 0;
  for (const auto& [meta, want] : cases) {
    const std::string path = WriteFile("nts" + std::to_string(i++) + ".td", 0, meta);
    std::vector<std::string> parts = want;
    parts.push_back(path);
    TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {parts});
  }
}

// Lazy stacks and NonTensorStacks as upstream 0.14 writes them (consolidated_fixture.py has the
// full example, file_compat_test.cc reads it): a stack along dim 1 of members with a
// NonTensorData each, and a NonTensorStack of NonTensorData members of batch size [2].
TEST(ConsolidatedFileBadInput, StacksLoad) {
  const std::string member = R"({"cls": "TensorDict", "non_tensors": {"s": ["M", [2], null]},
      "leaves": {"a": ["torch.float32", [2], OFF, END, 0]}, "cls_metadata": {"device": null,
      "names": ["t"], "batch_size": [2], "is_locked": false}})";
  auto with = [&](const char* v, const char* off, const char* end) {
    std::string s = member;
    s.replace(s.find("M"), 1, v);
    s.replace(s.find("OFF"), 3, off);
    s.replace(s.find("END"), 3, end);
    return s;
  };
  const std::string meta = Named(
      "2", "[\"t\"]",
      "\"ls\": " + Stack("LazyStackedTensorDict",
                         "\"stack_dim\": 1, \"stack_dim_name\": \"env\", \"is_locked\": true",
                         "\"0\": " + with("x", "0", "8") + ", \"1\": " + with("y", "8", "16")) +
          ", \"nts\": " + Stack("NonTensorStack", "\"stack_dim\": 1, \"is_locked\": false", "",
                                "\"0\": [\"p\", [2], null], \"1\": [{\"q\": 1}, [2], null]"));
  TensorDict t = load_consolidated(WriteFile("stacks.td", 16, meta));
  EXPECT_EQ(t.names(), DimNames({"t"}));
  TensorDict ls = t.get_tensordict("ls");
  EXPECT_TRUE(LazyStackedTensorDict::from(ls).has_value());  // under a CPU parent too
  EXPECT_EQ(ls.batch_size(), at::IntArrayRef({2, 2}));
  EXPECT_EQ(ls.names(), DimNames({"t", "env"}));
  EXPECT_TRUE(ls.is_locked());
  EXPECT_EQ(ls.get("a").sizes(), at::IntArrayRef({2, 2}));
  // The members' different values: a NonTensorStack over the stack's batch size [2, 2].
  EXPECT_EQ(ls.get_value("s").non_tensor_data(),
            NonTensorData::stack(nlohmann::json::parse(R"([["x", "y"], ["x", "y"]])")));
  EXPECT_FALSE(is_consolidated(t));  // a lazy stack's leaves are stacked when read
  EXPECT_EQ(t.get_non_tensor("nts"),
            nlohmann::json::parse(R"([["p", {"q": 1}], ["p", {"q": 1}]])"));
}

// A consolidated file truncated (by another process) after loading: clone() of the TensorDict,
// which copies the mapped buffer at once (NOTE [ One buffer, one kernel ] in
// td/core/leafwise.cc), is a MemmapError naming the file, not SIGBUS (NOTE [ SIGBUS guard ] in
// td/core/mapped_copy.h).
TEST(ConsolidatedFileBadInput, CloneOfATruncatedFileIsAnErrorNotSigbus) {
  const std::string path = TempPath("truncated.td");
  save_consolidated(TensorDict({{"x", at::ones({256, 256})}}, {256}), path);
  test::ChildOutcome o = test::ErrorInChild<MemmapError>([&] {
    TensorDict loaded = load_consolidated(path);
    ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
    (void)loaded.clone();
  });
  ASSERT_EQ(o.kind, "error") << o;
  EXPECT_NE(o.message.find(path), std::string::npos) << o;
  EXPECT_NE(o.message.find("SIGBUS"), std::string::npos) << o;
}

}  // namespace
}  // namespace td
