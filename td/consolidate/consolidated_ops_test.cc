#include "td/consolidate/consolidated_ops.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/consolidate/consolidate.h"
#include "td/core/testing.h"

namespace td {
namespace {

// Float leaves only (one dtype), nested, with odd sizes so that there are gaps between leaves.
TensorDict Floats() {
  at::manual_seed(1);
  return TensorDict({{"a", at::randn({4, 3})},
                     {"b", at::randn({4, 7, 2})},
                     {"n", {{"x", at::randn({4, 1})}, {"y", at::randn({4, 5})}}},
                     {"s", "text"}},
                    {4});
}

// `exact`: false for transcendental functions, where ATen's vectorised and scalar kernels may
// differ in the last bits and which one runs depends on where a leaf sits in the buffer.
void ExpectSame(const TensorDict& got, const TensorDict& want, bool exact = true) {
  ASSERT_EQ(got.keys(KeysOptions().include_nested(true)),
            want.keys(KeysOptions().include_nested(true)));
  for (const NestedKey& k : want.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    Value w = want.get_value(k);
    if (!w.is_tensor()) continue;
    at::Tensor g = got.get(k);
    EXPECT_EQ(g.scalar_type(), w.tensor().scalar_type()) << k;
    EXPECT_EQ(g.sizes(), w.tensor().sizes()) << k;
    if (exact) {
      EXPECT_TRUE(at::equal(g, w.tensor())) << k;
    } else {
      EXPECT_TRUE(at::allclose(g, w.tensor(), 1e-6, 1e-30)) << k;
    }
  }
  EXPECT_EQ(got.batch_size(), want.batch_size());
  EXPECT_EQ(got.device(), want.device());
}

TEST(ConsolidatedOps, CloneIsOneCopyAndStaysConsolidated) {
  TensorDict c = consolidate(Floats());
  TensorDict d = consolidated::clone(c);
  EXPECT_TRUE(is_consolidated(d));
  ExpectSame(d, c.clone());
  EXPECT_NE(consolidated_buffer(d)->data_ptr(), consolidated_buffer(c)->data_ptr());
  d.get("a").fill_(3);
  EXPECT_FALSE(c.get("a").eq(3).all().item<bool>());
  EXPECT_EQ(d.get_non_tensor("s"), "text");
}

TEST(ConsolidatedOps, ToDtype) {
  TensorDict c = consolidate(Floats());
  for (at::ScalarType dt : {at::kDouble, at::kHalf, at::kBFloat16}) {
    TensorDict d = consolidated::to(c, dt);
    EXPECT_TRUE(is_consolidated(d)) << dt;
    ExpectSame(d, c.to(dt));
  }
  // And back again, through a half buffer whose offsets were halved.
  TensorDict back = consolidated::to(consolidated::to(c, at::kHalf), at::kFloat);
  EXPECT_TRUE(is_consolidated(back));
  ExpectSame(back, c.to(at::kHalf).to(at::kFloat));
  // Non-floating targets cast every leaf, as the member does (leaf by leaf, not one kernel).
  ExpectSame(consolidated::to(c, at::kInt), c.to(at::kInt));
  EXPECT_EQ(consolidated::to(c, at::kInt).get("a").scalar_type(), at::kInt);
}

TEST(ConsolidatedOps, ToDeviceOnTheSameDevice) {
  TensorDict c = consolidate(Floats());
  TensorDict d = consolidated::to(c, at::Device(at::kCPU));
  ExpectSame(d, c.to(at::Device(at::kCPU)));
}

TEST(ConsolidatedOps, PointwiseMatchesLeafByLeaf) {
  TensorDict c = consolidate(Floats());
  TensorDict m = consolidated::mul(c, 2);
  EXPECT_TRUE(is_consolidated(m));
  ExpectSame(m, c * 2);
  TensorDict e = consolidated::exp(c);
  EXPECT_TRUE(is_consolidated(e));
  ExpectSame(e, c.exp(), /*exact=*/false);
  TensorDict cl = consolidated::clamp(c, -0.5, 0.5);
  EXPECT_TRUE(is_consolidated(cl));
  ExpectSame(cl, c.clamp(-0.5, 0.5));
  ExpectSame(consolidated::clamp(c, std::nullopt, 0.1), c.clamp(std::nullopt, 0.1));
  TensorDict s = consolidated::apply(c, [](const at::Tensor& x) { return x.sigmoid(); });
  EXPECT_TRUE(is_consolidated(s));
  ExpectSame(s, c.sigmoid(), /*exact=*/false);
  // A result dtype other than the leaves' (float * bool comparisons).
  TensorDict g = consolidated::apply(c, [](const at::Tensor& x) { return x.gt(0); });
  EXPECT_TRUE(is_consolidated(g));
  ExpectSame(g, c.apply([](const at::Tensor& x) { return x.gt(0); }));
}

TEST(ConsolidatedOps, BinaryOpsNeedTheSameLayout) {
  TensorDict a = consolidate(Floats());
  TensorDict b = consolidated::mul(a, 3);
  TensorDict sum = consolidated::add(a, b, 2);
  EXPECT_TRUE(is_consolidated(sum));
  ExpectSame(sum, a.add(b, 2));
  TensorDict want = a.clone();
  want.add_(b, 0.5);
  TensorDict got = consolidated::clone(a);
  consolidated::add_(got, b, 0.5);
  EXPECT_TRUE(is_consolidated(got));
  ExpectSame(got, want);
  // Same entries inserted in another order: a different layout, leaf-by-leaf, same result.
  TensorDict reordered({{"n", {{"y", b.get({"n", "y"})}, {"x", b.get({"n", "x"})}}},
                        {"b", b.get("b")},
                        {"a", b.get("a")}},
                       {4});
  TensorDict r = consolidate(reordered);
  ExpectSame(consolidated::add(a, r), a.add(r));
  TensorDict got2 = consolidated::clone(a);
  consolidated::add_(got2, r);
  TensorDict want2 = a.clone();
  want2.add_(r);
  ExpectSame(got2, want2);
  // Binary apply / apply_.
  auto fn = [](const at::Tensor& x, const at::Tensor& y) { return at::maximum(x, y); };
  ExpectSame(consolidated::apply(a, fn, b), a.apply(fn, b));
  TensorDict got3 = consolidated::clone(a);
  consolidated::apply_(got3, fn, b);
  ExpectSame(got3, a.apply(fn, b));
  // Missing keys: the member's KeyError.
  TensorDict missing = b.exclude({"a"});
  EXPECT_THROW(consolidated::add(a, missing), KeyError);
}

TEST(ConsolidatedOps, InPlace) {
  TensorDict a = consolidate(Floats());
  TensorDict want = a.clone();
  want.apply_([](const at::Tensor& x) { return x.clamp_(0, 1); });
  consolidated::apply_(a, [](const at::Tensor& x) { return x.clamp_(0, 1); });
  EXPECT_TRUE(is_consolidated(a));
  ExpectSame(a, want);
  consolidated::apply_(a, [](const at::Tensor& x) { return x * 4; });  // copied back
  want.apply_([](const at::Tensor& x) { return x * 4; });
  ExpectSame(a, want);
  consolidated::zero_(a);
  EXPECT_TRUE(is_consolidated(a));
  ExpectSame(a, want.zero_());
}

TEST(ConsolidatedOps, MixedDtypes) {
  // One buffer, several dtypes: clone, zero_ and device moves use the buffer; one-kernel math
  // needs one dtype and falls back to the members.
  TensorDict c = consolidate(test::SampleTensorDict());
  TensorDict d = consolidated::clone(c);
  EXPECT_TRUE(is_consolidated(d));
  ExpectSame(d, c.clone());
  ExpectSame(consolidated::mul(c, 2), c * 2);
  ExpectSame(consolidated::exp(c), c.exp(), /*exact=*/false);
  ExpectSame(consolidated::to(c, at::kDouble), c.to(at::kDouble));
  consolidated::zero_(d);
  ExpectSame(d, c.clone().zero_());
}

TEST(ConsolidatedOps, NotConsolidatedFallsBackToTheMembers) {
  TensorDict t = Floats();
  ExpectSame(consolidated::clone(t), t.clone());
  ExpectSame(consolidated::mul(t, 2), t * 2);
  ExpectSame(consolidated::to(t, at::kDouble), t.to(at::kDouble));
  TensorDict u = t.clone();
  consolidated::add_(u, t);
  ExpectSame(u, t * 2);
  // A consolidated TensorDict that got a new key is still computed right, leaf by leaf.
  TensorDict c = consolidate(Floats());
  c.set("extra", at::ones({4, 2}));
  EXPECT_FALSE(is_consolidated(c));
  ExpectSame(consolidated::mul(c, 2), c * 2);
}

TEST(ConsolidatedOps, NonElementwiseResultIsAnError) {
  TensorDict c = consolidate(Floats());
  TD_EXPECT_THROW_MSG(consolidated::apply(c, [](const at::Tensor& x) { return x.sum(); }),
                      ValueError, {"element-wise"});
}

TEST(ConsolidatedOps, ShareMemoryKeepsItConsolidated) {
  TensorDict c = consolidate(Floats());
  TensorDict want = c.clone();
  TensorDict alias = c;  // another handle
  consolidated::share_memory_(c);
  EXPECT_TRUE(alias.is_shared());
  EXPECT_TRUE(is_consolidated(alias));
  EXPECT_TRUE(alias.is_locked());
  ExpectSame(alias, want);
}

}  // namespace
}  // namespace td
