// Consolidated files across languages, with Debian's python3-torch: Python (testdata/
// consolidated_fixture.py, which follows Python tensordict's writer and reader) writes a file that
// we load, and reads one we write.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "td/consolidate/consolidate.h"
#include "td/consolidate/file.h"
#include "td/core/testing.h"

namespace td {
namespace {

const char kScript[] = "td/consolidate/testdata/consolidated_fixture.py";

std::string Python() {
  for (const char* p : {"/usr/bin/python3", "python3"}) {
    std::string cmd = std::string(p) + " -c 'import torch' 2>/dev/null";
    if (std::system(cmd.c_str()) == 0) return p;
  }
  return "";
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." + std::to_string(::getpid());
}

// What consolidated_fixture.py's expected() holds.
TensorDict Expected() {
  return TensorDict({{"a", at::arange(12, at::kFloat).view({3, 4})},
                     {"b", at::arange(3, at::kLong) * 7},
                     {"n",
                      {{"x", at::arange(30, at::kDouble).view({3, 2, 5}) / 4},
                       {"h", at::full({3, 3}, 1.5, at::kHalf)}}},
                     {"flag", at::tensor({1, 0, 1}).to(at::kBool)},
                     {"odd", at::arange(3, at::kShort)},
                     {"note", "hello"}},
                    {3});
}

void ExpectEqual(const TensorDict& got, const TensorDict& want) {
  for (const NestedKey& k : want.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    Value w = want.get_value(k);
    if (w.is_non_tensor()) {
      EXPECT_EQ(got.get_non_tensor(k), w.non_tensor()) << k;
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
  const std::string py = Python();
  ASSERT_FALSE(py.empty()) << "no python3 with torch (Debian: apt-get install python3-torch)";
  const std::string path = TempPath("py.td");
  ASSERT_EQ(std::system((py + " " + kScript + " write " + path).c_str()), 0);
  TensorDict loaded = load_consolidated(path);
  EXPECT_TRUE(is_consolidated(loaded));
  ExpectEqual(loaded, Expected());
  // Python's read order: non-tensors, leaves, then sub-TensorDicts.
  std::vector<NestedKey> keys = loaded.keys();
  EXPECT_EQ(keys.front(), NestedKey("note"));
  EXPECT_EQ(keys.back(), NestedKey("n"));
  std::remove(path.c_str());
}

TEST(ConsolidatedFileCompat, WeWritePythonReads) {
  const std::string py = Python();
  ASSERT_FALSE(py.empty()) << "no python3 with torch (Debian: apt-get install python3-torch)";
  const std::string path = TempPath("cc.td");
  consolidate(Expected(), ConsolidateOptions().filename(path));
  EXPECT_EQ(std::system((py + " " + kScript + " check " + path).c_str()), 0);
  // A consolidated TensorDict saved with one copy reads the same.
  save_consolidated(consolidate(Expected()), path);
  EXPECT_EQ(std::system((py + " " + kScript + " check " + path).c_str()), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace td
