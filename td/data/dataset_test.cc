#include "td/data/dataset.h"

#include <gtest/gtest.h>
#include <torch/data/dataloader.h>
#include <torch/data/samplers.h>

#include <string>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/stack.h"
#include "td/core/testing.h"
#include "td/data/test_rows.h"

namespace {

using td::TensorDict;

using td::data::test::Rows;
using td::testing_util::FreshDir;

// Runs a loader over `data` and returns the batches.
template <class Sampler>
std::vector<TensorDict> Collect(const TensorDict& data, size_t batch_size, size_t workers) {
  auto loader = torch::data::make_data_loader<Sampler>(
      td::data::TensorDictDataset(data).map(td::data::Stack()),
      torch::data::DataLoaderOptions().batch_size(batch_size).workers(workers));
  std::vector<TensorDict> batches;
  for (TensorDict& b : *loader) batches.push_back(b);
  return batches;
}

// Every row exactly once, each row intact (x, y and n/z agree).
void ExpectEveryRowOnce(const std::vector<TensorDict>& batches, int64_t n) {
  std::vector<TensorDict> parts(batches.begin(), batches.end());
  TensorDict all = td::cat(parts, 0);
  ASSERT_EQ(all.batch_size(), at::IntArrayRef({n}));
  const at::Tensor y = all.get("y");
  EXPECT_TRUE(at::equal(std::get<0>(y.sort()), at::arange(n, at::kLong)));
  EXPECT_TRUE(at::equal(all.get("x"), Rows(n).get("x").index({y})));
  EXPECT_TRUE(at::equal(all.get({"n", "z"}), Rows(n).get({"n", "z"}).index({y})));
}

TEST(TensorDictDataset, RowsAndErrors) {
  TensorDict data = Rows();
  td::data::TensorDictDataset ds(data);
  EXPECT_EQ(*ds.size(), 10u);
  TensorDict row = ds.get(3);
  EXPECT_EQ(row.batch_size(), at::IntArrayRef({}));
  EXPECT_TRUE(at::equal(row.get("x"), data.get("x")[3]));
  TD_EXPECT_THROW_MSG(ds.get(10), td::IndexError, {"row 10", "10 rows"});
  TD_EXPECT_THROW_MSG(td::data::TensorDictDataset(TensorDict({{"a", at::ones({3})}}, {})),
                      td::ValueError, {"torch.Size([])", "first batch dim"});
  TD_EXPECT_THROW_MSG(td::data::Stack().apply_batch({}), td::ValueError, {"empty batch"});
}

TEST(TensorDictDataset, SequentialSamplerStacksRowsInOrder) {
  std::vector<TensorDict> batches =
      Collect<torch::data::samplers::SequentialSampler>(Rows(), 4, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(batches[2].batch_size(), at::IntArrayRef({2}));
  TensorDict all = td::cat(batches, 0);
  EXPECT_TRUE((all == Rows()).all());
}

TEST(TensorDictDataset, RandomSamplerAndWorkers) {
  ExpectEveryRowOnce(Collect<torch::data::samplers::RandomSampler>(Rows(50), 8, 0), 50);
  ExpectEveryRowOnce(Collect<torch::data::samplers::RandomSampler>(Rows(50), 8, 2), 50);
  ExpectEveryRowOnce(Collect<torch::data::samplers::SequentialSampler>(Rows(50), 7, 3), 50);
}

TEST(TensorDictDataset, MemmapAndLazyStack) {
  TensorDict on_disk = Rows(20).memmap(FreshDir("ds_memmap") + "/td");
  ASSERT_TRUE(on_disk.is_memmap());
  ExpectEveryRowOnce(Collect<torch::data::samplers::RandomSampler>(on_disk, 6, 2), 20);

  std::vector<TensorDict> members;
  TensorDict rows = Rows(12);
  for (int64_t i = 0; i < 12; ++i) members.push_back(rows.index({i}).clone());
  TensorDict lazy = td::lazy_stack(members, 0);
  ASSERT_EQ(lazy.batch_size(), at::IntArrayRef({12}));
  ExpectEveryRowOnce(Collect<torch::data::samplers::RandomSampler>(lazy, 5, 2), 12);
}

TEST(TensorDictDataset, LibTorchStackSpelling) {
  auto loader = torch::data::make_data_loader(
      td::data::TensorDictDataset(Rows()).map(torch::data::transforms::Stack<TensorDict>()),
      torch::data::DataLoaderOptions().batch_size(5));
  int n = 0;
  for (TensorDict& b : *loader) {
    EXPECT_EQ(b.batch_size(), at::IntArrayRef({5}));
    ++n;
  }
  EXPECT_EQ(n, 2);
}

}  // namespace
