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
  EXPECT_EQ(t.size(), 0u);
  TD_EXPECT_THROW_MSG(t.popitem(), KeyError, {"empty"});
  // is_empty: no leaves anywhere, as upstream.
  EXPECT_TRUE(t.is_empty());
  t.set("e", TensorDict({}, {3, 4}));
  EXPECT_EQ(t.size(), 1u);
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

}  // namespace
}  // namespace td
