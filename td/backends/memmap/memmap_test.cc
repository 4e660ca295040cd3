// memmap / memmap_ / memmap_like / load_memmap and the "memmap" storage backend.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/storage.h"
#include "td/core/testing.h"

namespace td {
namespace {

using testing_util::Exists;
using testing_util::FileSizeOf;
using testing_util::FreshDir;
using testing_util::IsDir;
using testing_util::ReadText;
using testing_util::WriteText;

TensorDict Sample() {
  return TensorDict(
      {{"f32", at::arange(12, at::kFloat).view({3, 4})},
       {"f64", at::arange(3, at::kDouble)},
       {"f16", at::ones({3, 2}, at::kHalf)},
       {"bf16", at::full({3, 2}, 1.5, at::kBFloat16)},
       {"i8", at::full({3}, -3, at::kChar)},
       {"i16", at::full({3}, 300, at::kShort)},
       {"i32", at::full({3}, -70000, at::kInt)},
       {"i64", at::arange(3, at::kLong) * (int64_t{1} << 40)},
       {"u8", at::full({3, 1}, 250, at::kByte)},
       {"b", at::tensor({1, 0, 1}).to(at::kBool)},
       {"n", {{"x", at::ones({3, 5})}, {"deep", {{"y", at::zeros({3}, at::kLong)}}}}},
       {"text", "hello"},
       {"obj", NonTensorData(nlohmann::json{{"a", {1, 2}}, {"b", nullptr}})}},
      {3});
}

TEST(MemmapTest, RoundTripKeepsEverything) {
  const std::string dir = FreshDir("mm") + "/ckpt";
  TensorDict src = Sample();
  TensorDict saved = src.memmap(dir);
  EXPECT_EQ(saved.backend(), "memmap");
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_TRUE(saved.is_locked());
  EXPECT_EQ(saved.device(), std::optional<at::Device>(at::kCPU));
  EXPECT_EQ(saved.keys(), src.keys());
  assert_allclose(saved, src);
  EXPECT_EQ(saved.get_tensordict({"n", "deep"}).backend(), "memmap");
  EXPECT_TRUE(saved.storage().capabilities().has(Capability::kCrossProcess));
  // The files are where the format says.
  EXPECT_EQ(FileSizeOf(dir + "/f32.memmap"), 48);
  EXPECT_EQ(FileSizeOf(dir + "/bf16.memmap"), 12);
  EXPECT_EQ(FileSizeOf(dir + "/n/deep/y.memmap"), 24);
  EXPECT_TRUE(Exists(dir + "/text/meta.json"));
  EXPECT_TRUE(Exists(dir + "/text/_tensordict/meta.json"));
  const std::string meta = ReadText(dir + "/meta.json");
  EXPECT_NE(meta.find(R"("f32":{"device":"cpu","shape":[3,4],"dtype":"torch.float32")"),
            std::string::npos) << meta;
  EXPECT_NE(meta.find(R"("n":{"type":"TensorDict"})"), std::string::npos) << meta;
  EXPECT_NE(meta.find(R"("_type":"<class 'tensordict._td.TensorDict'>")"), std::string::npos);
  TensorDict loaded = TensorDict::load_memmap(dir);
  EXPECT_EQ(loaded.keys(KeysOptions().include_nested(true)),
            src.keys(KeysOptions().include_nested(true)));
  assert_allclose(loaded, src);
  EXPECT_EQ(loaded.get_non_tensor("obj"), (nlohmann::json{{"a", {1, 2}}, {"b", nullptr}}));
  EXPECT_EQ(*MemoryMappedTensor::filename_of(loaded.get({"n", "x"})), dir + "/n/x.memmap");
  // Only the final directory remains next to it (no temporaries).
  EXPECT_EQ(testing_util::ListNames(dir + "/.."), std::vector<std::string>{"ckpt"});
}

TEST(MemmapTest, EmptyBatchEmptyTensorsAndEmptyDicts) {
  const std::string dir = FreshDir("mm") + "/e";
  TensorDict src({{"scalar", at::scalar_tensor(2.5, at::kDouble)},
                  {"none", at::zeros({0, 4})},
                  {"sub", TensorDict({}, {})}},
                 {});
  TensorDict saved = src.memmap(dir);
  assert_allclose(saved, src);
  EXPECT_EQ(FileSizeOf(dir + "/none.memmap"), 0);
  TensorDict loaded = TensorDict::load_memmap(dir);
  EXPECT_EQ(loaded.get("scalar").item<double>(), 2.5);
  EXPECT_EQ(loaded.get("none").sizes(), at::IntArrayRef({0, 4}));
  EXPECT_TRUE(loaded.get_tensordict("sub").is_empty());
  TensorDict nothing = TensorDict({}, {5}).memmap(FreshDir("mm") + "/x");
  EXPECT_EQ(nothing.batch_size(), at::IntArrayRef({5}));
}

TEST(MemmapTest, KeysAreEscapedAndNeverLeaveTheDirectory) {
  const std::string root = FreshDir("mm");
  const std::string dir = root + "/d";
  TensorDict src({{"a/b", at::ones({2})},
                  {"..", at::full({2}, 2.0)},
                  {"", at::full({2}, 3.0)},
                  {"/etc/x", at::full({2}, 4.0)},
                  {"with space%", at::full({2}, 5.0)},
                  {"../up", {{"in", at::ones({2})}}}},
                 {2});
  src.memmap(dir);
  EXPECT_TRUE(Exists(dir + "/a%2Fb.memmap"));
  EXPECT_TRUE(Exists(dir + "/%2E%2E.memmap"));
  EXPECT_TRUE(Exists(dir + "/%.memmap"));
  EXPECT_TRUE(Exists(dir + "/%2Fetc%2Fx.memmap"));
  EXPECT_TRUE(Exists(dir + "/with%20space%25.memmap"));
  EXPECT_TRUE(IsDir(dir + "/..%2Fup"));
  EXPECT_FALSE(Exists(root + "/up"));
  EXPECT_FALSE(Exists(root + "/..memmap"));
  TensorDict loaded = TensorDict::load_memmap(dir);
  assert_allclose(loaded, src);
}

TEST(MemmapTest, KeysThatCannotBeStoredAreRefusedBeforeWriting) {
  const std::string root = FreshDir("mm");
  TD_EXPECT_THROW_MSG(TensorDict({{"shape", at::ones({2})}}, {2}).memmap(root + "/a"),
                      c10::ValueError, {"'shape'", "meta.json"});
  TD_EXPECT_THROW_MSG(TensorDict({{"n", {{"device", at::ones({2})}}}}, {2}).memmap(root + "/a"),
                      c10::ValueError, {"'device'", "('n', 'device')"});
  TD_EXPECT_THROW_MSG(
      TensorDict({{"x", at::ones({2})}, {"x.memmap", {{"y", at::ones({2})}}}}, {2})
          .memmap(root + "/a"),
      c10::ValueError, {"'x'", "'x.memmap'", "x.memmap"});
  TD_EXPECT_THROW_MSG(TensorDict({{"meta.json", {{"y", at::ones({2})}}}}, {2}).memmap(root + "/a"),
                      c10::ValueError, {"'meta.json'", "reserved"});
  TD_EXPECT_THROW_MSG(TensorDict({{std::string("\xff"), at::ones({2})}}, {2}).memmap(root + "/a"),
                      c10::ValueError, {"UTF-8"});
  TD_EXPECT_THROW_MSG(TensorDict({{std::string(300, 'k'), at::ones({2})}}, {2}).memmap(root + "/a"),
                      c10::ValueError, {"file systems allow 255"});
  TD_EXPECT_THROW_MSG(
      TensorDict({{"nan", NonTensorData(nlohmann::json(std::nan("")))}}, {2}).memmap(root + "/a"),
      c10::ValueError, {"'nan'", "null"});
  TD_EXPECT_THROW_MSG(TensorDict({{"sp", at::ones({2}).to_sparse()}}, {2}).memmap(root + "/a"),
                      c10::ValueError, {"'sp'", "strided"});
  EXPECT_TRUE(testing_util::ListNames(root).empty());  // nothing was written
}

// A nested (ragged) tensor reports the strided layout, yet memmap() has no sizes file to write
// for it: it is refused by name before anything is written, however it is written.
TEST(MemmapTest, NestedTensorLeavesAreRefusedBeforeWriting) {
  const std::string root = FreshDir("mm");
  const at::Tensor ragged =
      at::_nested_tensor_from_tensor_list({at::ones({2, 3}), at::full({4, 3}, 2.0)});
  TensorDict t({{"x", at::ones({2})}, {"n", TensorDict({{"r", ragged}}, {2})}}, {2});
  TD_EXPECT_THROW_MSG(t.memmap(root + "/a"), c10::ValueError,
                      {"memmap: key ('n', 'r')", "nested (ragged) tensor", "strided"});
  TD_EXPECT_THROW_MSG(t.memmap_like(root + "/a"), c10::ValueError, {"('n', 'r')", "nested"});
  TensorDict in_place = t.copy();
  TD_EXPECT_THROW_MSG(in_place.memmap_(root + "/a"), c10::ValueError, {"('n', 'r')", "nested"});
  EXPECT_TRUE(in_place.get("x").is_same(t.get("x")));  // its leaves are not replaced
  EXPECT_TRUE(testing_util::ListNames(root).empty());  // nothing was written
  // Into a memmap TensorDict: refused, the directory as it was.
  TensorDict mm = TensorDict({{"x", at::ones({2})}}, {2}).memmap(root + "/b");
  mm.unlock_();
  TD_EXPECT_THROW_MSG(mm.set("r", ragged), c10::ValueError, {"'r'", "nested (ragged) tensor"});
  EXPECT_FALSE(mm.contains("r"));
  EXPECT_EQ(TensorDict::load_memmap(root + "/b").keys(), std::vector<NestedKey>{"x"});
  EXPECT_EQ(testing_util::ListNames(root + "/b"),
            (std::vector<std::string>{"meta.json", "x.memmap"}));
  TD_EXPECT_THROW_MSG(MemoryMappedTensor::from_tensor(ragged, root + "/r.memmap"),
                      c10::ValueError, {"nested (ragged)", "strided"});
  EXPECT_FALSE(Exists(root + "/r.memmap"));
  // Padded, it is an ordinary tensor.
  const TensorDict padded = t.to_padded_tensor().memmap(root + "/c");
  EXPECT_EQ(padded.get({"n", "r"}).sizes(), at::IntArrayRef({2, 4, 3}));
}

TEST(MemmapTest, ExistingTargets) {
  const std::string root = FreshDir("mm");
  TensorDict src({{"a", at::ones({2})}}, {2});
  src.memmap(root + "/ckpt");
  TD_EXPECT_THROW_MSG(src.memmap(root + "/ckpt", MemmapOptions().exists_ok(false)),
                      c10::ValueError, {root + "/ckpt", "exists_ok"});
  TensorDict other({{"b", at::zeros({3})}}, {3});
  TensorDict replaced = other.memmap(root + "/ckpt");  // exists_ok defaults to true
  EXPECT_EQ(replaced.keys(), std::vector<NestedKey>{"b"});
  EXPECT_FALSE(Exists(root + "/ckpt/a.memmap"));
  // Not a memmap directory: never replaced.
  ASSERT_EQ(::mkdir((root + "/home").c_str(), 0755), 0);
  WriteText(root + "/home/notes.txt", "precious");
  TD_EXPECT_THROW_MSG(src.memmap(root + "/home"), c10::ValueError,
                      {root + "/home", "not a memmap directory"});
  EXPECT_EQ(ReadText(root + "/home/notes.txt"), "precious");
  // An empty directory is fine.
  ASSERT_EQ(::mkdir((root + "/empty").c_str(), 0755), 0);
  EXPECT_NO_THROW(src.memmap(root + "/empty"));
  // A file, a symlink.
  WriteText(root + "/file", "x");
  TD_EXPECT_THROW_MSG(src.memmap(root + "/file"), c10::ValueError, {"not a directory"});
  ASSERT_EQ(::symlink((root + "/ckpt").c_str(), (root + "/link").c_str()), 0);
  TD_EXPECT_THROW_MSG(src.memmap(root + "/link"), c10::ValueError, {root + "/link", "symlink"});
  // Missing parents are created.
  EXPECT_NO_THROW(src.memmap(root + "/p/q/r"));
  EXPECT_TRUE(Exists(root + "/p/q/r/a.memmap"));
  // Relative prefixes are resolved against the working directory.
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(root.c_str()), 0);
  TensorDict rel = src.memmap("rel/./x");
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_EQ(static_cast<const MemmapStorage&>(rel.storage()).path(), root + "/rel/x");
}

TEST(MemmapTest, CopyExisting) {
  const std::string root = FreshDir("mm");
  TensorDict saved = TensorDict({{"a", at::ones({2})}}, {2}).memmap(root + "/one");
  TD_EXPECT_THROW_MSG(saved.memmap(root + "/two"), c10::ValueError,
                      {"'a'", root + "/one/a.memmap", "copy_existing", root + "/two/a.memmap"});
  EXPECT_FALSE(Exists(root + "/two"));
  TensorDict two = saved.memmap(root + "/two", MemmapOptions().copy_existing(true));
  assert_allclose(two, saved);
  // Writing a TensorDict over its own directory is allowed, and the old tensors stay valid.
  at::Tensor old_a = saved.get("a");
  TensorDict again = saved.memmap(root + "/one");
  EXPECT_TRUE(old_a.equal(at::ones({2})));
  assert_allclose(again, saved);
}

TEST(MemmapTest, WritesReachTheFilesAndOtherMappings) {
  const std::string dir = FreshDir("mm") + "/w";
  TensorDict saved = Sample().memmap(dir);
  saved.get("f32").index_put_({0}, -1);
  saved.set_({"n", "x"}, at::full({3, 5}, 9.0));
  saved.set("f64", at::full({3}, 7.0, at::kDouble));  // locked: same shape is written in place
  TensorDict other = TensorDict::load_memmap(dir);
  EXPECT_TRUE(other.get("f32").index({0}).eq(-1).all().item<bool>());
  EXPECT_TRUE(other.get({"n", "x"}).eq(9).all().item<bool>());
  EXPECT_TRUE(other.get("f64").eq(7).all().item<bool>());
  // Both mappings share the page cache: a write through one is seen by the other at once.
  other.get("i64").fill_(5);
  EXPECT_TRUE(saved.get("i64").eq(5).all().item<bool>());
}

TEST(MemmapTest, StructuralChangesUpdateTheDirectory) {
  const std::string dir = FreshDir("mm") + "/s";
  TensorDict td = TensorDict({{"a", at::ones({2})}}, {2}).memmap(dir);
  TD_EXPECT_THROW_MSG(td.set("new", at::ones({2})), LockedError, {"'new'"});
  td.unlock_();
  td.set("new", at::arange(4).view({2, 2}));
  td.set({"sub", "deep", "x"}, at::full({2, 3}, 2.0));  // intermediate levels are created on disk
  td.set("note", "some text");
  td.set("a", at::zeros({2, 7}));  // replaced with another shape: a new file
  EXPECT_EQ(FileSizeOf(dir + "/a.memmap"), 56);
  EXPECT_TRUE(Exists(dir + "/sub/deep/x.memmap"));
  EXPECT_TRUE(MemoryMappedTensor::is_memory_mapped(td.get({"sub", "deep", "x"})));
  // Later writes through the handle reach the file.
  td.get({"sub", "deep", "x"}).fill_(3.0);
  TensorDict back = TensorDict::load_memmap(dir);
  EXPECT_EQ(back.keys(), (std::vector<NestedKey>{"a", "new", "sub", "note"}));
  EXPECT_TRUE(back.get("new").equal(at::arange(4).view({2, 2})));
  EXPECT_TRUE(back.get({"sub", "deep", "x"}).eq(3).all().item<bool>());
  EXPECT_EQ(back.get("a").sizes(), at::IntArrayRef({2, 7}));
  EXPECT_EQ(back.get_non_tensor("note"), "some text");
  td.del_("new");
  td.del_("sub");
  EXPECT_FALSE(Exists(dir + "/new.memmap"));
  EXPECT_FALSE(Exists(dir + "/sub"));
  td.set_batch_size({});
  back = TensorDict::load_memmap(dir);
  EXPECT_EQ(back.keys(), (std::vector<NestedKey>{"a", "note"}));
  EXPECT_EQ(back.batch_size().size(), 0u);
  // A tensor still held keeps the data of the file it was mapped from.
  at::Tensor held = td.get("a");
  td.set("a", at::ones({3}));
  EXPECT_TRUE(held.eq(0).all().item<bool>());
  EXPECT_TRUE(TensorDict::load_memmap(dir).get("a").equal(at::ones({3})));
  TD_EXPECT_THROW_MSG(td.set("shape", at::ones({1})), c10::ValueError, {"'shape'"});
}

TEST(MemmapTest, ReadOnlyMode) {
  const std::string dir = FreshDir("mm") + "/ro";
  Sample().memmap(dir);
  TensorDict ro = TensorDict::load_memmap(dir, LoadMemmapOptions().mode(MemmapMode::kReadOnly));
  EXPECT_FALSE(ro.storage().capabilities().has(Capability::kInPlaceWrite));
  TD_EXPECT_THROW_MSG(ro.set_("f32", at::zeros({3, 4})), c10::ValueError,
                      {"'f32'", "read-only", dir});
  ro.unlock_();
  TD_EXPECT_THROW_MSG(ro.set("f32", at::zeros({3, 4})), c10::ValueError, {"read-only"});
  TD_EXPECT_THROW_MSG(ro.del_("f32"), c10::ValueError, {"read-only"});
  TD_EXPECT_THROW_MSG(ro.set("zz", at::zeros({3})), KeyError, {"'zz'", "new keys"});
  ro.get("f32").fill_(100);  // private copy-on-write pages
  EXPECT_TRUE(TensorDict::load_memmap(dir).get("f32").equal(at::arange(12, at::kFloat).view({3, 4})));
}

TEST(MemmapTest, SubPathLoadsOneSlice) {
  const std::string dir = FreshDir("mm") + "/model";
  TensorDict params({{"0", {{"weight", at::ones({4, 3})}, {"bias", at::zeros({4})}}},
                     {"1", {{"weight", at::full({3, 4}, 2.0)}, {"bias", at::zeros({3})}}}},
                    {});
  params.memmap(dir, MemmapOptions().num_threads(2));
  TensorDict p0 = TensorDict::load_memmap(dir, LoadMemmapOptions().sub_path("0"));
  assert_allclose(p0, params.get_tensordict("0"));
  TensorDict p1 = TensorDict::load_memmap(dir + "/1");
  assert_allclose(p1, params.get_tensordict("1"));
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir, LoadMemmapOptions().sub_path("7")), MemmapError,
                      {"'7'", dir});
  TensorDict deep({{"a b", {{"c", at::ones({1})}}}}, {});
  deep.memmap(dir + "2");
  EXPECT_TRUE(TensorDict::load_memmap(dir + "2", LoadMemmapOptions().sub_path(NestedKey{"a b"}))
                  .get("c")
                  .equal(at::ones({1})));
}

TEST(MemmapTest, InPlaceMemmapAndLike) {
  const std::string root = FreshDir("mm");
  TensorDict td = Sample();
  TensorDict alias = td;
  td.memmap_(root + "/inplace");
  EXPECT_EQ(td.backend(), "dense");
  EXPECT_TRUE(td.is_memmap());
  EXPECT_TRUE(alias.is_memmap());  // every handle sees it
  EXPECT_TRUE(td.is_locked());
  EXPECT_EQ(*MemoryMappedTensor::filename_of(alias.get({"n", "deep", "y"})),
            root + "/inplace/n/deep/y.memmap");
  td.get("f64").fill_(4);
  EXPECT_TRUE(TensorDict::load_memmap(root + "/inplace").get("f64").eq(4).all().item<bool>());
  EXPECT_FALSE(Sample().is_memmap());
  EXPECT_FALSE(TensorDict().is_memmap());

  TensorDict like = Sample().memmap_like(root + "/like", MemmapOptions().num_threads(3));
  EXPECT_EQ(like.keys(KeysOptions().include_nested(true)),
            Sample().keys(KeysOptions().include_nested(true)));
  for (const Value& v : like.values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (v.is_tensor()) {
      EXPECT_EQ(v.tensor().ne(0).sum().item<int64_t>(), 0);
    }
  }
  EXPECT_EQ(like.get_non_tensor("text"), "hello");
  EXPECT_EQ(like.get("bf16").scalar_type(), at::kBFloat16);
}

TEST(MemmapTest, LikeDoesNotAllocateALargeDataset) {
  // 1000 x 1 MiB rows from a single expanded row: no RAM, sparse files.
  const std::string dir = FreshDir("mm") + "/ds";
  TensorDict row({{"images", at::zeros({1024, 1024}, at::kByte)},
                  {"labels", at::zeros({}, at::kInt)}},
                 {});
  TensorDict big({{"images", row.get("images").expand({1000, 1024, 1024})},
                  {"labels", row.get("labels").expand({1000})}},
                 {1000});
  TensorDict data = big.memmap_like(dir);
  struct stat st;
  ASSERT_EQ(::stat((dir + "/images.memmap").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, int64_t{1000} << 20);
  EXPECT_LT(st.st_blocks * 512, int64_t{1} << 20);
  data.get("images").index_put_({at::tensor({1, 500}, at::kLong)}, 7);
  at::Tensor rows = data.get("images").index({at::tensor({1, 10, 500}, at::kLong)});
  EXPECT_EQ(rows.index({0}).sum().item<int64_t>(), 7 * 1024 * 1024);
  EXPECT_EQ(rows.index({1}).sum().item<int64_t>(), 0);
  ASSERT_EQ(::stat((dir + "/images.memmap").c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, int64_t{4} << 20);  // only the touched rows became real
}

// A basic index of a memory-mapped TensorDict (a slice, an integer) gives tensors that are views
// of the mapped files: writing into them writes the files, which another load sees. An advanced
// index (a tensor of rows, a mask) gives copies.
TEST(MemmapTest, SlicesAreViewsOfTheFilesAdvancedIndicesCopies) {
  const std::string dir = FreshDir("mm") + "/ds";
  TensorDict row({{"x", at::zeros({4})}, {"n", {{"y", at::zeros({}, at::kLong)}}}}, {});
  TensorDict data = row.expand({10}).memmap_like(dir);
  TensorDict slice = data.index({at::indexing::Slice(2, 6)});
  EXPECT_EQ(slice.batch_size(), at::IntArrayRef({4}));
  ASSERT_TRUE(MemoryMappedTensor::filename_of(data.get("x")).has_value());
  EXPECT_EQ(MemoryMappedTensor::filename_of(slice.get("x")).value_or(""),
            *MemoryMappedTensor::filename_of(data.get("x")));
  EXPECT_EQ(slice.get("x").data_ptr<float>(), data.get("x").data_ptr<float>() + 2 * 4);
  slice.get("x").fill_(1);
  slice.get({"n", "y"}).fill_(7);
  data.index({9}).get("x").fill_(3);  // an integer index: a view too
  TensorDict copy = data.index({at::tensor({0, 1}, at::kLong)});
  copy.get("x").fill_(5);
  TensorDict masked = data.index({at::arange(10) < 2});
  masked.get("x").fill_(5);
  TensorDict again = TensorDict::load_memmap(dir);
  at::Tensor x = again.get("x");
  EXPECT_EQ(x.index({at::indexing::Slice(2, 6)}).eq(1).all().item<bool>(), true);
  EXPECT_EQ(x.index({9}).eq(3).all().item<bool>(), true);
  EXPECT_EQ(x.index({at::indexing::Slice(0, 2)}).abs().sum().item<float>(), 0.f);  // copies
  EXPECT_EQ(again.get({"n", "y"}).index({at::indexing::Slice(2, 6)}).eq(7).all().item<bool>(),
            true);
  EXPECT_FALSE(MemoryMappedTensor::filename_of(copy.get("x")).has_value());
}

TEST(MemmapTest, ThreadsGiveTheSameResult) {
  const std::string root = FreshDir("mm");
  std::vector<TensorDict::Item> items;
  for (int i = 0; i < 40; ++i) {
    items.emplace_back("k" + std::to_string(i), at::randn({8, 100}));
  }
  TensorDict src(items, {8});
  TensorDict one = src.memmap(root + "/one", MemmapOptions().num_threads(1));
  TensorDict four = src.memmap(root + "/four", MemmapOptions().num_threads(4).fsync(true));
  assert_allclose(one, src);
  assert_allclose(four, src);
  assert_allclose(TensorDict::load_memmap(root + "/four", LoadMemmapOptions().num_threads(4)), src);
  // The default (0) writes this much data (12 MiB in 3 leaves) on every CPU.
  TensorDict big({{"a", at::randn({4, 1 << 18})}, {"b", at::randn({4, 1 << 18})},
                  {"n", {{"c", at::randn({4, 1 << 18})}}}},
                 {4});
  TensorDict automatic = big.memmap(root + "/auto");
  assert_allclose(automatic, big);
  assert_allclose(TensorDict::load_memmap(root + "/auto"), big);
}

TEST(MemmapTest, StaleTemporariesOfDeadWritersAreRemoved) {
  const std::string root = FreshDir("mm");
  // A pid that is not running (pid_max is below 2^22 on Linux).
  const std::string stale = root + "/.td-tmp-4194303-0-abc-ckpt";
  const std::string alive = root + "/.td-tmp-" + std::to_string(::getppid()) + "-0-abc-ckpt";
  const std::string foreign = root + "/.td-tmp-4194303-0-abc-other";
  for (const std::string& d : {stale, alive, foreign}) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  TensorDict({{"a", at::ones({1})}}, {1}).memmap(root + "/ckpt");
  EXPECT_FALSE(Exists(stale));
  EXPECT_TRUE(Exists(alive));
  EXPECT_TRUE(Exists(foreign));
}

// ---- loading validates everything ----------------------------------------------------------

class LoadErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDir("mm") + "/bad";
    Sample().memmap(dir_);
  }
  void ExpectLoadError(const std::vector<std::string>& fragments) {
    TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir_), MemmapError, (fragments));
  }
  std::string dir_;
};

TEST_F(LoadErrorsTest, MissingDirectory) {
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir_ + "/nope"), MemmapError,
                      {dir_ + "/nope", "no memmap directory"});
}

// A file may be a memmap archive, which only //td/backends/memmap/archive (not linked into this
// test) opens: NOTE [ load_memmap of an archive ] in archive_hook.h.
TEST_F(LoadErrorsTest, FileNeedsTheArchiveReader) {
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir_ + "/f32.memmap"), MemmapError,
                      {dir_ + "/f32.memmap", "is a file",
                       "@tensordict//td/backends/memmap/archive"});
}

TEST_F(LoadErrorsTest, MissingFile) {
  ASSERT_EQ(::unlink((dir_ + "/f32.memmap").c_str()), 0);
  ExpectLoadError({dir_ + "/f32.memmap", "missing", "'f32'"});
}

TEST_F(LoadErrorsTest, ExtraFile) {
  WriteText(dir_ + "/n/stray.bin", "x");
  ExpectLoadError({dir_ + "/n/stray.bin", "does not describe"});
}

TEST_F(LoadErrorsTest, WrongSize) {
  ASSERT_EQ(::truncate((dir_ + "/n/deep/y.memmap").c_str(), 20), 0);
  ExpectLoadError({dir_ + "/n/deep/y.memmap", "20 bytes", "torch.Size([3])", "torch.int64", "24"});
}

TEST_F(LoadErrorsTest, MalformedAndTruncatedJson) {
  const std::string meta = ReadText(dir_ + "/meta.json");
  WriteText(dir_ + "/meta.json", meta.substr(0, meta.size() / 2));
  ExpectLoadError({dir_ + "/meta.json", "malformed JSON"});
  WriteText(dir_ + "/meta.json", "");
  ExpectLoadError({dir_ + "/meta.json", "empty file"});
  ::unlink((dir_ + "/meta.json").c_str());
  ExpectLoadError({dir_, "no meta.json"});
}

TEST_F(LoadErrorsTest, UnknownDtypeAndWrongTypes) {
  std::string meta = ReadText(dir_ + "/n/meta.json");
  std::string bad = meta;
  bad.replace(bad.find("torch.float32"), 13, "torch.float99");
  WriteText(dir_ + "/n/meta.json", bad);
  ExpectLoadError({dir_ + "/n/meta.json", "'x'", "unknown dtype \"torch.float99\""});
  bad = meta;
  bad.replace(bad.find("[3,5]"), 5, "\"3x5\"");
  WriteText(dir_ + "/n/meta.json", bad);
  ExpectLoadError({dir_ + "/n/meta.json", "'x'", "expected a list of integers"});
}

TEST_F(LoadErrorsTest, NestedBatchMustStartWithParents) {
  std::string meta = ReadText(dir_ + "/n/deep/meta.json");
  const size_t at = meta.rfind("\"shape\":[3]");
  ASSERT_NE(at, std::string::npos) << meta;
  meta.replace(at, 11, "\"shape\":[]");
  WriteText(dir_ + "/n/deep/meta.json", meta);
  ExpectLoadError({dir_ + "/n/deep/meta.json", "torch.Size([])", "parent's batch size",
                   "torch.Size([3])"});
}

// Levels nest at most td::kMaxNestingDepth deep (structure::Builder::AddLevel, NOTE [ Structure
// codec ] in td/structure/structure.h): a deeper tree is refused at the first level past it.
TEST_F(LoadErrorsTest, LevelsDeeperThanTheLimit) {
  const std::string root = FreshDir("mm") + "/deep";
  const std::string level = R"({"d": {"type": "TensorDict"}, "shape": [], "device": "cpu"})";
  std::string dir = root;
  for (int depth = 0; depth <= kMaxNestingDepth + 1; ++depth, dir += "/d") {
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
    WriteText(dir + "/meta.json", depth <= kMaxNestingDepth ? level : R"({"shape": []})");
  }
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(root), MemmapError,
                      {"/d/meta.json", "nested more than 128 levels deep", "td::kMaxNestingDepth"});
}

TEST_F(LoadErrorsTest, SymlinksAreRefused) {
  ASSERT_EQ(::unlink((dir_ + "/f32.memmap").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/passwd", (dir_ + "/f32.memmap").c_str()), 0);
  ExpectLoadError({dir_ + "/f32.memmap", "symlink"});
}

TEST_F(LoadErrorsTest, KindMismatch) {
  ASSERT_EQ(::unlink((dir_ + "/f64.memmap").c_str()), 0);
  ASSERT_EQ(::mkdir((dir_ + "/f64.memmap").c_str(), 0755), 0);
  ExpectLoadError({dir_ + "/f64.memmap", "a directory", "tensor file"});
}

TEST_F(LoadErrorsTest, PickledNonTensorIsNeverLoaded) {
  WriteText(dir_ + "/text/meta.json",
            R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_is_non_tensor": true})");
  WriteText(dir_ + "/text/other.pickle", "cos\nsystem\n(S'echo pwned'\ntR.");
  ExpectLoadError({dir_ + "/text/meta.json", "pickle"});
}

TEST_F(LoadErrorsTest, WritersTemporariesAreIgnored) {
  WriteText(dir_ + "/.td-tmp-1-2-3-f32.memmap", "partial");
  ASSERT_EQ(::mkdir((dir_ + "/n/.td-tmp-1-2-3-deep").c_str(), 0755), 0);
  EXPECT_NO_THROW(TensorDict::load_memmap(dir_));
}

TEST(MemmapRegistryTest, OpensAnEmptyDirectory) {
  const std::string dir = FreshDir("mm") + "/reg";
  TensorDict t = MakeTensorDict("memmap", StorageSpec().batch_size({2}).path(dir));
  EXPECT_EQ(t.backend(), "memmap");
  EXPECT_FALSE(t.is_locked());
  t.set("a", at::ones({2, 3}));
  EXPECT_TRUE(TensorDict::load_memmap(dir).get("a").equal(at::ones({2, 3})));
  EXPECT_THROW(MakeTensorDict("memmap", StorageSpec().batch_size({2}).path(dir)), c10::ValueError);
  // Without a path: a fresh directory under $TMPDIR.
  TensorDict anywhere = MakeTensorDict("memmap", StorageSpec().batch_size({2}));
  const std::string where = static_cast<const MemmapStorage&>(anywhere.storage()).path();
  anywhere.set("b", at::ones({2}));
  EXPECT_TRUE(TensorDict::load_memmap(where).get("b").equal(at::ones({2})));
}

}  // namespace
}  // namespace td

namespace td {
namespace {

// Dim names (NOTE [ Dim names ] in td/core/names.cc): meta.json has no names (as upstream's), so
// a loaded TensorDict is unnamed; the TensorDicts memmap() / memmap_() / memmap_like() return
// keep them.
TEST(MemmapTest, DimNamesStayInMemoryOnly) {
  const std::string root = FreshDir("mm");
  TensorDict src = Sample();
  src.set_names({"batch"});
  TensorDict saved = src.memmap(root + "/named");
  EXPECT_EQ(saved.names(), DimNames({"batch"}));
  EXPECT_EQ(saved.get_tensordict({"n", "deep"}).names(), DimNames({"batch"}));
  EXPECT_EQ(ReadText(root + "/named/meta.json").find("batch\""), std::string::npos);
  TensorDict loaded = TensorDict::load_memmap(root + "/named");
  EXPECT_FALSE(loaded.has_names());
  assert_allclose(loaded, src);
  EXPECT_EQ(src.memmap_like(root + "/like").names(), DimNames({"batch"}));
  TensorDict in_place = Sample();
  in_place.set_names({"b"});
  in_place.memmap_(root + "/inplace");
  EXPECT_EQ(in_place.names(), DimNames({"b"}));
}

}  // namespace
}  // namespace td
