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
