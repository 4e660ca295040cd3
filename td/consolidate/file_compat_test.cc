// Consolidated files across languages, with Debian's python3-torch: Python (testdata/
// consolidated_fixture.py, which follows Python tensordict's writer and reader) writes a file that
// we load, and reads one we write; dim names both ways, lazy stacks and NonTensorStacks from
// Python.
//
// By hand against Python tensordict itself: TD_COMPAT_PY_FILE / TD_COMPAT_PY_STACKS_FILE name
// files written by it (in place of the fixture's) and TD_COMPAT_OUT_FILE gets a copy of the file
// we write, e.g. `tools/bazelw test //td/consolidate:file_compat_test
// --test_env=TD_COMPAT_PY_FILE=/path/names.td` (docs/consolidate.md, "Python tensordict").
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/consolidate/consolidate.h"
#include "td/consolidate/file.h"
#include "td/core/testing.h"

namespace td {
namespace {

const char kScript[] = "td/consolidate/testdata/consolidated_fixture.py";

// A python3 with torch, looked for once.
std::string Python() {
  static const std::string* found = [] {
    for (const char* p : {"/usr/bin/python3", "python3"}) {
      std::string cmd = std::string(p) + " -c 'import torch' 2>/dev/null";
      if (std::system(cmd.c_str()) == 0) return new std::string(p);
    }
    return new std::string();
  }();
  return *found;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." + std::to_string(::getpid());
}

// What consolidated_fixture.py's expected() holds.
TensorDict Expected() {
  TensorDict n({{"x", at::arange(30, at::kDouble).view({3, 2, 5}) / 4},
                {"h", at::full({3, 2}, 1.5, at::kHalf)}},
               {3, 2}, std::nullopt, {"env", "agent"});
  return TensorDict({{"a", at::arange(12, at::kFloat).view({3, 4})},
                     {"b", at::arange(3, at::kLong) * 7},
                     {"n", n},
                     {"flag", at::tensor({1, 0, 1}).to(at::kBool)},
                     {"odd", at::arange(3, at::kShort)},
                     {"note", "hello"},
                     {"labels", NonTensorData::stack({"cat", "dog", nullptr})}},
                    {3}, std::nullopt, {"env"});
}

// Files Python wrote, once for all tests (starting Python with torch is slow): expected()'s and
// stacks()'s, or the files TD_COMPAT_PY_FILE / TD_COMPAT_PY_STACKS_FILE name.
struct PythonFiles {
  std::string names, stacks;
  static const PythonFiles& Get() {
    static const PythonFiles* files = [] {
      auto* f = new PythonFiles();
      const char* names = std::getenv("TD_COMPAT_PY_FILE");
      const char* stacks = std::getenv("TD_COMPAT_PY_STACKS_FILE");
      if (names && stacks) {
        f->names = names;
        f->stacks = stacks;
        return f;
      }
      const std::string py = Python();
      if (py.empty()) return f;
      const std::string a = TempPath("py.td"), b = TempPath("stacks.td");
      if (std::system((py + " " + kScript + " write " + a + " " + b).c_str()) == 0) {
        f->names = names ? names : a;
        f->stacks = stacks ? stacks : b;
      }
      return f;
    }();
    return *files;
  }
};

void ExpectEqual(const TensorDict& got, const TensorDict& want) {
  for (const NestedKey& k : want.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    Value w = want.get_value(k);
    if (w.is_non_tensor()) {
      EXPECT_EQ(got.get_value(k).non_tensor_data(), w.non_tensor_data()) << k;
      continue;
    }
    at::Tensor g = got.get(k);
    EXPECT_EQ(g.scalar_type(), w.tensor().scalar_type()) << k;
    EXPECT_TRUE(at::equal(g, w.tensor())) << k;
  }
  EXPECT_EQ(got.keys(KeysOptions().include_nested(true)).size(),
            want.keys(KeysOptions().include_nested(true)).size());
}

TEST(ConsolidatedFileCompat, PythonWritesWeRead) {
  const std::string& path = PythonFiles::Get().names;
  ASSERT_FALSE(path.empty()) << "no python3 with torch (Debian: apt-get install python3-torch)";
  TensorDict loaded = load_consolidated(path);
  EXPECT_TRUE(is_consolidated(loaded));
  ExpectEqual(loaded, Expected());
  // Dim names, every level's (they used to be dropped).
  EXPECT_EQ(loaded.names(), DimNames({"env"}));
  EXPECT_EQ(loaded.get_tensordict("n").names(), DimNames({"env", "agent"}));
  // Python's read order: non-tensors, leaves, then sub-levels (NonTensorStacks are levels).
  std::vector<NestedKey> keys = loaded.keys();
  EXPECT_EQ(keys.front(), NestedKey("note"));
  EXPECT_EQ(keys.back(), NestedKey("labels"));
  EXPECT_EQ(keys[keys.size() - 2], NestedKey("n"));
}

// A lazy stack (ragged, stacked along dim 1 and named) and NonTensorStacks, as Python writes them
// (consolidated_fixture.py's stacks()).
TEST(ConsolidatedFileCompat, PythonStacksWeRead) {
  const std::string& path = PythonFiles::Get().stacks;
  ASSERT_FALSE(path.empty()) << "no python3 with torch (Debian: apt-get install python3-torch)";
  TensorDict loaded = load_consolidated(path);
  EXPECT_EQ(loaded.batch_size(), at::IntArrayRef({3}));
  EXPECT_EQ(loaded.names(), DimNames({"t"}));
  EXPECT_TRUE(at::equal(loaded.get("v"), at::arange(3, at::kLong)));
  std::optional<LazyStackedTensorDict> ls =
      LazyStackedTensorDict::from(loaded.get_tensordict("ls"));
  ASSERT_TRUE(ls.has_value());
  EXPECT_EQ(ls->stack_dim(), 1);
  EXPECT_EQ(ls->batch_size(), at::IntArrayRef({3, 2}));
  EXPECT_EQ(ls->names(), DimNames({"t", "env"}));
  ASSERT_EQ(ls->tensordicts().size(), 2u);
  for (int64_t i = 0; i < 2; ++i) {
    const TensorDict& m = ls->tensordicts()[static_cast<size_t>(i)];
    EXPECT_EQ(m.names(), DimNames({"t"}));
    EXPECT_TRUE(at::equal(m.get("a"), at::arange(3, at::kFloat) + 10 * i));
    EXPECT_TRUE(at::equal(m.get("ragged"), at::ones({3, 2 + 2 * i}, at::kInt) * i));
    EXPECT_EQ(m.get_non_tensor("s"), nlohmann::json(i == 0 ? "x" : "y"));
  }
  EXPECT_TRUE(at::equal(ls->get("a"), at::stack({at::arange(3, at::kFloat),
                                                 at::arange(3, at::kFloat) + 10}, 1)));
  // The members' differing values, read through the lazy stack: a NonTensorStack over [3, 2].
  EXPECT_EQ(ls->get_value("s").non_tensor_data(),
            NonTensorData::stack(nlohmann::json::parse(R"([["x", "y"], ["x", "y"], ["x", "y"]])")));
  // NonTensorStacks: one value per element of the level's batch size [3], as upstream's tolist()
  // (a stack dim past the level's stays a list in each value).
  EXPECT_EQ(loaded.get_value("nts").non_tensor_data(),
            NonTensorData::stack(nlohmann::json::parse(R"([["p", "q"], ["p", "q"], ["p", "q"]])")));
  EXPECT_EQ(loaded.get_value("nts2").non_tensor_data(),
            NonTensorData::stack(nlohmann::json::parse(
                R"([[0, {"k": [0]}], [1, {"k": [1]}], [2, {"k": [2]}]])")));
  EXPECT_EQ(loaded.keys(), std::vector<NestedKey>({"v", "ls", "nts", "nts2"}));
}

TEST(ConsolidatedFileCompat, WeWritePythonReads) {
  const std::string py = Python();
  ASSERT_FALSE(py.empty()) << "no python3 with torch (Debian: apt-get install python3-torch)";
  const std::string path = TempPath("cc.td"), saved = TempPath("cc_saved.td");
  consolidate(Expected(), ConsolidateOptions().filename(path));
  // A consolidated TensorDict saved with one copy reads the same.
  save_consolidated(consolidate(Expected()), saved);
  EXPECT_EQ(std::system((py + " " + kScript + " check " + path + " " + saved).c_str()), 0);
  if (const char* out = std::getenv("TD_COMPAT_OUT_FILE")) save_consolidated(Expected(), out);
  std::remove(path.c_str());
  std::remove(saved.c_str());
}

}  // namespace
}  // namespace td
