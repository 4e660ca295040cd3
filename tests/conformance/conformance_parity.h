// Conformance tests of the members that follow the rest of Python tensordict's TensorDictBase API:
// the leaf queries (td/core/leaf_queries.cc), the dtype verbs, clamp_min / clamp_max, mod, rsub,
// logical_and, the is* predicates, amin / amax, fliplr / flipud / rot90 / tile / atleast_*d /
// swapdims, copy_ / copy_at_, create_nested, filter_empty_, replace, separates, to_dict and tolist. Registered by
// conformance_suite.h (include that one). As everywhere in the suite, the answer on a backend
// must be the answer on the dense ReferenceContent().
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/conformance/conformance_fixture.h"

namespace td {
namespace conformance {

// Read from the storages' metadata or the leaves; a lazy level has no stable leaf addresses and
// is not contiguous (its leaves are computed on read).
TYPED_TEST_P(Conformance, LeafQueries) {
  const TensorDict t = this->Make();
  const TensorDict ref = ReferenceContent();
  EXPECT_FALSE(t.is_floating_point());  // "c" is int64
  EXPECT_TRUE(t.exclude({"c"}).is_floating_point());
  EXPECT_EQ(t.dtype(), std::nullopt);
  EXPECT_EQ(t.exclude({"c"}).dtype(), std::optional<at::ScalarType>(at::kFloat));
  EXPECT_EQ(t.depth(), 1);
  EXPECT_EQ(t.param_count(), ref.param_count());
  EXPECT_EQ(t.bytes(), ref.bytes());
  EXPECT_FALSE(t.requires_grad());
  for (const NestedKey& k : ref.keys(test::kLeaves)) {
    EXPECT_EQ(t.get_item_shape(k), ref.get_item_shape(k)) << k;
  }
  EXPECT_EQ(t.get_item_shape("n"), Batch());
  EXPECT_EQ(t.entry_class("n"), "TensorDict");
  EXPECT_EQ(t.entry_class({"n", "inner"}), "Tensor");
  TD_EXPECT_THROW_MSG(t.get_item_shape("zz"), KeyError, {"'zz'"});
  TD_EXPECT_THROW_MSG(t.get_item_shape({"n", "zz"}), KeyError, {"zz"});
  if (this->Has(Capability::kLazy)) {
    EXPECT_FALSE(t.is_contiguous());
    TD_EXPECT_THROW_MSG(t.data_ptr(), ValueError, {"data_ptr", TypeParam::kBackendId});
  } else {
    EXPECT_TRUE(t.is_contiguous());
    const TensorDict p = t.data_ptr();
    for (const NestedKey& k : ref.keys(test::kLeaves)) {
      EXPECT_EQ(p.get(k).item<int64_t>(), reinterpret_cast<intptr_t>(t.get(k).data_ptr())) << k;
    }
  }
}

// Every leaf is cast (the int64 "c" too), as Python's td.float() ... do.
TYPED_TEST_P(Conformance, DtypeVerbs) {
  const TensorDict t = this->Make();
  const TensorDict ref = ReferenceContent();
  using Op = std::function<TensorDict(const TensorDict&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"float64", [](const TensorDict& x) { return x.float64(); }},
      {"int32", [](const TensorDict& x) { return x.int32(); }},
      {"uint8", [](const TensorDict& x) { return x.abs().uint8(); }},
      {"to(kBool)", [](const TensorDict& x) { return x.to(at::kBool); }},
      {"type(kLong)", [](const TensorDict& x) { return x.type(at::kLong); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    const TensorDict got = op(t);
    ExpectSame(got, op(ref));
    for (const NestedKey& k : ref.keys(test::kLeaves)) {
      EXPECT_EQ(got.get(k).scalar_type(), op(ref).get(k).scalar_type()) << k;
    }
  }
  EXPECT_EQ(t.float64().get("c").scalar_type(), at::kDouble);
  ExpectSame(t, ReferenceContent());  // nothing above wrote into t
}

TYPED_TEST_P(Conformance, ParityMathAndShapeOps) {
  const TensorDict t = this->Make();
  const TensorDict ref = ReferenceContent();
  const TensorDict other = ref.apply([](const at::Tensor& x) { return x.abs() + 1; });
  using Op = std::function<TensorDict(const TensorDict&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"clamp_min(other)", [&](const TensorDict& x) { return x.clamp_min(other); }},
      {"clamp_max(0.5)", [](const TensorDict& x) { return x.clamp_max(0.5); }},
      {"mod(other)", [&](const TensorDict& x) { return x.mod(other); }},
      {"rsub(other, 2)", [&](const TensorDict& x) { return x.rsub(other, 2); }},
      {"logical_and(other)", [&](const TensorDict& x) { return x.logical_and(other); }},
      {"isnan", [](const TensorDict& x) { return x.isnan(); }},
      {"isfinite", [](const TensorDict& x) { return x.isfinite(); }},
      {"isposinf", [](const TensorDict& x) { return x.isposinf(); }},
      {"amax({0})", [](const TensorDict& x) { return x.amax({0}); }},
      {"amin()", [](const TensorDict& x) { return x.amin(); }},
      {"fliplr", [](const TensorDict& x) { return x.fliplr(); }},
      {"flipud", [](const TensorDict& x) { return x.flipud(); }},
      {"rot90(1, {0, 2})", [](const TensorDict& x) { return x.rot90(1, {0, 2}); }},
      {"tile({2, 1})", [](const TensorDict& x) { return x.tile({2, 1}); }},
      {"swapdims(1, 3)", [](const TensorDict& x) { return x.swapdims(1, 3); }},
      {"atleast_3d", [](const TensorDict& x) { return x.atleast_3d(); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    ExpectSame(op(t), op(ref));
  }
  ExpectSame(t, ReferenceContent());  // nothing above wrote into t
}

// The in-place forms write through to the backend's memory, or change nothing when they fail.
TYPED_TEST_P(Conformance, ParityInPlace) {
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  TensorDict t = this->Make();
  TensorDict want = ReferenceContent();
  const TensorDict other = want.apply([](const at::Tensor& x) { return x.abs() + 1; });
  using Op = std::function<void(TensorDict&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"clamp_min_(other)", [&](TensorDict& x) { x.clamp_min_(other); }},
      {"clamp_max_(12)", [](TensorDict& x) { x.clamp_max_(12); }},
      {"copy_at_(other[1], 1)", [&](TensorDict& x) { x.copy_at_(other.index({1}), {1}); }},
      {"copy_at_(other[:, 0], [:, 0])",
       [&](TensorDict& x) {
         x.copy_at_(other.index({at::indexing::Slice(), 0}) * 3, {at::indexing::Slice(), 0});
       }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    op(t);
    op(want);
    ExpectSame(t, want);
  }
  // copy_ writes every leaf into a fresh TensorDict of the backend.
  TensorDict fresh = this->Make();
  fresh.copy_(want);
  ExpectSame(fresh, want);
  // A shape that would need broadcasting: ValueError naming the key and shapes; nothing written.
  TensorDict wide = other.index({1}).clone();
  wide.set("a", at::ones({3, 2, 1, 1}));
  TD_EXPECT_THROW_MSG(t.copy_at_(wide, {1}), ValueError, {"'a'", "[3, 2, 1, 1]", "[3, 2, 1, 5]"});
  ExpectSame(t, want);
}

TYPED_TEST_P(Conformance, ParityDictVerbs) {
  TensorDict t = this->Make();
  const TensorDict ref = ReferenceContent();
  // to_dict / tolist hold the dense answer's tensors.
  ExpectSame(TensorDict::from_ivalue(t.to_dict(), Batch()), ref);
  const c10::IValue rows = t.tolist();
  ASSERT_EQ(rows.toListRef().size(), static_cast<size_t>(Batch()[0]));
  const c10::IValue last = rows.toListRef()[3].toListRef()[2].toListRef()[1].toListRef()[0];
  ExpectSame(TensorDict::from_ivalue(last), ref.index({3, 2, 1, 0}));
  // replace: a new TensorDict (dense), this one unchanged.
  const TensorDict r = t.replace(TensorDict({{"b", ref.get("b") * 2}}, Batch()));
  ExpectSame(r, ref.replace(TensorDict({{"b", ref.get("b") * 2}}, Batch())));
  ExpectSame(t, ref);
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  t.create_nested({"m", "k"});
  EXPECT_EQ(t.get_tensordict({"m", "k"}).batch_size(), at::IntArrayRef(Batch()));
  t.filter_empty_();
  EXPECT_FALSE(t.contains("m"));
  TensorDict want = ReferenceContent();
  const TensorDict out = t.separates({"a", {"n", "inner"}});
  ExpectSame(out, want.separates({"a", {"n", "inner"}}));
  EXPECT_EQ(t.keys(), want.keys());
  ExpectSame(t, want);
  TD_EXPECT_THROW_MSG(t.separates({"b", "zz"}), KeyError, {"'zz'"});
  EXPECT_TRUE(t.contains("b"));
}

}  // namespace conformance
}  // namespace td
