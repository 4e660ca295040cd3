// Tests of td/core/pointwise_ops.cc: every op against the same ATen call leaf by leaf, with
// TensorDict / tensor / number operands, in-place forms, and errors (keyed, nothing written).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "td/core/testing.h"

namespace td {
namespace {

using test::kLeaves;
using Fn = std::function<at::Tensor(const at::Tensor&)>;
using Fn2 = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

// Floats only: "a" (3, 4, 5), nested "n/x" (3, 4, 2, 6), plus non-tensor "s".
TensorDict Floats(double lo = -0.9, double hi = 0.9) {
  at::manual_seed(1);
  TensorDict n({{"x", at::empty({3, 4, 2, 6}).uniform_(lo, hi)}}, {3, 4, 2});
  return TensorDict({{"a", at::empty({3, 4, 5}).uniform_(lo, hi)}, {"n", n}, {"s", "a string!"}},
                    {3, 4});
}

// Integers: "i" int64 (3, 4, 2), "m" bool (3, 4).
TensorDict Ints() {
  at::manual_seed(2);
  return TensorDict({{"i", at::randint(-20, 20, {3, 4, 2})}, {"m", at::rand({3, 4}) > 0.5}},
                    {3, 4});
}

// Every leaf of `r` equals fn(leaf of src), same dtype and shape; non-tensor data carried.
void ExpectLeafwise(const TensorDict& src, const TensorDict& r, const Fn& fn) {
  EXPECT_EQ(r.batch_size(), src.batch_size());
  if (src.contains("s")) {
    EXPECT_EQ(r.get_non_tensor("s"), "a string!");
  }
  for (const NestedKey& k : src.keys(kLeaves)) {
    if (!src.get_value(k).is_tensor()) continue;
    const at::Tensor e = fn(src.get(k));
    const at::Tensor got = r.get(k);
    ASSERT_EQ(got.sizes(), e.sizes()) << k;
    ASSERT_EQ(got.scalar_type(), e.scalar_type()) << k;
    EXPECT_TRUE(got.is_floating_point() ? got.allclose(e, 1e-5, 1e-6, true) : got.equal(e)) << k;
  }
}
// Same with a second TensorDict's leaf under the same key.
void ExpectLeafwise2(const TensorDict& src, const TensorDict& other, const TensorDict& r,
                     const Fn2& fn) {
  for (const NestedKey& k : src.keys(kLeaves)) {
    if (!src.get_value(k).is_tensor()) continue;
    const at::Tensor e = fn(src.get(k), other.get(k));
    const at::Tensor got = r.get(k);
    ASSERT_EQ(got.scalar_type(), e.scalar_type()) << k;
    EXPECT_TRUE(got.is_floating_point() ? got.allclose(e, 1e-5, 1e-6, true) : got.equal(e)) << k;
  }
}

TEST(PointwiseOpsTest, Lerp) {
  TensorDict a = Floats(), b = Floats(1, 2);
  ExpectLeafwise2(a, b, a.lerp(b, 0.25),
                  [](const at::Tensor& x, const at::Tensor& y) { return at::lerp(x, y, 0.25); });
  TensorDict w = b.apply([](const at::Tensor& x) { return x - 1; });
  TensorDict r = a.lerp(b, w);
  for (const NestedKey& k : {NestedKey("a"), NestedKey({"n", "x"})}) {
    EXPECT_TRUE(r.get(k).allclose(at::lerp(a.get(k), b.get(k), w.get(k)))) << k;
  }
  const at::Tensor end = at::full({}, 3.0);
  ExpectLeafwise(a, a.lerp(end, 0.5), [&](const at::Tensor& x) { return at::lerp(x, end, 0.5); });
  // Soft update in place: every handle sees it.
  TensorDict target = a.clone();
  TensorDict expect = a.lerp(b, 0.005);
  target.lerp_(b, 0.005);
  ExpectLeafwise2(expect, target, expect, [](const at::Tensor&, const at::Tensor& y) { return y; });
  TD_EXPECT_THROW_MSG(a.lerp(1.0, 0.5), c10::TypeError, {"lerp", "end"});
  TensorDict missing({{"a", at::zeros({3, 4, 5})}}, {3, 4});
  TD_EXPECT_THROW_MSG(a.lerp(missing, 0.5), c10::Error, {"['n']", "missing"});
  // A failing in-place call (operand does not broadcast into nested "x") changes nothing.
  TensorDict before = target.clone();
  EXPECT_THROW(target.lerp_(at::zeros({5}), 0.5), c10::Error);
  EXPECT_TRUE(target.get("a").equal(before.get("a")));
}

TEST(PointwiseOpsTest, MaximumMinimum) {
  TensorDict a = Floats(), b = Floats(-0.5, 0.5);
  ExpectLeafwise2(a, b, a.maximum(b), [](const at::Tensor& x, const at::Tensor& y) {
    return at::maximum(x, y);
  });
  ExpectLeafwise2(a, b, a.minimum(b), [](const at::Tensor& x, const at::Tensor& y) {
    return at::minimum(x, y);
  });
  ExpectLeafwise(a, a.maximum(0.1), [](const at::Tensor& x) { return at::clamp_min(x, 0.1); });
  ExpectLeafwise(a, a.minimum(0.1), [](const at::Tensor& x) { return at::clamp_max(x, 0.1); });
  const at::Tensor t = at::zeros({});
  ExpectLeafwise(a, a.maximum(t), [&](const at::Tensor& x) { return at::maximum(x, t); });
  TensorDict c = a.clone();
  c.maximum_(b);
  ExpectLeafwise2(a, b, c, [](const at::Tensor& x, const at::Tensor& y) {
    return at::maximum(x, y);
  });
  c = a.clone();
  c.minimum_(0.0);
  ExpectLeafwise(a, c, [](const at::Tensor& x) { return at::clamp_max(x, 0.0); });
}

TEST(PointwiseOpsTest, AddcmulAddcdiv) {
  TensorDict a = Floats(), b = Floats(1, 2), c = Floats(2, 3);
  TensorDict r = a.addcmul(b, c, 0.5);
  TensorDict q = a.addcdiv(b, c, 0.5);
  for (const NestedKey& k : {NestedKey("a"), NestedKey({"n", "x"})}) {
    EXPECT_TRUE(r.get(k).allclose(at::addcmul(a.get(k), b.get(k), c.get(k), 0.5))) << k;
    EXPECT_TRUE(q.get(k).allclose(at::addcdiv(a.get(k), b.get(k), c.get(k), 0.5))) << k;
  }
  TensorDict in = a.clone();
  in.addcmul_(b, b, 0.1);
  for (const NestedKey& k : {NestedKey("a"), NestedKey({"n", "x"})}) {
    EXPECT_TRUE(in.get(k).allclose(at::addcmul(a.get(k), b.get(k), b.get(k), 0.1))) << k;
  }
  in = a.clone();
  in.addcdiv_(b, at::full({}, 2.0));
  ExpectLeafwise2(a, b, in, [](const at::Tensor& x, const at::Tensor& y) {
    return at::addcdiv(x, y, at::full({}, 2.0));
  });
  TD_EXPECT_THROW_MSG(a.addcmul(b, 2.0), c10::TypeError, {"addcmul", "tensor2"});
}

TEST(PointwiseOpsTest, RemainderAndBitwise) {
  TensorDict x = Ints();
  ExpectLeafwise(x, x % 3, [](const at::Tensor& t) { return at::remainder(t, 3); });
  ExpectLeafwise(x, x & true, [](const at::Tensor& t) { return at::bitwise_and(t, true); });
  ExpectLeafwise(x, x | 1, [](const at::Tensor& t) { return at::bitwise_or(t, 1); });
  ExpectLeafwise(x, x ^ x, [](const at::Tensor& t) { return at::bitwise_xor(t, t); });
  ExpectLeafwise(x, ~x, [](const at::Tensor& t) { return at::bitwise_not(t); });
  // % of a bool leaf is an int64 result that cannot be written back in place: keyed error,
  // nothing written (not even the int leaf checked first).
  TensorDict y = x.clone();
  TD_EXPECT_THROW_MSG(y %= 4, c10::Error, {"'m'", "remainder_"});
  EXPECT_TRUE(y.get("i").equal(x.get("i")));
  y = x.clone().select({"i"});
  y %= 4;
  ExpectLeafwise(x.select({"i"}), y, [](const at::Tensor& t) { return at::remainder(t, 4); });
  y = x.clone();
  y ^= x;
  ExpectLeafwise(x, y, [](const at::Tensor& t) { return at::bitwise_xor(t, t); });
  y = x.clone();
  y.bitwise_not_();
  ExpectLeafwise(x, y, [](const at::Tensor& t) { return at::bitwise_not(t); });
  // A float leaf: LibTorch's error, naming the key; in place nothing is written.
  TensorDict mixed({{"i", at::arange(4)}, {"f", at::ones({4})}}, {4});
  TD_EXPECT_THROW_MSG(mixed & 1, c10::Error, {"'f'"});
  EXPECT_THROW(mixed &= 0, c10::Error);
  EXPECT_TRUE(mixed.get("i").equal(at::arange(4)));
  ExpectLeafwise(Floats(), Floats() % 0.5, [](const at::Tensor& t) { return at::remainder(t, 0.5); });
}

// Every TD_UNARY row of td/core/ops.def against its ATen function, out of place and in place.
TEST(PointwiseOpsTest, UnaryFamily) {
  const TensorDict a = Floats(0.1, 0.9);
  int rows = 0;
#define TD_UNARY(name, kernel)                                                        \
  {                                                                                   \
    SCOPED_TRACE(#name);                                                              \
    ExpectLeafwise(a, a.name(), [](const at::Tensor& t) { return at::name(t); });     \
    TensorDict c = a.clone();                                                         \
    EXPECT_EQ(&c.name##_(), &c);                                                      \
    ExpectLeafwise(a, c, [](const at::Tensor& t) { return at::name(t); });            \
    ++rows;                                                                           \
  }
#include "td/core/ops.def"
  EXPECT_EQ(rows, 39);
  TensorDict s = a.clone().sub_(0.5);
  TensorDict c = s.clone();
  c.sign_();
  ExpectLeafwise(s, c, [](const at::Tensor& t) { return at::sign(t); });
  // acosh is NaN below 1, as for tensors; an integer leaf in place is LibTorch's error with the
  // key, and nothing is written.
  TensorDict mixed({{"f", at::full({4}, 0.5)}, {"i", at::arange(4)}}, {4});
  TD_EXPECT_THROW_MSG(mixed.sin_(), c10::Error, {"'i'"});
  EXPECT_TRUE(mixed.get("f").equal(at::full({4}, 0.5)));
  ExpectLeafwise(mixed, mixed.sin(), [](const at::Tensor& t) { return at::sin(t); });
}

// NOTE [ One buffer, one kernel ]: leaves that are views into one buffer (here with a gap
// holding NaN between them) give, out of place with number operands, the per-leaf result, as
// views into ONE new buffer; overlapping leaves and leaves requiring grad take the per-leaf path.
TEST(PointwiseOpsTest, OneBufferOneKernel) {
  const at::Tensor buffer = at::full({40}, std::nan(""));
  buffer.narrow(0, 0, 12).copy_(at::linspace(0.1, 0.9, 12));
  buffer.narrow(0, 16, 8).copy_(at::linspace(-0.5, 0.5, 8));
  const TensorDict td({{"a", buffer.narrow(0, 0, 12).view({4, 3})},
                       {"n", {{"b", buffer.narrow(0, 16, 8).view({4, 2})}}},
                       {"s", "a string!"}},
                      {4});
  auto same_storage = [](const TensorDict& r) {
    return r.get("a").storage().unsafeGetStorageImpl() ==
           r.get({"n", "b"}).storage().unsafeGetStorageImpl();
  };
  const TensorDict e = td.exp();
  EXPECT_TRUE(same_storage(e));
  ExpectLeafwise(td, e, [](const at::Tensor& t) { return at::exp(t); });
  const TensorDict c = (td * 2).clamp(-0.3, 0.3);
  EXPECT_TRUE(same_storage(c));
  ExpectLeafwise(td, c, [](const at::Tensor& t) { return at::clamp(t * 2, -0.3, 0.3); });
  const TensorDict g = td > 0;
  EXPECT_EQ(g.get("a").scalar_type(), at::kBool);
  ExpectLeafwise(td, g, [](const at::Tensor& t) { return t > 0; });
  EXPECT_TRUE(e.get("a").is_contiguous());
  // A result's leaves write independently (no overlap between them).
  e.get("a").fill_(7);
  EXPECT_TRUE(e.get({"n", "b"}).allclose(at::exp(td.get({"n", "b"}))));
  // Overlapping leaves: per leaf.
  const at::Tensor base = at::linspace(0.1, 0.9, 12);
  const TensorDict overlap({{"x", base.narrow(0, 0, 8)}, {"y", base.narrow(0, 4, 8)}}, {8});
  const TensorDict o = overlap.exp();
  EXPECT_FALSE(o.get("x").storage().unsafeGetStorageImpl() ==
               o.get("y").storage().unsafeGetStorageImpl());
  ExpectLeafwise(overlap, o, [](const at::Tensor& t) { return at::exp(t); });
  // Leaves requiring grad: per leaf, with each leaf's own graph.
  const at::Tensor w = at::linspace(0.1, 0.9, 12).requires_grad_();
  const TensorDict params({{"p", w.narrow(0, 0, 6)}, {"q", w.narrow(0, 6, 6)}}, {6});
  const TensorDict sq = params.mul(3);
  sq.get("q").sum().backward();
  EXPECT_TRUE(w.grad().narrow(0, 0, 6).eq(0).all().item<bool>());
  EXPECT_TRUE(w.grad().narrow(0, 6, 6).eq(3).all().item<bool>());
}

// Two operands laid out alike, in-place ops, clone and to (NOTE [ One buffer, one kernel ]).
TEST(PointwiseOpsTest, OneBufferOperandsInPlaceAndCopies) {
  // Leaves covering [0, 20) of their buffer with no gap, the operand the same way in another.
  auto make = [](const at::Tensor& buffer) {
    return TensorDict({{"a", buffer.narrow(0, 0, 12).view({4, 3})},
                       {"n", {{"b", buffer.narrow(0, 12, 8).view({4, 2})}}}},
                      {4});
  };
  auto storage_of = [](const TensorDict& r, const NestedKey& k) {
    return r.get(k).storage().unsafeGetStorageImpl();
  };
  auto one_buffer = [&](const TensorDict& r) {
    return storage_of(r, "a") == storage_of(r, {"n", "b"});
  };
  const TensorDict x = make(at::linspace(0.1, 2.0, 20));
  const TensorDict y = make(at::linspace(-1.0, 1.0, 20));
  const TensorDict sum = x.add(y, 2);
  EXPECT_TRUE(one_buffer(sum));
  EXPECT_TRUE(sum.get({"n", "b"}).allclose(x.get({"n", "b"}) + 2 * y.get({"n", "b"})));
  // In place: one kernel writes the leaves' own memory.
  TensorDict z = x.clone();
  EXPECT_TRUE(one_buffer(z));
  EXPECT_NE(storage_of(z, "a"), storage_of(x, "a"));
  EXPECT_TRUE(z.get("a").equal(x.get("a")));
  const at::Tensor a_before = z.get("a");
  z.mul_(y);
  EXPECT_TRUE(z.get("a").is_same(a_before));
  EXPECT_TRUE(z.get("a").allclose(x.get("a") * y.get("a")));
  EXPECT_TRUE(z.get({"n", "b"}).allclose(x.get({"n", "b"}) * y.get({"n", "b"})));
  z.zero_();
  EXPECT_TRUE(z.get({"n", "b"}).eq(0).all().item<bool>());
  // A gap between leaves: in place goes leaf by leaf and leaves the gap alone.
  at::Tensor gapped = at::full({24}, 5.0);
  TensorDict g({{"a", gapped.narrow(0, 0, 12).view({4, 3})},
                {"b", gapped.narrow(0, 16, 8).view({4, 2})}},
               {4});
  g.add_(1);
  EXPECT_TRUE(gapped.narrow(0, 12, 4).eq(5).all().item<bool>());
  EXPECT_TRUE(gapped.narrow(0, 16, 8).eq(6).all().item<bool>());
  // to(dtype) casts the buffer once; the result is one buffer of the new dtype.
  const TensorDict h = x.to(at::kDouble);
  EXPECT_TRUE(one_buffer(h));
  EXPECT_EQ(h.get({"n", "b"}).scalar_type(), at::kDouble);
  EXPECT_TRUE(h.get({"n", "b"}).allclose(x.get({"n", "b"}).to(at::kDouble)));
  // An operand laid out differently, or a bad probe: per leaf, same values and keyed errors.
  const TensorDict other({{"a", at::ones({4, 3})}, {"n", {{"b", at::ones({4, 2})}}}}, {4});
  EXPECT_TRUE(x.add(other).get("a").allclose(x.get("a") + 1));
  TensorDict ints = make(at::arange(20));
  TD_EXPECT_THROW_MSG(ints.div_(2.5), c10::Error, {"'a'"});
  EXPECT_TRUE(ints.get("a").equal(at::arange(12).view({4, 3})));
  // A large buffer is copied in parallel chunks (several chunks, same values).
  const at::Tensor big = at::randn({3 << 20});
  const TensorDict large({{"p", big.narrow(0, 0, 2 << 20)}, {"q", big.narrow(0, 2 << 20, 1 << 20)}},
                         {});
  const TensorDict copy = large.clone();
  EXPECT_EQ(storage_of(copy, "p"), storage_of(copy, "q"));
  EXPECT_NE(storage_of(copy, "p"), big.storage().unsafeGetStorageImpl());
  EXPECT_TRUE(copy.get("q").equal(large.get("q")));
  EXPECT_TRUE(large.to(at::kHalf).get("p").equal(large.get("p").to(at::kHalf)));
  // Small leaves padded to 64 bytes each (the consolidated layout): the padding outweighs the
  // leaves, and the op is still one kernel.
  const at::Tensor padded = at::ones({19});
  const TensorDict small({{"a", padded.narrow(0, 0, 6).view({3, 2})},
                          {"n", {{"b", padded.narrow(0, 16, 3)}}}},
                         {3});
  const TensorDict twice = small * 2;
  EXPECT_TRUE(one_buffer(twice));
  EXPECT_TRUE(twice.get({"n", "b"}).equal(at::full({3}, 2.0)));
  // The result's leaves are views of one buffer: an in-place write to one bumps the version
  // counter they share, as for views made by as_strided.
  const int64_t version = twice.get({"n", "b"})._version();
  twice.get("a").add_(1);
  EXPECT_GT(twice.get({"n", "b"})._version(), version);
  // Under grad mode with a leaf that requires grad, the result goes leaf by leaf with its graph.
  const at::Tensor w = at::ones({4}).requires_grad_();
  const TensorDict g2 = TensorDict({{"w", w}}, {}) * 2;
  EXPECT_TRUE(g2.get("w").requires_grad());
  EXPECT_FALSE(g2.get("w").is_leaf());
  // Gaps larger than the leaves and than the padding: leaf by leaf.
  const at::Tensor sparse = at::ones({200});
  const TensorDict apart({{"a", sparse.narrow(0, 0, 6)}, {"b", sparse.narrow(0, 100, 6)}}, {6});
  const TensorDict apart_twice = apart * 2;
  EXPECT_NE(storage_of(apart_twice, "a"), storage_of(apart_twice, "b"));
}

// clamp_min / clamp_max with a TensorDict, tensor or number bound, out of place and in place.
TEST(PointwiseOpsTest, ClampMinMax) {
  const TensorDict a = Floats(), b = Floats(-0.5, 0.5);
  const Fn2 lo = [](const at::Tensor& x, const at::Tensor& y) { return at::clamp_min(x, y); };
  const Fn2 hi = [](const at::Tensor& x, const at::Tensor& y) { return at::clamp_max(x, y); };
  ExpectLeafwise2(a, b, a.clamp_min(b), lo);
  ExpectLeafwise2(a, b, a.clamp_max(b), hi);
  ExpectLeafwise(a, a.clamp_min(0.25), [](const at::Tensor& x) { return at::clamp_min(x, 0.25); });
  ExpectLeafwise(a, a.clamp_max(0.25), [](const at::Tensor& x) { return at::clamp_max(x, 0.25); });
  const at::Tensor bound = at::full({}, -0.1);
  ExpectLeafwise(a, a.clamp_max(bound), [&](const at::Tensor& x) { return at::clamp_max(x, bound); });
  TensorDict c = a.clone();
  c.clamp_min_(b);
  ExpectLeafwise2(a, b, c, lo);
  c = a.clone();
  c.clamp_max_(0.0);
  ExpectLeafwise(a, c, [](const at::Tensor& x) { return at::clamp_max(x, 0.0); });
  // A bound that lacks a leaf: KeyError naming it; in place nothing is written.
  TensorDict partial({{"a", at::zeros({3, 4, 5})}}, {3, 4});
  c = a.clone();
  TD_EXPECT_THROW_MSG(c.clamp_min_(partial), c10::Error, {"['n']", "missing"});
  EXPECT_TRUE(c.get("a").equal(a.get("a")));
  // A bound that does not broadcast into a leaf: keyed error with both shapes, nothing written.
  TD_EXPECT_THROW_MSG(c.clamp_max_(at::zeros({5})), c10::Error, {"('n', 'x')"});
  EXPECT_TRUE(c.get("a").equal(a.get("a")));
}

// mod is remainder; rsub is other - alpha * this (torch.rsub); logical_and gives bools.
TEST(PointwiseOpsTest, ModRsubLogicalAnd) {
  const TensorDict a = Floats(), b = Floats(1, 2);
  ExpectLeafwise2(a, b, a.mod(b), [](const at::Tensor& x, const at::Tensor& y) {
    return at::remainder(x, y);
  });
  ExpectLeafwise(a, a.mod(0.3), [](const at::Tensor& x) { return at::remainder(x, 0.3); });
  ExpectLeafwise2(a, b, a.rsub(b, 0.5), [](const at::Tensor& x, const at::Tensor& y) {
    return at::rsub(x, y, 0.5);  // y - 0.5 * x
  });
  ExpectLeafwise(a, a.rsub(1), [](const at::Tensor& x) { return 1 - x; });
  const TensorDict ints = Ints();
  const TensorDict i = ints.select({"i"});  // (torch.rsub refuses bool tensors)
  ExpectLeafwise(i, i.rsub(3, 2), [](const at::Tensor& x) { return 3 - 2 * x; });
  ExpectLeafwise2(a, b, a.logical_and(b), [](const at::Tensor& x, const at::Tensor& y) {
    return at::logical_and(x, y);
  });
  const at::Tensor yes = at::ones({}, at::kBool);
  ExpectLeafwise(ints, ints.logical_and(yes), [&](const at::Tensor& x) {
    return at::logical_and(x, yes);
  });
  ExpectLeafwise(ints, ints.logical_and(0), [](const at::Tensor& x) {
    return at::logical_and(x, at::zeros({}, at::kLong));
  });
  EXPECT_EQ(a.logical_and(b).get({"n", "x"}).scalar_type(), at::kBool);
  TensorDict partial({{"a", at::zeros({3, 4, 5})}}, {3, 4});
  TD_EXPECT_THROW_MSG(a.rsub(partial), c10::Error, {"['n']", "missing"});
}

// isnan / isfinite / isposinf / isneginf / isreal against ATen on every leaf.
// In-place ops whose kernels fail on values (an integer remainder by zero) check every leaf's
// values first: a failing call writes nothing.
TEST(PointwiseOpsTest, ValueErrorsWriteNothing) {
  TensorDict t({{"a", at::arange(1, 5, at::kInt)}, {"b", at::arange(1, 5, at::kInt)}}, {4});
  const TensorDict before = t.clone();
  TensorDict divisor({{"a", at::full({4}, 3, at::kInt)}, {"b", at::arange(0, 4, at::kInt)}}, {4});
  TD_EXPECT_THROW_MSG(t.remainder_(divisor), c10::ValueError, {"'b'", "division by zero"});
  EXPECT_TRUE(t.get("a").equal(before.get("a")));
  // Floats are not refused: inf / nan as LibTorch gives.
  TensorDict f({{"x", at::ones({4})}}, {4});
  f.remainder_(TensorDict({{"x", at::zeros({4})}}, {4}));
  EXPECT_TRUE(f.get("x").isnan().all().item<bool>());
  t.remainder_(TensorDict({{"a", at::full({4}, 3, at::kInt)}, {"b", at::full({4}, 2, at::kInt)}},
                          {4}));
  EXPECT_TRUE(t.get("a").equal(at::tensor({1, 2, 0, 1}, at::kInt)));
}

TEST(PointwiseOpsTest, Predicates) {
  TensorDict a = Floats();
  a.get("a").index_put_({0, 0}, NAN);
  a.get({"n", "x"}).index_put_({1, 1, 0}, INFINITY);
  a.get({"n", "x"}).index_put_({2, 3, 1}, -INFINITY);
  a.set("c", at::complex(at::ones({3, 4}), at::arange(12.0).view({3, 4}) % 2));
  const std::vector<std::pair<TensorDict, Fn>> cases = {
      {a.isnan(), [](const at::Tensor& x) { return at::isnan(x); }},
      {a.isfinite(), [](const at::Tensor& x) { return at::isfinite(x); }},
      {a.isreal(), [](const at::Tensor& x) { return at::isreal(x); }}};
  for (const auto& [r, fn] : cases) ExpectLeafwise(a, r, fn);
  const TensorDict reals = a.exclude({"c"});
  ExpectLeafwise(reals, reals.isposinf(), [](const at::Tensor& x) { return at::isposinf(x); });
  ExpectLeafwise(reals, reals.isneginf(), [](const at::Tensor& x) { return at::isneginf(x); });
  EXPECT_EQ(a.isnan().get("a").sum().item<int64_t>(), 5);  // the row a[0, 0, :]
  EXPECT_FALSE(a.isfinite().all());
  EXPECT_TRUE(Ints().isfinite().all());
  // isposinf of a complex leaf: LibTorch's error, naming the key.
  TD_EXPECT_THROW_MSG(a.isposinf(), c10::Error, {"'c'"});
}

}  // namespace
}  // namespace td
