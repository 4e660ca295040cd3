// Conformance tests of the dictionary side: identity, reading, writing, structure, maps,
// comparison and printing. Registered by conformance_suite.h (include that one).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/conformance/conformance_fixture.h"

namespace td {
namespace conformance {

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
  EXPECT_EQ(t.num_keys(), 4u);
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
  if (!this->Has(Capability::kReplaceEntries) && !this->Has(Capability::kInPlaceWrite)) {
    // Neither a new entry nor a write into the old one: the backend refuses, nothing changes.
    EXPECT_THROW(t.set("a", Values(Shape({5}), -1.0, 2.0)), c10::ValueError);
    ExpectSame(t, ReferenceContent());
  }
  TD_CONFORMANCE_REQUIRE(kInPlaceWrite);
  at::Tensor a = Values(Shape({5}), -1.0, 2.0);
  t.set("a", a);
  EXPECT_TRUE(t.get("a").equal(a));
  t.set({"n", "inner"}, Values(Shape({2}), 1.0, 0.0));
  EXPECT_TRUE(t.get({"n", "inner"}).equal(Values(Shape({2}), 1.0, 0.0)));
  if (!this->Has(Capability::kReplaceEntries)) {
    // The core refuses before the backend is asked, and nothing changes.
    TD_EXPECT_THROW_MSG(t.set("a", Values(Shape({6}), 1.0, 0.0)), ValueError,
                        {"set:", "'a'", std::string("'") + TypeParam::kBackendId + "'",
                         "replace_entries", "torch.Size([4, 3, 2, 1, 6])"});
    TD_EXPECT_THROW_MSG(t.set("a", "text"), ValueError, {"'a'", "NonTensorData"});
    EXPECT_TRUE(t.get("a").equal(a));
  }
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
  if (!this->Has(Capability::kBatchResize)) {
    // The core refuses before any level changes.
    TD_EXPECT_THROW_MSG(t.set_batch_size({4, 3, 2}), BatchSizeError,
                        {"set_batch_size", std::string("'") + TypeParam::kBackendId + "'",
                         "batch_resize", "torch.Size([4, 3, 2])"});
    TD_EXPECT_THROW_MSG(t.auto_batch_size_(2), BatchSizeError,
                        {"auto_batch_size_", "batch_resize"});
    EXPECT_EQ(t.batch_size(), at::IntArrayRef(Batch()));
    EXPECT_EQ(t.get_tensordict("n").batch_size(), at::IntArrayRef(Batch()));
  }
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
  if (t.device() == at::Device(at::kCPU)) {
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

}  // namespace conformance
}  // namespace td
