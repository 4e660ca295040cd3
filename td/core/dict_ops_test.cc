// Tests of td/core/dict_ops.cc: the dict verbs against the same ATen calls on each leaf, with
// their errors (and that a failing call changes nothing).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/testing.h"

namespace td {
namespace {

using at::indexing::None;
using at::indexing::Slice;
using test::kLeaves;
using test::SampleTensorDict;

TEST(DictOpsTest, SetAndUpdateOptions) {
  TensorDict t = SampleTensorDict();
  const at::Tensor a = t.get("a");
  t.set("a", at::ones({3, 4, 5}), SetOptions().inplace(true));
  EXPECT_TRUE(a.equal(at::ones({3, 4, 5})));   // written into the same tensor
  t.set("a", at::zeros({3, 4, 5}));             // replaces
  EXPECT_TRUE(a.equal(at::ones({3, 4, 5})));
  t.set("new", at::ones({3, 4}), SetOptions().inplace(true));   // new key: created
  EXPECT_TRUE(t.get("new").equal(at::ones({3, 4})));
  TD_EXPECT_THROW_MSG(t.set("a", at::ones({3, 4, 6}), SetOptions().inplace(true)), c10::Error,
                      {"'a'"});

  TensorDict dst = SampleTensorDict();
  TensorDict src = SampleTensorDict().apply([](const at::Tensor& x) { return x + 1; });
  const at::Tensor dst_x = dst.get({"n", "x"});
  dst.update(src, UpdateOptions().inplace(true).keys_to_update(std::vector<NestedKey>{{"n", "x"}}));
  EXPECT_TRUE(dst_x.equal(src.get({"n", "x"})));
  EXPECT_TRUE(dst.get("a").equal(SampleTensorDict().get("a")));   // not in keys_to_update
  dst.update(src, UpdateOptions().clone(true));
  EXPECT_TRUE(dst.get("a").equal(src.get("a")));
  EXPECT_NE(dst.get("a").data_ptr(), src.get("a").data_ptr());
  TensorDict shared = SampleTensorDict();
  shared.update(src, UpdateOptions());
  EXPECT_EQ(shared.get("a").data_ptr(), src.get("a").data_ptr());
  TD_EXPECT_THROW_MSG(dst.update(src, UpdateOptions().keys_to_update(std::vector<NestedKey>{"zz"})),
                      KeyError, {"'zz'"});
  // A bad shape anywhere: nothing written.
  TensorDict bad({{"a", at::full({3, 4, 5}, 7.0)}, {"b", at::zeros({2})}}, {});
  TensorDict before = dst.clone();
  EXPECT_THROW(dst.update(bad, UpdateOptions().inplace(true)), c10::Error);
  EXPECT_TRUE(dst.get("a").equal(before.get("a")));
  EXPECT_THROW(dst.update(bad, UpdateOptions()), BatchSizeError);
  EXPECT_TRUE(dst.get("a").equal(before.get("a")));
}

TEST(DictOpsTest, IndexedAccess) {
  TensorDict t = SampleTensorDict();
  at::Tensor ref = t.get("a").clone();
  t.set_at_("a", at::ones({5}), {Slice(0, 2)});
  ref.index_put_({Slice(0, 2)}, at::ones({5}));
  EXPECT_TRUE(t.get("a").equal(ref));
  EXPECT_TRUE(t.get_at({"n", "x"}, {1, Slice(None, 2)}).equal(t.get({"n", "x"}).index({1, Slice(None, 2)})));
  EXPECT_TRUE(t.get_at("zz", {0}, at::zeros({1})).equal(at::zeros({1})));
  TD_EXPECT_THROW_MSG(t.set_at_("zz", at::ones({5}), {0}), KeyError, {"'zz'"});
  TD_EXPECT_THROW_MSG(t.set_at_("a", at::ones({4}), {0}), c10::Error, {"'a'"});
  TD_EXPECT_THROW_MSG(t.get_at("a", {7}), c10::Error, {"'a'"});
  TD_EXPECT_THROW_MSG(t.set_at_("n", at::ones({1}), {0}), c10::TypeError, {"'n'"});

  TensorDict row({{"a", at::full({4, 5}, 2.0)}, {"b", at::full({4}, 9)}}, {4});
  TensorDict expect = t.clone();
  expect.get("a").index_put_({1}, row.get("a"));
  expect.get("b").index_put_({1}, row.get("b"));
  t.update_at_(row, {1});
  EXPECT_TRUE(t.get("a").equal(expect.get("a")));
  EXPECT_TRUE(t.get("b").equal(expect.get("b")));
  TensorDict extra({{"a", at::zeros({4, 5})}, {"zz", at::zeros({4})}}, {4});
  TD_EXPECT_THROW_MSG(t.update_at_(extra, {1}), KeyError, {"'zz'"});
  EXPECT_TRUE(t.get("a").equal(expect.get("a")));
}

TEST(DictOpsTest, DictVerbs) {
  TensorDict t = SampleTensorDict();
  TensorDict::Item last = t.popitem();
  EXPECT_EQ(last.first, NestedKey("s"));
  EXPECT_EQ(last.second.non_tensor(), "a string!");
  EXPECT_FALSE(t.contains("s"));
  Value existing = t.setdefault("a", at::zeros({3, 4, 5}));
  EXPECT_TRUE(existing.tensor().equal(t.get("a")));
  Value created = t.setdefault({"m", "k"}, at::ones({3, 4}));
  EXPECT_TRUE(t.get({"m", "k"}).equal(at::ones({3, 4})));
  EXPECT_TRUE(created.tensor().equal(at::ones({3, 4})));
  TD_EXPECT_THROW_MSG(t.setdefault("q", at::ones({2})), BatchSizeError, {"'q'"});
  t.lock_();
  TD_EXPECT_THROW_MSG(t.clear(), LockedError, {"locked"});
  EXPECT_TRUE(t.contains("a"));
  t.unlock_();
  t.clear();
  EXPECT_EQ(t.num_keys(), 0u);
  TD_EXPECT_THROW_MSG(t.popitem(), KeyError, {"empty"});
  // is_empty: no leaves anywhere, as upstream.
  EXPECT_TRUE(t.is_empty());
  t.set("e", TensorDict({}, {3, 4}));
  EXPECT_EQ(t.num_keys(), 1u);
  EXPECT_TRUE(t.is_empty());
  t.set_non_tensor({"e", "note"}, "x");
  EXPECT_FALSE(t.is_empty());
}

TEST(DictOpsTest, KeysSortIsLeafFilter) {
  TensorDict t({{"b", at::zeros({2})}, {"a", at::zeros({2})}, {"c", {{"z", at::zeros({2})},
                {"y", "text"}}}}, {2});
  EXPECT_EQ(t.sorted_keys(),
            (std::vector<NestedKey>{"a", "b", {"c", "y"}, {"c", "z"}}));
  EXPECT_EQ(t.keys(KeysOptions().sort(true)), (std::vector<NestedKey>{"a", "b", "c"}));
  std::vector<Value> vs = t.values(KeysOptions().sort(true));
  EXPECT_TRUE(vs[2].is_tensordict());
  // TensorDicts as leaves: not recursed into.
  auto as_leaf = [](const Value& v) { return v.is_tensordict(); };
  EXPECT_EQ(t.keys(KeysOptions().include_nested(true).leaves_only(true).is_leaf(as_leaf)), (std::vector<NestedKey>{"c"}));
  auto tensors_only = [](const Value& v) { return v.is_tensor(); };
  EXPECT_EQ(t.keys(KeysOptions().include_nested(true).leaves_only(true).is_leaf(tensors_only)),
            (std::vector<NestedKey>{"b", "a", {"c", "z"}}));
  TensorDict f = t.filter_non_tensor_data();
  EXPECT_FALSE(f.contains({"c", "y"}));
  EXPECT_TRUE(f.contains({"c", "z"}));
  EXPECT_TRUE(t.contains({"c", "y"}));   // the original keeps it
}

TEST(DictOpsTest, WherePadFill) {
  TensorDict a({{"x", at::ones({4, 2})}, {"only_a", at::full({4}, 3.0)}}, {4});
  TensorDict b({{"x", at::zeros({4, 2})}, {"only_b", at::full({4, 3}, 5.0)}}, {4});
  const at::Tensor cond = at::tensor({1, 0, 1, 0}).to(at::kBool);
  TensorDict w = a.where(cond, b, -1);
  EXPECT_TRUE(w.get("x").equal(at::where(cond.unsqueeze(1), a.get("x"), b.get("x"))));
  EXPECT_TRUE(w.get("only_a").equal(at::where(cond, a.get("only_a"), at::full({4}, -1.0))));
  EXPECT_TRUE(w.get("only_b").equal(
      at::where(cond.unsqueeze(1), at::full({4, 3}, -1.0), b.get("only_b"))));
  TD_EXPECT_THROW_MSG(a.where(cond, b), KeyError, {"only_a"});
  a.fill_("x", 7);
  EXPECT_TRUE(a.get("x").equal(at::full({4, 2}, 7.0)));
  EXPECT_TRUE(a.get("only_a").equal(at::full({4}, 3.0)));
  TD_EXPECT_THROW_MSG(a.fill_("zz", 1), KeyError, {"'zz'"});
}

TEST(DictOpsTest, StateDictMetadataAndIValue) {
  TensorDict t = SampleTensorDict();
  StateDict sd = t.state_dict_with_metadata();
  EXPECT_EQ(sd.metadata[""].batch_size, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(sd.metadata["n"].batch_size, (std::vector<int64_t>{3, 4, 2}));
  EXPECT_TRUE(sd.tensors["n.x"].equal(t.get({"n", "x"})));
  TensorDict back = TensorDict::from_state_dict(sd);
  EXPECT_EQ(back.batch_size(), t.batch_size());
  EXPECT_EQ(back.get_tensordict("n").batch_size(), t.get_tensordict("n").batch_size());
  EXPECT_TRUE(back.get({"n", "x"}).equal(t.get({"n", "x"})));
  TensorDict empty({}, {});
  empty.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(empty.batch_size(), t.batch_size());
  sd.metadata[""].batch_size = {3, 5};
  TD_EXPECT_THROW_MSG(TensorDict::from_state_dict(sd), BatchSizeError, {"[3, 5]"});

  TensorDict iv = TensorDict::from_ivalue(t.to_ivalue());
  EXPECT_EQ(iv.batch_size(), t.batch_size());
  EXPECT_EQ(iv.get_tensordict("n").batch_size(), t.get_tensordict("n").batch_size());
  EXPECT_FALSE(iv.contains(std::string(kIValueBatchSizeKey)));
  EXPECT_TRUE((iv.exclude({"s"}) == t.exclude({"s"})).all());
  TensorDict explicit_batch = TensorDict::from_ivalue(t.to_ivalue(), {3});
  EXPECT_EQ(explicit_batch.batch_size(), (std::vector<int64_t>{3}));
}

// copy_ is update_; copy_at_ writes existing leaves at an index with exact shapes, checking
// every key, kind and shape before writing.
TEST(DictOpsTest, CopyAndCopyAt) {
  TensorDict t = SampleTensorDict();
  const TensorDict src = t.apply([](const at::Tensor& x) { return x + 1; });
  TensorDict c = t.clone();
  const at::Tensor a = c.get("a");
  c.copy_(src);
  EXPECT_TRUE(a.equal(src.get("a")));  // written into the existing tensors
  EXPECT_TRUE(c.get({"n", "x"}).equal(src.get({"n", "x"})));
  TD_EXPECT_THROW_MSG(c.copy_(TensorDict({{"zz", at::ones({3, 4})}}, {3, 4})), KeyError, {"'zz'"});

  const TensorDict step = src.index({Slice(), 2}).exclude({"s"});  // batch [3]
  TensorDict expect = t.clone();
  for (const NestedKey& k : step.keys(kLeaves)) {
    expect.get(k).index_put_({Slice(), 2}, step.get(k));
  }
  TensorDict d = t.clone();
  d.copy_at_(step, {Slice(), 2});
  for (const NestedKey& k : step.keys(kLeaves)) EXPECT_TRUE(d.get(k).equal(expect.get(k))) << k;
  // Equal non-tensor data is fine.
  d.copy_at_(src.index({Slice(), 2}), {Slice(), 2});
  EXPECT_EQ(d.get_non_tensor("s"), "a string!");
  // An advanced index (a copy, not a view, in torch) is written too.
  TensorDict e = t.clone();
  const at::Tensor rows = at::tensor({2, 0}, at::kLong);
  e.copy_at_(src.index({rows}).exclude({"s"}), {rows});
  EXPECT_TRUE(e.get("a").index({rows}).equal(src.get("a").index({rows})));
  EXPECT_TRUE(e.get("a")[1].equal(t.get("a")[1]));

  // Errors name the key and shapes; nothing is written.
  TensorDict f = t.clone();
  TensorDict wide = step.clone();
  wide.set("a", at::ones({3, 1}));  // broadcastable, but copy_at_ does not broadcast
  TD_EXPECT_THROW_MSG(f.copy_at_(wide, {Slice(), 2}), ValueError,
                      {"'a'", "[3, 1]", "[3, 5]", "broadcast"});
  TensorDict missing = step.clone();
  missing.set({"n", "zz"}, at::ones({3, 2}));
  TD_EXPECT_THROW_MSG(f.copy_at_(missing, {Slice(), 2}), KeyError, {"('n', 'zz')"});
  TensorDict text = step.clone();
  text.set_non_tensor("s", "x");  // this TensorDict's "s" is "a string!"
  TD_EXPECT_THROW_MSG(f.copy_at_(text, {Slice(), 2}), ValueError, {"'s'"});
  TensorDict into_text = step.clone();
  into_text.set({"n", "x"}, at::ones({3, 2, 6}));
  TensorDict g = f.clone();
  g.set({"n", "x"}, "now text");
  TD_EXPECT_THROW_MSG(g.copy_at_(into_text, {Slice(), 2}), TypeError, {"('n', 'x')"});
  TD_EXPECT_THROW_MSG(f.copy_at_(step, {Slice(), 9}), c10::Error, {"'a'"});
  for (const NestedKey& k : step.keys(kLeaves)) EXPECT_TRUE(f.get(k).equal(t.get(k))) << k;
}

TEST(DictOpsTest, CreateNestedAndFilterEmpty) {
  TensorDict t({{"a", at::ones({3, 4})}, {"n", TensorDict({{"x", at::ones({3, 4, 2})}}, {3, 4})}},
               {3, 4});
  t.create_nested("root");
  t.create_nested({"some", "nested", "value"});
  t.create_nested({"n", "m"});  // inside an existing level: "n" and its leaf are kept
  EXPECT_EQ(t.get_tensordict("root").batch_size(), at::IntArrayRef({3, 4}));
  EXPECT_EQ(t.get_tensordict({"some", "nested", "value"}).batch_size(), at::IntArrayRef({3, 4}));
  EXPECT_TRUE(t.get_tensordict({"some", "nested", "value"}).keys().empty());
  EXPECT_TRUE(t.contains({"n", "x"}));
  EXPECT_TRUE(t.get_tensordict({"n", "m"}).keys().empty());
  // An existing entry is replaced.
  t.create_nested("a");
  EXPECT_TRUE(t.get_value("a").is_tensordict());

  t.filter_empty_();
  EXPECT_EQ(t.keys(), (std::vector<NestedKey>{"n"}));  // "a", "root", "some" held no leaf
  EXPECT_EQ(t.get_tensordict("n").keys(), (std::vector<NestedKey>{"x"}));

  t.lock_();
  TD_EXPECT_THROW_MSG(t.create_nested("q"), LockedError, {"'q'", "locked"});
  t.filter_empty_();  // nothing to remove: fine while locked
  t.unlock_();
  t.create_nested({"e", "f"});
  t.lock_();
  TD_EXPECT_THROW_MSG(t.filter_empty_(), LockedError, {"['e']", "locked"});
  EXPECT_TRUE(t.contains({"e", "f"}));
}

TEST(DictOpsTest, ReplaceAndSeparates) {
  const TensorDict t = SampleTensorDict();
  const at::Tensor obs = at::zeros({3, 4, 5});
  const TensorDict r = t.replace(TensorDict({{"a", obs}, {"new", at::ones({3, 4})}}, {3, 4}));
  EXPECT_TRUE(r.get("a").is_same(obs));
  EXPECT_TRUE(r.get("new").equal(at::ones({3, 4})));
  EXPECT_TRUE(r.get("b").is_same(t.get("b")));  // shared, as copy() shares
  EXPECT_FALSE(t.contains("new"));               // this TensorDict is unchanged
  EXPECT_FALSE(t.get("a").is_same(obs));
  EXPECT_TRUE(t.replace({{"b", at::zeros({3, 4}, at::kLong)}}).get("b").equal(at::zeros({3, 4}, at::kLong)));
  TD_EXPECT_THROW_MSG(t.replace({{"q", at::ones({2})}}), BatchSizeError, {"'q'"});

  TensorDict s = SampleTensorDict();
  const at::Tensor a = s.get("a");
  const TensorDict out = s.separates({"a", {"n", "x"}});
  EXPECT_TRUE(out.get("a").is_same(a));
  EXPECT_EQ(out.get({"n", "x"}).sizes(), at::IntArrayRef({3, 4, 2, 6}));
  EXPECT_EQ(out.get_tensordict("n").batch_size(), at::IntArrayRef({3, 4, 2}));
  EXPECT_EQ(out.batch_size(), s.batch_size());
  EXPECT_FALSE(s.contains("a"));
  EXPECT_FALSE(s.contains("n"));  // emptied, then filtered
  EXPECT_TRUE(s.contains("b"));
  // Missing keys: KeyError (nothing removed) when strict, skipped otherwise.
  TensorDict m = SampleTensorDict();
  TD_EXPECT_THROW_MSG(m.separates({"a", "zz"}), KeyError, {"'zz'"});
  EXPECT_TRUE(m.contains("a"));
  const TensorDict some = m.separates({"zz", "b"}, /*strict=*/false, /*filter_empty=*/false);
  EXPECT_EQ(some.keys(), (std::vector<NestedKey>{"b"}));
  m.separates({{"n", "x"}}, true, /*filter_empty=*/false);
  EXPECT_TRUE(m.contains("n"));  // kept, empty
  m.lock_();
  TD_EXPECT_THROW_MSG(m.separates({"a"}), LockedError, {"locked"});
  EXPECT_TRUE(m.contains("a"));
}

TEST(DictOpsTest, Fromkeys) {
  const at::Tensor zero = at::zeros({});
  const TensorDict t = TensorDict::fromkeys({"a", {"n", "b"}}, zero);
  EXPECT_EQ(t.batch_size(), at::IntArrayRef({}));
  EXPECT_EQ(t.keys(test::kLeaves), (std::vector<NestedKey>{"a", {"n", "b"}}));
  EXPECT_TRUE(t.get("a").is_same(zero));
  EXPECT_TRUE(t.get({"n", "b"}).is_same(zero));
  EXPECT_EQ(TensorDict::fromkeys({"x", "y"}, "text").get_non_tensor("y"), "text");
  EXPECT_TRUE(TensorDict::fromkeys({}, zero).keys().empty());
}

TEST(DictOpsTest, CatAndStackTensors) {
  TensorDict t({{"pos", at::arange(6.0).view({3, 2})},
                {"vel", at::ones({3, 2})},
                {"n", {{"acc", at::zeros({3, 2})}}}},
               {3});
  const TensorDict before = t.clone();
  t.cat_tensors({"pos", "vel", {"n", "acc"}}, "state", -1);
  EXPECT_TRUE(t.get("state").equal(
      at::cat({before.get("pos"), before.get("vel"), before.get({"n", "acc"})}, -1)));
  EXPECT_FALSE(t.contains("pos"));
  EXPECT_FALSE(t.contains({"n", "acc"}));
  TensorDict s = before.clone();
  s.stack_tensors({"pos", "vel"}, {"n", "both"}, 1, /*keep_entries=*/true);
  EXPECT_TRUE(s.get({"n", "both"}).equal(at::stack({before.get("pos"), before.get("vel")}, 1)));
  EXPECT_TRUE(s.contains("pos"));
  // Errors change nothing: a missing key, shapes that do not fit (keyed), a result that does not
  // start with the batch size, a locked TensorDict.
  TensorDict e = before.clone();
  TD_EXPECT_THROW_MSG(e.cat_tensors({"pos", "zz"}, "out"), KeyError, {"'zz'"});
  TD_EXPECT_THROW_MSG(e.stack_tensors({"pos", "n"}, "out"), TypeError, {"'n'"});
  e.set("wide", at::ones({3, 5}));
  TD_EXPECT_THROW_MSG(e.stack_tensors({"pos", "wide"}, "out"), c10::Error, {"'out'", "stack"});
  TD_EXPECT_THROW_MSG(e.cat_tensors({"pos", "vel"}, "out", 0), BatchSizeError,
                      {"'out'", "[6, 2]", "torch.Size([3])"});
  EXPECT_TRUE(e.contains("pos") && e.contains("vel") && !e.contains("out"));
  e.lock_();
  TD_EXPECT_THROW_MSG(e.cat_tensors({"pos", "vel"}, "out", 1), LockedError, {"locked"});
  EXPECT_TRUE(e.contains("pos"));
}

TEST(DictOpsTest, CatStackFromTensorDictAndNonTensorItems) {
  const TensorDict t({{"b", at::ones({3, 2})},
                      {"a", at::arange(6.0).view({3, 2})},
                      {"n", {{"c", at::zeros({3, 2})}, {"note", "deep"}}},
                      {"s", "top"}},
                     {3});
  const at::Tensor a = t.get("a"), b = t.get("b"), c = t.get({"n", "c"});
  EXPECT_TRUE(t.cat_from_tensordict().equal(at::cat({b, a, c}, 0)));  // key order
  EXPECT_TRUE(t.cat_from_tensordict(1, /*sorted=*/true).equal(at::cat({a, b, c}, 1)));
  EXPECT_TRUE(t.stack_from_tensordict(-1).equal(at::stack({b, a, c}, -1)));
  EXPECT_TRUE(t.stack_from_tensordict({{"n", "c"}, "a", "b"}).equal(at::stack({c, a, b})));
  EXPECT_TRUE(t.cat_from_tensordict({"a", {"n", "c"}, "b"}, 1).equal(at::cat({a, c, b}, 1)));
  TD_EXPECT_THROW_MSG(t.cat_from_tensordict({"a", "zz"}), ValueError,
                      {"missing ['b', ('n', 'c')]", "'zz'"});
  TD_EXPECT_THROW_MSG(t.stack_from_tensordict({"a", "b", "s", {"n", "c"}}), ValueError, {"'s'"});

  const std::vector<TensorDict::Item> top = t.non_tensor_items();
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].first, NestedKey("s"));
  EXPECT_EQ(top[0].second.non_tensor(), "top");
  const std::vector<TensorDict::Item> all = t.non_tensor_items(/*include_nested=*/true);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, NestedKey({"n", "note"}));
  EXPECT_EQ(all[1].first, NestedKey("s"));
}

}  // namespace
}  // namespace td
