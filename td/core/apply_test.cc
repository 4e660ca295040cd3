#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace {

using test::kLeaves;
using test::SampleTensorDict;

TEST(ApplyTest, ZipsOtherTensorDicts) {
  TensorDict a = SampleTensorDict();
  TensorDict b = a.apply([](const at::Tensor& x) { return x * 3; });
  TensorDict c = a.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, b);
  TensorDict d = a.apply(
      [](const std::vector<at::Tensor>& xs) {
        EXPECT_EQ(xs.size(), 3u);
        return xs[0] + xs[1] * xs[2];
      },
      std::vector<TensorDict>{b, c});
  for (const NestedKey& k : a.keys(kLeaves)) {
    if (!a.get_value(k).is_tensor()) continue;
    EXPECT_TRUE(c.get(k).equal(a.get(k) + b.get(k))) << k;
    EXPECT_TRUE(d.get(k).equal(a.get(k) + b.get(k) * c.get(k))) << k;
  }
  EXPECT_EQ(c.get_non_tensor("s"), "a string!");
  EXPECT_EQ(c.get_tensordict("n").batch_size(), at::IntArrayRef({3, 4, 2}));
  // Extra keys in the other TensorDict are ignored.
  TensorDict bigger = b.clone();
  bigger.set("extra", at::zeros({3, 4}));
  EXPECT_FALSE(a.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, bigger)
                   .contains("extra"));
}

TEST(ApplyTest, MissingKeysAndDefaults) {
  TensorDict a = SampleTensorDict();
  TensorDict partial = a.exclude({"b", {"n", "x"}});
  auto add = [](const at::Tensor& x, const at::Tensor& y) { return x + y; };
  TD_EXPECT_THROW_MSG(a.apply(add, partial), KeyError,
                      {"'b'", "('n', 'x')", "missing in the other TensorDict", "default"});
  TensorDict r = a.apply(add, partial, ApplyOptions().default_value(at::full({}, 100)));
  EXPECT_TRUE(r.get("b").equal(a.get("b") + 100));
  EXPECT_TRUE(r.get({"n", "x"}).equal(a.get({"n", "x"}) + 100));
  EXPECT_TRUE(r.get("a").equal(a.get("a") * 2));
  // A whole missing sub-TensorDict takes the default too.
  TensorDict no_n = a.exclude({"n"});
  TensorDict r2 = a.apply(add, no_n, ApplyOptions().default_value(at::zeros({})));
  EXPECT_TRUE(r2.get({"n", "x"}).equal(a.get({"n", "x"})));
  TensorDict wrong = a.clone();
  wrong.set("b", TensorDict({}, {3, 4}));
  TD_EXPECT_THROW_MSG(a.apply(add, wrong), c10::TypeError, {"'b'", "Tensor", "TensorDict"});
}

TEST(ApplyTest, NamedApplyDropAndBatchSize) {
  TensorDict a = SampleTensorDict();
  std::vector<NestedKey> seen;
  TensorDict r = a.named_apply([&](const NestedKey& k, const at::Tensor& x) {
    seen.push_back(k);
    return k == NestedKey("b") ? at::Tensor() : x + 1;
  });
  EXPECT_EQ(seen, (std::vector<NestedKey>{"a", "b", {"n", "x"}}));
  EXPECT_FALSE(r.contains("b"));
  EXPECT_TRUE(r.get("a").equal(a.get("a") + 1));
  EXPECT_EQ(r.get_non_tensor("s"), "a string!");
  TensorDict z = a.named_apply(
      [](const NestedKey& k, const std::vector<at::Tensor>& xs) {
        return k.size() > 1 ? xs[0] - xs[1] : xs[0];
      },
      {a});
  EXPECT_TRUE(z.get({"n", "x"}).eq(0).all().item<bool>());
  // A new batch size: nested levels keep their extra dims after it.
  TensorDict flat =
      a.apply([](const at::Tensor& x) { return x.flatten(0, 1); }, ApplyOptions().batch_size({12}));
  EXPECT_EQ(flat.batch_size(), at::IntArrayRef({12}));
  EXPECT_EQ(flat.get_tensordict("n").batch_size(), at::IntArrayRef({12, 2}));
  TD_EXPECT_THROW_MSG(a.apply([](const at::Tensor& x) { return x; }, ApplyOptions().batch_size({4})),
                      BatchSizeError, {"'a'", "torch.Size([3, 4, 5])", "torch.Size([4])"});
  TD_EXPECT_THROW_MSG(a.apply([](const at::Tensor& x) { return x; }, ApplyOptions().batch_size({-2})),
                      c10::ValueError, {"negative"});
  TD_EXPECT_THROW_MSG(a.named_apply([](const NestedKey& k, const at::Tensor& x) -> at::Tensor {
    if (k.size() > 1) throw std::runtime_error("nested!");
    return x;
  }),
                      c10::Error, {"nested!", "('n', 'x')"});
  TD_EXPECT_THROW_MSG(a.apply([](const at::Tensor& x) -> at::Tensor {
    TORCH_CHECK_VALUE(x.dim() != 2, "two dims");
    return x;
  }),
                      c10::ValueError, {"two dims", "'b'"});
}

TEST(ApplyTest, InPlaceWithOthers) {
  TensorDict a = SampleTensorDict();
  TensorDict orig = a.clone();
  TensorDict b = a.apply([](const at::Tensor& x) { return at::ones_like(x); });
  at::Tensor a_leaf = a.get("a");
  a.apply_([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, b);
  EXPECT_TRUE(a.get("a").is_same(a_leaf));
  EXPECT_TRUE(a.get("a").equal(orig.get("a") + 1));
  EXPECT_TRUE(a.get("b").equal(orig.get("b") + 1));
  a.apply_([](const std::vector<at::Tensor>& xs) { return xs[0] - xs[1] - xs[2]; },
           std::vector<TensorDict>{b, b});
  EXPECT_TRUE(a.get({"n", "x"}).allclose(orig.get({"n", "x"}) - 1));
  // A result that does not fit its leaf: nothing is written.
  TensorDict before = a.clone();
  TD_EXPECT_THROW_MSG(a.apply_([](const at::Tensor& x) { return x.dim() == 2 ? at::zeros({7}) : x + 5; }),
                      c10::ValueError, {"'b'", "torch.Size([7])", "torch.Size([3, 4])"});
  assert_allclose(a, before);
  TD_EXPECT_THROW_MSG(a.apply_([](const at::Tensor& x, const at::Tensor& y) { return x + y; },
                               a.exclude({"a"})),
                      KeyError, {"'a'"});
  a.apply_([](const at::Tensor& x, const at::Tensor& y) { return x * y; }, a.exclude({"a"}),
           ApplyOptions().default_value(at::zeros({})));
  EXPECT_TRUE(a.get("a").eq(0).all().item<bool>());
}

// apply_ follows set_'s rule: a result must have exactly the leaf's shape. Scalars and smaller
// broadcastable results are errors naming the key and both shapes, checked before any write.
TEST(ApplyTest, InPlaceResultsMustHaveTheLeafShape) {
  TensorDict a = SampleTensorDict();
  TensorDict before = a.clone();
  TD_EXPECT_THROW_MSG(a.apply_([](const at::Tensor& x) { return x.sum(); }), c10::ValueError,
                      {"apply_", "'a'", "torch.Size([])", "torch.Size([3, 4, 5])",
                       "exactly the leaf's shape"});
  assert_allclose(a, before);
  // apply (not in place) with the same function names the key, the shape and the batch size.
  TD_EXPECT_THROW_MSG(a.apply([](const at::Tensor& x) { return x.sum(); }), BatchSizeError,
                      {"'a'", "torch.Size([])", "torch.Size([3, 4])"});
  // Broadcastable to the leaf, but smaller: still an error.
  TD_EXPECT_THROW_MSG(
      a.apply_([](const at::Tensor& x) { return x.select(0, 0) * 0; }), c10::ValueError,
      {"'a'", "torch.Size([4, 5])", "torch.Size([3, 4, 5])"});
  assert_allclose(a, before);
  // A result overlapping the leaf (a transposed view of a square leaf) is named, nothing written.
  TensorDict sq({{"q", at::arange(9.).view({3, 3})}, {"r", at::zeros({3})}}, {3});
  TensorDict sq_before = sq.clone();
  TD_EXPECT_THROW_MSG(sq.apply_([](const at::Tensor& x) { return x.dim() == 2 ? x.t() : x + 1; }),
                      c10::ValueError, {"'q'", "share its memory"});
  assert_allclose(sq, sq_before);
  // An expanded leaf cannot be written into: named before anything is written.
  TensorDict ex = sq.expand({2, 3});
  TD_EXPECT_THROW_MSG(ex.apply_([](const at::Tensor& x) { return x + 1; }), c10::ValueError,
                      {"'q'", "torch.Size([2, 3, 3])"});
  assert_allclose(sq, sq_before);
  // A meta leaf holds nothing to write into.
  TensorDict meta({{"m", at::empty({3, 2}, at::TensorOptions().device(at::kMeta))}}, {3});
  TD_EXPECT_THROW_MSG(meta.apply_([](const at::Tensor& x) { return at::ones(x.sizes()); }),
                      c10::ValueError, {"'m'", "meta"});
  // The leaf itself, or a same-shaped new tensor, is fine.
  a.apply_([](const at::Tensor& x) { return x.mul_(2); });
  EXPECT_TRUE(a.get("a").allclose(before.get("a") * 2));
  a.apply_([](const at::Tensor& x) { return at::zeros_like(x); });
  EXPECT_TRUE(a.get({"n", "x"}).eq(0).all().item<bool>());
}

}  // namespace
}  // namespace td
