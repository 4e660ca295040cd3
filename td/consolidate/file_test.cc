#include "td/consolidate/file.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/consolidate/consolidate.h"
#include "td/core/testing.h"

namespace td {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." + std::to_string(::getpid());
}

TEST(ConsolidatedFile, RoundTrip) {
  TensorDict td = test::SampleTensorDict();
  td.set({"n", "h"}, at::ones({3, 4, 2}, at::kHalf));
  const std::string path = TempPath("rt.td");
  TensorDict c = consolidate(td, ConsolidateOptions().filename(path));
  EXPECT_TRUE(is_consolidated(c));
  EXPECT_TRUE(allclose(c, td));
  TensorDict loaded = load_consolidated(path);
  EXPECT_TRUE(is_consolidated(loaded));
  EXPECT_TRUE(allclose(loaded, td));
  EXPECT_EQ(loaded.get_non_tensor("s"), td.get_non_tensor("s"));
  EXPECT_EQ(loaded.get_tensordict("n").batch_size(), td.get_tensordict("n").batch_size());
  // The result of consolidate(filename) maps the file (shared): writes reach it.
  c.get("a").fill_(5);
  EXPECT_TRUE(load_consolidated(path).get("a").eq(5).all().item<bool>());
  // Loading maps privately: writes stay in memory.
  loaded = load_consolidated(path);
  loaded.get("a").fill_(6);
  EXPECT_TRUE(load_consolidated(path).get("a").eq(5).all().item<bool>());
  std::remove(path.c_str());
}

TEST(ConsolidatedFile, SaveAConsolidatedTensorDict) {
  TensorDict c = consolidate(test::SampleTensorDict());
  c.lock_();
  const std::string path = TempPath("save.td");
  save_consolidated(c, path);
  TensorDict loaded = load_consolidated(path);
  EXPECT_TRUE(allclose(loaded, c));
  EXPECT_TRUE(loaded.is_locked());
  // Half buffers and not-consolidated TensorDicts save too.
  TensorDict h = consolidate(consolidate(test::SampleTensorDict().exclude({"b"})).to(at::kHalf));
  save_consolidated(h, path);
  EXPECT_TRUE(allclose(load_consolidated(path), h));
  TensorDict plain = test::SampleTensorDict();
  save_consolidated(plain, path);
  EXPECT_TRUE(allclose(load_consolidated(path), plain));
  std::remove(path.c_str());
}

// Dim names of every level round-trip (they used to be written as null and not read).
TEST(ConsolidatedFile, DimNamesRoundTrip) {
  TensorDict td = test::SampleTensorDict();  // batch [3, 4], "n" [3, 4, 2]
  td.set_names({"env", "time"});
  td.get_tensordict("n").set_names({"env", "time", "agent"});
  const std::string path = TempPath("names.td");
  TensorDict c = consolidate(td, ConsolidateOptions().filename(path));
  EXPECT_EQ(c.get_tensordict("n").names(), DimNames({"env", "time", "agent"}));
  for (int pass = 0; pass < 2; ++pass) {
    TensorDict loaded = load_consolidated(path);
    EXPECT_TRUE(is_consolidated(loaded));
    EXPECT_EQ(loaded.names(), DimNames({"env", "time"}));
    EXPECT_EQ(loaded.get_tensordict("n").names(), DimNames({"env", "time", "agent"}));
    save_consolidated(consolidate(td), path);  // the one-copy writer, second pass
  }
  // Unnamed stays unnamed; a name on a nested level's own dim only.
  TensorDict plain = test::SampleTensorDict();
  plain.get_tensordict("n").set_names({std::nullopt, std::nullopt, "agent"});
  save_consolidated(plain, path);
  TensorDict loaded = load_consolidated(path);
  EXPECT_FALSE(loaded.has_names());
  EXPECT_EQ(loaded.get_tensordict("n").names(), DimNames({std::nullopt, std::nullopt, "agent"}));
  std::remove(path.c_str());
}

// We write a lazy stack as a TensorDict of its stacked leaves (NOTE [ Consolidated file format ]);
// a ragged one has no stacked leaves and is refused before anything is written.
TEST(ConsolidatedFile, LazyStacksAreWrittenDense) {
  const std::string path = TempPath("lazy.td");
  TensorDict a({{"x", at::zeros({3, 2})}, {"s", "p"}}, {3});
  TensorDict b({{"x", at::ones({3, 2})}, {"s", "p"}}, {3});
  TensorDict root({{"ls", TensorDict(lazy_stack({a, b}, 1))}}, {3});
  save_consolidated(root, path);
  TensorDict loaded = load_consolidated(path);
  EXPECT_FALSE(LazyStackedTensorDict::from(loaded.get_tensordict("ls")).has_value());
  EXPECT_TRUE(at::equal(loaded.get({"ls", "x"}), root.get({"ls", "x"})));
  TensorDict c({{"x", at::ones({3, 5})}}, {3});
  TensorDict ragged({{"ls", TensorDict(lazy_stack({TensorDict({{"x", at::zeros({3, 2})}}, {3}), c},
                                                  1))}},
                    {3});
  std::remove(path.c_str());
  TD_EXPECT_THROW_MSG(save_consolidated(ragged, path), ValueError, {"'x'"});
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

void WriteRaw(const std::string& path, const std::string& data, const std::string& meta) {
  std::ofstream f(path, std::ios::binary);
  f << data << meta;
  int64_t n = static_cast<int64_t>(meta.size());
  f.write(reinterpret_cast<const char*>(&n), 8);
}

TEST(ConsolidatedFile, ValidatesEverything) {
  const std::string path = TempPath("bad.td");
  const std::string ok_level =
      R"("cls": "TensorDict", "non_tensors": {}, "cls_metadata": {"batch_size": [2], "device": null, "names": [null], "is_locked": false})";
  auto meta = [&](const std::string& leaves) {
    return "{" + ok_level + R"(, "leaves": {)" + leaves + "}}";
  };
  std::string data(16, '\0');
  WriteRaw(path, data, meta(R"("a": ["torch.float32", [2, 2], 0, 16, 0])"));
  EXPECT_EQ(load_consolidated(path).get("a").sizes(), at::IntArrayRef({2, 2}));
  WriteRaw(path, data, meta(R"("a": ["torch.float32", [2, 3], 0, 16, 0])"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"'a'", "does not hold"});
  WriteRaw(path, data, meta(R"("a": ["torch.float32", [2, 2], 8, 24, 0])"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"outside the data"});
  WriteRaw(path, data, meta(R"("a": ["torch.complex7", [2, 2], 0, 16, 0])"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"unknown dtype"});
  WriteRaw(path, data, meta(R"("a": ["torch.float32", [2, -2], 0, 16, 0])"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"holds -2, not an integer"});
  WriteRaw(path, data, meta(R"("a": ["torch.float32", [2, 2], 0, 16])"));
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"expected [dtype"});
  WriteRaw(path, data, R"({"cls": "TensorClass"})");
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"TensorClass", "only TensorDict"});
  WriteRaw(path, data, "{not json");
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"malformed"});
  {
    std::ofstream f(path, std::ios::binary);
    f << "abc";
  }
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"fewer than the 8"});
  {
    std::ofstream f(path, std::ios::binary);
    int64_t n = 1000;
    f.write(reinterpret_cast<const char*>(&n), 8);
  }
  TD_EXPECT_THROW_MSG(load_consolidated(path), MemmapError, {"metadata length 1000"});
  // Overlapping leaves load, but are not consolidated (one kernel would touch bytes twice).
  WriteRaw(path, data,
           meta(R"("a": ["torch.float32", [2, 2], 0, 16, 0], "b": ["torch.float32", [2, 1], 0, 8, 0])"));
  TensorDict overlap = load_consolidated(path);
  EXPECT_FALSE(is_consolidated(overlap));
  std::remove(path.c_str());
}

TEST(ConsolidatedFile, KeysTheFormatCannotHold) {
  const std::string path = TempPath("keys.td");
  TensorDict td({{"leaves", {{"x", at::zeros({2})}}}}, {2});
  TD_EXPECT_THROW_MSG(save_consolidated(td, path), ValueError, {"'leaves'"});
  TensorDict njt({{"<NJT>x", at::zeros({2})}}, {2});
  TD_EXPECT_THROW_MSG(save_consolidated(njt, path), ValueError, {"<NJT"});
  EXPECT_NE(::access(path.c_str(), F_OK), 0);  // nothing left behind
}

}  // namespace
}  // namespace td
