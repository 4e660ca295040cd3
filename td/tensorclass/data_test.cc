// td::data::ClassBatchLoader (td/tensorclass/data.h): BatchLoader's batches, as the class.
#include "td/tensorclass/data.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

using data::BatchLoader;
using data::BatchOptions;
using data::ClassBatchLoader;

class Next : public TensorClass<Next> {
 public:
  TD_TENSORCLASS(Next, (at::Tensor, obs), (at::Tensor, reward))
};
class Transition : public TensorClass<Transition> {
 public:
  TD_TENSORCLASS(Transition, (at::Tensor, obs), (at::Tensor, action), (Next, next),
                 (std::string, env))
};

// Row i holds i everywhere (obs [n, 3], action [n, 2], next.obs [n, 3], next.reward [n]).
Transition Rows(int64_t n) {
  at::Tensor i = at::arange(n, at::kFloat);
  return Transition(i.unsqueeze(1).expand({n, 3}).contiguous(),
                    i.unsqueeze(1).expand({n, 2}).contiguous(),
                    Next(i.unsqueeze(1).expand({n, 3}).contiguous() + 1, i, {n}), "cartpole", {n});
}

// The same batches as BatchLoader over the class's TensorDict, as classes, with the text field.
TEST(ClassBatchLoader, BatchesAreTheClass) {
  Transition rows = Rows(10);
  ClassBatchLoader loader(rows, BatchOptions(4).shuffle(true).seed(3));
  BatchLoader plain(rows.tensordict(), BatchOptions(4).shuffle(true).seed(3));
  EXPECT_EQ(loader.size(), 3);
  EXPECT_EQ(loader.num_rows(), 10);
  std::vector<Transition> batches;
  for (const Transition& b : loader) batches.push_back(b);
  std::vector<TensorDict> want;
  for (const TensorDict& b : plain) want.push_back(b);
  ASSERT_EQ(batches.size(), 3u);
  ASSERT_EQ(want.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(at::equal(batches[k].obs(), want[k].get("obs"))) << k;
    EXPECT_TRUE(at::equal(batches[k].next().reward(), want[k].get({"next", "reward"}))) << k;
    // Every field of a row comes from the same row.
    EXPECT_TRUE(at::equal(batches[k].action().select(1, 0), batches[k].next().reward())) << k;
    EXPECT_EQ(batches[k].env(), "cartpole");
  }
  EXPECT_EQ(batches[2].batch_size(), at::IntArrayRef({2}));
  EXPECT_EQ(loader.epoch(), 1);
  EXPECT_TRUE(at::equal(loader.order(0), plain.order(0)));
  // Every row once per epoch.
  at::Tensor seen = at::cat({batches[0].next().reward(), batches[1].next().reward(),
                             batches[2].next().reward()});
  EXPECT_TRUE(at::equal(std::get<0>(seen.sort()), at::arange(10, at::kFloat)));
  // Batches are copies: writing into one leaves the data alone.
  batches[0].obs().fill_(-1);
  EXPECT_GE(rows.obs().min().item<float>(), 0.f);
  // *begin() outlives the temporary iterator; -> reads the current batch.
  const Transition& first = *loader.begin();
  EXPECT_EQ(first.batch_size(), at::IntArrayRef({4}));
  ClassBatchLoader<Transition>::Iterator it = loader.begin();
  EXPECT_EQ(it->batch_size(), at::IntArrayRef({4}));
  EXPECT_TRUE(loader.data().obs().is_same(rows.obs()));
}

// Over a memory-mapped class made with memmap_like (a replay buffer), partly filled, with
// prefetch and drop_last.
TEST(ClassBatchLoader, MemmapReplayBuffer) {
  const std::string dir = testing_util::FreshDir("class_loader");
  Transition buffer = Rows(1).index({0}).expand({32}).memmap_like(dir + "/replay");
  buffer.index_put_({at::indexing::Slice(0, 20)}, Rows(20));
  Transition filled = buffer.index({at::indexing::Slice(0, 20)});
  ClassBatchLoader loader(filled, BatchOptions(8).shuffle(true).drop_last(true).prefetch(true));
  int64_t n = 0;
  for (const Transition& b : loader) {
    EXPECT_EQ(b.batch_size(), at::IntArrayRef({8}));
    EXPECT_TRUE(at::equal(b.next().obs(), b.obs() + 1));
    EXPECT_LT(b.next().reward().max().item<float>(), 20.f);
    n += b.batch_size()[0];
  }
  EXPECT_EQ(n, 16);
  // The rows past the slice stayed zero in the files.
  EXPECT_EQ(Transition::load_memmap(dir + "/replay").obs().index({at::indexing::Slice(20)})
                .abs().sum().item<float>(),
            0.f);
  TD_EXPECT_THROW_MSG(ClassBatchLoader(Rows(3).index({0}), BatchOptions(2)), ValueError,
                      {"at least one"});
}

}  // namespace
}  // namespace td
