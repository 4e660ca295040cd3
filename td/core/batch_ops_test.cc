// Tests of the ops along batch dims (td/core/reduce_ops.cc), gradients, new_* and device strings
// (td/core/memory_ops.cc) and the shape helpers (td/core/shape_ops.cc), each against the same ATen call leaf by leaf, errors included.
#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include <functional>

#include "td/core/testing.h"

namespace td {
namespace {

using test::kLeaves;
using Fn = std::function<at::Tensor(const at::Tensor&)>;

// Batch [3, 4]: "a" float (3, 4, 5), "n/x" float (3, 4, 2, 6) (nested batch [3, 4, 2]), "s".
TensorDict Sample() {
  at::manual_seed(3);
  TensorDict n({{"x", at::randn({3, 4, 2, 6})}}, {3, 4, 2});
  return TensorDict({{"a", at::randn({3, 4, 5})}, {"n", n}, {"s", "a string!"}}, {3, 4});
}

// Every leaf of `r` equals fn(leaf of src); `batch` is r's batch size.
void ExpectLeafwise(const TensorDict& src, const TensorDict& r, at::IntArrayRef batch,
                    const Fn& fn) {
  EXPECT_EQ(r.batch_size(), batch);
  EXPECT_EQ(r.get_non_tensor("s"), "a string!");
  for (const NestedKey& k : src.keys(kLeaves)) {
    if (!src.get_value(k).is_tensor()) continue;
    const at::Tensor e = fn(src.get(k));
    const at::Tensor got = r.get(k);
    ASSERT_EQ(got.sizes(), e.sizes()) << k;
    ASSERT_EQ(got.scalar_type(), e.scalar_type()) << k;
    EXPECT_TRUE(got.is_floating_point() ? got.allclose(e, 1e-5, 1e-6, true) : got.equal(e)) << k;
  }
}

TEST(BatchOpsTest, SoftmaxFamily) {
  TensorDict t = Sample();
  ExpectLeafwise(t, t.softmax(-1), {3, 4}, [](const at::Tensor& x) { return at::softmax(x, 1); });
  ExpectLeafwise(t, t.log_softmax(0, at::kDouble), {3, 4},
                 [](const at::Tensor& x) { return at::log_softmax(x, 0, at::kDouble); });
  ExpectLeafwise(t, t.logsumexp({0}), {4},
                 [](const at::Tensor& x) { return at::logsumexp(x, at::IntArrayRef{0}); });
  ExpectLeafwise(t, t.logsumexp({1, 0}, true), {1, 1},
                 [](const at::Tensor& x) { return at::logsumexp(x, at::IntArrayRef{0, 1}, true); });
  TensorDict all = t.logsumexp();
  EXPECT_TRUE(all.get("a").allclose(at::logsumexp(t.get("a").reshape({-1}), {0})));
  EXPECT_EQ(all.get_tensordict("n").batch_size(), at::IntArrayRef{});
  TD_EXPECT_THROW_MSG(t.softmax(2), c10::IndexError, {"softmax", "[3, 4]"});
  TD_EXPECT_THROW_MSG(t.logsumexp({0, -2}), c10::ValueError, {"twice"});
  TensorDict ints({{"i", at::arange(4)}}, {4});
  TD_EXPECT_THROW_MSG(ints.softmax(0), c10::Error, {"'i'"});
}

TEST(BatchOpsTest, ProdNansumNanmeanQuantile) {
  TensorDict t = Sample();
  t.get("a").index_put_({0, 0, 0}, NAN);
  ExpectLeafwise(t, t.prod({0}), {4}, [](const at::Tensor& x) { return at::prod(x, 0); });
  ExpectLeafwise(t, t.prod({0, 1}, true), {1, 1}, [](const at::Tensor& x) {
    return at::prod(at::prod(x, 1, true), 0, true);
  });
  EXPECT_TRUE(t.prod().get({"n", "x"}).allclose(at::prod(t.get({"n", "x"}))));
  ExpectLeafwise(t, t.nansum({1}), {3}, [](const at::Tensor& x) { return at::nansum(x, {1}); });
  ExpectLeafwise(t, t.nanmean({0}), {4}, [](const at::Tensor& x) { return at::nanmean(x, {0}); });
  EXPECT_TRUE(t.nansum().get("a").allclose(at::nansum(t.get("a"))));
  EXPECT_TRUE(t.nanmean().get("a").allclose(at::nanmean(t.get("a"))));
  TensorDict clean = Sample();
  ExpectLeafwise(clean, clean.quantile(0.3, 1), {3},
                 [](const at::Tensor& x) { return at::quantile(x, 0.3, 1); });
  ExpectLeafwise(clean, clean.quantile(0.5, 0, true, "lower"), {1, 4}, [](const at::Tensor& x) {
    return at::quantile(x, 0.5, 0, true, "lower");
  });
  EXPECT_TRUE(clean.quantile(0.9).get("a").allclose(at::quantile(clean.get("a"), 0.9)));
  // q and the interpolation are refused before any leaf is read (so without leaves too).
  TD_EXPECT_THROW_MSG(clean.quantile(1.5, 0), c10::ValueError, {"quantile", "[0, 1]", "1.5"});
  TD_EXPECT_THROW_MSG(TensorDict({}, {2}).quantile(1.5), c10::ValueError, {"quantile"});
  TD_EXPECT_THROW_MSG(TensorDict({}, {0}).quantile(0.5), c10::IndexError, {"quantile", "[0]"});
  TD_EXPECT_THROW_MSG(clean.quantile(0.5, 0, false, "bad"), c10::Error, {"interpolation"});
}

TEST(BatchOpsTest, MinMaxWithIndicesCummaxCummin) {
  TensorDict t = Sample();
  auto [mv, mi] = t.min_with_indices(0);
  ExpectLeafwise(t, mv, {4}, [](const at::Tensor& x) { return std::get<0>(at::min(x, 0)); });
  ExpectLeafwise(t, mi, {4}, [](const at::Tensor& x) { return std::get<1>(at::min(x, 0)); });
  auto [xv, xi] = t.max_with_indices(-1, true);
  ExpectLeafwise(t, xv, {3, 1}, [](const at::Tensor& x) { return std::get<0>(at::max(x, 1, true)); });
  ExpectLeafwise(t, xi, {3, 1}, [](const at::Tensor& x) { return std::get<1>(at::max(x, 1, true)); });
  ValuesIndices cm = t.cummax(1);
  ExpectLeafwise(t, cm.values, {3, 4}, [](const at::Tensor& x) { return std::get<0>(at::cummax(x, 1)); });
  ExpectLeafwise(t, cm.indices, {3, 4}, [](const at::Tensor& x) { return std::get<1>(at::cummax(x, 1)); });
  ValuesIndices cn = t.cummin(0);
  ExpectLeafwise(t, cn.values, {3, 4}, [](const at::Tensor& x) { return std::get<0>(at::cummin(x, 0)); });
  ExpectLeafwise(t, cn.indices, {3, 4}, [](const at::Tensor& x) { return std::get<1>(at::cummin(x, 0)); });
  TD_EXPECT_THROW_MSG(t.max_with_indices(2), c10::IndexError, {"max", "[3, 4]"});
  // Reducing a dim of size 0 is refused as LibTorch refuses it, with or without leaves.
  TD_EXPECT_THROW_MSG(TensorDict({{"e", at::zeros({0, 2})}}, {0}).min_with_indices(0),
                      c10::IndexError, {"min", "dim 0 of size 0"});
  TD_EXPECT_THROW_MSG(TensorDict({}, {2, 0}).max({1}), c10::IndexError,
                      {"max", "dim 1 of size 0", "[2, 0]"});
  TD_EXPECT_THROW_MSG(TensorDict({}, {2, 0}).amin(), c10::IndexError, {"min", "no elements"});
  // The reduced dims' names go, the others stay, with or without leaves.
  TensorDict named({}, {2, 3});
  named.set_names({"a", "b"});
  EXPECT_EQ(named.max({0}).names(), DimNames({"b"}));
  EXPECT_EQ(named.sum({1}, true).names(), DimNames({"a", "b"}));
  EXPECT_EQ(named.max_with_indices(1).values.names(), DimNames({"a"}));
}

TEST(BatchOpsTest, GradAndZeroGrad) {
  TensorDict t = Sample();
  t.requires_grad_();
  (t.get("a").sum() + t.get({"n", "x"}).pow(2).sum()).backward();
  TensorDict g = t.grad();
  EXPECT_TRUE(g.get("a").equal(at::ones({3, 4, 5})));
  EXPECT_TRUE(g.get({"n", "x"}).allclose(2 * t.get({"n", "x"}).detach()));
  t.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(t.get("a").grad().equal(at::zeros({3, 4, 5})));
  EXPECT_TRUE(t.get({"n", "x"}).grad().equal(at::zeros({3, 4, 2, 6})));
  t.zero_grad();
  EXPECT_FALSE(t.get("a").grad().defined());
  EXPECT_FALSE(t.grad().contains("a"));
}

TEST(BatchOpsTest, NewTensors) {
  TensorDict t = Sample();
  TensorDict z = t.new_zeros({7});
  EXPECT_EQ(z.batch_size(), at::IntArrayRef{7});
  EXPECT_TRUE(z.get("a").equal(t.get("a").new_zeros({7, 5})));
  EXPECT_EQ(z.get_tensordict("n").batch_size(), (std::vector<int64_t>{7, 2}));
  EXPECT_TRUE(z.get({"n", "x"}).equal(at::zeros({7, 2, 6})));
  EXPECT_EQ(z.get_non_tensor("s"), "a string!");
  TensorDict o = t.new_ones({2, 2}, NewOptions().dtype(at::kDouble).requires_grad(true));
  EXPECT_TRUE(o.get("a").equal(at::ones({2, 2, 5}, at::kDouble)));
  EXPECT_TRUE(o.get("a").requires_grad());
  EXPECT_EQ(t.new_empty({1}).get("a").sizes(), (std::vector<int64_t>{1, 5}));
  EXPECT_TRUE(t.new_full({2}, 3.5).get({"n", "x"}).equal(at::full({2, 2, 6}, 3.5)));
  TD_EXPECT_THROW_MSG(t.new_zeros({-1}), c10::ValueError, {"negative"});
  const at::Tensor data = at::arange(6).view({2, 3});
  TensorDict nt = t.new_tensor(data);
  EXPECT_EQ(nt.batch_size(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(nt.get("a").equal(data.to(at::kFloat)));
  EXPECT_EQ(nt.get_tensordict("n").batch_size(), (std::vector<int64_t>{2, 3}));
  TensorDict src = t.apply([](const at::Tensor& x) { return x.to(at::kDouble) * 2; });
  TensorDict nd = t.new_tensor(src);
  EXPECT_TRUE(nd.get("a").equal(src.get("a").to(at::kFloat)));
  EXPECT_NE(nd.get("a").data_ptr(), src.get("a").data_ptr());
  TD_EXPECT_THROW_MSG(t.new_tensor(TensorDict({{"a", data}}, {2})), c10::Error, {"n"});
}

TEST(BatchOpsTest, ShapeHelpers) {
  TensorDict t = Sample();
  TensorDict u = t.unsqueeze(0);   // [1, 3, 4]
  ExpectLeafwise(u, u.expand_as(at::zeros({5, 3, 4})), {5, 3, 4},
                 [](const at::Tensor& x) {
                   std::vector<int64_t> s = x.sizes().vec();
                   s[0] = 5;
                   return x.expand(s);
                 });
  EXPECT_EQ(u.expand_as(TensorDict({}, {2, 3, 4})).batch_size(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(u.broadcast_to({6, 3, 4}).batch_size(), (std::vector<int64_t>{6, 3, 4}));
  TD_EXPECT_THROW_MSG(t.broadcast_to({5, 4}), c10::ValueError, {"[3, 4]"});
  TensorDict three({{"a", at::randn({2, 3, 4, 5})}, {"s", "a string!"}}, {2, 3, 4});
  ExpectLeafwise(three, three.movedim({0}, {-1}), {3, 4, 2},
                 [](const at::Tensor& x) { return x.movedim(0, 2); });
  ExpectLeafwise(three, three.moveaxis({0, 1}, {2, 0}), {3, 4, 2},
                 [](const at::Tensor& x) { return at::movedim(x, {0, 1}, {2, 0}); });
  ExpectLeafwise(three, three.swapaxes(0, 2), {4, 3, 2},
                 [](const at::Tensor& x) { return at::swapaxes(x, 0, 2); });
  TD_EXPECT_THROW_MSG(three.movedim({0, 1}, {1}), c10::ValueError, {"movedim"});
  TD_EXPECT_THROW_MSG(three.movedim({0, 0}, {1, 2}), c10::ValueError, {"twice"});
  // tensor_split: sections and indices (unsorted and out of range too) as torch's.
  TensorDict seq({{"a", at::arange(14).view({7, 2})}, {"s", "a string!"}}, {7});
  for (int64_t sections : {1, 3, 7, 9}) {
    auto got = seq.tensor_split(sections);
    auto ref = at::tensor_split(seq.get("a"), sections, 0);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(got[i].get("a").equal(ref[i])) << sections;
  }
  for (std::vector<int64_t> idx : std::vector<std::vector<int64_t>>{{2, 5}, {5, 2}, {0, 9}, {-2}}) {
    auto got = seq.tensor_split(at::IntArrayRef(idx));
    auto ref = at::tensor_split(seq.get("a"), idx, 0);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_TRUE(got[i].get("a").equal(ref[i])) << at::IntArrayRef(idx) << " piece " << i;
      EXPECT_EQ(got[i].batch_size()[0], ref[i].size(0));
    }
  }
  TD_EXPECT_THROW_MSG(seq.tensor_split(0), c10::ValueError, {"sections"});
}

TEST(BatchOpsTest, DtypesAndDevices) {
  TensorDict t = Sample();
  for (at::ScalarType d : {at::kInt, at::kBool, at::kLong}) {
    ExpectLeafwise(t, t.to(d), {3, 4}, [d](const at::Tensor& x) { return x.to(d); });
  }
  TensorDict c = t.to("cpu");
  EXPECT_EQ(c.device(), at::Device("cpu"));
  ExpectLeafwise(t, c, {3, 4}, [](const at::Tensor& x) { return x; });
  EXPECT_THROW(t.to("not-a-device"), c10::Error);
  if (!c10::impl::hasDeviceGuardImpl(at::kCUDA)) {
    TD_EXPECT_THROW_MSG(t.cuda(), c10::Error, {"cuda"});
  }
}

}  // namespace
}  // namespace td
