// Tests of td/core/leaf_queries.cc: each question against the leaves' own answers, nested leaves
// and non-tensor data included. (The same questions on lazy and memory-mapped backends:
// tests/conformance/conformance_parity.h.)
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "td/core/testing.h"

namespace td {
namespace {

using test::kLeaves;

TEST(LeafQueriesTest, FloatingPointAndDtype) {
  TensorDict f({{"a", at::ones({3, 2})}, {"n", {{"x", at::zeros({3, 4})}}}, {"s", "text"}}, {3});
  EXPECT_TRUE(f.is_floating_point());
  EXPECT_EQ(f.dtype(), std::optional<at::ScalarType>(at::kFloat));
  f.set({"n", "i"}, at::arange(3));  // a nested integer leaf
  EXPECT_FALSE(f.is_floating_point());
  EXPECT_EQ(f.dtype(), std::nullopt);
  EXPECT_EQ(f.float64().dtype(), std::optional<at::ScalarType>(at::kDouble));
  // No tensor leaf: floating point (vacuously), no dtype, as in Python.
  const TensorDict none({{"s", "text"}, {"n", TensorDict({}, {})}}, {});
  EXPECT_TRUE(none.is_floating_point());
  EXPECT_EQ(none.dtype(), std::nullopt);
}

TEST(LeafQueriesTest, ContiguousDevicesRequiresGrad) {
  const TensorDict t = test::SampleTensorDict();
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.transpose(0, 1).is_contiguous());  // every leaf transposed
  TensorDict one = t.clone();
  one.set({"n", "y"}, at::ones({4, 3, 2}).transpose(0, 1));  // one nested leaf is not
  EXPECT_FALSE(one.is_contiguous());
  EXPECT_TRUE(one.contiguous().is_contiguous());

  EXPECT_FALSE(t.is_cpu());  // no device: neither, as in Python
  EXPECT_FALSE(t.is_cuda());
  EXPECT_FALSE(t.is_meta());
  EXPECT_TRUE(t.cpu().is_cpu());
  EXPECT_FALSE(t.cpu().is_cuda());
  EXPECT_TRUE(t.to(at::Device(at::kMeta)).is_meta());

  EXPECT_FALSE(t.requires_grad());
  TensorDict g = t.clone();
  g.set({"n", "w"}, at::ones({3, 4, 2}).requires_grad_(true));
  EXPECT_TRUE(g.requires_grad());
  EXPECT_FALSE(g.detach().requires_grad());
}

TEST(LeafQueriesTest, DataPtrHoldsEachLeafsAddress) {
  const TensorDict t = test::SampleTensorDict();
  const TensorDict p = t.data_ptr();
  EXPECT_EQ(p.batch_size(), at::IntArrayRef({}));
  EXPECT_EQ(p.device(), at::Device("cpu"));
  EXPECT_FALSE(p.contains("s"));  // non-tensor data has no address
  for (const NestedKey& k : t.keys(kLeaves)) {
    if (!t.get_value(k).is_tensor()) continue;
    const at::Tensor v = p.get(k);
    EXPECT_EQ(v.dim(), 0) << k;
    EXPECT_EQ(v.scalar_type(), at::kLong) << k;
    EXPECT_EQ(v.item<int64_t>(), reinterpret_cast<intptr_t>(t.get(k).data_ptr())) << k;
  }
  // The documented check: a shallow copy shares every leaf, a clone none.
  EXPECT_TRUE((t.copy().data_ptr() == p).all());
  EXPECT_FALSE((t.clone().data_ptr() == p).any());
  // storage: the storage's address, the same for views at an offset into it.
  const at::Tensor base = at::arange(12.0);
  const TensorDict views({{"x", base.narrow(0, 0, 6).view({3, 2})},
                          {"y", base.narrow(0, 6, 6).view({3, 2})}},
                         {3});
  const TensorDict sp = views.data_ptr(/*storage=*/true);
  EXPECT_EQ(sp.get("x").item<int64_t>(), sp.get("y").item<int64_t>());
  EXPECT_NE(views.data_ptr().get("x").item<int64_t>(), views.data_ptr().get("y").item<int64_t>());
}

TEST(LeafQueriesTest, BytesAndParamCount) {
  const at::Tensor shared = at::ones({3, 4}, at::kDouble);
  TensorDict t({{"a", shared},
                {"b", at::ones({3, 2}, at::kByte)},
                {"n", {{"again", shared}, {"c", at::ones({3, 5}, at::kHalf)}}},
                {"s", "text"}},
               {3});
  EXPECT_EQ(t.param_count(), 12 + 6 + 12 + 15);
  EXPECT_EQ(t.bytes(), 12 * 8 + 6 * 1 + 12 * 8 + 15 * 2);
  // The same tensor under two keys counts once without count_duplicates.
  EXPECT_EQ(t.param_count(/*count_duplicates=*/false), 12 + 6 + 15);
  EXPECT_EQ(t.bytes(/*count_duplicates=*/false), 12 * 8 + 6 * 1 + 15 * 2);
  // A gradient is counted with its leaf.
  at::Tensor w = at::ones({3, 7}).requires_grad_(true);
  w.sum().backward();
  TensorDict g({{"w", w}}, {3});
  EXPECT_EQ(g.bytes(), 2 * 21 * 4);
  EXPECT_EQ(g.param_count(), 21);
  EXPECT_EQ(TensorDict().bytes(), 0);
}

TEST(LeafQueriesTest, Depth) {
  EXPECT_EQ(TensorDict().depth(), 0);
  TensorDict t({{"a", at::ones({3})}, {"s", "text"}}, {3});
  EXPECT_EQ(t.depth(), 0);
  t.set({"n", "x"}, at::ones({3}));
  EXPECT_EQ(t.depth(), 1);
  t.set({"n", "m", "note"}, "deep text");  // a non-tensor leaf counts
  EXPECT_EQ(t.depth(), 2);
  t.set({"e", "f", "g"}, TensorDict({}, {3}));  // an empty TensorDict holds no leaf
  EXPECT_EQ(t.depth(), 2);
}

TEST(LeafQueriesTest, GetItemShape) {
  const TensorDict t = test::SampleTensorDict();
  EXPECT_EQ(t.get_item_shape("a"), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(t.get_item_shape({"n", "x"}), (std::vector<int64_t>{3, 4, 2, 6}));
  EXPECT_EQ(t.get_item_shape("n"), (std::vector<int64_t>{3, 4, 2}));  // its batch size
  EXPECT_EQ(t.get_item_shape("s"), (std::vector<int64_t>{3, 4}));     // the level's
  TD_EXPECT_THROW_MSG(t.get_item_shape("zz"), KeyError, {"'zz'"});
  TD_EXPECT_THROW_MSG(t.get_item_shape({"n", "zz"}), KeyError, {"zz"});
  TD_EXPECT_THROW_MSG(t.get_item_shape({"a", "x"}), TypeError, {"'a'"});
  EXPECT_EQ(t.entry_class("a"), "Tensor");
  EXPECT_EQ(t.entry_class("n"), "TensorDict");
  EXPECT_EQ(t.entry_class({"n", "x"}), "Tensor");
  EXPECT_EQ(t.entry_class("s"), "NonTensorData");
  TD_EXPECT_THROW_MSG(t.entry_class({"n", "zz"}), KeyError, {"zz"});
}

}  // namespace
}  // namespace td
