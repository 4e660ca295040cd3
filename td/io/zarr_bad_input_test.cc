// from_zarr / to_zarr on stores that other tools (or a hostile writer) can produce: FIFOs where
// files belong, directory symlinks, grids of many chunks with few files, fill values the dtype
// cannot hold, deeply nested JSON, keys that are not UTF-8. Each is refused at once with an error
// naming the store and the node, or read with work that follows the files on disk.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"
#include "td/io/zarr.h"

namespace td {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing_util::FreshDir;
using testing_util::WriteText;

// A format 2 group at `dir` (created).
void Group(const std::string& dir) {
  fs::create_directories(dir);
  WriteText(dir + "/.zgroup", R"({"zarr_format": 2})");
}

// Format 2 array metadata in `dir` (created): uncompressed, C order unless `extra` says more.
void Array(const std::string& dir, const json& shape, const json& chunks, const std::string& dtype,
           const json& fill, const json& extra = json::object()) {
  fs::create_directories(dir);
  json z = {{"zarr_format", 2}, {"dtype", dtype}, {"compressor", nullptr}, {"filters", nullptr},
            {"order", "C"}};
  z["shape"] = shape;
  z["chunks"] = chunks;
  z["fill_value"] = fill;
  z.update(extra);
  WriteText(dir + "/.zarray", z.dump());
}

TEST(ZarrBadInput, FifosAreRefusedNotWaitedOn) {
  const std::string dir = FreshDir("zfifo");
  fs::create_directories(dir + "/a.zarr");
  ASSERT_EQ(::mkfifo((dir + "/a.zarr/.zgroup").c_str(), 0644), 0);
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/a.zarr"), ZarrError, {"a.zarr/.zgroup", "a FIFO"});

  to_zarr(TensorDict({{"x", at::arange(4)}, {"g", {{"y", at::ones({4})}}}}, {4}), dir + "/b.zarr");
  ASSERT_EQ(::unlink((dir + "/b.zarr/x/0").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/b.zarr/x/0").c_str(), 0644), 0);
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/b.zarr"), ZarrError, {"b.zarr/x/0", "a FIFO"});
  ASSERT_EQ(::unlink((dir + "/b.zarr/x/0").c_str()), 0);  // a missing chunk: the fill value
  EXPECT_TRUE(from_zarr(dir + "/b.zarr").get("x").equal(at::zeros({4}, at::kLong)));
  ASSERT_EQ(::unlink((dir + "/b.zarr/g/.zattrs").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/b.zarr/g/.zattrs").c_str(), 0644), 0);
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/b.zarr"), ZarrError, {"g/.zattrs", "a FIFO"});
}

TEST(ZarrBadInput, DirectorySymlinksAreNotFollowed) {
  const std::string dir = FreshDir("zlink");
  const std::string store = dir + "/s.zarr";
  to_zarr(TensorDict({{"x", at::arange(4)}}, {4}), store);
  // A chunk file that is a symlink to a regular file is read (git-annex and DVC stores).
  fs::rename(store + "/x/0", dir + "/x0.bin");
  fs::create_symlink(dir + "/x0.bin", store + "/x/0");
  EXPECT_TRUE(from_zarr(store).get("x").equal(at::arange(4)));
  // Two links to "." would make the walk a tree of 2^depth groups.
  fs::create_directory_symlink(".", store + "/l1");
  fs::create_directory_symlink(".", store + "/l2");
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store, "symlink to a directory"});
}

// 2^26 one-byte chunks and one file: reading costs one listing and a fill, not 2^26 open()s.
TEST(ZarrBadInput, MissingChunksCostNoWorkEach) {
  const std::string store = FreshDir("zgrid") + "/s.zarr";
  Group(store);
  const int64_t n = int64_t{1} << 26;
  Array(store + "/a", json::array({n}), json::array({1}), "|u1", 7);
  WriteText(store + "/a/5", "\x03");
  WriteText(store + "/a/junk", "ignored: not a chunk key");
  const at::Tensor a = from_zarr(store).get("a");
  ASSERT_EQ(a.numel(), n);
  EXPECT_EQ(a[5].item<int64_t>(), 3);
  EXPECT_EQ(a.eq(7).sum().item<int64_t>(), n - 1);
}

// The listing knows every chunk key form: "/" separators, Fortran order, edge chunks, format 3's
// "c/..." keys.
TEST(ZarrBadInput, ChunkKeysOfEveryLayoutAreFound) {
  const std::string store = FreshDir("zkeys") + "/s.zarr";
  Group(store);
  // [3, 3] in chunks of [2, 2], "/" separator; chunk (1, 0) is missing (fill 9).
  Array(store + "/a", json::array({3, 3}), json::array({2, 2}), "<i2", 9,
        {{"dimension_separator", "/"}});
  auto chunk = [](std::initializer_list<int16_t> v) {
    return std::string(reinterpret_cast<const char*>(std::data(v)), 2 * v.size());
  };
  fs::create_directories(store + "/a/0");
  WriteText(store + "/a/0/0", chunk({0, 1, 3, 4}));
  WriteText(store + "/a/0/1", chunk({2, -1, 5, -1}));
  fs::create_directories(store + "/a/1");
  WriteText(store + "/a/1/1", chunk({8, -1, -1, -1}));
  WriteText(store + "/a/1/10", chunk({-5, -5, -5, -5}));  // outside the grid: not a chunk
  EXPECT_TRUE(from_zarr(store).get("a").equal(
      at::tensor({0, 1, 2, 3, 4, 5, 9, 9, 8}, at::kShort).view({3, 3})));
  // Fortran order, "." separator.
  Array(store + "/f", json::array({2, 2}), json::array({2, 2}), "<i2", 0, {{"order", "F"}});
  WriteText(store + "/f/0.0", chunk({1, 3, 2, 4}));
  EXPECT_TRUE(from_zarr(store).get("f").equal(at::tensor({1, 2, 3, 4}, at::kShort).view({2, 2})));
  // Format 3, default keys: c/0/0 and c/0/1 present, c/1/... missing (fill 6).
  const std::string v3 = FreshDir("zv3") + "/s.zarr";
  fs::create_directories(v3 + "/b/c/0");
  WriteText(v3 + "/zarr.json", R"({"zarr_format": 3, "node_type": "group"})");
  json meta = {{"zarr_format", 3}, {"node_type", "array"}, {"data_type", "int16"}, {"fill_value", 6}};
  meta["shape"] = json::array({3, 2});
  meta["chunk_grid"] = {{"name", "regular"}};
  meta["chunk_grid"]["configuration"]["chunk_shape"] = json::array({2, 1});
  meta["codecs"] = json::array({json{{"name", "bytes"}}});
  WriteText(v3 + "/b/zarr.json", meta.dump());
  WriteText(v3 + "/b/c/0/0", chunk({1, 3}));
  WriteText(v3 + "/b/c/0/1", chunk({2, 4}));
  EXPECT_TRUE(from_zarr(v3).get("b").equal(at::tensor({1, 2, 3, 4, 6, 6}, at::kShort).view({3, 2})));
}

TEST(ZarrBadInput, FillValuesTheDtypeCannotHoldAreNamed) {
  const std::string dir = FreshDir("zfill");
  auto store_with = [&](const std::string& name, const std::string& dtype, const json& fill) {
    const std::string store = dir + "/" + name + ".zarr";
    Group(store);
    Array(store + "/arr", json::array({2}), json::array({1}), dtype, fill);
    return store;
  };
  TD_EXPECT_THROW_MSG(from_zarr(store_with("i1", "|i1", 300)), ZarrError,
                      {"i1.zarr/arr", "fill_value 300", "|i1"});
  TD_EXPECT_THROW_MSG(from_zarr(store_with("u64", "<i8", json(UINT64_MAX))), ZarrError,
                      {"u64.zarr/arr", "18446744073709551615"});
  TD_EXPECT_THROW_MSG(from_zarr(store_with("nan", "<i4", "NaN")), ZarrError,
                      {"nan.zarr/arr", "\"NaN\"", "needs an integer"});
  TD_EXPECT_THROW_MSG(from_zarr(store_with("b", "|b1", 2)), ZarrError, {"b.zarr/arr", "bool"});
  TD_EXPECT_THROW_MSG(from_zarr(store_with("f2", "<f2", 1e300)), ZarrError,
                      {"f2.zarr/arr", "<f2"});
  EXPECT_TRUE(from_zarr(store_with("ok", "|b1", true)).get("arr").all().item<bool>());
}

TEST(ZarrBadInput, DeeplyNestedJsonIsRefused) {
  const std::string dir = FreshDir("zdeep");
  // Well-formed: nlohmann/json parses it, then its dump and copies recurse once per level.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Group(dir + "/a.zarr");
  WriteText(dir + "/a.zarr/.zattrs", "{\"a\": " + deep + "}");
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/a.zarr"), ZarrError, {"a.zarr/.zattrs", "nested deeper"});
  Group(dir + "/b.zarr");
  Array(dir + "/b.zarr/n", json::array({deep.size()}), json::array({deep.size()}), "|u1", 0);
  WriteText(dir + "/b.zarr/n/.zattrs", R"({"__tensordict_non_tensor__": {"encoding": "json"}})");
  WriteText(dir + "/b.zarr/n/0", deep);
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/b.zarr"), ZarrError,
                      {"b.zarr/n (non-tensor payload)", "nested deeper"});
}

// Groups and arrays are said to a structure::Builder (NOTE [ Structure codec ] in
// td/structure/structure.h): groups nest at most td::kMaxNestingDepth deep, checked before the
// deeper group is read; batch sizes and shapes are at most 64 sizes in [0, 2^63-1].
TEST(ZarrBadInput, StructureRulesAreTheBuilders) {
  const std::string dir = FreshDir("zrules");
  std::string deep = dir + "/d.zarr";
  Group(deep);
  for (int i = 0; i < kMaxNestingDepth + 1; ++i) Group(deep += "/g");
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/d.zarr"), ZarrError,
                      {deep, "nested more than 128 levels deep"});
  const std::string store = dir + "/s.zarr";
  Group(store);
  WriteText(store + "/.zattrs", R"({"__tensordict__": {"batch_size": [2, -1]}})");
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError,
                      {"s.zarr (attribute __tensordict__, batch_size)", "holds -1", "[2,-1]"});
  fs::remove(store + "/.zattrs");
  Array(store + "/a", json(std::vector<int>(65, 1)), json(std::vector<int>(65, 1)), "|u1", 0);
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {"s.zarr/a", "shape", "65 dims"});
  Array(store + "/a", json::array({int64_t{1} << 62, 4}), json::array({1, 1}), "<i8", 0);
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError,
                      {"s.zarr/a", "torch.Size([4611686018427387904, 4])", "fit in int64"});
  // Fixed-size strings are non-tensor data: their bound is the reader's own.
  Array(store + "/a", json::array({int64_t{1} << 62, 4}), json::array({1, 1}), "|S1", 0);
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {"s.zarr/a", "is too large"});
}

// Shapes past any memory are a ZarrError naming the array before their bytes are read: a leaf's,
// fixed-size strings', and a chunk larger than the array. (AddressSanitizer's allocator ends the
// process on such a request rather than failing it.)
TEST(ZarrBadInput, ShapesPastMemoryAreNamed) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on an allocation past its limit";
#endif
  const std::string store = FreshDir("zhuge") + "/s.zarr";
  Group(store);
  const int64_t huge = int64_t{1} << 50;  // past any address space
  Array(store + "/a", json::array({huge}), json::array({1 << 20}), "|u1", 0);
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {"s.zarr/a", "allocate 1125899906842624 bytes"});
  Array(store + "/a", json::array({huge}), json::array({1 << 20}), "|S1", 0);
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {"s.zarr/a", "1125899906842624 bytes"});
  Array(store + "/a", json::array({2}), json::array({huge}), "|u1", 0);
  WriteText(store + "/a/0", "xy");
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {"s.zarr/a", "1125899906842624 bytes"});
}

TEST(ZarrBadInput, KeysThatAreNotUtf8AreNamed) {
  const std::string dir = FreshDir("zutf8");
  TensorDict td({{"ok", at::zeros({2})}, {"g", {{std::string("bad\xff"), at::zeros({2})}}}}, {2});
  TD_EXPECT_THROW_MSG(to_zarr(td, dir + "/s.zarr"), ValueError, {"not valid UTF-8"});
  EXPECT_TRUE(fs::is_empty(dir));  // nothing half-written
}

}  // namespace
}  // namespace td
