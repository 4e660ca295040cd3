// Conformance tests of the tensor side: batch indexing, shape ops, stack / cat, math, in-place
// writes and consolidate. Registered by conformance_suite.h (include that one).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tests/conformance/conformance_fixture.h"

namespace td {
namespace conformance {

// ---- batch indexing ----------------------------------------------------------------------

// Index lists covering every kind of index, each valid for the batch size [4, 3, 2, 1].
inline std::vector<std::vector<at::indexing::TensorIndex>> IndexCases() {
  using at::indexing::Ellipsis;
  using at::indexing::None;
  using at::indexing::Slice;
  at::Tensor mask = (at::arange(12).view({4, 3}) % 3) != 1;  // over the first two dims
  return {{0},
          {-1},
          {1, 2},
          {3, Slice(), 1, 0},
          {Slice(1, 3)},
          {Slice(None, None, 2), Slice(1, None)},
          {Ellipsis, 0},
          {Slice(), Ellipsis, Slice(0, 1)},
          {None, 2},
          {Slice(), None, 1},
          {at::tensor({2, 0, 2}, at::kLong)},
          {Slice(), at::tensor({0, 2}, at::kLong)},
          {mask},
          {at::tensor({3, 1}, at::kLong), at::tensor({0, 2}, at::kLong)}};
}

inline std::string IndexRepr(const std::vector<at::indexing::TensorIndex>& index) {
  std::ostringstream os;
  os << "index {";
  for (size_t i = 0; i < index.size(); ++i) os << (i ? ", " : "") << index[i];
  os << "}";
  return os.str();
}

TYPED_TEST_P(Conformance, Indexing) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  for (const auto& index : IndexCases()) {
    SCOPED_TRACE(IndexRepr(index));
    TensorDict got = t.index(index);
    ExpectSame(got, ref.index(index));
    EXPECT_EQ(got.get_tensordict("n").batch_size(), got.batch_size());
  }
  TD_EXPECT_THROW_MSG(t.index({4}), c10::IndexError, {"4"});
  TD_EXPECT_THROW_MSG(t.index({0, 0, 0, 0, 0}), c10::IndexError, {"torch.Size([4, 3, 2, 1])"});
}

TYPED_TEST_P(Conformance, IndexResultsWriteThrough) {
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  using at::indexing::Slice;
  TensorDict t = this->Make();
  TensorDict row = t.index({1});
  row.set_("a", at::zeros({3, 2, 1, 5}));
  TensorDict part = t.index({Slice(2, 4), 0});
  part.set_({"n", "inner"}, at::zeros({2, 2, 1, 2}));
  TensorDict ref = ReferenceContent();
  ref.get("a").index_put_({1}, 0);
  ref.get({"n", "inner"}).index_put_({Slice(2, 4), 0}, 0);
  ExpectSame(t, ref);
}

TYPED_TEST_P(Conformance, IndexPut) {
  using at::indexing::Ellipsis;
  using at::indexing::Slice;
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  // Errors first: nothing may be written.
  if (!this->Has(Capability::kInPlaceWrite)) {
    // The core refuses before anything else is checked (NOTE [ Storage interface ]).
    TD_EXPECT_THROW_MSG(t.index_put_({0}, ref.index({1})), c10::TypeError,
                        {"index_put_", std::string("'") + TypeParam::kBackendId + "'"});
    ExpectSame(t, ref);
  }
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  TensorDict bad({{"a", at::zeros({3, 2, 1, 7})}}, {3, 2, 1});
  TD_EXPECT_THROW_MSG(t.index_put_({0}, bad), c10::ValueError, {"'a'", "torch.Size([3, 2, 1, 7])"});
  TD_EXPECT_THROW_MSG(t.index_put_({9}, ref.index({0})), c10::IndexError, {"9"});
  ExpectSame(t, ref);
  TensorDict want = ref.clone();
  auto both = [&](const std::vector<at::indexing::TensorIndex>& index, const TensorDict& value) {
    SCOPED_TRACE(IndexRepr(index));
    t.index_put_(index, value);
    want.index_put_(index, value);
    ExpectSame(t, want);
  };
  both({1}, ref.index({2}).apply([](const at::Tensor& x) { return x * -1; }));
  both({Slice(0, 2), 1}, ref.index({Slice(2, 4), 0}));
  both({Ellipsis, 1, 0}, ref.index({Ellipsis, 0, 0}));
  both({at::tensor({3, 0}, at::kLong)}, ref.index({Slice(0, 2)}));
  both({Slice(), 2}, ref.index({0, 0}));  // broadcast over the first dim
  at::Tensor mask = (at::arange(12).view({4, 3}) % 2) == 0;
  t.index_put_({mask}, 5);
  want.index_put_({mask}, 5);
  ExpectSame(t, want);
  t.index_put_({Slice(1, 3)}, at::full({}, 2.5));
  want.index_put_({Slice(1, 3)}, at::full({}, 2.5));
  ExpectSame(t, want);
  t.masked_fill_(mask, -3);
  want.masked_fill_(mask, -3);
  ExpectSame(t, want);
}

TYPED_TEST_P(Conformance, LazyPreallocation) {
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  TensorDict t = this->Make();
  for (int64_t i = 0; i < 4; ++i) {
    TensorDict step({{"obs", at::full({3, 2, 1, 6}, static_cast<double>(i))},
                     {"sub", {{"x", at::full({3, 2, 1}, i, at::kLong)}}}},
                    {3, 2, 1});
    t.index_put_({i}, step);
  }
  EXPECT_EQ(t.get("obs").sizes(), at::IntArrayRef(Shape({6})));
  EXPECT_EQ(t.get({"sub", "x"}).scalar_type(), at::kLong);
  EXPECT_TRUE(t.get("obs").select(0, 3).equal(at::full({3, 2, 1, 6}, 3.0)));
  EXPECT_TRUE(t.get({"sub", "x"}).select(0, 2).equal(at::full({3, 2, 1}, 2, at::kLong)));
  ExpectSame(t.select({"a", "b", "c", "n"}), ReferenceContent());
}

// ---- shape ops ---------------------------------------------------------------------------

using ShapeOp = std::function<TensorDict(const TensorDict&)>;
using MultiShapeOp = std::function<std::vector<TensorDict>(const TensorDict&)>;

// Shape ops covering every kind, each valid for the batch size [4, 3, 2, 1]; `where` takes the
// other values from `like` (the dense content the backend holds).
inline std::vector<std::pair<std::string, ShapeOp>> ShapeOpCases(const TensorDict& like) {
  const TensorDict zeros = like.apply([](const at::Tensor& y) { return y * 0; });
  return {
      {"view({12, 2, 1})", [](const TensorDict& x) { return x.view({12, 2, 1}); }},
      {"view({-1})", [](const TensorDict& x) { return x.view({-1}); }},
      {"reshape({2, 12})", [](const TensorDict& x) { return x.reshape({2, 12}); }},
      {"squeeze()", [](const TensorDict& x) { return x.squeeze(); }},
      {"squeeze(3)", [](const TensorDict& x) { return x.squeeze(3); }},
      {"squeeze(0)", [](const TensorDict& x) { return x.squeeze(0); }},
      {"unsqueeze(0)", [](const TensorDict& x) { return x.unsqueeze(0); }},
      {"unsqueeze(-1)", [](const TensorDict& x) { return x.unsqueeze(-1); }},
      {"permute({3, 1, 0, 2})", [](const TensorDict& x) { return x.permute({3, 1, 0, 2}); }},
      {"transpose(0, 2)", [](const TensorDict& x) { return x.transpose(0, 2); }},
      {"expand({2, 4, 3, 2, 5})", [](const TensorDict& x) { return x.expand({2, 4, 3, 2, 5}); }},
      {"flatten(0, 1)", [](const TensorDict& x) { return x.flatten(0, 1); }},
      {"unflatten(0, {2, 2})", [](const TensorDict& x) { return x.unflatten(0, {2, 2}); }},
      {"flip({0, 1})", [](const TensorDict& x) { return x.flip({0, 1}); }},
      {"roll({1}, {0})", [](const TensorDict& x) { return x.roll({1}, {0}); }},
      {"narrow(1, 1, 2)", [](const TensorDict& x) { return x.narrow(1, 1, 2); }},
      {"repeat({2, 1, 1, 1})", [](const TensorDict& x) { return x.repeat({2, 1, 1, 1}); }},
      {"repeat_interleave(2, 1)", [](const TensorDict& x) { return x.repeat_interleave(2, 1); }},
      {"pad({1, 0})", [](const TensorDict& x) { return x.pad({1, 0}); }},
      {"masked_select", [](const TensorDict& x) {
         return x.masked_select(at::arange(4) > 1);
       }},
      {"masked_fill", [](const TensorDict& x) { return x.masked_fill(at::arange(4) > 1, 7); }},
      {"gather", [](const TensorDict& x) {
         return x.gather(0, at::zeros({2, 3, 2, 1}, at::kLong));
       }},
      {"where", [zeros](const TensorDict& x) { return x.where(at::arange(4) > 1, zeros); }},
  };
}

inline std::vector<std::pair<std::string, MultiShapeOp>> MultiShapeOpCases() {
  return {
      {"split(3, 0)", [](const TensorDict& x) { return x.split(3, 0); }},
      {"split({1, 2}, 1)", [](const TensorDict& x) { return x.split({1, 2}, 1); }},
      {"chunk(2, 2)", [](const TensorDict& x) { return x.chunk(2, 2); }},
      {"unbind(1)", [](const TensorDict& x) { return x.unbind(1); }},
  };
}

TYPED_TEST_P(Conformance, ShapeOps) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  // view() needs leaves whose memory allows it, as torch's view does: a backend holding
  // non-contiguous leaves (a permuted view) must refuse it with torch's message and the key.
  const bool viewable = t.get("a").is_contiguous();
  for (const auto& [name, op] : ShapeOpCases(ref)) {
    SCOPED_TRACE(name);
    if (!viewable && name.rfind("view(", 0) == 0) {
      TD_EXPECT_THROW_MSG(op(t), c10::Error, {"view", "'a'"});
      continue;
    }
    ExpectSame(op(t), op(ref));
  }
  for (const auto& [name, op] : MultiShapeOpCases()) {
    SCOPED_TRACE(name);
    std::vector<TensorDict> got = op(t);
    std::vector<TensorDict> want = op(ref);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ExpectSame(got[i], want[i]);
  }
  TD_EXPECT_THROW_MSG(t.view({5, -1}), c10::ValueError, {"torch.Size([4, 3, 2, 1])"});
  TD_EXPECT_THROW_MSG(t.permute({0, 1}), c10::ValueError, {"permut"});
  TD_EXPECT_THROW_MSG(t.unsqueeze(6), c10::IndexError, {"torch.Size([4, 3, 2, 1])"});
}

// ---- stack / cat -------------------------------------------------------------------------

TYPED_TEST_P(Conformance, StackAndCat) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  for (int64_t dim : {0, 2, -1}) {
    SCOPED_TRACE(dim);
    ExpectSame(stack({t, ref, t}, dim), stack({ref, ref, ref}, dim));
    ExpectSame(lazy_stack({t, ref}, dim), stack({ref, ref}, dim));
  }
  ExpectSame(cat({t, ref}, 0), cat({ref, ref}, 0));
  ExpectSame(cat({ref, t}, 3), cat({ref, ref}, 3));
  std::vector<TensorDict> parts = unbind(t, 0);
  ASSERT_EQ(parts.size(), 4u);
  ExpectSame(stack(parts, 0), ref);
  EXPECT_EQ(stack({t, t}, 0).backend(), "dense");  // td::stack stays dense
  TD_EXPECT_THROW_MSG(stack({t, ref.exclude({"b"})}, 0), KeyError, {"'b'"});
  TD_EXPECT_THROW_MSG(cat({t, ref.index({0})}, 0), BatchSizeError, {"torch.Size([3, 2, 1])"});
}

// ---- math --------------------------------------------------------------------------------

TYPED_TEST_P(Conformance, Math) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  const TensorDict other = ref.apply([](const at::Tensor& x) { return x.abs() + 1; });
  using Op = std::function<TensorDict(const TensorDict&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add(other)", [&](const TensorDict& x) { return x.add(other); }},
      {"add(2)", [](const TensorDict& x) { return x.add(2); }},
      {"sub(other, 2)", [&](const TensorDict& x) { return x.sub(other, 2); }},
      {"mul(3)", [](const TensorDict& x) { return x.mul(3); }},
      {"div(other)", [&](const TensorDict& x) { return x.div(other); }},
      {"pow(2)", [](const TensorDict& x) { return x.pow(2); }},
      {"(x + other) * 2", [&](const TensorDict& x) { return (x + other) * 2; }},
      {"-x", [](const TensorDict& x) { return -x; }},
      {"abs", [](const TensorDict& x) { return x.abs(); }},
      {"floor", [](const TensorDict& x) { return x.floor(); }},
      {"sign", [](const TensorDict& x) { return x.sign(); }},
      {"clamp(-1, 1)", [](const TensorDict& x) { return x.clamp(-1, 1); }},
      {"gt(0)", [](const TensorDict& x) { return x.gt(0); }},
      {"le(other)", [&](const TensorDict& x) { return x.le(other); }},
      {"sum()", [](const TensorDict& x) { return x.sum(); }},
      {"sum({0, 2})", [](const TensorDict& x) { return x.sum({0, 2}); }},
      {"max({1}, true)", [](const TensorDict& x) { return x.max({1}, true); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    ExpectSame(op(t), op(ref));
  }
  ExpectClose(t.sigmoid(), ref.sigmoid());
  TD_EXPECT_THROW_MSG(t.add(ref.exclude({"b"})), KeyError, {"'b'"});
  ExpectSame(t, ReferenceContent());  // nothing above wrote into t
}

TYPED_TEST_P(Conformance, MathInPlace) {
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  TensorDict t = this->Make();
  TensorDict want = ReferenceContent();
  const TensorDict other = want.apply([](const at::Tensor& x) { return x.abs() + 1; });
  using Op = std::function<void(TensorDict&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add_(other)", [&](TensorDict& x) { x.add_(other); }},
      {"mul_(2)", [](TensorDict& x) { x.mul_(2); }},
      {"sub_(1)", [](TensorDict& x) { x.sub_(1); }},
      {"neg_()", [](TensorDict& x) { x.neg_(); }},
      {"clamp_(-50, 50)", [](TensorDict& x) { x.clamp_(-50, 50); }},
      {"apply_ with other", [&](TensorDict& x) {
         x.apply_([](const at::Tensor& a, const at::Tensor& b) { return a - b; }, other);
       }},
      {"fill_(3)", [](TensorDict& x) { x.fill_(3); }},
      {"zero_()", [](TensorDict& x) { x.zero_(); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    op(t);
    op(want);
    ExpectSame(t, want);
  }
  TD_EXPECT_THROW_MSG(t.add_(want.exclude({"b"})), KeyError, {"'b'"});
}

// ---- in-place writes ---------------------------------------------------------------------

// Every family of in-place operation lands in the backend's entries, a lazy level's included
// (NOTE [ In-place writes ] in td/core/internal/in_place.h): each op runs on the backend's
// TensorDict and on the dense reference, which must stay equal after every step.
TYPED_TEST_P(Conformance, EveryInPlaceOpWritesThrough) {
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  using at::indexing::Slice;
  TensorDict t = this->Make();
  TensorDict want = ReferenceContent();
  const TensorDict other = want.apply([](const at::Tensor& x) { return x.abs() + 1; });
  const at::Tensor mask = (at::arange(24).view({4, 3, 2, 1}) % 3) == 0;
  using Op = std::function<void(TensorDict&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"index_put_(1:3, scalar)", [](TensorDict& x) { x.index_put_({Slice(1, 3)}, 0.5); }},
      {"index_put_(0, tensor)", [](TensorDict& x) { x.index_put_({0}, at::full({}, 4.0)); }},
      {"index_put_(2, TensorDict)", [&](TensorDict& x) { x.index_put_({2}, other.index({1})); }},
      {"masked_fill_", [&](TensorDict& x) { x.masked_fill_(mask, -2); }},
      {"set_at_", [](TensorDict& x) { x.set_at_({"n", "inner"}, at::full({2}, 9.0), {3, 1}); }},
      {"update_at_", [&](TensorDict& x) { x.update_at_(other.index({0}), {1}); }},
      {"maximum_(other)", [&](TensorDict& x) { x.maximum_(other); }},
      {"sign_()", [](TensorDict& x) { x.sign_(); }},
      {"pow_(2)", [](TensorDict& x) { x.pow_(2); }},
      {"apply_ with two others", [&](TensorDict& x) {
         x.apply_([](const std::vector<at::Tensor>& v) { return v[0] * 3 - v[1] - v[2]; },
                  {other, other});
       }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    op(t);
    op(want);
    ExpectSame(t, want);
  }
  // A key it lacks is a KeyError naming it, lazy levels included, and writes nothing.
  TD_EXPECT_THROW_MSG(t.set_at_("zz", at::ones({5}), {0}), KeyError, {"'zz'"});
  ExpectSame(t, want);
  // Gradient flags belong to the tensors themselves: a lazy level, whose tensors are computed
  // on every read, refuses them, naming the operation and the backend.
  if (this->Has(Capability::kLazy)) {
    TD_EXPECT_THROW_MSG(t.requires_grad_(), TypeError, {"requires_grad_", TypeParam::kBackendId});
    TD_EXPECT_THROW_MSG(t.detach_(), TypeError, {"detach_", TypeParam::kBackendId});
  } else {
    t.requires_grad_();
    EXPECT_TRUE(t.get("a").requires_grad());
    EXPECT_TRUE(t.get({"n", "inner"}).requires_grad());
    EXPECT_FALSE(t.get("c").requires_grad());  // integers cannot
    t.requires_grad_(false);
    EXPECT_FALSE(t.get("a").requires_grad());
  }
  ExpectSame(t, want);
}

// consolidate() applies to every backend (lazy entries are computed once; the result is dense):
// the leaves land in one buffer and the members run one kernel over it (NOTE [ One buffer, one
// kernel ] in td/core/leafwise.cc) with the leaf-by-leaf result.
TYPED_TEST_P(Conformance, Consolidate) {
  TensorDict t = this->Make();
  TensorDict c = consolidate(t);
  EXPECT_TRUE(is_consolidated(c));
  EXPECT_EQ(c.backend(), "dense");
  ExpectSame(c, ReferenceContent());
  ExpectSame(c.clone(), ReferenceContent());
  const TensorDict ref = ReferenceContent().exclude({"c"});  // one dtype: one kernel
  TensorDict floats = consolidate(t.exclude({"c"}));
  EXPECT_TRUE(is_consolidated(floats));
  ExpectSame(floats * 2, ref * 2);
  ExpectClose(floats.exp(), ref.exp());
  ExpectSame(floats.to(at::kDouble), ref.to(at::kDouble));
  TensorDict acc = floats.clone();
  acc.add_(floats);
  ExpectSame(acc, ref * 2);
  ExpectSame(t, ReferenceContent());  // nothing above wrote into t
}

// ---- nested levels with batch dims of their own ---------------------------------------------

// Levels one, two and three below the root with batch dims of their own (DeepContent()) keep
// exactly those dims after the root's through every kind of operation (NOTE [ Rebuilt batch
// sizes ] in td/core/leaves.cc): each result is the dense answer, and every level's batch size
// is the result's root batch size followed by the level's own dims (ExpectDeepLevels).
TYPED_TEST_P(Conformance, NestedLevelsWithBatchDims) {
  const TensorDict t = this->MakeDeep();
  const TensorDict ref = DeepContent();
  auto check = [](const std::string& name, const TensorDict& got, const TensorDict& want) {
    SCOPED_TRACE(name);
    ExpectSame(got, want);
    ExpectDeepLevels(got);
    ExpectDeepLevels(want);
  };
  check("the content", t, ref);
  check("clone", t.clone(), ref);
  check("to(kDouble)", t.to(at::kDouble), ref.to(at::kDouble));
  check("contiguous", t.contiguous(), ref);
  check("to_dense", t.to_dense(), ref);
  check("consolidate", consolidate(t), ref);
  check("consolidate + clone", consolidate(t).clone(), ref);
  check("consolidate + to(kDouble)", consolidate(t).to(at::kDouble), ref.to(at::kDouble));
  const auto twice = [](const at::Tensor& x) { return x * 2; };
  check("apply", t.apply(twice), ref.apply(twice));
  const auto row = [](const at::Tensor& x) { return x.select(0, 1); };
  check("apply(batch_size)", t.apply(row, std::vector<int64_t>{3, 2, 1}),
        ref.apply(row, std::vector<int64_t>{3, 2, 1}));
  check("t + ref", t + ref, ref * 2);
  check("sum({0, 2})", t.sum({0, 2}), ref.sum({0, 2}));
  check("max({1}, true)", t.max({1}, true), ref.max({1}, true));
  for (const auto& index : IndexCases()) check(IndexRepr(index), t.index(index), ref.index(index));
  const bool viewable = t.get("a").is_contiguous();
  for (const auto& [name, op] : ShapeOpCases(ref)) {
    if (!viewable && name.rfind("view(", 0) == 0) continue;  // as in ShapeOps
    check(name, op(t), op(ref));
  }
  for (const auto& [name, op] : MultiShapeOpCases()) {
    std::vector<TensorDict> got = op(t);
    std::vector<TensorDict> want = op(ref);
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) check(name + " " + std::to_string(i), got[i], want[i]);
  }
  check("stack(1)", stack({t, ref}, 1), stack({ref, ref}, 1));
  check("lazy_stack(0)", lazy_stack({t, ref}, 0), stack({ref, ref}, 0));
  check("cat(2)", cat({t, ref}, 2), cat({ref, ref}, 2));
  ExpectSame(t, DeepContent());  // nothing above wrote into t
}

}  // namespace conformance
}  // namespace td
