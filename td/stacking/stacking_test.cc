// Tests of td/stacking: maybe_dense_stack, pad_sequence and densify against the same ATen calls
// (at::stack, padding with at::constant_pad_nd) leaf by leaf, errors included.
#include "td/stacking/stacking.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/testing.h"

namespace td {
namespace {

TEST(StackingTest, MaybeDenseStack) {
  TensorDict a({{"x", at::randn({3, 2})}, {"n", {{"y", at::randn({3})}}}}, {3});
  TensorDict b({{"x", at::randn({3, 2})}, {"n", {{"y", at::randn({3})}}}}, {3});
  TensorDict dense = maybe_dense_stack({a, b}, 1);
  EXPECT_EQ(dense.backend(), "dense");
  EXPECT_TRUE(dense.get("x").equal(at::stack({a.get("x"), b.get("x")}, 1)));
  EXPECT_TRUE(dense.get({"n", "y"}).equal(at::stack({a.get({"n", "y"}), b.get({"n", "y"})}, 1)));
  TensorDict c({{"x", at::randn({3, 5})}, {"n", {{"y", at::randn({3})}}}}, {3});
  TensorDict lazy = maybe_dense_stack({a, c}, 0);
  EXPECT_EQ(lazy.backend(), "lazy_stack");
  EXPECT_TRUE(LazyStackedTensorDict(lazy).get_list("x")[1].equal(c.get("x")));
  TD_EXPECT_THROW_MSG(maybe_dense_stack({a, TensorDict({}, {4})}, 0), BatchSizeError, {"[4]"});
  EXPECT_THROW(maybe_dense_stack({}, 0), c10::ValueError);
}

TEST(StackingTest, PadSequence) {
  TensorDict a({{"x", at::randn({2, 3})}, {"s", "text"}}, {2});
  TensorDict b({{"x", at::randn({4, 3})}, {"s", "text"}}, {4});
  TensorDict p = pad_sequence({a, b}, PadSequenceOptions().padding_value(-1).return_mask(true));
  EXPECT_EQ(p.batch_size(), (std::vector<int64_t>{2, 4}));
  const at::Tensor ref =
      at::stack({at::constant_pad_nd(a.get("x"), {0, 0, 0, 2}, -1), b.get("x")}, 0);
  EXPECT_TRUE(p.get("x").equal(ref));
  const at::Tensor mask = at::stack({at::tensor({1, 1, 0, 0}), at::tensor({1, 1, 1, 1})}, 0).to(at::kBool);
  EXPECT_TRUE(p.get({"masks", "x"}).equal(mask));
  EXPECT_EQ(p.get_non_tensor("s"), "text");
  // pad_dim 1 of a [2, T] batch.
  TensorDict c({{"y", at::randn({2, 1, 5})}}, {2, 1});
  TensorDict d({{"y", at::randn({2, 3, 5})}}, {2, 3});
  TensorDict q = pad_sequence({c, d}, PadSequenceOptions().pad_dim(-1));
  EXPECT_TRUE(q.get("y").equal(
      at::stack({at::constant_pad_nd(c.get("y"), {0, 0, 0, 2}, 0), d.get("y")}, 0)));
  TD_EXPECT_THROW_MSG(pad_sequence({c, TensorDict({{"y", at::zeros({3, 3, 5})}}, {3, 3})}),
                      c10::ValueError, {"TensorDict 1", "[3, 3]"});
  TD_EXPECT_THROW_MSG(pad_sequence({}), c10::ValueError, {"empty"});
  TD_EXPECT_THROW_MSG(pad_sequence({TensorDict({}, {})}), c10::ValueError, {"batch dims"});
  TD_EXPECT_THROW_MSG(pad_sequence({c, d}, PadSequenceOptions().pad_dim(2)), c10::IndexError,
                      {"pad_dim"});
}

TEST(StackingTest, Densify) {
  TensorDict a({{"x", at::randn({2, 3})}, {"n", {{"y", at::randn({1})}}}}, {});
  TensorDict b({{"x", at::randn({4, 1})}, {"n", {{"y", at::randn({2})}}}}, {});
  TensorDict lazy = lazy_stack({a, b}, 0);
  TensorDict dense = densify(lazy, -1);
  EXPECT_EQ(dense.backend(), "dense");
  EXPECT_EQ(dense.batch_size(), (std::vector<int64_t>{2}));
  const at::Tensor ref = at::stack(
      {at::constant_pad_nd(a.get("x"), {0, 0, 0, 2}, -1), at::constant_pad_nd(b.get("x"), {0, 2}, -1)}, 0);
  EXPECT_TRUE(dense.get("x").equal(ref));
  EXPECT_TRUE(dense.get({"n", "y"}).equal(
      at::stack({at::constant_pad_nd(a.get({"n", "y"}), {0, 1}, -1), b.get({"n", "y"})}, 0)));
  EXPECT_TRUE(densify(a).is_same(a));
  TensorDict bad = lazy_stack({a, TensorDict({{"x", at::randn({4})}, {"n", {{"y", at::randn({2})}}}}, {})}, 0);
  EXPECT_THROW(densify(bad), c10::ValueError);
}

}  // namespace
}  // namespace td
