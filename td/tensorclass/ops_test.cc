// Every TensorDict operation on a TensorClass returns the class, with its non-tensor fields
// (and nested classes) carried: indexing, index_put_ and lazy preallocation, shape ops, clone,
// to, apply, math, td::stack / td::cat / unbind / split, share_memory_, equality.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "td/core/testing.h"
#include "td/tensorclass/tensorclass.h"
#include "td/tensorclass/test_classes.h"

namespace td {
namespace {

using test::Episode;
using test::MyData;
using test::Step;
using namespace at::indexing;

// The non-tensor fields of SampleEpisode() and its nested Step, after any operation.
void ExpectCarried(const Episode& e) {
  EXPECT_EQ(e.name(), "ep");
  EXPECT_EQ(e.seed(), 7);
  EXPECT_EQ(e.gamma(), 0.5);
  EXPECT_TRUE(e.done());
  EXPECT_EQ(e.info(), (nlohmann::json{{"k", {1, 2}}}));
  EXPECT_EQ(e.step().tag(), "s");
  EXPECT_EQ(e.step().batch_dims(), e.batch_dims() + 1);
  EXPECT_EQ(e.step().batch_size().slice(0, e.batch_dims()), e.batch_size());
}

TEST(TensorClassOps, Indexing) {
  Episode ep = test::SampleEpisode();
  Episode row = ep.index({1});
  static_assert(std::is_same_v<decltype(ep.index({1})), Episode>);
  EXPECT_EQ(row.batch_dims(), 0);
  EXPECT_TRUE(at::equal(row.reward(), ep.reward()[1]));
  ExpectCarried(row);
  Episode head = ep.index({Slice(0, 2)});
  EXPECT_EQ(head.batch_size(), at::IntArrayRef({2}));
  EXPECT_EQ(head.step().obs().sizes(), at::IntArrayRef({2, 2, 5}));
  ExpectCarried(head);
  at::Tensor mask = at::tensor({1, 0, 1, 1}).to(at::kBool);
  Episode masked = ep.index({mask});
  EXPECT_EQ(masked.batch_size(), at::IntArrayRef({3}));
  ExpectCarried(masked);
  EXPECT_EQ(ep.masked_select(mask).batch_size(), at::IntArrayRef({3}));
  Episode picked = ep.index({at::tensor({3, 0}, at::kLong)});
  EXPECT_TRUE(at::equal(picked.reward()[0], ep.reward()[3]));
  ExpectCarried(picked);
  std::vector<at::indexing::TensorIndex> idx{Slice(1, None)};
  EXPECT_EQ(ep.index(idx).batch_size(), at::IntArrayRef({3}));  // an ArrayRef of indices
  // Basic indexing gives views: writing into a row writes into the batch.
  row.reward().fill_(9);
  EXPECT_TRUE((ep.reward()[1] == 9).all().item<bool>());
  TD_EXPECT_THROW_MSG(ep.index({7}), IndexError, {"7"});
}

TEST(TensorClassOps, IndexPutAndLazyPreallocation) {
  Episode ep = test::SampleEpisode();
  Episode buf = Episode::unset({8});
  for (int64_t i = 0; i < 4; ++i) buf.index_put_({2 * i}, ep.index({i}));
  EXPECT_EQ(buf.reward().sizes(), at::IntArrayRef({8, 3}));
  EXPECT_TRUE(at::equal(buf.reward()[6], ep.reward()[3]));
  EXPECT_TRUE(at::equal(buf.reward()[1], at::zeros({3})));  // preallocated with zeros
  EXPECT_EQ(buf.step().obs().sizes(), at::IntArrayRef({8, 2, 5}));
  ExpectCarried(buf);
  EXPECT_TRUE(Episode::check_tensordict(buf.tensordict()).empty());
  // Scalars and tensors broadcast into every tensor field; masks and index tensors work.
  buf.index_put_({Slice(0, 2)}, 0);
  EXPECT_EQ(buf.reward()[0].abs().sum().item<float>(), 0.0f);
  buf.index_put_({at::tensor({5}, at::kLong)}, at::ones({}));
  EXPECT_TRUE((buf.reward()[5] == 1).all().item<bool>());
  Episode& same = buf.index_put_({buf.reward().select(1, 0) == 1}, 2);
  EXPECT_EQ(&same, &buf);
  EXPECT_TRUE((buf.reward()[5] == 2).all().item<bool>());
  // A differing non-tensor field is refused before anything is written.
  Episode other = ep.index({Slice(0, 1)}).clone();
  other.set_name("zz");
  at::Tensor before = buf.reward().clone();
  TD_EXPECT_THROW_MSG(buf.index_put_({Slice(0, 1)}, other), ValueError, {"name"});
  EXPECT_TRUE(at::equal(buf.reward(), before));
}

TEST(TensorClassOps, ShapeOps) {
  Episode ep = test::SampleEpisode();
  Episode grid = ep.reshape({2, 2});
  EXPECT_EQ(grid.batch_size(), at::IntArrayRef({2, 2}));
  EXPECT_EQ(grid.step().batch_size(), at::IntArrayRef({2, 2, 2}));
  ExpectCarried(grid);
  ExpectCarried(ep.view({2, -1}));
  ExpectCarried(grid.flatten());
  EXPECT_EQ(grid.flatten().batch_size(), at::IntArrayRef({4}));
  ExpectCarried(ep.unflatten(0, {2, 2}));
  ExpectCarried(ep.unsqueeze(0));
  EXPECT_EQ(ep.unsqueeze(0).batch_size(), at::IntArrayRef({1, 4}));
  EXPECT_EQ(ep.unsqueeze(0).squeeze().batch_size(), at::IntArrayRef({4}));
  ExpectCarried(ep.unsqueeze(1).squeeze(1));
  ExpectCarried(grid.permute({1, 0}));
  ExpectCarried(grid.transpose(0, 1));
  EXPECT_TRUE(at::equal(grid.transpose(0, 1).reward()[0][1], grid.reward()[1][0]));
  ExpectCarried(ep.expand({3, 4}));
  EXPECT_EQ(ep.expand({3, 4}).batch_size(), at::IntArrayRef({3, 4}));
  ExpectCarried(ep.flip({0}));
  ExpectCarried(ep.roll({1}, {0}));
  EXPECT_TRUE(at::equal(ep.roll({1}, {0}).reward()[0], ep.reward()[3]));
  ExpectCarried(ep.narrow(0, 1, 2));
  ExpectCarried(ep.repeat({2}));
  EXPECT_EQ(ep.repeat({2}).batch_size(), at::IntArrayRef({8}));
  ExpectCarried(ep.repeat_interleave(2));
  ExpectCarried(ep.pad({1, 1}));
  ExpectCarried(ep.gather(0, at::tensor({0, 0, 1}, at::kLong)));
  ExpectCarried(ep.where(at::tensor({1, 0, 1, 0}).to(at::kBool), td::zeros_like(ep)));
  std::vector<Episode> parts = ep.split(3);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].batch_size(), at::IntArrayRef({1}));
  for (const Episode& p : parts) ExpectCarried(p);
  std::vector<Episode> sized = ep.split({1, 3});
  EXPECT_EQ(sized[1].batch_size(), at::IntArrayRef({3}));
  std::vector<Episode> chunks = ep.chunk(2);
  ASSERT_EQ(chunks.size(), 2u);
  ExpectCarried(chunks[0]);
  std::vector<Episode> rows = td::unbind(ep, 0);
  ASSERT_EQ(rows.size(), 4u);
  ExpectCarried(rows[3]);
  EXPECT_TRUE(at::equal(rows[3].reward(), ep.reward()[3]));
  TD_EXPECT_THROW_MSG(ep.view({3, -1}), ValueError, {"torch.Size([4])"});
}

TEST(TensorClassOps, CopiesDevicesApply) {
  Episode ep = test::SampleEpisode();
  Episode deep = ep.clone();
  ExpectCarried(deep);
  deep.reward().zero_();
  EXPECT_NE(ep.reward().abs().sum().item<float>(), 0.0f);
  ExpectCarried(ep.to(at::Device("cpu")));
  Episode doubles = ep.to(at::kDouble);
  EXPECT_EQ(doubles.reward().scalar_type(), at::kDouble);
  ExpectCarried(doubles);
  ExpectCarried(ep.contiguous());
  ExpectCarried(ep.detach());
  Episode halved = ep.apply([](const at::Tensor& x) { return x / 2; });
  EXPECT_TRUE(at::allclose(halved.reward(), ep.reward() / 2));
  ExpectCarried(halved);
  Episode summed =
      ep.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, halved);
  EXPECT_TRUE(at::allclose(summed.reward(), ep.reward() * 1.5));
  ExpectCarried(ep.named_apply([](const NestedKey&, const at::Tensor& x) { return x; }));
  // Dropping an optional field is fine; dropping a required one is an error naming it.
  Episode with_weight = ep.clone().set_weight(at::ones({4}));
  Episode dropped = with_weight.named_apply([](const NestedKey& k, const at::Tensor& x) {
    return k.back() == "weight" ? at::Tensor() : x;
  });
  EXPECT_FALSE(dropped.weight());
  TD_EXPECT_THROW_MSG(
      ep.named_apply([](const NestedKey& k, const at::Tensor& x) {
        return k.back() == "reward" ? at::Tensor() : x;
      }),
      KeyError, {"Episode", "missing field ['reward']"});
  Episode copy = ep.clone();
  Episode& self = copy.apply_([](const at::Tensor& x) { return x * 0; });
  EXPECT_EQ(&self, &copy);
  EXPECT_EQ(copy.reward().abs().sum().item<float>(), 0.0f);
  ExpectCarried(copy);
}

TEST(TensorClassOps, Math) {
  Episode ep = test::SampleEpisode();
  Episode y = 2 * ep + 1;
  EXPECT_TRUE(at::allclose(y.reward(), ep.reward() * 2 + 1));
  ExpectCarried(y);
  ExpectCarried(ep - ep);
  ExpectCarried(ep / 2);
  ExpectCarried(ep.abs().exp());
  ExpectCarried(-ep);
  ExpectCarried(ep.clamp(0.0, 1.0));
  Episode gt = ep > 0;
  EXPECT_EQ(gt.reward().scalar_type(), at::kBool);
  ExpectCarried(gt);
  Episode z = ep.clone();
  z += ep;
  z.mul_(0.5).sub_(ep);
  EXPECT_LT(z.reward().abs().max().item<float>(), 1e-6f);
  Episode total = ep.sum({0});
  EXPECT_EQ(total.batch_dims(), 0);
  EXPECT_TRUE(at::allclose(total.reward(), ep.reward().sum(0)));
  ExpectCarried(ep.mean({0}, /*keepdim=*/true));
  EXPECT_TRUE((ep.abs() >= 0).all());
  EXPECT_TRUE(td::allclose(ep, ep.clone()));
  Episode zeros = td::zeros_like(ep);
  EXPECT_EQ(zeros.reward().abs().sum().item<float>(), 0.0f);
  ExpectCarried(zeros);
}

TEST(TensorClassOps, StackCatSplit) {
  Episode ep = test::SampleEpisode();
  Episode both = td::stack({ep, ep}, 0);
  static_assert(std::is_same_v<decltype(td::stack({ep, ep}, 0)), Episode>);
  EXPECT_EQ(both.batch_size(), at::IntArrayRef({2, 4}));
  EXPECT_EQ(both.step().batch_size(), at::IntArrayRef({2, 4, 2}));
  ExpectCarried(both);
  Episode longer = td::cat(std::vector<Episode>{ep, ep, ep}, 0);
  EXPECT_EQ(longer.batch_size(), at::IntArrayRef({12}));
  ExpectCarried(longer);
  std::vector<Episode> back = longer.split(4);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_TRUE((back[2] == ep).all());
  // Differing non-tensor fields cannot be stacked.
  Episode other = ep.clone();
  other.set_seed(8);
  TD_EXPECT_THROW_MSG(td::stack({ep, other}, 0), ValueError, {"seed"});
}

TEST(TensorClassOps, EqualityAndLocks) {
  Episode ep = test::SampleEpisode();
  EXPECT_TRUE((ep == ep.clone()).all());
  Episode changed = ep.clone();
  changed.reward().index_put_({0, 0}, 100.0);
  EXPECT_FALSE((ep == changed).all());
  EXPECT_TRUE((ep != changed).any());
  TensorDict eq = ep == ep.clone();  // nested levels compare at their own batch size
  EXPECT_EQ(eq.get({"step", "tag"}).sizes(), at::IntArrayRef({4, 2}));
  EXPECT_TRUE(eq.get({"step", "tag"}).all().item<bool>());
  Episode renamed = ep.clone();
  renamed.step().set_tag("other");
  EXPECT_FALSE((ep == renamed).get({"step", "tag"}).any().item<bool>());
  EXPECT_FALSE((ep == renamed).all());
  Episode weighted = ep.clone().set_weight(at::ones({4}));
  TD_EXPECT_THROW_MSG(ep == weighted, KeyError, {"only in the second: ['weight']"});
  Episode locked = ep.clone();
  locked.lock_();
  EXPECT_TRUE(locked.is_locked());
  TD_EXPECT_THROW_MSG(locked.set_weight(at::ones({4})), LockedError, {"weight"});
  locked.set_reward(at::zeros({4, 3}));  // an existing field may still be replaced
  EXPECT_EQ(locked.unlock_().is_locked(), false);
}

TEST(TensorClassOps, ShareMemory) {
  Episode ep = test::SampleEpisode().clone();
  EXPECT_FALSE(ep.is_shared());
  Episode& same = ep.share_memory_();
  EXPECT_EQ(&same, &ep);
  EXPECT_TRUE(ep.is_shared());
  ExpectCarried(ep);
}

TEST(TensorClassOps, SeedClassMethodsAfterOps) {
  test::SeedData seed = test::MakeSeedData();
  MyData data(seed.images, seed.mask, seed.label, {100});
  MyData grid = data.reshape({10, 10});
  EXPECT_EQ(grid.mask_image().sizes(), at::IntArrayRef({10, 10, 6117}));
  EXPECT_EQ(grid.select_label(1).batch_size(), at::IntArrayRef({11}));
  EXPECT_EQ(td::stack({data, data}, 0).select_label(2).batch_size(), at::IntArrayRef({22}));
}

}  // namespace
}  // namespace td
