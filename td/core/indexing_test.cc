#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "td/core/storage.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace {

using at::indexing::Ellipsis;
using at::indexing::None;
using at::indexing::Slice;
using at::indexing::TensorIndex;

// test::SampleTensorDict() plus a nested TensorDict "m" without an extra batch dim.
TensorDict Sample() {
  TensorDict t = test::SampleTensorDict();
  t.set("m", TensorDict({{"y", at::randn({3, 4, 1, 2})}}, {3, 4}));
  return t;
}
at::Tensor Mask(std::vector<int64_t> v) { return at::tensor(v).to(at::kBool); }
at::Tensor Long(std::vector<int64_t> v) { return at::tensor(v); }

// The index a leaf gets by hand: the Ellipsis spelled out as full slices over the batch dims.
std::vector<TensorIndex> ForLeaf(const std::vector<TensorIndex>& idx, int64_t bd) {
  std::vector<TensorIndex> hand;
  int64_t consumed = 0;
  for (const auto& i : idx) {
    if (i.is_integer() || i.is_slice()) ++consumed;
    if (i.is_tensor()) consumed += (i.tensor().scalar_type() == at::kBool) ? i.tensor().dim() : 1;
  }
  for (const auto& i : idx) {
    if (i.is_ellipsis()) {
      for (int64_t j = 0; j < bd - consumed; ++j) hand.emplace_back(Slice());
    } else {
      hand.push_back(i);
    }
  }
  return hand;
}

// Every leaf of `result` equals the same index applied to the leaf of `src` by hand; the batch
// size is that of a tensor of shape batch_size() indexed the same way.
void ExpectIndexed(const TensorDict& src, std::vector<TensorIndex> idx) {
  SCOPED_TRACE(::testing::Message() << "index of size " << idx.size());
  TensorDict r = src.index(idx);
  at::Tensor probe = at::zeros(src.batch_size());
  // Ellipsis on the probe covers exactly the batch dims.
  EXPECT_EQ(r.batch_size(), probe.index(idx).sizes());
  const int64_t bd = src.batch_dims();
  for (const NestedKey& k : src.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    Value v = src.get_value(k);
    if (!v.is_tensor()) {
      EXPECT_EQ(r.get_non_tensor(k), v.non_tensor());
      continue;
    }
    std::vector<TensorIndex> hand = ForLeaf(idx, bd);
    at::Tensor expected = v.tensor().index(hand);
    ASSERT_TRUE(r.contains(k)) << k;
    EXPECT_TRUE(r.get(k).equal(expected)) << k;
  }
  // Nested levels keep their extra batch dims after the new ones.
  std::vector<int64_t> nb = r.batch_size().vec();
  nb.push_back(2);
  EXPECT_EQ(r.get_tensordict("n").batch_size(), at::IntArrayRef(nb));
  EXPECT_EQ(r.get_tensordict("m").batch_size(), r.batch_size());
}

TEST(IndexTest, IntegersSlicesEllipsisNone) {
  TensorDict t = Sample();
  ExpectIndexed(t, {0});
  ExpectIndexed(t, {-1});
  ExpectIndexed(t, {1, 2});
  ExpectIndexed(t, {-3, -4});
  ExpectIndexed(t, {Slice(1, None)});
  ExpectIndexed(t, {Slice(None, None, 2)});
  ExpectIndexed(t, {Slice(), Slice(1, None, 2)});
  ExpectIndexed(t, {Slice(-2, None), Slice(None, -1)});
  ExpectIndexed(t, {Slice(5, 10)});  // empty, as torch
  ExpectIndexed(t, {Ellipsis, Slice(None, 2)});
  ExpectIndexed(t, {Ellipsis, 0});
  ExpectIndexed(t, {0, Ellipsis});
  ExpectIndexed(t, {Ellipsis});
  ExpectIndexed(t, {None});
  ExpectIndexed(t, {Slice(), None});
  ExpectIndexed(t, {None, Ellipsis, None});
  ExpectIndexed(t, {1, None, Slice(None, None, 3)});
  ExpectIndexed(t, {true});
  ExpectIndexed(t, {false});
}

TEST(IndexTest, MasksAndIndexTensors) {
  TensorDict t = Sample();
  ExpectIndexed(t, {Mask({1, 0, 1})});
  ExpectIndexed(t, {Mask({0, 0, 0})});
  ExpectIndexed(t, {at::rand({3, 4}) > 0.5});
  ExpectIndexed(t, {Slice(), Mask({1, 0, 1, 1})});
  ExpectIndexed(t, {Ellipsis, Mask({0, 1, 1, 0})});
  ExpectIndexed(t, {Long({2, 0, 2})});
  ExpectIndexed(t, {Long({-1})});
  ExpectIndexed(t, {Long({2, 0}).view({2, 1}), Long({1, 3, 0})});  // broadcast -> [2, 3]
  ExpectIndexed(t, {Slice(), Long({3, 1})});
  ExpectIndexed(t, {0, Long({3, 1})});
  ExpectIndexed(t, {Long({1, 2}), 0});
  ExpectIndexed(t, {Long({1, 2}), Slice(1, 3)});
  ExpectIndexed(t, {None, Long({1, 2}), None});
  ExpectIndexed(t, {Mask({1, 0, 1}), Long({0, 3})});
  ExpectIndexed(t, {at::scalar_tensor(1, at::kLong)});
  ExpectIndexed(t, {Long({0, 1}).view({1, 2}), Slice(), });
}

TEST(IndexTest, BasicIndexingGivesViews) {
  TensorDict t = Sample();
  TensorDict row = t.index({0});
  row.get("a").fill_(7);
  EXPECT_TRUE(t.get("a")[0].eq(7).all().item<bool>());
  EXPECT_FALSE(t.get("a")[1].eq(7).any().item<bool>());
  t.index({Slice(), Slice(1, 3)}).get({"n", "x"}).zero_();
  EXPECT_TRUE(t.get({"n", "x"}).index({Slice(), Slice(1, 3)}).eq(0).all().item<bool>());
  // Advanced indexing copies, as in torch.
  t.index({Long({1})}).get("a").fill_(9);
  EXPECT_FALSE(t.get("a").eq(9).any().item<bool>());
}

TEST(IndexTest, EmptyTensorDictUsesBatchRules) {
  TensorDict e({}, {3, 4});
  EXPECT_EQ(e.index({0}).batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(e.index({Mask({1, 0, 1})}).batch_size(), at::IntArrayRef({2, 4}));
  EXPECT_EQ(e.index({Ellipsis, None, Long({0, 0, 1})}).batch_size(),
            at::IntArrayRef({3, 1, 3}));
  TD_EXPECT_THROW_MSG(e.index({Long({0, 7})}), c10::IndexError, {"out of bounds", "[3, 4]"});
  // Non-tensor entries only: carried.
  TensorDict s({{"s", "x"}}, {3});
  EXPECT_EQ(s.index({1}).get_non_tensor("s"), "x");
  EXPECT_EQ(s.index({1}).batch_size().size(), 0u);
}

TEST(IndexTest, Errors) {
  TensorDict t = Sample();
  TD_EXPECT_THROW_MSG(t.index({3}), c10::IndexError,
                      {"index 3", "batch dim 0 of size 3", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.index({0, -5}), c10::IndexError, {"index -5", "batch dim 1 of size 4"});
  TD_EXPECT_THROW_MSG(t.index({0, 0, 0}), c10::IndexError,
                      {"too many indices", "torch.Size([3, 4])", "covers 3 dims"});
  TD_EXPECT_THROW_MSG(t.index({Ellipsis, 0, Ellipsis}), c10::IndexError, {"single Ellipsis"});
  TD_EXPECT_THROW_MSG(t.index({Mask({1, 0})}), c10::IndexError,
                      {"mask of shape torch.Size([2])", "torch.Size([3, 4])",
                       "expected a mask of shape torch.Size([3])"});
  TD_EXPECT_THROW_MSG(t.index({Slice(), Mask({1, 0, 1})}), c10::IndexError,
                      {"torch.Size([3])", "expected a mask of shape torch.Size([4])"});
  TD_EXPECT_THROW_MSG(t.index({at::ones({3, 4, 2}, at::kBool)}), c10::IndexError,
                      {"too many indices"});
  TD_EXPECT_THROW_MSG(t.index({Long({0, 3})}), c10::IndexError, {"out of bounds", "'a'"});
  TD_EXPECT_THROW_MSG(t.index({at::Tensor()}), c10::IndexError, {"undefined"});
}

// ---- index_put_ -----------------------------------------------------------------------------

TEST(IndexPutTest, TensorDictValueMatchesTorch) {
  for (const std::vector<TensorIndex>& idx :
       std::vector<std::vector<TensorIndex>>{{1},
                                             {Slice(None, 2)},
                                             {Ellipsis, 2},
                                             {Mask({1, 0, 1})},
                                             {Long({2, 0})},
                                             {Slice(), Long({3, 1})}}) {
    TensorDict t = Sample();
    TensorDict expected = t.clone();
    TensorDict value = t.index(idx).apply([](const at::Tensor& x) { return at::rand_like(x.to(at::kFloat)).to(x.dtype()) + 1; });
    t.index_put_(idx, value);
    for (const NestedKey& k : expected.keys(KeysOptions().include_nested(true).leaves_only(true))) {
      if (!expected.get_value(k).is_tensor()) continue;
      at::Tensor e = expected.get(k);
      e.index_put_(ForLeaf(idx, 2), value.get(k));
      EXPECT_TRUE(t.get(k).equal(e)) << k;
    }
    EXPECT_EQ(t.get_non_tensor("s"), "a string!");
  }
}

TEST(IndexPutTest, BroadcastCastAndScalarAndTensorValues) {
  TensorDict t = Sample();
  // A value with batch [] broadcast into a slice, cast from float to the int64 leaf.
  TensorDict v({{"a", at::full({5}, 2.0)}, {"b", at::full({}, 3.0)}}, {});
  t.index_put_({Slice(0, 2)}, v);
  EXPECT_TRUE(t.get("a").index({Slice(0, 2)}).eq(2).all().item<bool>());
  EXPECT_TRUE(t.get("b").index({Slice(0, 2)}).eq(3).all().item<bool>());
  EXPECT_EQ(t.get("b").scalar_type(), at::kLong);
  EXPECT_EQ(t.get("b")[2][0].item<int64_t>(), 8);  // untouched
  // Advanced index with a float value into the int64 leaf (torch alone would reject it).
  t.index_put_({Long({2})}, TensorDict({{"b", at::full({1, 4}, 5.5)}}, {1}));
  EXPECT_TRUE(t.get("b")[2].eq(5).all().item<bool>());
  // Scalar into every leaf.
  t.index_put_({Mask({0, 1, 0})}, 0);
  for (const Value& v2 : t.index({1}).values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (v2.is_tensor()) {
      EXPECT_TRUE(v2.tensor().eq(0).all().item<bool>());
    }
  }
  // Tensor broadcast into every leaf: shape [] fits all.
  t.index_put_({Ellipsis, 3}, at::full({}, -1.0));
  EXPECT_TRUE(t.get({"n", "x"}).index({Slice(), 3}).eq(-1).all().item<bool>());
  EXPECT_TRUE(t.get("b").index({Slice(), 3}).eq(-1).all().item<bool>());
  TD_EXPECT_THROW_MSG(t.index_put_({0}, at::zeros({7})), c10::ValueError,
                      {"torch.Size([7])", "cannot be broadcast", "torch.Size([4, 5])", "'a'"});
}

TensorDict Foo(int64_t i) {
  TensorDict d({}, {});
  d.set("a", at::full({3}, static_cast<double>(i)));
  d.set("i", at::full({}, i, at::kLong));
  d.set("b", TensorDict({{"c", at::full({2}, static_cast<double>(-i))}}, {}));
  d.set({"deep", "er"}, at::full({2, 2}, static_cast<double>(i)));
  d.set("tag", "episode");
  return d;
}

TEST(IndexPutTest, LazyPreallocation) {
  constexpr int64_t N = 10;
  TensorDict data({}, {N});
  std::vector<int64_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  at::Tensor a_storage;
  for (int64_t i : order) {
    data.index_put_({i}, Foo(i));
    if (!a_storage.defined()) {
      a_storage = data.get("a");
      EXPECT_EQ(data.get("a").sizes(), at::IntArrayRef({N, 3}));
    }
    EXPECT_TRUE(data.get("a").is_same(a_storage)) << "later writes are in place";
  }
  EXPECT_EQ(data.get("a").sizes(), at::IntArrayRef({N, 3}));
  EXPECT_EQ(data.get("i").sizes(), at::IntArrayRef({N}));
  EXPECT_EQ(data.get("i").scalar_type(), at::kLong);
  EXPECT_EQ(data.get({"b", "c"}).sizes(), at::IntArrayRef({N, 2}));
  EXPECT_EQ(data.get_tensordict("b").batch_size(), at::IntArrayRef({N}));
  EXPECT_EQ(data.get({"deep", "er"}).sizes(), at::IntArrayRef({N, 2, 2}));
  EXPECT_EQ(data.get_non_tensor("tag"), "episode");
  EXPECT_TRUE(data.get("i").equal(at::arange(N)));
  EXPECT_TRUE(data.get("a").equal(at::arange(N).to(at::kFloat).unsqueeze(1).expand({N, 3})));
  EXPECT_TRUE(data.get({"b", "c"}).equal(-at::arange(N).to(at::kFloat).unsqueeze(1).expand({N, 2})));
  // The result equals stacking the calls.
  TD_EXPECT_THROW_MSG(data.index_put_({0}, TensorDict({{"tag", "other"}}, {})), c10::ValueError,
                      {"'tag'", "episode", "other"});
}

TEST(IndexPutTest, LazyPreallocationKeepsNestedExtraBatchDimsAndDevice) {
  TensorDict data({}, {4}, at::Device("cpu"));
  TensorDict v({}, {2});
  v.set("n", TensorDict({{"x", at::ones({2, 3, 5})}}, {2, 3}));
  data.index_put_({Slice(1, 3)}, v);
  EXPECT_EQ(data.get_tensordict("n").batch_size(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(data.get({"n", "x"}).sizes(), at::IntArrayRef({4, 3, 5}));
  EXPECT_EQ(data.get({"n", "x"}).sum().item<double>(), 30.0);
  EXPECT_EQ(data.get({"n", "x"}).device(), at::Device("cpu"));
}

TEST(IndexPutTest, FailuresChangeNothing) {
  TensorDict t = Sample();
  TensorDict before = t.clone();
  // "a" is fine, "b" does not broadcast: nothing written, nothing created.
  TensorDict bad({{"a", at::ones({4, 5})}, {"new", at::ones({4})}, {"b", at::ones({3})}}, {});
  TD_EXPECT_THROW_MSG(t.index_put_({0}, bad), c10::ValueError,
                      {"'b'", "torch.Size([3])", "torch.Size([4])"});
  assert_allclose(t, before);
  EXPECT_FALSE(t.contains("new"));
  // Index out of range: caught before writing.
  TD_EXPECT_THROW_MSG(t.index_put_({Long({0, 5})}, t.index({Long({0, 1})})), c10::IndexError,
                      {"out of bounds"});
  TD_EXPECT_THROW_MSG(t.index_put_({4}, 1.0), c10::IndexError, {"index 4"});
  assert_allclose(t, before);
  // Kind mismatch.
  TD_EXPECT_THROW_MSG(t.index_put_({0}, TensorDict({{"n", at::ones({})}}, {})), c10::TypeError,
                      {"'n'", "Tensor in the value", "TensorDict"});
  // Locked: a new key cannot be created, even if the rest is fine.
  t.lock_();
  TD_EXPECT_THROW_MSG(t.index_put_({0}, TensorDict({{"a", at::ones({5})}, {"zz", at::ones({})}}, {})),
                      LockedError, {"'zz'", "locked"});
  assert_allclose(t, before);
  // Writing existing keys into a locked TensorDict is fine.
  t.index_put_({0}, TensorDict({{"a", at::ones({5})}}, {}));
  EXPECT_TRUE(t.get("a")[0].eq(1).all().item<bool>());
  t.unlock_();
  TD_EXPECT_THROW_MSG(t.index_put_({0}, t), c10::ValueError, {"itself"});
  TD_EXPECT_THROW_MSG(t.index_put_({0}, at::Tensor()), c10::ValueError, {"undefined"});
}

// A scalar that does not fit a later leaf's dtype: refused before the first leaf is written
// (index_put_ and masked_fill_), naming the key.
TEST(IndexPutTest, ScalarOverflowWritesNothing) {
  TensorDict t({{"f", at::zeros({2, 3})}, {"n", TensorDict({{"u", at::zeros({2}, at::kByte)}}, {2})}},
               {2});
  const TensorDict before = t.clone();
  TD_EXPECT_THROW_MSG(t.index_put_({0}, 300), c10::Error, {"('n', 'u')", "overflow"});
  TD_EXPECT_THROW_MSG(t.masked_fill_(Long({1, 0}).to(at::kBool), -1.5), c10::Error,
                      {"('n', 'u')", "overflow"});
  assert_allclose(t, before);
  t.index_put_({0}, 7);
  EXPECT_EQ(t.get({"n", "u"})[0].item<int64_t>(), 7);
}

// Negative slice steps are refused as torch refuses them for tensors, naming the batch dim.
TEST(IndexingTest, NegativeStepIsANamedError) {
  TensorDict t = Sample();
  TD_EXPECT_THROW_MSG(t.index({Slice(None, None, -1)}), c10::ValueError,
                      {"negative slice steps are not supported", "step -1", "batch dim 0",
                       "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.index({Ellipsis, Slice(None, None, -2)}), c10::ValueError,
                      {"batch dim 1"});
  TD_EXPECT_THROW_MSG(t.index({0, Slice(None, None, -1)}), c10::ValueError, {"batch dim 1"});
  TD_EXPECT_THROW_MSG(t.index_put_({Slice(None, None, -1)}, 0), c10::ValueError,
                      {"index_put_", "batch dim 0"});
  TD_EXPECT_THROW_MSG(t.index_put_({Slice(None, None, -1)}, at::zeros({})), c10::ValueError,
                      {"index_put_", "batch dim 0"});
  TD_EXPECT_THROW_MSG(t.index_put_({Slice(None, None, -1)}, t.clone()), c10::ValueError,
                      {"index_put_", "batch dim 0"});
  EXPECT_EQ(t.index({Slice(None, None, 2)}).batch_size(), at::IntArrayRef({2, 4}));
}

TEST(IndexPutTest, EllipsisOnEmptyBatchWritesEveryLeaf) {
  TensorDict t({{"a", at::zeros({2})}, {"n", TensorDict({{"b", at::zeros({})}}, {})}}, {});
  t.index_put_({at::indexing::Ellipsis}, 1.5);
  EXPECT_TRUE(t.get("a").equal(at::full({2}, 1.5)));
  EXPECT_TRUE(t.get({"n", "b"}).equal(at::full({}, 1.5)));
  EXPECT_TRUE(t.index({at::indexing::Ellipsis}).get("a").equal(at::full({2}, 1.5)));
}

}  // namespace
}  // namespace td
