#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>

#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace {

// Batch [3, 4]; "n" has an extra batch dim; "s" is non-tensor data. All leaves positive floats
// except "b" (int64).
TensorDict Sample() {
  at::manual_seed(0);
  TensorDict n({{"x", at::rand({3, 4, 2, 6}) + 0.5}}, {3, 4, 2});
  return TensorDict({{"a", at::rand({3, 4, 5}) + 0.5},
                     {"b", at::arange(12).view({3, 4}) + 1},
                     {"n", n},
                     {"s", "a string!"}},
                    {3, 4});
}

using test::kLeaves;

// Every tensor leaf of `r` equals fn(leaf of `src`) (allclose for floats), "s" is carried.
void ExpectLeafwise(const TensorDict& src, const TensorDict& r,
                    const std::function<at::Tensor(const at::Tensor&)>& fn) {
  EXPECT_EQ(r.get_non_tensor("s"), "a string!");
  for (const NestedKey& k : src.keys(kLeaves)) {
    if (!src.get_value(k).is_tensor()) continue;
    at::Tensor e = fn(src.get(k));
    at::Tensor got = r.get(k);
    ASSERT_EQ(got.sizes(), e.sizes()) << k;
    ASSERT_EQ(got.scalar_type(), e.scalar_type()) << k;
    EXPECT_TRUE(got.is_floating_point() ? got.allclose(e, 1e-5, 1e-6, true) : got.equal(e)) << k;
  }
}

TEST(MathOpsTest, DevicesDtypesMemory) {
  TensorDict t = Sample();
  TensorDict moved = t.to(at::Device("cpu"));
  EXPECT_EQ(moved.device(), at::Device("cpu"));
  EXPECT_EQ(moved.get_tensordict("n").device(), at::Device("cpu"));
  ExpectLeafwise(t, moved, [](const at::Tensor& x) { return x; });
  // Every leaf is cast, the int64 one too (Python's td.to(dtype)).
  TensorDict dbl = t.to(at::kDouble);
  ExpectLeafwise(t, dbl, [](const at::Tensor& x) { return x.to(at::kDouble); });
  EXPECT_EQ(dbl.get("b").scalar_type(), at::kDouble);
  TensorDict both = t.to(at::Device("cpu"), at::kHalf, /*non_blocking=*/true);
  ExpectLeafwise(t, both, [](const at::Tensor& x) { return x.to(at::kHalf); });
  EXPECT_EQ(both.get("b").scalar_type(), at::kHalf);
  EXPECT_EQ(both.device(), at::Device("cpu"));
  ExpectLeafwise(t, t.to(at::kLong), [](const at::Tensor& x) { return x.to(at::kLong); });
  EXPECT_FALSE(t.cpu().is_same(t));
  TensorDict tr = t.transpose(0, 1);
  EXPECT_FALSE(tr.get("a").is_contiguous());
  TensorDict c = tr.contiguous();
  ExpectLeafwise(tr, c, [](const at::Tensor& x) { return x.contiguous(); });
  EXPECT_TRUE(c.get("a").is_contiguous());
  EXPECT_TRUE(t.contiguous().get("a").is_same(t.get("a")));

  TensorDict g = t.clone();
  g.requires_grad_();
  EXPECT_TRUE(g.get("a").requires_grad());
  EXPECT_TRUE(g.get({"n", "x"}).requires_grad());
  EXPECT_FALSE(g.get("b").requires_grad());  // integers cannot require grad
  TensorDict y = g.apply([](const at::Tensor& x) { return x * 2; });
  EXPECT_TRUE(y.get("a").requires_grad());
  TensorDict det = y.detach();
  EXPECT_FALSE(det.get("a").requires_grad());
  EXPECT_EQ(det.get("a").data_ptr(), y.get("a").data_ptr());
  y.detach_();
  EXPECT_FALSE(y.get("a").requires_grad());
  TD_EXPECT_THROW_MSG(g.zero_(), c10::Error, {"requires grad", "'a'"});
  g.requires_grad_(false);
  EXPECT_FALSE(g.get("a").requires_grad());

  TensorDict z = t.clone();
  z.zero_();
  ExpectLeafwise(t, z, [](const at::Tensor& x) { return at::zeros_like(x); });
  z.fill_(3);
  ExpectLeafwise(t, z, [](const at::Tensor& x) { return at::full_like(x, 3); });
  TensorDict gz = t.clone().requires_grad_();
  TD_EXPECT_THROW_MSG(gz.fill_(1), c10::Error, {"fill_", "'a'", "requires grad"});

  if (at::hasCUDA()) {
    EXPECT_TRUE(t.pin_memory().get("a").is_pinned());
  } else {
    TD_EXPECT_THROW_MSG(t.pin_memory(), c10::Error, {"pinning key 'a'"});
  }
}

TEST(MathOpsTest, LikeConstructors) {
  TensorDict t = Sample();
  ExpectLeafwise(t, zeros_like(t), [](const at::Tensor& x) { return at::zeros_like(x); });
  ExpectLeafwise(t, ones_like(t), [](const at::Tensor& x) { return at::ones_like(x); });
  ExpectLeafwise(t, full_like(t, 7), [](const at::Tensor& x) { return at::full_like(x, 7); });
  TensorDict e = empty_like(t);
  EXPECT_EQ(e.get({"n", "x"}).sizes(), t.get({"n", "x"}).sizes());
  EXPECT_EQ(e.get_tensordict("n").batch_size(), at::IntArrayRef({3, 4, 2}));
  TensorDict floats = t.exclude({"b"});
  TensorDict r = rand_like(floats);
  EXPECT_TRUE((r >= 0).all() && (r < 1).all());
  EXPECT_EQ(randn_like(floats).get("a").sizes(), t.get("a").sizes());
  TD_EXPECT_THROW_MSG(rand_like(t), c10::Error, {"rand_like of key 'b'"});
}

TEST(MathOpsTest, ArithmeticMatchesTorch) {
  TensorDict a = Sample();
  TensorDict b = a.apply([](const at::Tensor& x) { return x * 2 + 1; });
  auto both = [&](const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& f) {
    return [&, f](const at::Tensor& x) {
      // find the matching leaf of b by value identity: b = 2a + 1
      return f(x, x * 2 + 1);
    };
  };
  ExpectLeafwise(a, a + b, both([](const at::Tensor& x, const at::Tensor& y) { return x + y; }));
  ExpectLeafwise(a, a - b, both([](const at::Tensor& x, const at::Tensor& y) { return x - y; }));
  ExpectLeafwise(a, a * b, both([](const at::Tensor& x, const at::Tensor& y) { return x * y; }));
  ExpectLeafwise(a, a / b, both([](const at::Tensor& x, const at::Tensor& y) { return x / y; }));
  ExpectLeafwise(a, a.pow(b), both([](const at::Tensor& x, const at::Tensor& y) { return x.pow(y); }));
  TD_EXPECT_THROW_MSG(a.add(b, 0.5), c10::Error, {"alpha", "adding key 'b'"});
  TensorDict fa = a.exclude({"b"});
  ExpectLeafwise(fa.set("s", "a string!"), fa.add(b, 0.5),
                 both([](const at::Tensor& x, const at::Tensor& y) { return x.add(y, 0.5); }));
  ExpectLeafwise(a, a.sub(b, 2), both([](const at::Tensor& x, const at::Tensor& y) { return x.sub(y, 2); }));
  ExpectLeafwise(a, a + 1, [](const at::Tensor& x) { return x + 1; });
  ExpectLeafwise(a, 1 + a, [](const at::Tensor& x) { return 1 + x; });
  ExpectLeafwise(a, a - 1.5, [](const at::Tensor& x) { return x - 1.5; });
  // Python number semantics (LibTorch's C++ `1.5 - x` / `2 / x` keep an integer x's dtype).
  ExpectLeafwise(a, 1.5 - a, [](const at::Tensor& x) { return -(x - 1.5); });
  ExpectLeafwise(a, a * 3, [](const at::Tensor& x) { return x * 3; });
  ExpectLeafwise(a, 3 * a, [](const at::Tensor& x) { return 3 * x; });
  ExpectLeafwise(a, a / 4, [](const at::Tensor& x) { return x / 4; });
  ExpectLeafwise(a, 2 / a, [](const at::Tensor& x) { return x.reciprocal() * 2; });
  EXPECT_EQ((2 / a).get("b").scalar_type(), at::kFloat);
  ExpectLeafwise(a, a.pow(2), [](const at::Tensor& x) { return x.pow(2); });
  ExpectLeafwise(a, -a, [](const at::Tensor& x) { return -x; });
  // Broadcasting leaves: b's leaves are [3, 4, 1]-shaped where a's are [3, 4, 5].
  TensorDict small({{"a", at::ones({3, 4, 1})}}, {3, 4});
  TensorDict only_a = a.select({"a"});
  EXPECT_TRUE((only_a + small).get("a").equal(a.get("a") + 1));
  TD_EXPECT_THROW_MSG(a + a.exclude({"b"}), KeyError, {"'b'", "missing"});
  TD_EXPECT_THROW_MSG(only_a + TensorDict({{"a", at::ones({3, 4, 2})}}, {3, 4}), c10::Error,
                      {"'a'"});
}

TEST(MathOpsTest, InPlaceArithmetic) {
  TensorDict a = Sample();
  TensorDict orig = a.clone();
  TensorDict b = a.apply([](const at::Tensor& x) { return x * 2 + 1; });
  at::Tensor leaf = a.get("a");
  a.add_(b);
  EXPECT_TRUE(a.get("a").is_same(leaf));
  ExpectLeafwise(orig, a, [](const at::Tensor& x) { return x + (x * 2 + 1); });
  a.sub_(b, 1);
  ExpectLeafwise(orig, a, [](const at::Tensor& x) { return x.clone(); });
  a += 1;
  a -= 1;
  a *= 2;
  ExpectLeafwise(orig, a, [](const at::Tensor& x) { return x * 2; });
  a.mul_(b);
  ExpectLeafwise(orig, a, [](const at::Tensor& x) { return x * 2 * (x * 2 + 1); });
  TensorDict f = orig.exclude({"b"});
  TensorDict fo = f.clone();
  f /= 2;
  f.div_(f);
  f.pow_(3);
  f.pow_(f);
  ExpectLeafwise(fo, f, [](const at::Tensor& x) { return at::ones_like(x); });
  // Validation first: "b" (int64) cannot hold a float quotient; nothing is written.
  TensorDict c = orig.clone();
  TD_EXPECT_THROW_MSG(c.div_(2), c10::Error, {"div_", "'b'"});
  TD_EXPECT_THROW_MSG(c /= c, c10::Error, {"'b'"});
  TD_EXPECT_THROW_MSG(c.add_(0.5), c10::Error, {"'b'"});
  assert_allclose(c, orig);
  TD_EXPECT_THROW_MSG(c.add_(TensorDict({{"a", at::ones({3, 4, 5, 2})}, {"b", at::ones({3, 4})}, {"n", {{"x", at::ones({3, 4, 2, 6})}}}}, {3, 4})),
                      c10::ValueError, {"'a'", "torch.Size([3, 4, 5, 2])", "torch.Size([3, 4, 5])"});
  assert_allclose(c, orig);
}

TEST(MathOpsTest, UnaryMath) {
  TensorDict a = Sample();
  using F = std::function<at::Tensor(const at::Tensor&)>;
  std::vector<std::pair<std::function<TensorDict(const TensorDict&)>, F>> cases = {
      {[](const TensorDict& t) { return t.abs(); }, [](const at::Tensor& x) { return x.abs(); }},
      {[](const TensorDict& t) { return t.neg(); }, [](const at::Tensor& x) { return x.neg(); }},
      {[](const TensorDict& t) { return t.exp(); }, [](const at::Tensor& x) { return x.exp(); }},
      {[](const TensorDict& t) { return t.log(); }, [](const at::Tensor& x) { return x.log(); }},
      {[](const TensorDict& t) { return t.sqrt(); }, [](const at::Tensor& x) { return x.sqrt(); }},
      {[](const TensorDict& t) { return t.sigmoid(); }, [](const at::Tensor& x) { return x.sigmoid(); }},
      {[](const TensorDict& t) { return t.tanh(); }, [](const at::Tensor& x) { return x.tanh(); }},
      {[](const TensorDict& t) { return t.reciprocal(); }, [](const at::Tensor& x) { return x.reciprocal(); }},
      {[](const TensorDict& t) { return t.sign(); }, [](const at::Tensor& x) { return x.sign(); }},
      {[](const TensorDict& t) { return t.floor(); }, [](const at::Tensor& x) { return x.floor(); }},
      {[](const TensorDict& t) { return t.ceil(); }, [](const at::Tensor& x) { return x.ceil(); }},
      {[](const TensorDict& t) { return t.round(); }, [](const at::Tensor& x) { return x.round(); }},
      {[](const TensorDict& t) { return t.clamp(1.0, 2.0); }, [](const at::Tensor& x) { return x.clamp(1.0, 2.0); }},
      {[](const TensorDict& t) { return t.clamp(std::nullopt, 1.0); }, [](const at::Tensor& x) { return x.clamp_max(1.0); }},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectLeafwise(a, cases[i].first(a), cases[i].second);
  }
  TensorDict f = a.exclude({"b"});
  TensorDict fo = f.clone();
  f.exp_().log_().sqrt_().abs_().neg_().neg_();
  ExpectLeafwise(fo, f, [](const at::Tensor& x) { return x.sqrt(); });
  f.sigmoid_().tanh_().reciprocal_().floor_().ceil_().round_();
  ExpectLeafwise(fo, f, [](const at::Tensor& x) {
    return x.sqrt().sigmoid().tanh().reciprocal().floor().ceil().round();
  });
  f.clamp_(0.5, std::nullopt);
  EXPECT_TRUE((f >= 0.5).all());
  TD_EXPECT_THROW_MSG(a.clamp(std::nullopt, std::nullopt), c10::ValueError, {"at least one"});
  // In place on the int64 leaf: exp_ cannot write floats into it; nothing is written.
  TensorDict before = a.clone();
  TD_EXPECT_THROW_MSG(a.exp_(), c10::Error, {"exp_", "'b'"});
  TD_EXPECT_THROW_MSG(TensorDict({{"m", at::ones({2}, at::kBool)}}, {2}).neg(), c10::Error, {"'m'"});
  assert_allclose(a, before);
}

TEST(MathOpsTest, Comparisons) {
  TensorDict a = Sample();
  TensorDict b = a.apply([](const at::Tensor& x) { return x.flip(0); });
  ExpectLeafwise(a, a < b, [](const at::Tensor& x) { return x < x.flip(0); });
  ExpectLeafwise(a, a <= b, [](const at::Tensor& x) { return x <= x.flip(0); });
  ExpectLeafwise(a, a > b, [](const at::Tensor& x) { return x > x.flip(0); });
  ExpectLeafwise(a, a >= b, [](const at::Tensor& x) { return x >= x.flip(0); });
  ExpectLeafwise(a, a == 1, [](const at::Tensor& x) { return x == 1; });
  ExpectLeafwise(a, a != 1, [](const at::Tensor& x) { return x != 1; });
  ExpectLeafwise(a, a < 2, [](const at::Tensor& x) { return x < 2; });
  ExpectLeafwise(a, a <= 2, [](const at::Tensor& x) { return x <= 2; });
  ExpectLeafwise(a, a > 2, [](const at::Tensor& x) { return x > 2; });
  ExpectLeafwise(a, a >= 2, [](const at::Tensor& x) { return x >= 2; });
  EXPECT_TRUE((a > 0).all());
  EXPECT_FALSE((a > 100).any());
  TD_EXPECT_THROW_MSG(a < a.exclude({{"n", "x"}}), KeyError, {"('n', 'x')"});
}

TEST(MathOpsTest, Reductions) {
  TensorDict a = Sample();
  // Everything: batch [] (nested levels too), one scalar per leaf.
  TensorDict s = a.sum();
  EXPECT_EQ(s.batch_size().size(), 0u);
  EXPECT_EQ(s.get_tensordict("n").batch_size().size(), 0u);
  ExpectLeafwise(a, s, [](const at::Tensor& x) { return x.sum(); });
  ExpectLeafwise(a, a.max(), [](const at::Tensor& x) { return x.max(); });
  ExpectLeafwise(a, a.min(), [](const at::Tensor& x) { return x.min(); });
  TensorDict f = a.exclude({"b"});
  ExpectLeafwise(f.set("s", "a string!"), f.mean(), [](const at::Tensor& x) { return x.mean(); });
  ExpectLeafwise(f, f.std(), [](const at::Tensor& x) { return x.std(); });
  ExpectLeafwise(f, f.var(ReduceOptions().unbiased(false)),
                 [](const at::Tensor& x) { return x.var(false); });
  ExpectLeafwise(f, f.norm(), [](const at::Tensor& x) { return x.norm(); });
  ExpectLeafwise(f, f.norm(1), [](const at::Tensor& x) { return x.norm(1); });
  // Over batch dims: nested levels keep their extra dims.
  TensorDict m = a.sum({0});
  EXPECT_EQ(m.batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(m.get_tensordict("n").batch_size(), at::IntArrayRef({4, 2}));
  ExpectLeafwise(a, m, [](const at::Tensor& x) { return x.sum(0); });
  ExpectLeafwise(a, a.sum({-1}, true), [](const at::Tensor& x) { return x.sum(1, true); });
  EXPECT_EQ(a.sum({-1}, true).batch_size(), at::IntArrayRef({3, 1}));
  ExpectLeafwise(a, a.sum({0, 1}), [](const at::Tensor& x) { return x.sum(std::vector<int64_t>{0, 1}); });
  ExpectLeafwise(f, f.mean({1}), [](const at::Tensor& x) { return x.mean(1); });
  ExpectLeafwise(f, f.std({0}, true), [](const at::Tensor& x) { return x.std(0, true, true); });
  ExpectLeafwise(f, f.var({0, 1}), [](const at::Tensor& x) { return x.var(std::vector<int64_t>{0, 1}); });
  ExpectLeafwise(a, a.max({1}), [](const at::Tensor& x) { return x.amax(1); });
  ExpectLeafwise(a, a.min({0, 1}), [](const at::Tensor& x) { return x.amin({0, 1}); });
  ExpectLeafwise(f, f.norm(2, ReduceOptions().dim({0})),
                 [](const at::Tensor& x) { return x.norm(2, {0}); });
  TensorDict bools = a > 1;
  ExpectLeafwise(a, bools.any({0}), [](const at::Tensor& x) { return (x > 1).any(0); });
  ExpectLeafwise(a, bools.all({0, 1}), [](const at::Tensor& x) { return (x > 1).all(1).all(0); });
  ExpectLeafwise(a, bools.all({1}, true), [](const at::Tensor& x) { return (x > 1).all(1, true); });
  TD_EXPECT_THROW_MSG(a.sum({2}), c10::IndexError, {"sum", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(a.sum({0, -2}), c10::ValueError, {"twice"});
  TD_EXPECT_THROW_MSG(a.mean(), c10::Error, {"mean", "'b'"});
  TD_EXPECT_THROW_MSG(a.norm(), c10::Error, {"norm", "'b'"});
}

}  // namespace
}  // namespace td
