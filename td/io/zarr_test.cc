// to_zarr / from_zarr on their own (no Python): round trips of every dtype, nesting, non-tensor
// data and chunking; batch sizes from the store's metadata and from the options; replacing a
// store atomically; and each kind of bad store (missing, truncated chunk, batch mismatch,
// compressor, filters, order, pickled data) refused with an error naming the node.
#include "td/io/zarr.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void WriteJson(const std::string& path, const json& j) {
  std::ofstream(path, std::ios::trunc) << j.dump();
}

std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TensorDict EveryDtype() {
  std::vector<TensorDict::Item> items;
  int i = 0;
  for (at::ScalarType t : {at::kBool, at::kChar, at::kByte, at::kShort, at::kInt, at::kLong,
                           at::kHalf, at::kFloat, at::kDouble, at::kComplexFloat,
                           at::kComplexDouble}) {
    at::Tensor v = at::arange(6, at::kDouble).view({3, 2}).sub(2);
    if (t == at::kBool) v = v.gt(0);
    if (at::isComplexType(t)) v = at::complex(v, v.mul(-3));
    items.emplace_back("k" + std::to_string(i++) + std::string(c10::toString(t)), v.to(t));
  }
  items.emplace_back("empty", at::zeros({3, 0, 4}));
  items.emplace_back("note", "hello");
  items.emplace_back("cfg", NonTensorData(json{{"lr", 0.1}, {"sizes", {1, 2, 3}}}));
  items.emplace_back("nested", TensorDict({{"x", at::arange(12, at::kFloat).view({3, 2, 2})},
                                          {"deep", {{"y", at::ones({3, 2}, at::kLong)}}},
                                          {"tag", NonTensorData(json(nullptr))}},
                                         {3, 2}));
  return TensorDict(items, {3});
}

void ExpectSame(const TensorDict& got, const TensorDict& want) {
  EXPECT_EQ(got.batch_size(), want.batch_size());
  const auto items = want.items(KeysOptions().include_nested(true));
  for (const auto& [k, v] : items) {
    SCOPED_TRACE(k.repr());
    ASSERT_TRUE(got.contains(k));
    if (v.is_tensordict()) {
      EXPECT_EQ(got.get_tensordict(k).batch_size(), v.tensordict().batch_size());
    } else if (v.is_non_tensor()) {
      EXPECT_EQ(got.get_non_tensor(k), v.non_tensor());
    } else {
      EXPECT_EQ(got.get(k).scalar_type(), v.tensor().scalar_type());
      EXPECT_TRUE(got.get(k).equal(v.tensor()));
    }
  }
  EXPECT_EQ(got.keys(KeysOptions().include_nested(true)).size(), items.size());
}

// Dim names as upstream 0.14 keeps them (tensordict/persistent.py, _write_attrs_metadata and
// from_zarr): "names" in each named level's __tensordict__ attribute, read back at the root
// with the stored batch size and given to the nested levels from there.
TEST(Zarr, DimNamesInTheTensordictAttribute) {
  const std::string dir = testing_util::FreshDir("names");
  TensorDict td({{"a", at::zeros({3, 2})}, {"n", TensorDict({{"b", at::zeros({3, 2, 4})}}, {3, 2, 4})}},
                {3, 2});
  td.set_names({"env", std::nullopt});
  to_zarr(td, dir + "/s.zarr");
  EXPECT_EQ(ReadJson(dir + "/s.zarr/.zattrs")["__tensordict__"],
            (json{{"batch_size", {3, 2}}, {"version", 1}, {"names", {"env", nullptr}}}));
  EXPECT_EQ(ReadJson(dir + "/s.zarr/n/.zattrs")["__tensordict__"]["names"],
            json({"env", nullptr, nullptr}));
  const TensorDict back = from_zarr(dir + "/s.zarr");
  EXPECT_EQ(back.names(), (DimNames{"env", std::nullopt}));
  EXPECT_EQ(back.get_tensordict("n").names(), (DimNames{"env", std::nullopt, std::nullopt}));
  // Unnamed: no "names", and nothing named on reading.
  to_zarr(TensorDict({{"a", at::zeros({3})}}, {3}), dir + "/u.zarr");
  EXPECT_FALSE(ReadJson(dir + "/u.zarr/.zattrs")["__tensordict__"].contains("names"));
  EXPECT_FALSE(from_zarr(dir + "/u.zarr").has_names());
  // A batch size given by the caller, or inferred: the stored names are not used.
  EXPECT_FALSE(from_zarr(dir + "/s.zarr", FromZarrOptions().batch_size(std::vector<int64_t>{3}))
                   .has_names());
  // Names that do not fit: a ZarrError naming the store.
  WriteJson(dir + "/s.zarr/.zattrs",
            json{{"__tensordict__", {{"batch_size", {3, 2}}, {"version", 1}, {"names", {"x"}}}}});
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/s.zarr"), ZarrError, {dir + "/s.zarr", "__tensordict__"});
  WriteJson(dir + "/s.zarr/.zattrs",
            json{{"__tensordict__", {{"batch_size", {3, 2}}, {"version", 1}, {"names", {1, 2}}}}});
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/s.zarr"), ZarrError,
                      {dir + "/s.zarr", "names [1,2]", "strings or nulls"});
}

TEST(Zarr, RoundTripEveryDtypeNestingAndNonTensorData) {
  const std::string store = testing_util::FreshDir("rt") + "/s.zarr";
  const TensorDict td = EveryDtype();
  to_zarr(td, store);
  ExpectSame(from_zarr(store), td);
  // Upstream's layout (NOTE [ Zarr layout ]).
  EXPECT_EQ(ReadJson(store + "/.zattrs")["__tensordict__"], (json{{"batch_size", {3}}, {"version", 1}}));
  EXPECT_EQ(ReadJson(store + "/nested/.zattrs")["__tensordict__"]["batch_size"], json({3, 2}));
  const json z = ReadJson(store + "/k7Float/.zarray");
  EXPECT_EQ(z["dtype"], "<f4");
  EXPECT_EQ(z["chunks"], json({3, 2}));
  EXPECT_TRUE(z["compressor"].is_null());
  EXPECT_EQ(ReadJson(store + "/k0Bool/.zarray")["dtype"], "|b1");
  EXPECT_EQ(ReadJson(store + "/k10ComplexDouble/.zarray")["dtype"], "<c16");
  EXPECT_EQ(ReadJson(store + "/note/.zattrs")["__tensordict_non_tensor__"],
            (json{{"encoding", "json"}}));
  EXPECT_EQ(ReadJson(store + "/note/.zarray")["dtype"], "|u1");
  EXPECT_FALSE(testing_util::Exists(store + "/empty/0.0.0"));  // no chunk for an empty array
  const json consolidated = ReadJson(store + "/.zmetadata");
  EXPECT_EQ(consolidated["metadata"]["nested/deep/y/.zarray"]["dtype"], "<i8");
  // Batch size [] and a 0-d tensor (chunk key "0").
  const TensorDict scalar({{"s", at::scalar_tensor(2.5, at::kDouble)}}, {});
  to_zarr(scalar, store);
  ExpectSame(from_zarr(store), scalar);
  EXPECT_TRUE(testing_util::Exists(store + "/s/0"));
}

TEST(Zarr, ChunksConstrainTheLeadingDims) {
  const std::string store = testing_util::FreshDir("chunks") + "/s.zarr";
  const TensorDict td({{"a", at::arange(60, at::kInt).view({5, 3, 4})},
                       {"b", at::arange(5, at::kFloat)}},
                      {5});
  to_zarr(td, store, ToZarrOptions().chunks({2, 2}));
  EXPECT_EQ(ReadJson(store + "/a/.zarray")["chunks"], json({2, 2, 4}));
  EXPECT_EQ(ReadJson(store + "/b/.zarray")["chunks"], json({2}));
  EXPECT_EQ(Listing(store + "/b"), (std::vector<std::string>{".zarray", "0", "1", "2"}));
  EXPECT_EQ(testing_util::FileSizeOf(store + "/a/2.1.0"), 2 * 2 * 4 * 4);  // a full edge chunk
  ExpectSame(from_zarr(store), td);
  // A missing chunk reads as the fill value.
  fs::remove(store + "/b/1");
  json meta = ReadJson(store + "/b/.zarray");
  meta["fill_value"] = "NaN";
  WriteJson(store + "/b/.zarray", meta);
  at::Tensor b = from_zarr(store).get("b");
  EXPECT_TRUE(b.isnan().equal(at::tensor({0, 0, 1, 1, 0}, at::kByte).to(at::kBool)));
  EXPECT_EQ(b[4].item<float>(), 4.0f);
}

TEST(Zarr, BatchSizeFromTheStoreOrTheOptions) {
  const std::string store = testing_util::FreshDir("batch") + "/s.zarr";
  const TensorDict td({{"a", at::zeros({4, 3})}, {"n", TensorDict({{"x", at::zeros({4, 3, 2})}}, {4, 3})}},
                      {4});
  to_zarr(td, store);
  EXPECT_EQ(from_zarr(store).batch_size().vec(), std::vector<int64_t>{4});
  EXPECT_EQ(from_zarr(store).get_tensordict("n").batch_size().vec(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(from_zarr(store, FromZarrOptions().batch_size(std::vector<int64_t>{})).batch_size().vec(),
            std::vector<int64_t>{});
  EXPECT_EQ(from_zarr(store, FromZarrOptions().auto_batch_size(true)).batch_size().vec(),
            (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(from_zarr(store, FromZarrOptions().batch_dims(1)).batch_size().vec(),
            std::vector<int64_t>{4});
  TD_EXPECT_THROW_MSG(from_zarr(store, FromZarrOptions().batch_size(std::vector<int64_t>{4}).auto_batch_size(true)),
                      ValueError, {"batch_size [4]", "auto_batch_size"});
  TD_EXPECT_THROW_MSG(from_zarr(store, FromZarrOptions().batch_size(std::vector<int64_t>{4, -1})),
                      ValueError, {"from_zarr: the batch_size", "holds -1"});
  // Without the metadata (a store of another tool): the batch size is inferred.
  fs::remove(store + "/.zattrs");
  fs::remove(store + "/n/.zattrs");
  EXPECT_EQ(from_zarr(store).batch_size().vec(), (std::vector<int64_t>{4, 3}));
}

TEST(Zarr, ReplacingAStoreIsAtomic) {
  const std::string dir = testing_util::FreshDir("replace");
  const std::string store = dir + "/s.zarr";
  const TensorDict first({{"a", at::ones({2})}, {"old", at::ones({2})}}, {2});
  to_zarr(first, store);
  const TensorDict second({{"a", at::full({3}, 5.0)}}, {3});
  to_zarr(second, store);
  ExpectSame(from_zarr(store), second);
  EXPECT_FALSE(testing_util::Exists(store + "/old"));
  EXPECT_EQ(Listing(dir), std::vector<std::string>{"s.zarr"});  // no temporary left
  TD_EXPECT_THROW_MSG(to_zarr(first, store, ToZarrOptions().overwrite(false)), ValueError,
                      {store, "exists"});
  // A write that fails part-way (a dtype Zarr cannot hold, after other keys were written)
  // leaves the previous store whole, and nothing beside it.
  const TensorDict bad({{"a", at::zeros({3})}, {"b", at::zeros({3}, at::kBFloat16)}}, {3});
  TD_EXPECT_THROW_MSG(to_zarr(bad, store), TypeError, {"'b'", "torch.bfloat16"});
  ExpectSame(from_zarr(store), second);
  EXPECT_EQ(Listing(dir), std::vector<std::string>{"s.zarr"});
  // A new path: nothing at all after a failure.
  TD_EXPECT_THROW_MSG(to_zarr(bad, dir + "/new.zarr"), TypeError, {"'b'"});
  EXPECT_EQ(Listing(dir), std::vector<std::string>{"s.zarr"});
  // Only a Zarr store (or an empty directory) is replaced.
  fs::create_directory(dir + "/other");
  std::ofstream(dir + "/other/keep.txt") << "x";
  TD_EXPECT_THROW_MSG(to_zarr(second, dir + "/other"), ValueError, {"not a Zarr store"});
  EXPECT_TRUE(testing_util::Exists(dir + "/other/keep.txt"));
  // Keys that cannot be Zarr names.
  TD_EXPECT_THROW_MSG(to_zarr(TensorDict({{".zarray", at::zeros({1})}}, {}), dir + "/k.zarr"),
                      ValueError, {"'.zarray'", "Zarr node name"});
}

TEST(Zarr, BadStoresAreRefusedNamingTheNode) {
  const std::string dir = testing_util::FreshDir("bad");
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/missing.zarr"), ZarrError, {"missing.zarr", "does not exist"});
  TD_EXPECT_THROW_MSG(from_zarr(dir), ZarrError, {dir, "not a Zarr store"});
  const TensorDict td({{"a", at::arange(6, at::kFloat).view({3, 2})},
                       {"n", TensorDict({{"x", at::zeros({3, 2})}}, {3, 2})}},
                      {3});
  const std::string store = dir + "/s.zarr";
  auto fresh = [&] { to_zarr(td, store); };

  fresh();  // a truncated chunk
  fs::resize_file(store + "/a/0.0", 20);
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError,
                      {store + "/a", "a/0.0 holds 20 bytes, expected 24", "truncated"});

  fresh();  // batch size and shapes disagree
  WriteJson(store + "/.zattrs", json{{"__tensordict__", {{"batch_size", {5}}, {"version", 1}}}});
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError,
                      {store + "/a", "shape torch.Size([3, 2])", "batch size torch.Size([5])"});
  WriteJson(store + "/.zattrs", json{{"__tensordict__", {{"batch_size", {3}}, {"version", 1}}}});
  WriteJson(store + "/n/.zattrs", json{{"__tensordict__", {{"batch_size", {2}}, {"version", 1}}}});
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError,
                      {store + "/n", "batch size torch.Size([2])",
                       "torch.Size([3]) of its parent"});

  auto edit = [&](const char* field, const json& value) {
    fresh();
    json meta = ReadJson(store + "/a/.zarray");
    meta[field] = value;
    WriteJson(store + "/a/.zarray", meta);
  };
  edit("compressor", json{{"id", "lz4"}, {"acceleration", 1}});
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "compressor", "lz4"});
  edit("compressor", json{{"id", "zlib"}, {"level", 1}});  // read, but the chunk is raw
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "a/0.0", "codec zlib"});
  edit("filters", json::array({json{{"id", "delta"}, {"dtype", "<f4"}}}));
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "filters", "delta"});
  edit("order", "K");
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "order 'K'"});
  edit("dtype", "<m8");  // numpy's timedelta64 (uint16: //td/io:newer_dtypes_test)
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "'<m8'", "not supported"});
  edit("chunks", json({2}));
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "different lengths"});

  fresh();  // malformed metadata
  std::ofstream(store + "/n/x/.zarray", std::ios::trunc) << "{not json";
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/n/x/.zarray", "not valid JSON"});

  fresh();  // non-tensor data pickled by Python
  fs::create_directory(store + "/obj");
  WriteJson(store + "/obj/.zarray",
            json{{"zarr_format", 2}, {"shape", {1}}, {"chunks", {1}}, {"dtype", "|u1"},
                 {"compressor", nullptr}, {"filters", nullptr}, {"order", "C"}, {"fill_value", 0}});
  WriteJson(store + "/obj/.zattrs", json{{"__tensordict_non_tensor__", {{"encoding", "pickle"}}}});
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/obj", "'pickle'"});
}

}  // namespace
}  // namespace td
