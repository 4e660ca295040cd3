#include "td/data/batches.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/stack.h"
#include "td/core/testing.h"
#include "td/data/test_rows.h"

namespace {

using td::TensorDict;
using td::data::BatchLoader;
using td::data::BatchOptions;

using td::data::test::Rows;
using td::testing_util::FreshDir;

std::vector<TensorDict> Epoch(BatchLoader& loader) {
  std::vector<TensorDict> out;
  for (const TensorDict& b : loader) out.push_back(b);
  return out;
}

TEST(BatchLoader, SequentialBatches) {
  TensorDict data = Rows(10);
  BatchLoader loader(data, BatchOptions(4));
  EXPECT_EQ(loader.size(), 3);
  std::vector<TensorDict> batches = Epoch(loader);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(batches[2].batch_size(), at::IntArrayRef({2}));
  EXPECT_TRUE((td::cat(batches, 0) == data).all());
  // Batches are copies: writing into one leaves the data alone.
  batches[0].get("x").fill_(-1);
  EXPECT_EQ(data.get("x")[0][0].item<float>(), 0.0f);

  BatchLoader dropping(data, BatchOptions(4).drop_last(true));
  EXPECT_EQ(dropping.size(), 2);
  EXPECT_EQ(Epoch(dropping).size(), 2u);
  BatchLoader whole(data, BatchOptions(100));
  ASSERT_EQ(Epoch(whole).size(), 1u);
  BatchLoader none(data, BatchOptions(100).drop_last(true));
  EXPECT_TRUE(none.begin() == none.end());
}

// Batch sizes near INT64_MAX: one batch of every row (or none with drop_last), no overflow in
// size() or in cutting the batches.
TEST(BatchLoader, HugeBatchSizes) {
  TensorDict data = Rows(10);
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (const int64_t b : {max, max - 5, max / 2 + 1}) {
    for (const bool shuffle : {false, true}) {
      BatchLoader loader(data, BatchOptions(b).shuffle(shuffle));
      EXPECT_EQ(loader.size(), 1) << b;
      std::vector<TensorDict> batches = Epoch(loader);
      ASSERT_EQ(batches.size(), 1u) << b;
      EXPECT_EQ(batches[0].batch_size(), at::IntArrayRef({10})) << b;
      EXPECT_TRUE(at::equal(std::get<0>(batches[0].get("y").sort()), data.get("y"))) << b;
      BatchLoader dropping(data, BatchOptions(b).drop_last(true));
      EXPECT_EQ(dropping.size(), 0) << b;
      EXPECT_TRUE(dropping.begin() == dropping.end()) << b;
    }
  }
  // Around the row count: exact division and one row more or less.
  EXPECT_EQ(BatchLoader(data, BatchOptions(10)).size(), 1);
  EXPECT_EQ(BatchLoader(data, BatchOptions(9)).size(), 2);
  EXPECT_EQ(BatchLoader(data, BatchOptions(9).drop_last(true)).size(), 1);
  EXPECT_EQ(BatchLoader(data, BatchOptions(11)).size(), 1);
  EXPECT_EQ(BatchLoader(Rows(0), BatchOptions(max)).size(), 0);
}

// *loader.begin() is a batch (a handle) of its own: it outlives the temporary iterator.
TEST(BatchLoader, FirstBatchOutlivesTheIterator) {
  TensorDict data = Rows(10);
  BatchLoader loader(data, BatchOptions(4));
  const TensorDict& first = *loader.begin();
  EXPECT_EQ(first.batch_size(), at::IntArrayRef({4}));
  EXPECT_TRUE(at::equal(first.get("y"), at::arange(4, at::kLong)));
  auto it = loader.begin();
  TensorDict taken = *it;
  ++it;
  EXPECT_TRUE(at::equal(taken.get("y"), at::arange(4, at::kLong)));
  EXPECT_TRUE(at::equal(it->get("y"), at::arange(4, 8, at::kLong)));
}

// Contrast with the loader's copies: basic indexing (a Slice, an integer) of a memory-mapped
// TensorDict gives views of its files, so writes through them reach the files.
TEST(BatchLoader, SliceOfAMemmapTensorDictIsAViewOfTheFiles) {
  const std::string dir = FreshDir("slice") + "/data";
  Rows(10).memmap(dir);
  TensorDict data = TensorDict::load_memmap(dir);
  TensorDict slice = data.index({at::indexing::Slice(2, 4)});
  slice.get("y").fill_(-7);
  EXPECT_EQ(TensorDict::load_memmap(dir).get("y")[3].item<int64_t>(), -7);
  BatchLoader loader(data, BatchOptions(4));
  TensorDict batch = *loader.begin();
  batch.get("y").fill_(-9);
  EXPECT_EQ(TensorDict::load_memmap(dir).get("y")[0].item<int64_t>(), 0);
}

// A memmap file truncated (by another process) while a BatchLoader reads it: the gather is a
// MemmapError naming the key, not SIGBUS (NOTE [ SIGBUS guard ] in td/core/mapped_copy.h). In a
// child process, so that a regression fails the test instead of ending the test binary; small
// enough that the child gathers on its own thread (no thread pool after fork()).
TEST(BatchLoader, TruncatedMemmapFileIsAnErrorNotSigbus) {
  const std::string dir = FreshDir("truncated") + "/data";
  TensorDict({{"x", at::ones({256, 256})}, {"y", at::arange(256, at::kLong)}}, {256}).memmap(dir);
  td::test::ChildOutcome o = td::test::ErrorInChild<td::MemmapError>([&] {
    TensorDict data = TensorDict::load_memmap(dir);
    BatchLoader loader(data, BatchOptions(32).shuffle(true));
    ASSERT_EQ(::truncate((dir + "/x.memmap").c_str(), 4096), 0);
    for (const TensorDict& b : loader) (void)b;
  });
  ASSERT_EQ(o.kind, "error") << o;
  EXPECT_NE(o.message.find("key 'x'"), std::string::npos) << o;
  EXPECT_NE(o.message.find("SIGBUS"), std::string::npos) << o;
  EXPECT_NE(o.message.find("truncated"), std::string::npos) << o;
}

TEST(BatchLoader, ShuffleIsAPermutationPerEpochAndFollowsTheSeed) {
  TensorDict data = Rows(37);
  BatchLoader a(data, BatchOptions(8).shuffle(true).seed(3));
  BatchLoader b(data, BatchOptions(8).shuffle(true).seed(3));
  BatchLoader c(data, BatchOptions(8).shuffle(true).seed(4));
  std::vector<at::Tensor> orders;
  for (int e = 0; e < 3; ++e) {
    std::vector<TensorDict> batches = Epoch(a);
    TensorDict all = td::cat(batches, 0);
    const at::Tensor y = all.get("y");
    EXPECT_TRUE(at::equal(std::get<0>(y.sort()), at::arange(37, at::kLong)));
    EXPECT_TRUE(at::equal(y, a.order(e)));
    EXPECT_TRUE(at::equal(all.get("x"), data.get("x").index({y})));
    EXPECT_TRUE(at::equal(all.get({"n", "z"}), data.get({"n", "z"}).index({y})));
    EXPECT_TRUE(at::equal(td::cat(Epoch(b), 0).get("y"), y));  // same seed, same order
    orders.push_back(y);
  }
  EXPECT_EQ(a.epoch(), 3);
  EXPECT_FALSE(at::equal(orders[0], orders[1]));  // a new order every epoch
  EXPECT_FALSE(at::equal(td::cat(Epoch(c), 0).get("y"), orders[0]));  // another seed
}

TEST(BatchLoader, PrefetchGivesTheSameBatches) {
  TensorDict data = Rows(101);
  BatchLoader plain(data, BatchOptions(10).shuffle(true).seed(9));
  BatchLoader ahead(data, BatchOptions(10).shuffle(true).seed(9).prefetch(true));
  for (int e = 0; e < 3; ++e) {
    std::vector<TensorDict> p = Epoch(plain), q = Epoch(ahead);
    ASSERT_EQ(p.size(), q.size());
    for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE((p[i] == q[i]).all());
  }
  // An epoch abandoned half-way (its prefetched batch is dropped), then a new one.
  auto it = ahead.begin();
  ++it;
  std::vector<TensorDict> next = Epoch(ahead);
  EXPECT_TRUE(at::equal(td::cat(next, 0).get("y"), ahead.order(4)));
  // Iterators of the earlier epoch keep working.
  int64_t rest = 0;
  for (; it != ahead.end(); ++it) ++rest;
  EXPECT_EQ(rest, 10);
}

TEST(BatchLoader, MemmapAndLazyStack) {
  TensorDict data = Rows(64);
  TensorDict on_disk = data.memmap(FreshDir("batches_memmap") + "/td");
  ASSERT_TRUE(on_disk.is_memmap());
  BatchLoader dense(data, BatchOptions(16).shuffle(true).seed(1));
  BatchLoader disk(on_disk, BatchOptions(16).shuffle(true).seed(1).prefetch(true));
  std::vector<TensorDict> p = Epoch(dense), q = Epoch(disk);
  ASSERT_EQ(p.size(), 4u);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE((p[i] == q[i]).all());

  std::vector<TensorDict> members;
  for (int64_t i = 0; i < 12; ++i) members.push_back(data.index({i}).clone());
  BatchLoader lazy(td::lazy_stack(members, 0), BatchOptions(5).shuffle(true).seed(2));
  std::vector<TensorDict> lazy_batches = Epoch(lazy);
  TensorDict all = td::cat(lazy_batches, 0);
  EXPECT_TRUE(at::equal(all.get("x"), data.get("x").index({lazy.order(0)})));
  // Batches of a lazy stack are dense copies too: writing into one leaves the members alone.
  EXPECT_EQ(lazy_batches[0].backend(), "dense");
  const int64_t first = lazy.order(0)[0].item<int64_t>();
  lazy_batches[0].set_("y", at::full({5}, -1, at::kLong));
  EXPECT_EQ(members[first].get("y").item<int64_t>(), first);
}

TEST(BatchLoader, TrailingBatchDimsNestedLevelsAndNonTensorData) {
  TensorDict data({{"x", at::arange(6 * 2 * 4, at::kFloat).view({6, 2, 4})},
                   {"n", TensorDict({{"z", at::arange(6 * 2 * 3, at::kInt).view({6, 2, 3})}},
                                    {6, 2, 3})}},
                  {6, 2});
  data.set_non_tensor("tag", "images");
  BatchLoader loader(data, BatchOptions(4).shuffle(true).seed(5));
  std::vector<TensorDict> batches = Epoch(loader);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].batch_size(), at::IntArrayRef({4, 2}));
  EXPECT_EQ(batches[1].batch_size(), at::IntArrayRef({2, 2}));
  EXPECT_EQ(batches[1].get_tensordict("n").batch_size(), at::IntArrayRef({2, 2, 3}));
  EXPECT_EQ(batches[0].get_non_tensor("tag"), "images");
  const at::Tensor rows = loader.order(0);
  TensorDict all = td::cat(batches, 0);
  EXPECT_TRUE(at::equal(all.get("x"), data.get("x").index({rows})));
  EXPECT_TRUE(at::equal(all.get({"n", "z"}), data.get({"n", "z"}).index({rows})));
}

TEST(BatchLoader, Errors) {
  TD_EXPECT_THROW_MSG(BatchLoader(Rows(4), BatchOptions(0)), td::ValueError,
                      {"batch_size must be at least 1, got 0"});
  TD_EXPECT_THROW_MSG(BatchLoader(TensorDict({{"a", at::ones({3})}}, {}), BatchOptions(2)),
                      td::ValueError, {"torch.Size([])", "first batch dim"});
}

}  // namespace
