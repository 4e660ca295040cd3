// The lazy view backends' own behaviour (the common behaviour is in tests/conformance): reading
// through, writing through to the source, lazy preallocation, errors.
#include "td/backends/lazy_view/lazy_view.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/storage.h"
#include "td/core/testing.h"

namespace td {
namespace {

using at::indexing::Slice;

TensorDict Source() {
  return TensorDict({{"a", at::arange(24.0).view({2, 3, 4})},
                     {"n", {{"x", at::arange(6.0).view({2, 3})}}}},
                    {2, 3});
}

TEST(IndexViewTest, ReadsAndWritesTheSource) {
  TensorDict src = Source();
  TensorDict v = index_view(src, {1});
  EXPECT_EQ(v.backend(), "index_view");
  const std::optional<LazyViewTensorDict> handle = LazyViewTensorDict::from(v);
  ASSERT_TRUE(handle.has_value());
  EXPECT_TRUE(handle->is_same(v));
  EXPECT_TRUE(handle->source().is_same(src));
  EXPECT_EQ(v.batch_size(), at::IntArrayRef({3}));
  EXPECT_TRUE(v.get("a").equal(src.get("a")[1]));
  // Reads see later writes to the source: nothing is cached.
  src.get("a").index_put_({1, 0}, -1.0);
  EXPECT_TRUE(v.get("a")[0].equal(at::full({4}, -1.0)));
  v.set_("a", at::zeros({3, 4}));
  EXPECT_TRUE(src.get("a")[1].equal(at::zeros({3, 4})));
  EXPECT_TRUE(src.get("a")[0].equal(at::arange(12.0).view({3, 4})));
  v.set({"n", "x"}, at::full({3}, 7.0));
  EXPECT_TRUE(src.get({"n", "x"})[1].equal(at::full({3}, 7.0)));
  EXPECT_EQ(v.get_tensordict("n").backend(), "index_view");
  // A set() with another dtype writes into the source's tensor, cast.
  v.set("a", at::ones({3, 4}, at::kLong));
  EXPECT_EQ(src.get("a").scalar_type(), at::kFloat);
  // A partial view cannot change a key's feature shape.
  TD_EXPECT_THROW_MSG(v.set("a", at::ones({3, 5})), c10::ValueError,
                      {"'a'", "torch.Size([3, 5])"});
}

TEST(IndexViewTest, NewKeysArePreallocatedInTheSource) {
  TensorDict src({}, {4});
  for (int64_t i = 0; i < 4; ++i) {
    TensorDict row = index_view(src, {i});
    row.set("obs", at::full({3}, static_cast<double>(i)));
    row.set({"sub", "k"}, at::full({2}, i, at::kLong));
  }
  EXPECT_EQ(src.get("obs").sizes(), at::IntArrayRef({4, 3}));
  EXPECT_TRUE(src.get("obs").select(1, 0).equal(at::arange(4.0)));
  EXPECT_EQ(src.get({"sub", "k"}).scalar_type(), at::kLong);
  EXPECT_EQ(src.get_tensordict("sub").batch_size(), at::IntArrayRef({4}));
  // A new key through a partial view leaves the rest of the source at zero.
  TensorDict part = index_view(src, {Slice(1, 3)});
  part.set("fresh", at::ones({2, 5}));
  EXPECT_TRUE(src.get("fresh").sum(1).equal(at::tensor({0.0, 5.0, 5.0, 0.0})));
}

TEST(IndexViewTest, AdvancedIndicesWriteThroughToo) {
  TensorDict src = Source();
  at::Tensor mask = at::arange(6).view({2, 3}) % 2 == 0;
  TensorDict v = index_view(src, {mask});
  EXPECT_EQ(v.batch_size(), at::IntArrayRef({3}));
  v.set_("a", at::zeros({3, 4}));  // get() returns a copy, the write still lands
  EXPECT_TRUE(src.get("a").index({mask}).equal(at::zeros({3, 4})));
  v.apply_([](const at::Tensor& t) { return t.add_(1); });
  EXPECT_TRUE(src.get("a").index({mask}).equal(at::ones({3, 4})));
  EXPECT_TRUE(src.get({"n", "x"}).index({mask}).equal(at::tensor({1.0, 3.0, 5.0})));
  // Indexing the view gives a view of the view: writes into the result reach the source.
  TensorDict sub = v.index({Slice(0, 2)});
  sub.set_("a", at::full({2, 4}, 9.0));
  EXPECT_TRUE(src.get("a")[0][0].equal(at::full({4}, 9.0)));
}

TEST(IndexViewTest, KeysDeletesAndRenamesAreTheSources) {
  TensorDict src = Source();
  TensorDict v = index_view(src, {0});
  EXPECT_EQ(v.keys(), src.keys());
  v.rename_key_("a", "b");
  EXPECT_TRUE(src.get("b").equal(Source().get("a")));  // the whole source key, not the row
  v.del_("b");
  EXPECT_FALSE(src.contains("b"));
  v.set("s", "text");
  EXPECT_EQ(src.get_non_tensor("s"), "text");
}

TEST(IndexViewTest, Errors) {
  TensorDict src = Source();
  TD_EXPECT_THROW_MSG(index_view(src, {5}), c10::IndexError, {"5"});
  TensorDict v = index_view(src, {0});
  TD_EXPECT_THROW_MSG(v.set_batch_size({}), BatchSizeError, {"index_view", "to_dense"});
  EXPECT_FALSE(LazyViewTensorDict::from(src).has_value());
}

// A NonTensorStack reads through every view as the view moves elements (NOTE [ Non-tensor
// stacks ]); it is set through a bijective view's inverse, and refused by an index view.
TEST(IndexViewTest, NonTensorStacksMoveWithTheView) {
  TensorDict src({{"x", at::zeros({4, 2})}}, {4, 2});
  src.set("s", NonTensorData::stack(nlohmann::json::parse(
                   R"([["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]])")));
  const TensorDict rows = index_view(src, {Slice(1, 3)});
  EXPECT_EQ(rows.get_value("s").non_tensor_data(),
            NonTensorData::stack(nlohmann::json::parse(R"([["c", "d"], ["e", "f"]])")));
  EXPECT_EQ(index_view(src, {at::tensor({3, 0}, at::kLong), 1}).get_non_tensor("s"),
            nlohmann::json::parse(R"(["h", "b"])"));
  EXPECT_EQ(index_view(src, {2, 1}).get_value("s").non_tensor_data(), NonTensorData("f"));
  TensorDict t = permute_view(src, {1, 0});
  EXPECT_EQ(t.get_non_tensor("s"),
            nlohmann::json::parse(R"([["a", "c", "e", "g"], ["b", "d", "f", "h"]])"));
  t.set("u", NonTensorData::stack(nlohmann::json::parse(R"([[1, 2, 3, 4], [5, 6, 7, 8]])")));
  EXPECT_EQ(src.get_non_tensor("u"), nlohmann::json::parse("[[1, 5], [2, 6], [3, 7], [4, 8]]"));
  TensorDict v = index_view(src, {Slice(0, 2)});
  TD_EXPECT_THROW_MSG(v.set("w", NonTensorData::stack(nlohmann::json::parse(R"([[1, 2], [3, 4]])"))),
                      ValueError, {"NonTensorStack 'w'", "index_view"});
  EXPECT_FALSE(src.contains("w"));
}

TEST(PermuteViewTest, GetAppliesTheOpWritesApplyTheInverse) {
  TensorDict src = Source();
  TensorDict v = permute_view(src, {1, 0});
  EXPECT_EQ(v.backend(), "permute_view");
  EXPECT_EQ(v.batch_size(), at::IntArrayRef({3, 2}));
  EXPECT_TRUE(v.get("a").equal(src.get("a").permute({1, 0, 2})));
  at::Tensor x = at::arange(24.0, 48.0).view({3, 2, 4});
  v.set_("a", x);
  EXPECT_TRUE(src.get("a").equal(x.permute({1, 0, 2})));
  v.set("new", at::ones({3, 2, 5}));
  EXPECT_EQ(src.get("new").sizes(), at::IntArrayRef({2, 3, 5}));
  v.set("a", at::zeros({3, 2, 7}, at::kDouble));  // replaced in the source, new shape
  EXPECT_EQ(src.get("a").sizes(), at::IntArrayRef({2, 3, 7}));
  EXPECT_EQ(src.get("a").scalar_type(), at::kDouble);
  v.set("sub", TensorDict({{"y", at::ones({3, 2, 2})}}, {3, 2}));
  EXPECT_EQ(src.get_tensordict("sub").batch_size(), at::IntArrayRef({2, 3}));
  TensorDict t = transpose_view(src, 0, -1);
  EXPECT_EQ(t.backend(), "permute_view");
  EXPECT_TRUE(t.get({"n", "x"}).equal(src.get({"n", "x"}).t()));
  TD_EXPECT_THROW_MSG(permute_view(src, {0, 0}), c10::ValueError,
                      {"permutation", "torch.Size([2, 3])"});
  TD_EXPECT_THROW_MSG(transpose_view(src, 0, 2), c10::IndexError, {"dim 2"});
}

TEST(SqueezeUnsqueezeViewTest, RoundTrips) {
  TensorDict src = Source();
  TensorDict u = unsqueeze_view(src, 1);
  EXPECT_EQ(u.backend(), "unsqueeze_view");
  EXPECT_EQ(u.batch_size(), at::IntArrayRef({2, 1, 3}));
  EXPECT_EQ(u.get("a").sizes(), at::IntArrayRef({2, 1, 3, 4}));
  u.set_({"n", "x"}, at::zeros({2, 1, 3}));
  EXPECT_TRUE(src.get({"n", "x"}).equal(at::zeros({2, 3})));
  TensorDict s = squeeze_view(u, 1);  // a view of a view
  EXPECT_EQ(s.backend(), "squeeze_view");
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({2, 3}));
  s.set_("a", at::ones({2, 3, 4}));
  EXPECT_TRUE(src.get("a").equal(at::ones({2, 3, 4})));
  TD_EXPECT_THROW_MSG(squeeze_view(src, 0), c10::ValueError, {"size 2", "not 1"});
  TD_EXPECT_THROW_MSG(unsqueeze_view(src, 4), c10::IndexError, {"dim 4"});
}

TEST(ReshapeViewTest, ViewsTheBatch) {
  TensorDict src = Source();
  TensorDict v = reshape_view(src, {-1});
  EXPECT_EQ(v.backend(), "reshape_view");
  EXPECT_EQ(v.batch_size(), at::IntArrayRef({6}));
  EXPECT_TRUE(v.get("a").equal(src.get("a").view({6, 4})));
  v.set_({"n", "x"}, at::arange(6.0) * 10);
  EXPECT_TRUE(src.get({"n", "x"}).equal((at::arange(6.0) * 10).view({2, 3})));
  // A source leaf that cannot be viewed is read as a copy, and still written through.
  TensorDict strided({{"t", at::arange(6.0).view({3, 2}).t()}}, {2, 3});
  TensorDict flat = reshape_view(strided, {6});
  flat.set_("t", at::zeros({6}));
  EXPECT_TRUE(strided.get("t").equal(at::zeros({2, 3})));
  TD_EXPECT_THROW_MSG(reshape_view(src, {4, -1}), c10::ValueError,
                      {"torch.Size([2, 3])", "6 elements"});
}

TEST(LazyViewTest, LockIsTheViewsAndItsSubViews) {
  TensorDict src = Source();
  TensorDict v = permute_view(src, {1, 0});
  v.lock_();
  EXPECT_TRUE(v.is_locked());
  EXPECT_TRUE(v.get_tensordict("n").is_locked());
  TD_EXPECT_THROW_MSG(v.set("z", at::ones({3, 2})), LockedError, {"'z'"});
  v.set_("a", at::zeros({3, 2, 4}));  // in place is fine
  EXPECT_TRUE(src.get("a").equal(at::zeros({2, 3, 4})));
  v.unlock_();
  src.lock_();
  TensorDict w = index_view(src, {0});
  EXPECT_TRUE(w.is_locked());  // a view of a locked source starts locked
}

// Views are made from their source by index_view, permute_view, ..., never opened by id; each
// is a LazyStorage (the lazy hooks), as its kLazy capability says.
TEST(LazyViewTest, MadeFromSourcesNotOpenedById) {
  for (const char* id :
       {"index_view", "permute_view", "unsqueeze_view", "squeeze_view", "reshape_view"}) {
    SCOPED_TRACE(id);
    TD_EXPECT_THROW_MSG(MakeTensorDict(id, StorageSpec().batch_size({2, 1, 3})), KeyError,
                        {id, "dense"});
  }
  TensorDict src({{"x", at::zeros({2, 3})}}, {2, 3});
  for (const TensorDict& v : {index_view(src, {0}), permute_view(src, {1, 0}),
                              unsqueeze_view(src, 0), reshape_view(src, {6})}) {
    SCOPED_TRACE(v.backend());
    EXPECT_TRUE(v.storage().capabilities().has(Capability::kLazy));
    EXPECT_NE(v.storage().lazy(), nullptr);
  }
}

// Dim names (NOTE [ Dim names ] in td/core/names.cc): a view's level carries what the same
// dense op gives the source's names.
TEST(IndexViewTest, DimNames) {
  TensorDict src({{"a", at::zeros({2, 3, 4})}}, {2, 3}, std::nullopt, {"env", "time"});
  EXPECT_EQ(index_view(src, {0}).names(), DimNames({"time"}));
  EXPECT_EQ(index_view(src, {Slice(), Slice(0, 2)}).names(), DimNames({"env", "time"}));
  EXPECT_EQ(permute_view(src, {1, 0}).names(), DimNames({"time", "env"}));
  EXPECT_EQ(unsqueeze_view(src, 1).names(), DimNames({"env", std::nullopt, "time"}));
  EXPECT_EQ(squeeze_view(unsqueeze_view(src, 0), 0).names(), DimNames({"env", "time"}));
  EXPECT_FALSE(index_view(TensorDict({}, {2}), {0}).has_names());
}

// A nested level seen through a view: the view's names on its leading dims, its own extra dims'
// names after them, as the dense op gives.
TEST(IndexViewTest, NestedLevelsCarryTheViewsNames) {
  const TensorDict child({{"b", at::zeros({2, 3, 5})}}, {2, 3, 5}, std::nullopt,
                         {"env", "time", "agent"});
  TensorDict src({{"n", child}}, {2, 3}, std::nullopt, {"env", "time"});
  ASSERT_EQ(src.get_tensordict("n").names(), DimNames({"env", "time", "agent"}));
  for (const TensorDict& view : {permute_view(src, {1, 0}), index_view(src, {0})}) {
    const TensorDict dense = view.to_dense();
    EXPECT_EQ(view.get_tensordict("n").names(), dense.get_tensordict("n").names());
  }
  EXPECT_EQ(permute_view(src, {1, 0}).get_tensordict("n").names(),
            DimNames({"time", "env", "agent"}));
  EXPECT_EQ(index_view(src, {0}).get_tensordict("n").names(), DimNames({"time", "agent"}));
}

}  // namespace
}  // namespace td
