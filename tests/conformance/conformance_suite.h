// The conformance suite: the behaviour every storage backend must have, as ONE typed GoogleTest
// suite (TYPED_TEST_SUITE_P) that each backend instantiates. See NOTE [ Storage interface ] in
// td/core/storage.h for the rules the suite checks.
//
// How a backend joins
// -------------------
// 1. Write a traits type (in tests/conformance/<backend>_conformance_test.cc, or beside the
//    backend) with:
//      static constexpr const char* kBackendId;  // what TensorDict::backend() reports
//      static td::Capabilities capabilities();   // what the backend declares; must equal
//                                                // storage().capabilities() of Make()'s result
//      static td::TensorDict Make();             // a NEW TensorDict on the backend holding
//                                                // exactly td::conformance::ReferenceContent()
//    ReferenceContent() is the same logical content for every backend: batch size [4, 3, 2, 1],
//    keys "a" float32 (*B, 5), "b" float32 (*B, 10), "c" int64 (*B, 3) and ("n", "inner")
//    float32 (*B, 2) (sub-TensorDict "n" with batch size B), inserted in that order.
// 2. Instantiate the suite and add a cc_test depending on //tests/conformance:suite:
//      using MyTypes = ::testing::Types<MyTraits>;
//      INSTANTIATE_TYPED_TEST_SUITE_P(My, Conformance, MyTypes);
// 3. A test that needs a capability the backend lacks is skipped with GTEST_SKIP() naming the
//    backend and the missing capability (never silently passed): declare capabilities honestly.
//    Error paths are checked on every backend.
// Every test compares the backend's results with the same operation on the dense
// ReferenceContent(), so "conforms" means "gives the dense answer".
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/consolidate/consolidate.h"
#include "td/consolidate/consolidated_ops.h"
#include "td/core/stack.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace conformance {

// The batch size of the reference content.
inline std::vector<int64_t> Batch() { return {4, 3, 2, 1}; }

// Batch() followed by `feature` dims.
inline std::vector<int64_t> Shape(std::initializer_list<int64_t> feature) {
  std::vector<int64_t> s = Batch();
  s.insert(s.end(), feature.begin(), feature.end());
  return s;
}

// Deterministic, distinct values of the given shape and dtype.
inline at::Tensor Values(at::IntArrayRef shape, double scale, double offset,
                         at::ScalarType dtype = at::kFloat) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return (at::arange(n, at::kDouble) * scale + offset).to(dtype).view(shape);
}

// The logical content every backend's traits Make() must hold (see the top of this file).
inline TensorDict ReferenceContent() {
  TensorDict t({}, Batch());
  t.set("a", Values(Shape({5}), 0.5, -10.0));
  t.set("b", Values(Shape({10}), -0.25, 3.0));
  t.set("c", Values(Shape({3}), 1, 7, at::kLong));
  t.set({"n", "inner"}, Values(Shape({2}), 2.0, 1000.0));
  return t;
}

// Throws (failing the test with the difference) unless `actual` has the same batch size, keys,
// dtypes, shapes and values as `expected`.
inline void ExpectSame(const TensorDict& actual, const TensorDict& expected) {
  EXPECT_EQ(actual.batch_size(), expected.batch_size());
  try {
    assert_allclose(actual, expected, AllCloseOptions().rtol(0).atol(0));
  } catch (const c10::Error& e) {
    ADD_FAILURE() << "TensorDicts differ: " << e.what_without_backtrace();
  }
}

template <class Traits>
class Conformance : public ::testing::Test {
 protected:
  static TensorDict Make() { return Traits::Make(); }
  static bool Has(Capability c) { return Traits::capabilities().has(c); }
};

TYPED_TEST_SUITE_P(Conformance);

// Skips the rest of the test, naming the backend and the capability it lacks.
#define TD_CONFORMANCE_REQUIRE(cap)                                                        \
  do {                                                                                     \
    if (!TypeParam::capabilities().has(::td::Capability::cap)) {                           \
      GTEST_SKIP() << "the '" << TypeParam::kBackendId << "' backend lacks " #cap " ("     \
                   << ::td::CapabilityName(::td::Capability::cap) << ")";                  \
    }                                                                                      \
  } while (0)

// ---- identity ----------------------------------------------------------------------------

TYPED_TEST_P(Conformance, BackendIdAndCapabilities) {
  TensorDict t = this->Make();
  EXPECT_EQ(t.backend(), TypeParam::kBackendId);
  // Bits, not names: a wrong value of any flag fails here (names are printed on failure).
  EXPECT_EQ(t.storage().capabilities().bits(), TypeParam::capabilities().bits())
      << "declared " << t.storage().capabilities() << ", expected " << TypeParam::capabilities();
  // A backend declares kLazy exactly when it has the lazy hooks (derives from LazyStorage).
  EXPECT_EQ(t.storage().capabilities().has(Capability::kLazy), t.storage().lazy() != nullptr);
  EXPECT_EQ(std::string(t.to_dense().backend()), "dense");
}

// ---- reading -----------------------------------------------------------------------------

TYPED_TEST_P(Conformance, ContentMatchesReference) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  EXPECT_EQ(t.batch_size(), at::IntArrayRef(Batch()));
  EXPECT_EQ(t.batch_dims(), 4);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.keys(), (std::vector<NestedKey>{"a", "b", "c", "n"}));
  EXPECT_EQ(t.keys(KeysOptions().include_nested(true)),
            (std::vector<NestedKey>{"a", "b", "c", "n", {"n", "inner"}}));
  EXPECT_EQ(t.keys(KeysOptions().include_nested(true).leaves_only(true)),
            (std::vector<NestedKey>{"a", "b", "c", {"n", "inner"}}));
  for (const NestedKey& k : ref.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    at::Tensor got = t.get(k);
    at::Tensor want = ref.get(k);
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << k;
    EXPECT_TRUE(got.equal(want)) << k;
  }
  EXPECT_EQ(t.get_tensordict("n").batch_size(), at::IntArrayRef(Batch()));
  std::vector<TensorDict::Item> items = t.items(KeysOptions().include_nested(true));
  ASSERT_EQ(items.size(), 5u);
  EXPECT_TRUE(items[0].second.tensor().equal(ref.get("a")));
  EXPECT_TRUE(items[3].second.is_tensordict());
  std::vector<Value> values = t.values(KeysOptions().include_nested(true).leaves_only(true));
  ASSERT_EQ(values.size(), 4u);
  EXPECT_TRUE(values[3].tensor().equal(ref.get({"n", "inner"})));
  EXPECT_TRUE(t.contains("a"));
  EXPECT_TRUE(t.contains({"n", "inner"}));
  EXPECT_FALSE(t.contains("zz"));
  EXPECT_FALSE(t.contains({"a", "x"}));
  EXPECT_FALSE(t.contains({"n", "zz"}));
  ExpectSame(t, ref);
}

// for_each_entry walks one level, in keys() order, nested levels as TensorDict values.
TYPED_TEST_P(Conformance, ForEachEntryWalksOneLevel) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  std::vector<std::string> seen;
  t.for_each_entry([&](const std::string& k, const Value& v) {
    seen.push_back(k);
    if (v.is_tensor()) {
      EXPECT_TRUE(v.tensor().equal(ref.get(k))) << k;
    } else {
      ASSERT_TRUE(v.is_tensordict()) << k;
      std::vector<std::string> inner;
      v.tensordict().for_each_entry([&](const std::string& ik, const Value& iv) {
        inner.push_back(ik);
        EXPECT_TRUE(iv.tensor().equal(ref.get({k, ik}))) << k << "." << ik;
      });
      EXPECT_EQ(inner, std::vector<std::string>{"inner"});
    }
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "n"}));
}

TYPED_TEST_P(Conformance, GetErrorsNameKeyAndExistingKeys) {
  TensorDict t = this->Make();
  TD_EXPECT_THROW_MSG(t.get("zz"), KeyError, {"'zz'", "['a', 'b', 'c', 'n']"});
  TD_EXPECT_THROW_MSG(t.get({"n", "zz"}), KeyError, {"('n', 'zz')", "['inner']"});
  TD_EXPECT_THROW_MSG(t.get({"a", "x"}), KeyError, {"('a', 'x')", "Tensor"});
  TD_EXPECT_THROW_MSG(t.get("n"), c10::TypeError, {"'n'", "TensorDict"});
  TD_EXPECT_THROW_MSG(t.get_tensordict("a"), c10::TypeError, {"'a'", "Tensor"});
  at::Tensor fallback = at::ones({2});
  EXPECT_TRUE(t.get("zz", fallback).is_same(fallback));
  EXPECT_TRUE(t.get("a", fallback).equal(ReferenceContent().get("a")));
}

// ---- writing -----------------------------------------------------------------------------

TYPED_TEST_P(Conformance, SetNewKeys) {
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  TensorDict t = this->Make();
  at::Tensor d = Values(Shape({4}), 3.0, 1.0);
  t.set("d", d);
  EXPECT_TRUE(t.get("d").equal(d));
  EXPECT_EQ(t.keys().back(), NestedKey("d"));
  t.set({"n", "new"}, d * 2);
  EXPECT_TRUE(t.get({"n", "new"}).equal(d * 2));
  t.set({"m", "x"}, d * 3);  // creates the intermediate level
  EXPECT_EQ(t.get_tensordict("m").batch_size(), at::IntArrayRef(Batch()));
  EXPECT_TRUE(t.get({"m", "x"}).equal(d * 3));
  TensorDict sub({{"y", Values(Shape({2, 2}), 1.0, 0.0)}}, Batch());
  t.set("sub", sub);
  EXPECT_TRUE(t.get({"sub", "y"}).equal(sub.get("y")));
  t.set("s", "hello");
  EXPECT_EQ(t.get_non_tensor("s"), "hello");
  // The original entries are untouched.
  ExpectSame(t.select({"a", "b", "c", {"n", "inner"}}), ReferenceContent());
}

TYPED_TEST_P(Conformance, SetReplacesExisting) {
  TensorDict t = this->Make();
  at::Tensor a = Values(Shape({5}), -1.0, 2.0);
  t.set("a", a);
  EXPECT_TRUE(t.get("a").equal(a));
  t.set({"n", "inner"}, Values(Shape({2}), 1.0, 0.0));
  EXPECT_TRUE(t.get({"n", "inner"}).equal(Values(Shape({2}), 1.0, 0.0)));
  TD_CONFORMANCE_REQUIRE(kReplaceEntries);
  at::Tensor wider = Values(Shape({6}), 1.0, 0.0, at::kDouble);
  t.set("a", wider);
  EXPECT_EQ(t.get("a").sizes(), at::IntArrayRef(Shape({6})));
  EXPECT_EQ(t.get("a").scalar_type(), at::kDouble);
  EXPECT_TRUE(t.get("a").equal(wider));
}

TYPED_TEST_P(Conformance, SetChecksBatchSize) {
  TensorDict t = this->Make();
  TD_EXPECT_THROW_MSG(t.set("x", at::zeros({4, 3, 5})), BatchSizeError,
                      {"'x'", "torch.Size([4, 3, 5])", "torch.Size([4, 3, 2, 1])"});
  TD_EXPECT_THROW_MSG(t.set("a", at::zeros({4, 3})), BatchSizeError,
                      {"'a'", "torch.Size([4, 3])", "torch.Size([4, 3, 2, 1])"});
  TD_EXPECT_THROW_MSG(t.set({"n", "inner"}, at::zeros({2})), BatchSizeError,
                      {"('n', 'inner')", "torch.Size([2])"});
  TD_EXPECT_THROW_MSG(t.set("x", at::Tensor()), c10::ValueError, {"'x'", "undefined"});
  ExpectSame(t, ReferenceContent());  // nothing changed
}

TYPED_TEST_P(Conformance, SetInPlace) {
  TensorDict t = this->Make();
  TD_EXPECT_THROW_MSG(t.set_("a", at::zeros(Shape({6}))), c10::ValueError,
                      {"'a'", "torch.Size([4, 3, 2, 1, 6])", "torch.Size([4, 3, 2, 1, 5])"});
  TD_EXPECT_THROW_MSG(t.set_("zz", at::zeros(Shape({5}))), KeyError, {"'zz'"});
  TD_EXPECT_THROW_MSG(t.set_("n", at::zeros(Shape({5}))), c10::TypeError, {"'n'", "TensorDict"});
  ExpectSame(t, ReferenceContent());
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  at::Tensor a = Values(Shape({5}), 3.0, 0.5);
  t.set_("a", a);
  EXPECT_TRUE(t.get("a").equal(a));
  t.set_({"n", "inner"}, at::zeros(Shape({2})));
  EXPECT_TRUE(t.get({"n", "inner"}).equal(at::zeros(Shape({2}))));
  t.set_("c", at::ones(Shape({3}), at::kLong) * 5);
  EXPECT_TRUE(t.get("c").equal(at::ones(Shape({3}), at::kLong) * 5));
}

TYPED_TEST_P(Conformance, NestedHandleWritesThrough) {
  TensorDict t = this->Make();
  TensorDict sub = t.get_tensordict("n");
  EXPECT_EQ(sub.batch_size(), at::IntArrayRef(Batch()));
  if (this->Has(Capability::kInPlaceWrite)) {
    sub.set_("inner", at::full(Shape({2}), 7.0));
    EXPECT_TRUE(t.get({"n", "inner"}).equal(at::full(Shape({2}), 7.0)));
  }
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  sub.set("fresh", at::ones(Shape({1})));
  EXPECT_TRUE(t.contains({"n", "fresh"}));
  EXPECT_TRUE(t.get({"n", "fresh"}).equal(at::ones(Shape({1}))));
}

TYPED_TEST_P(Conformance, UpdateMergesNested) {
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  TensorDict t = this->Make();
  TensorDict other({{"a", at::ones(Shape({5}))},
                    {"d", at::zeros(Shape({1}))},
                    {"n", {{"other", at::ones(Shape({3}))}}}},
                   Batch());
  t.update(other);
  EXPECT_TRUE(t.get("a").equal(at::ones(Shape({5}))));
  EXPECT_TRUE(t.get("d").equal(at::zeros(Shape({1}))));
  EXPECT_TRUE(t.get({"n", "other"}).equal(at::ones(Shape({3}))));
  EXPECT_TRUE(t.get({"n", "inner"}).equal(ReferenceContent().get({"n", "inner"})));
}

TYPED_TEST_P(Conformance, UpdateInPlaceIsAllOrNothing) {
  TensorDict t = this->Make();
  TensorDict bad({{"a", at::ones(Shape({5}))}, {"b", at::ones(Shape({9}))}}, Batch());
  TD_EXPECT_THROW_MSG(t.update_(bad), c10::ValueError,
                      {"'b'", "torch.Size([4, 3, 2, 1, 9])", "torch.Size([4, 3, 2, 1, 10])"});
  TensorDict missing({{"a", at::ones(Shape({5}))}, {"zz", at::ones(Shape({9}))}}, Batch());
  TD_EXPECT_THROW_MSG(t.update_(missing), KeyError, {"'zz'"});
  ExpectSame(t, ReferenceContent());  // nothing was written
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  TensorDict good({{"a", at::ones(Shape({5}))}, {"n", {{"inner", at::ones(Shape({2}))}}}},
                  Batch());
  t.update_(good);
  EXPECT_TRUE(t.get("a").equal(at::ones(Shape({5}))));
  EXPECT_TRUE(t.get({"n", "inner"}).equal(at::ones(Shape({2}))));
}

TYPED_TEST_P(Conformance, DeletePopRename) {
  TensorDict t = this->Make();
  TD_EXPECT_THROW_MSG(t.del_("zz"), KeyError, {"'zz'"});
  TD_EXPECT_THROW_MSG(t.rename_key_("a", "b"), KeyError, {"'b'", "already exists"});
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  t.del_("b");
  EXPECT_EQ(t.keys(), (std::vector<NestedKey>{"a", "c", "n"}));
  Value c = t.pop("c");
  EXPECT_TRUE(c.tensor().equal(ReferenceContent().get("c")));
  EXPECT_FALSE(t.contains("c"));
  EXPECT_TRUE(t.pop("c", Value(at::ones({1}))).tensor().equal(at::ones({1})));
  t.rename_key_("a", "z");
  EXPECT_FALSE(t.contains("a"));
  EXPECT_TRUE(t.get("z").equal(ReferenceContent().get("a")));
  t.rename_key_({"n", "inner"}, {"n", "renamed"});
  EXPECT_TRUE(t.get({"n", "renamed"}).equal(ReferenceContent().get({"n", "inner"})));
  t.del_({"n", "renamed"});
  EXPECT_TRUE(t.get_tensordict("n").is_empty());
}

// ---- structure ---------------------------------------------------------------------------

TYPED_TEST_P(Conformance, SelectExcludeSplitKeys) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  ExpectSame(t.select({"a", {"n", "inner"}}), ref.select({"a", {"n", "inner"}}));
  ExpectSame(t.exclude({"b", "c"}), ref.exclude({"b", "c"}));
  TD_EXPECT_THROW_MSG(t.select({"zz"}), KeyError, {"'zz'"});
  EXPECT_EQ(t.select({"zz", "a"}, /*strict=*/false).keys(), (std::vector<NestedKey>{"a"}));
  std::vector<TensorDict> parts = t.split_keys({{"a"}, {"b", "c"}});
  ASSERT_EQ(parts.size(), 3u);
  ExpectSame(parts[0], ref.select({"a"}));
  ExpectSame(parts[1], ref.select({"b", "c"}));
  ExpectSame(parts[2], ref.select({"n"}));
}

TYPED_TEST_P(Conformance, FlattenAndUnflattenKeys) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  TensorDict flat = t.flatten_keys(".");
  EXPECT_EQ(flat.keys(), (std::vector<NestedKey>{"a", "b", "c", "n.inner"}));
  ExpectSame(flat, ref.flatten_keys("."));
  ExpectSame(flat.unflatten_keys("."), ref);
}

TYPED_TEST_P(Conformance, EmptyCloneCopyToDense) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  TensorDict e = t.empty();
  EXPECT_TRUE(e.is_empty());
  EXPECT_EQ(e.batch_size(), at::IntArrayRef(Batch()));
  EXPECT_EQ(t.empty(/*recurse=*/true).keys(KeysOptions().include_nested(true)),
            (std::vector<NestedKey>{"n"}));
  TensorDict c = t.clone();
  ExpectSame(c, ref);
  c.set_("a", at::zeros(Shape({5})));
  EXPECT_TRUE(t.get("a").equal(ref.get("a")));  // independent
  ExpectSame(t.copy(), ref);
  TensorDict d = t.to_dense();
  EXPECT_EQ(d.backend(), "dense");
  EXPECT_EQ(d.get_tensordict("n").backend(), "dense");
  ExpectSame(d, ref);
  TensorDict k = t.contiguous();
  EXPECT_EQ(k.backend(), "dense");
  for (const Value& v : k.values(KeysOptions().include_nested(true).leaves_only(true))) {
    EXPECT_TRUE(v.tensor().is_contiguous());
  }
  ExpectSame(k, ref);
  ExpectSame(t.to(at::kCPU), ref);
}

TYPED_TEST_P(Conformance, LockSemantics) {
  TensorDict t = this->Make();
  t.lock_();
  EXPECT_TRUE(t.is_locked());
  EXPECT_TRUE(t.get_tensordict("n").is_locked());
  TD_EXPECT_THROW_MSG(t.set("new", at::ones(Batch())), LockedError, {"'new'", "locked"});
  TD_EXPECT_THROW_MSG(t.set({"n", "new"}, at::ones(Batch())), LockedError,
                      {"('n', 'new')", "locked"});
  TD_EXPECT_THROW_MSG(t.del_("a"), LockedError, {"'a'", "locked"});
  TD_EXPECT_THROW_MSG(t.rename_key_("a", "z"), LockedError, {"'a'", "'z'"});
  TD_EXPECT_THROW_MSG(t.set("a", at::ones(Shape({6}))), LockedError, {"'a'"});
  ExpectSame(t, ReferenceContent());
  if (this->Has(Capability::kInPlaceWrite)) {
    t.set("a", at::ones(Shape({5})));  // same shape: written in place
    EXPECT_TRUE(t.get("a").equal(at::ones(Shape({5}))));
    t.set_("b", at::ones(Shape({10})));
    EXPECT_TRUE(t.get("b").equal(at::ones(Shape({10}))));
  }
  t.unlock_();
  EXPECT_FALSE(t.is_locked());
  EXPECT_FALSE(t.get_tensordict("n").is_locked());
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  t.set({"n", "new"}, at::ones(Batch()));
  EXPECT_TRUE(t.contains({"n", "new"}));
}

// A TensorDict that belongs to a locked parent cannot be unlocked on its own (Python
// tensordict's rule): the LockedError names the key path from the locked TensorDict, and the
// parent keeps its keys. Unlocking the parent unlocks the child.
TYPED_TEST_P(Conformance, LockHoldsThroughChildren) {
  TensorDict t = this->Make();
  t.lock_();
  TensorDict c = t.get_tensordict("n");
  EXPECT_TRUE(c.is_locked());
  TD_EXPECT_THROW_MSG(c.unlock_(), LockedError, {"cannot unlock", "'n'", "locked"});
  EXPECT_TRUE(c.is_locked());
  TD_EXPECT_THROW_MSG(c.set("new", at::ones(Batch())), LockedError, {"'new'", "locked"});
  EXPECT_FALSE(t.contains({"n", "new"}));
  EXPECT_TRUE(t.is_locked());
  ExpectSame(t, ReferenceContent());
  t.unlock_();
  EXPECT_FALSE(t.get_tensordict("n").is_locked());
  TensorDict c2 = t.get_tensordict("n");
  c2.lock_();  // a child locked on its own may unlock on its own
  c2.unlock_();
  EXPECT_FALSE(c2.is_locked());
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  t.get_tensordict("n").set("new", at::ones(Batch()));
  EXPECT_TRUE(t.contains({"n", "new"}));
}

TYPED_TEST_P(Conformance, BatchSizeChanges) {
  TensorDict t = this->Make();
  TD_EXPECT_THROW_MSG(t.set_batch_size({5}), BatchSizeError,
                      {"'a'", "torch.Size([4, 3, 2, 1, 5])", "torch.Size([5])"});
  EXPECT_EQ(t.batch_size(), at::IntArrayRef(Batch()));
  TD_CONFORMANCE_REQUIRE(kBatchResize);
  t.set_batch_size({4, 3, 2});
  EXPECT_EQ(t.batch_size(), at::IntArrayRef({4, 3, 2}));
  EXPECT_EQ(t.get_tensordict("n").batch_size(), at::IntArrayRef(Batch()));
  EXPECT_TRUE(t.get("a").equal(ReferenceContent().get("a")));
  t.set_batch_size({4, 3, 2, 1});
  EXPECT_EQ(t.batch_size(), at::IntArrayRef(Batch()));
}

// ---- maps --------------------------------------------------------------------------------

TYPED_TEST_P(Conformance, Apply) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  auto twice = [](const at::Tensor& x) { return x * 2; };
  ExpectSame(t.apply(twice), ref.apply(twice));
  auto flat = [](const at::Tensor& x) { return x.flatten(0, 1); };
  TensorDict f = t.apply(flat, std::vector<int64_t>{12, 2, 1});
  EXPECT_EQ(f.batch_size(), at::IntArrayRef({12, 2, 1}));
  EXPECT_EQ(f.get_tensordict("n").batch_size(), at::IntArrayRef({12, 2, 1}));
  ExpectSame(f, ref.apply(flat, std::vector<int64_t>{12, 2, 1}));
  TD_EXPECT_THROW_MSG(t.apply([](const at::Tensor& x) -> at::Tensor {
    TORCH_CHECK(x.size(-1) != 2, "boom");
    return x;
  }),
                      c10::Error, {"boom", "('n', 'inner')"});
}

TYPED_TEST_P(Conformance, ApplyInPlace) {
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  t.apply_([](const at::Tensor& x) { return x.mul_(2); });  // modifies the leaf it is given
  ExpectSame(t, ref.apply([](const at::Tensor& x) { return x * 2; }));
  t.apply_([](const at::Tensor& x) { return x + 1; });  // returns a new tensor
  ExpectSame(t, ref.apply([](const at::Tensor& x) { return x * 2 + 1; }));
}

// ---- comparison and printing -------------------------------------------------------------

TYPED_TEST_P(Conformance, Equality) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  EXPECT_TRUE((t == ref).all());
  EXPECT_FALSE((t != ref).any());
  EXPECT_TRUE((ref == t).all());
  EXPECT_TRUE(allclose(t, ref));
  TensorDict other = ref.clone();
  other.set_({"n", "inner"}, at::zeros(Shape({2})));
  EXPECT_FALSE((t == other).all());
  TD_EXPECT_THROW_MSG(assert_allclose(t, other), c10::Error, {"('n', 'inner')"});
  TD_EXPECT_THROW_MSG(t == ref.exclude({"b"}), KeyError, {"only in the first: ['b']"});
}

TYPED_TEST_P(Conformance, PrintsLikeDense) {
  TensorDict t = this->Make();
  std::string expected = ReferenceContent().repr();
  if (this->Has(Capability::kCrossProcess)) {
    expected = absl::StrReplaceAll(expected, {{"is_shared=False", "is_shared=True"}});
  }
  if (this->Has(Capability::kCpuOnly)) {
    // A CPU-only backend keeps its TensorDicts on the CPU (as Python's memmap does).
    expected = absl::StrReplaceAll(expected, {{"device=None", "device=cpu"}});
  }
  EXPECT_EQ(t.repr(), expected);
}

TYPED_TEST_P(Conformance, StateDictAndIValue) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  auto sd = t.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "b", "c", "n.inner"}));
  EXPECT_TRUE(sd["n.inner"].equal(ref.get({"n", "inner"})));
  ExpectSame(TensorDict::from_ivalue(t.to_ivalue(), Batch()), ref);
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  TensorDict tripled = ref.apply([](const at::Tensor& x) { return x * 3; });
  t.load_state_dict(tripled.state_dict());
  ExpectSame(t, tripled);
}

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
  TensorDict bad({{"a", at::zeros({3, 2, 1, 7})}}, {3, 2, 1});
  TD_EXPECT_THROW_MSG(t.index_put_({0}, bad), c10::ValueError, {"'a'", "torch.Size([3, 2, 1, 7])"});
  TD_EXPECT_THROW_MSG(t.index_put_({9}, ref.index({0})), c10::IndexError, {"9"});
  ExpectSame(t, ref);
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
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

TYPED_TEST_P(Conformance, ShapeOps) {
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  using Op = std::function<TensorDict(const TensorDict&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
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
      {"where", [](const TensorDict& x) {
         return x.where(at::arange(4) > 1, ReferenceContent().apply(
                                                [](const at::Tensor& y) { return y * 0; }));
       }},
  };
  // view() needs leaves whose memory allows it, as torch's view does: a backend holding
  // non-contiguous leaves (a permuted view) must refuse it with torch's message and the key.
  const bool viewable = t.get("a").is_contiguous();
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    if (!viewable && name.rfind("view(", 0) == 0) {
      TD_EXPECT_THROW_MSG(op(t), c10::Error, {"view", "'a'"});
      continue;
    }
    ExpectSame(op(t), op(ref));
  }
  const std::vector<std::pair<std::string, std::function<std::vector<TensorDict>(const TensorDict&)>>>
      multi = {
          {"split(3, 0)", [](const TensorDict& x) { return x.split(3, 0); }},
          {"split({1, 2}, 1)", [](const TensorDict& x) { return x.split({1, 2}, 1); }},
          {"chunk(2, 2)", [](const TensorDict& x) { return x.chunk(2, 2); }},
          {"unbind(1)", [](const TensorDict& x) { return x.unbind(1); }},
      };
  for (const auto& [name, op] : multi) {
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
      {"sigmoid", [](const TensorDict& x) { return x.sigmoid(); }},
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

// consolidate() applies to every backend (lazy entries are computed once; the result is dense):
// the leaves land in one buffer and the buffer fast paths give the members' results. On the
// backend's own TensorDict (not consolidated) the td::consolidated calls are the members.
TYPED_TEST_P(Conformance, Consolidate) {
  TensorDict t = this->Make();
  TensorDict c = consolidate(t);
  EXPECT_TRUE(is_consolidated(c));
  EXPECT_EQ(c.backend(), "dense");
  ExpectSame(c, ReferenceContent());
  ExpectSame(consolidated::clone(c), ReferenceContent());
  const TensorDict ref = ReferenceContent().exclude({"c"});  // one dtype: one kernel
  TensorDict floats = consolidate(t.exclude({"c"}));
  EXPECT_TRUE(is_consolidated(floats));
  ExpectSame(consolidated::mul(floats, 2), ref * 2);
  ExpectSame(consolidated::exp(floats), ref.exp());
  ExpectSame(consolidated::to(floats, at::kDouble), ref.to(at::kDouble));
  TensorDict acc = consolidated::clone(floats);
  consolidated::add_(acc, floats);
  EXPECT_TRUE(is_consolidated(acc));
  ExpectSame(acc, ref * 2);
  ExpectSame(consolidated::mul(t, 2), ReferenceContent() * 2);
  ExpectSame(t, ReferenceContent());  // nothing above wrote into t
}

REGISTER_TYPED_TEST_SUITE_P(Conformance, BackendIdAndCapabilities, ContentMatchesReference,
                            ForEachEntryWalksOneLevel, GetErrorsNameKeyAndExistingKeys, SetNewKeys, SetReplacesExisting,
                            SetChecksBatchSize, SetInPlace, NestedHandleWritesThrough,
                            UpdateMergesNested, UpdateInPlaceIsAllOrNothing, DeletePopRename,
                            SelectExcludeSplitKeys, FlattenAndUnflattenKeys,
                            EmptyCloneCopyToDense, LockSemantics, LockHoldsThroughChildren,
                            BatchSizeChanges, Apply,
                            ApplyInPlace, Equality, PrintsLikeDense, StateDictAndIValue,
                            Indexing, IndexResultsWriteThrough, IndexPut, LazyPreallocation,
                            ShapeOps, StackAndCat, Math, MathInPlace, Consolidate);

}  // namespace conformance
}  // namespace td
