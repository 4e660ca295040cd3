// save / load / dumps / load_ / saved_path / memmap_refresh_ / make_memmap*: directories and
// archives, nested keys, the lock, and bad input.
#include "td/io/io.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "td/backends/memmap/archive/archive.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

using testing_util::Exists;
using testing_util::FreshDir;
using testing_util::IsDir;

TensorDict Data() {
  return TensorDict({{"a", at::arange(6, at::kFloat).view({3, 2})},
                     {"n", {{"b", at::arange(3, at::kLong)}, {"s", "text"}}}},
                    {3});
}

TEST(SaveLoad, DirectoryOrArchiveBySuffix) {
  const std::string dir = FreshDir("save");
  TensorDict d = save(Data(), dir + "/plain");
  EXPECT_TRUE(IsDir(dir + "/plain"));
  EXPECT_EQ(d.backend(), "memmap");
  TensorDict z = save(Data(), dir + "/one.tdz");
  EXPECT_FALSE(IsDir(dir + "/one.tdz"));
  EXPECT_TRUE(is_memmap_archive(dir + "/one.tdz"));
  EXPECT_TRUE(z.get({"n", "b"}).equal(at::arange(3, at::kLong)));
  // archive(true) without the suffix, archive(false) with it.
  save(Data(), dir + "/forced", SaveOptions().archive(true));
  EXPECT_TRUE(is_memmap_archive(dir + "/forced"));
  save(Data(), dir + "/dir.tdz", SaveOptions().archive(false));
  EXPECT_TRUE(IsDir(dir + "/dir.tdz"));
  dumps(Data(), dir + "/dumped.tdz");
  for (const char* p : {"/plain", "/one.tdz", "/forced", "/dir.tdz", "/dumped.tdz"}) {
    TensorDict back = load(dir + p);
    EXPECT_TRUE(back.get("a").equal(Data().get("a"))) << p;
    EXPECT_TRUE(back.get({"n", "b"}).equal(Data().get({"n", "b"}))) << p;
    EXPECT_EQ(back.get_non_tensor({"n", "s"}), "text") << p;
  }
  EXPECT_EQ(load(dir + "/one.tdz", LoadOptions().sub_path(NestedKey("n"))).get_non_tensor("s"), "text");
  // No staging directory is left behind.
  for (const std::string& name : testing_util::ListNames(dir)) {
    EXPECT_EQ(name.find(".td-tmp-"), std::string::npos) << name;
  }
  TD_EXPECT_THROW_MSG(save(Data(), dir + "/one.tdz", SaveOptions().exists_ok(false)), ValueError,
                      {"one.tdz", "already exists"});
  TD_EXPECT_THROW_MSG(save(Data(), dir + "/plain", SaveOptions().archive(true)), ValueError,
                      {"plain", "is a directory"});
  TD_EXPECT_THROW_MSG(load(dir + "/nothing"), MemmapError, {"nothing"});
}

TEST(SaveLoad, LoadIntoExisting) {
  const std::string dir = FreshDir("load_");
  save(Data(), dir + "/d.tdz");
  TensorDict live({{"a", at::zeros({3, 2})}, {"keep", at::ones({3})}}, {3});
  TensorDict& same = load_(live, dir + "/d.tdz");
  EXPECT_TRUE(same.is_same(live));
  EXPECT_TRUE(live.get("a").equal(Data().get("a")));
  EXPECT_TRUE(live.get({"n", "b"}).equal(Data().get({"n", "b"})));
  EXPECT_TRUE(live.get("keep").equal(at::ones({3})));
  // A batch size the file's entries do not fit: the key is named.
  TensorDict other({}, {5});
  TD_EXPECT_THROW_MSG(load_memmap_(other, dir + "/d.tdz"), BatchSizeError, {"'a'"});
  // A locked TensorDict that is not memory-mapped refuses new keys.
  TensorDict locked({{"a", at::zeros({3, 2})}}, {3});
  locked.lock_();
  EXPECT_THROW(load_(locked, dir + "/d.tdz"), LockedError);
  // A memory-mapped one takes the values into its own files and stays locked.
  TensorDict mapped = TensorDict({{"a", at::zeros({3, 2})}}, {3}).memmap(dir + "/m");
  ASSERT_TRUE(mapped.is_locked());
  load_(mapped, dir + "/d.tdz");
  EXPECT_TRUE(mapped.is_locked());
  EXPECT_TRUE(TensorDict::load_memmap(dir + "/m").get({"n", "b"}).equal(at::arange(3, at::kLong)));
}

TEST(SaveLoad, SavedPathAndRefresh) {
  const std::string dir = FreshDir("refresh");
  TensorDict mapped = Data().memmap(dir + "/m");
  EXPECT_TRUE(std::filesystem::equivalent(saved_path(mapped), dir + "/m"));
  EXPECT_TRUE(std::filesystem::equivalent(saved_path(mapped.get_tensordict("n")), dir + "/m/n"));
  TD_EXPECT_THROW_MSG(saved_path(Data()), ValueError, {"'dense'", "not memory-mapped"});
  TensorDict dense = Data();
  TD_EXPECT_THROW_MSG(memmap_refresh_(dense), ValueError, {"'dense'"});
  // Another handle (another process, in real use) adds a key through the directory.
  TensorDict writer = TensorDict::load_memmap(dir + "/m");
  writer.unlock_();
  writer.set("late", at::full({3}, 9.0));
  EXPECT_FALSE(mapped.contains("late"));
  memmap_refresh_(mapped);
  EXPECT_TRUE(mapped.get("late").equal(at::full({3}, 9.0)));
  EXPECT_TRUE(mapped.is_locked());
}

TEST(MakeMemmap, NewFilesUnderNestedKeys) {
  const std::string dir = FreshDir("make");
  TensorDict mapped = Data().memmap(dir + "/m");
  at::Tensor z = make_memmap(mapped, {"new", "zeros"}, {3, 4}, at::kInt);
  EXPECT_EQ(z.sizes().vec(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(z.scalar_type(), at::kInt);
  EXPECT_EQ(z.count_nonzero().item<int64_t>(), 0);
  EXPECT_TRUE(MemoryMappedTensor::is_memory_mapped(z));
  z.fill_(5);  // writes the file
  EXPECT_TRUE(TensorDict::load_memmap(dir + "/m").get({"new", "zeros"}).equal(at::full({3, 4}, 5, at::kInt)));
  EXPECT_TRUE(mapped.is_locked());

  at::Tensor c = make_memmap_from_tensor(mapped, "copy", at::arange(3, at::kDouble));
  EXPECT_TRUE(c.equal(at::arange(3, at::kDouble)));
  at::Tensor e = make_memmap_from_tensor(mapped, "like", at::ones({3, 2}), /*copy_data=*/false);
  EXPECT_TRUE(e.equal(at::zeros({3, 2})));
  at::Tensor src = at::arange(8, at::kFloat);
  at::Tensor s = make_memmap_from_storage(mapped, {"n", "st"}, src.storage(), {3, 2}, at::kFloat);
  EXPECT_TRUE(s.equal(at::arange(6, at::kFloat).view({3, 2})));
  EXPECT_TRUE(TensorDict::load_memmap(dir + "/m").get({"n", "st"}).equal(s));

  TD_EXPECT_THROW_MSG(make_memmap(mapped, "a", {3}), ValueError, {"'a'", "already exists"});
  TD_EXPECT_THROW_MSG(make_memmap_from_storage(mapped, "big", src.storage(), {3, 4}), ValueError,
                      {"'big'", "48 bytes", "holds 32"});
  TensorDict dense = Data();
  TD_EXPECT_THROW_MSG(make_memmap(dense, "x", {3}), ValueError, {"'x'", "memmap backend", "'dense'"});
  TD_EXPECT_THROW_MSG(make_memmap(mapped, "bad", {4}), BatchSizeError, {"'bad'"});
  EXPECT_FALSE(mapped.contains("bad"));
}

}  // namespace
}  // namespace td
