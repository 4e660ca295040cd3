#include "td/backends/memmap/memory_mapped_tensor.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

using testing_util::FileSizeOf;
using testing_util::FreshDir;

TEST(MemoryMappedTensorTest, FromTensorWritesTheBytesAndMapsThem) {
  const std::string dir = FreshDir("mmt");
  at::Tensor src = at::arange(12, at::kFloat).view({3, 4});
  MemoryMappedTensor t = MemoryMappedTensor::from_tensor(src, dir + "/x.memmap");
  EXPECT_TRUE(t.equal(src));
  EXPECT_EQ(t.filename(), dir + "/x.memmap");
  EXPECT_EQ(t.mode(), MemmapMode::kReadWrite);
  EXPECT_EQ(FileSizeOf(dir + "/x.memmap"), 48);
  // Writes go to the file: a second mapping sees them.
  t.index_put_({1}, -1);
  MemoryMappedTensor again = MemoryMappedTensor::from_filename(dir + "/x.memmap", at::kFloat, {3, 4});
  EXPECT_TRUE(again.index({1}).eq(-1).all().item<bool>());
  EXPECT_TRUE(again.index({0}).equal(src.index({0})));
}

TEST(MemoryMappedTensorTest, ViewsKeepTheMapping) {
  const std::string dir = FreshDir("mmt");
  MemoryMappedTensor t = MemoryMappedTensor::from_tensor(at::arange(100, at::kLong).view({10, 10}),
                                                         dir + "/v.memmap");
  at::Tensor rows = t.index({at::indexing::Slice(2, 5)});
  ASSERT_TRUE(MemoryMappedTensor::filename_of(rows).has_value());
  EXPECT_EQ(*MemoryMappedTensor::filename_of(rows), dir + "/v.memmap");
  EXPECT_EQ(rows.data_ptr<int64_t>(), t.data_ptr<int64_t>() + 20);  // no copy
  EXPECT_FALSE(MemoryMappedTensor::is_memory_mapped(at::ones({2})));
  EXPECT_FALSE(MemoryMappedTensor::is_memory_mapped(at::Tensor()));
  // A fancy index copies (as in LibTorch) and is no longer a mapping.
  EXPECT_FALSE(MemoryMappedTensor::is_memory_mapped(t.index({at::tensor({1, 3}, at::kLong)})));
}

TEST(MemoryMappedTensorTest, FactoriesAndSparseZeros) {
  const std::string dir = FreshDir("mmt");
  MemoryMappedTensor z = MemoryMappedTensor::zeros({1 << 20, 64}, dir + "/z.memmap", at::kByte);
  EXPECT_EQ(FileSizeOf(dir + "/z.memmap"), int64_t{64} << 20);
  struct stat st;
  ASSERT_EQ(::stat((dir + "/z.memmap").c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, int64_t{1} << 20) << "zeros() should create a sparse file";
  EXPECT_EQ(z.index({12345}).sum().item<int64_t>(), 0);
  MemoryMappedTensor o = MemoryMappedTensor::ones({3}, dir + "/o.memmap", at::kDouble);
  EXPECT_TRUE(o.equal(at::ones({3}, at::kDouble)));
  MemoryMappedTensor f = MemoryMappedTensor::full({2, 2}, 7, dir + "/f.memmap", at::kInt);
  EXPECT_TRUE(f.equal(at::full({2, 2}, 7, at::kInt)));
  MemoryMappedTensor e = MemoryMappedTensor::empty({0, 3}, dir + "/e.memmap");
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(FileSizeOf(dir + "/e.memmap"), 0);
  EXPECT_EQ(MemoryMappedTensor::from_filename(dir + "/e.memmap", at::kFloat, {0, 3}).sizes(),
            at::IntArrayRef({0, 3}));
}

TEST(MemoryMappedTensorTest, StridedAndExpandedSourcesAreWrittenInCOrder) {
  const std::string dir = FreshDir("mmt");
  at::Tensor base = at::arange(6, at::kShort).view({2, 3});
  MemoryMappedTensor t = MemoryMappedTensor::from_tensor(base.t(), dir + "/t.memmap");
  EXPECT_TRUE(t.equal(base.t().contiguous()));
  MemoryMappedTensor x = MemoryMappedTensor::from_tensor(at::arange(4).expand({5, 4}),
                                                         dir + "/x.memmap");
  EXPECT_TRUE(x.equal(at::arange(4).expand({5, 4})));
  at::Tensor c = at::complex(at::ones({2}), at::ones({2}));
  MemoryMappedTensor cj = MemoryMappedTensor::from_tensor(c.conj(), dir + "/c.memmap");
  EXPECT_TRUE(cj.equal(c.conj().resolve_conj()));
}

TEST(MemoryMappedTensorTest, ReadOnlyMappingNeverWritesTheFile) {
  const std::string dir = FreshDir("mmt");
  MemoryMappedTensor::from_tensor(at::zeros({4}), dir + "/r.memmap");
  MemoryMappedTensor ro =
      MemoryMappedTensor::from_filename(dir + "/r.memmap", at::kFloat, {4}, MemmapMode::kReadOnly);
  EXPECT_EQ(ro.mode(), MemmapMode::kReadOnly);
  ro.fill_(5);  // copy-on-write: this process's pages only
  EXPECT_TRUE(ro.eq(5).all().item<bool>());
  MemoryMappedTensor fresh = MemoryMappedTensor::from_filename(dir + "/r.memmap", at::kFloat, {4});
  EXPECT_TRUE(fresh.eq(0).all().item<bool>());
}

TEST(MemoryMappedTensorTest, Errors) {
  const std::string dir = FreshDir("mmt");
  MemoryMappedTensor::from_tensor(at::zeros({4}), dir + "/a.memmap");
  TD_EXPECT_THROW_MSG(MemoryMappedTensor::from_tensor(at::zeros({4}), dir + "/a.memmap"),
                      c10::ValueError, {dir + "/a.memmap", "already exists", "exists_ok"});
  EXPECT_NO_THROW(MemoryMappedTensor::from_tensor(at::ones({5}), dir + "/a.memmap", true));
  TD_EXPECT_THROW_MSG(MemoryMappedTensor::from_filename(dir + "/a.memmap", at::kFloat, {4}),
                      MemmapError, {dir + "/a.memmap", "20 bytes", "torch.Size([4])", "16"});
  TD_EXPECT_THROW_MSG(MemoryMappedTensor::from_filename(dir + "/nope.memmap", at::kFloat, {4}),
                      MemmapError, {dir + "/nope.memmap", "No such file"});
  ASSERT_EQ(::symlink((dir + "/a.memmap").c_str(), (dir + "/link.memmap").c_str()), 0);
  TD_EXPECT_THROW_MSG(MemoryMappedTensor::from_filename(dir + "/link.memmap", at::kFloat, {5}),
                      MemmapError, {"link.memmap", "symlink"});
  TD_EXPECT_THROW_MSG(MemoryMappedTensor::from_tensor(at::ones({5}), dir + "/link.memmap", true),
                      MemmapError, {"link.memmap", "symlink"});
  TD_EXPECT_THROW_MSG(MemoryMappedTensor::from_filename(dir, at::kFloat, {5}), MemmapError,
                      {dir});
  TD_EXPECT_THROW_MSG(
      MemoryMappedTensor::from_tensor(at::ones({2}).to_sparse(), dir + "/s.memmap"),
      c10::ValueError, {"strided"});
}

}  // namespace
}  // namespace td
