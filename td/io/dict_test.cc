// from_dict / make_tensordict / to_dict / fromkeys, and utils.h: unravel_key(_list),
// merge_tensordicts, assert_close.
#include "td/io/dict.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sstream>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/testing.h"
#include "td/io/utils.h"

namespace td {
namespace {

TEST(FromDict, BatchSizeGivenInferredOrEmpty) {
  const at::Tensor a = at::zeros({3, 4}), c = at::ones({3, 4, 2});
  TensorDict plain = from_dict({{"a", a}, {"b", {{"c", c}}}});
  EXPECT_EQ(plain.batch_size().vec(), std::vector<int64_t>{});
  TensorDict given = from_dict({{"a", a}, {"b", {{"c", c}}}}, FromDictOptions().batch_size(std::vector<int64_t>{3}));
  EXPECT_EQ(given.batch_size().vec(), std::vector<int64_t>{3});
  EXPECT_EQ(given.get_tensordict("b").batch_size().vec(), std::vector<int64_t>{3});
  TensorDict inferred = from_dict({{"a", a}, {"b", {{"c", c}}}}, FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(inferred.batch_size().vec(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(inferred.get_tensordict("b").batch_size().vec(), (std::vector<int64_t>{3, 4, 2}));
  TensorDict capped = make_tensordict({{"a", a}, {"b", {{"c", c}}}}, FromDictOptions().batch_dims(1));
  EXPECT_EQ(capped.batch_size().vec(), std::vector<int64_t>{3});
  EXPECT_TRUE(capped.get({"b", "c"}).equal(c));
  TD_EXPECT_THROW_MSG(from_dict({{"a", a}}, FromDictOptions().batch_size(std::vector<int64_t>{3}).auto_batch_size(true)),
                      ValueError, {"batch_size", "auto_batch_size"});
  TD_EXPECT_THROW_MSG(from_dict({{"a", a}}, FromDictOptions().batch_size(std::vector<int64_t>{5})), BatchSizeError, {"'a'"});
}

TEST(ToDict, RoundTripThroughIValue) {
  TensorDict td({{"a", at::arange(3)}, {"n", {{"x", at::ones({3, 2})}, {"s", "str"}}}, {"none", NonTensorData(nullptr)}},
                {3});
  c10::IValue d = to_dict(td);
  ASSERT_TRUE(d.isGenericDict());
  const c10::impl::GenericDict g = d.toGenericDict();
  EXPECT_FALSE(g.contains("__batch_size"));
  EXPECT_TRUE(g.at("a").toTensor().is_same(td.get("a")));  // shared, not copied
  const c10::impl::GenericDict n = g.at("n").toGenericDict();
  EXPECT_EQ(n.size(), 2u);
  EXPECT_EQ(n.at("s").toStringRef(), "str");
  EXPECT_TRUE(g.at("none").isNone());
  EXPECT_FALSE(to_dict(td, ToDictOptions().retain_none(false)).toGenericDict().contains("none"));
  TensorDict back = from_dict(d, FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(back.batch_size().vec(), std::vector<int64_t>{3});
  EXPECT_TRUE(back.get({"n", "x"}).equal(at::ones({3, 2})));
  EXPECT_EQ(back.get_non_tensor({"n", "s"}), "str");
  c10::impl::GenericDict bad(c10::StringType::get(), c10::AnyType::get());
  bad.insert("obj", c10::IValue(c10::Device("cpu")));
  TD_EXPECT_THROW_MSG(from_dict(c10::IValue(bad)), TypeError, {"'obj'"});
  TD_EXPECT_THROW_MSG(from_dict(c10::IValue(3)), TypeError, {"needs a dict"});
}

TEST(FromList, DictsAndTensorDictsStackedAlongANewDim) {
  const TensorDict row({{"obs", at::full({2}, 3.0)}}, {});
  TensorDict s = from_list({Value{{"obs", at::zeros({2})}}, row, Value{{"obs", at::ones({2})}}});
  EXPECT_EQ(s.backend(), "dense");
  EXPECT_EQ(s.batch_size().vec(), std::vector<int64_t>{3});
  EXPECT_TRUE(s.get("obs").equal(at::tensor({0.f, 0.f, 3.f, 3.f, 1.f, 1.f}).view({3, 2})));
  // Per-element batch sizes: given (after the list's length) or inferred.
  EXPECT_EQ(from_list({Value{{"obs", at::zeros({2})}}}, FromListOptions().batch_size(std::vector<int64_t>{1, 2}))
                .batch_size()
                .vec(),
            (std::vector<int64_t>{1, 2}));
  const std::vector<Value> nested = {Value{{"a", at::zeros({2, 4})}, {"n", {{"b", at::zeros({2, 4, 5})}}}},
                                     Value{{"a", at::ones({2, 4})}, {"n", {{"b", at::ones({2, 4, 5})}}}}};
  TensorDict inferred = from_list(nested, FromListOptions().auto_batch_size(true));
  EXPECT_EQ(inferred.batch_size().vec(), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(from_list(nested, FromListOptions().batch_dims(2)).batch_size().vec(),
            (std::vector<int64_t>{2, 2}));
  // Stacking: dense when the elements agree, lazy when they do not (or when asked).
  TensorDict ragged = from_list({Value{{"obs", at::zeros({2})}}, Value{{"obs", at::zeros({5})}}});
  EXPECT_EQ(ragged.backend(), "lazy_stack");
  EXPECT_EQ(from_list({row, row}, FromListOptions().lazy(true)).backend(), "lazy_stack");
  EXPECT_THROW(from_list({Value{{"obs", at::zeros({2})}}, Value{{"obs", at::zeros({5})}}},
                         FromListOptions().lazy(false)),
               c10::Error);
  // From a list of dicts as torch::pickle_load gives it.
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(to_dict(TensorDict({{"x", at::zeros({3})}}, {3})));
  list.push_back(to_dict(TensorDict({{"x", at::ones({3})}}, {3})));
  TensorDict from_ivalues = from_list(c10::IValue(list), FromListOptions().auto_batch_size(true));
  EXPECT_EQ(from_ivalues.batch_size().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(from_ivalues.get("x")[1].equal(at::ones({3})));
  // Errors.
  TD_EXPECT_THROW_MSG(from_list(std::vector<Value>{}), ValueError, {"empty list"});
  TD_EXPECT_THROW_MSG(from_list({row, row}, FromListOptions().batch_size(std::vector<int64_t>{3})),
                      ValueError, {"[3]", "length of the list (2)"});
  TD_EXPECT_THROW_MSG(from_list({row, Value(at::zeros({2}))}), TypeError, {"element 1", "Tensor"});
  TD_EXPECT_THROW_MSG(from_list({row}, FromListOptions().batch_size(std::vector<int64_t>{1}).auto_batch_size(true)),
                      ValueError, {"auto_batch_size"});
  TD_EXPECT_THROW_MSG(from_list(c10::IValue(at::zeros({1}))), TypeError, {"needs a list"});
}

TEST(FromKeys, OneValueUnderEveryKey) {
  TensorDict z = fromkeys({"a", {"n", "b"}});
  EXPECT_EQ(z.batch_size().size(), 0u);
  EXPECT_EQ(z.get("a").scalar_type(), at::kLong);
  EXPECT_EQ(z.get("a").item<int64_t>(), 0);
  EXPECT_EQ(z.get({"n", "b"}).item<int64_t>(), 0);
  TensorDict f = fromkeys({"x", "y", "x"}, at::full({2}, 1.5));
  EXPECT_EQ(f.num_keys(), 2u);
  EXPECT_TRUE(f.get("y").equal(at::full({2}, 1.5)));
  TensorDict s = fromkeys({"x"}, "label");
  EXPECT_EQ(s.get_non_tensor("x"), "label");
  EXPECT_THROW(fromkeys({"a", {"a", "b"}}), c10::Error);  // "a" is a tensor, not a level
}

TEST(Utils, UnravelKey) {
  EXPECT_EQ(unravel_key({"a"}), NestedKey("a"));
  EXPECT_EQ(unravel_key({"a", NestedKey{"b", "c"}}), (NestedKey{"a", "b", "c"}));
  EXPECT_EQ(unravel_key_list({{"a", NestedKey{"b"}}, {"c"}}),
            (std::vector<NestedKey>{NestedKey{"a", "b"}, NestedKey("c")}));
  TD_EXPECT_THROW_MSG(unravel_key({}), ValueError, {"at least one part"});
}

TEST(Utils, LeafPredicates) {
  TensorDict td({{"a", at::zeros({2})}, {"n", {{"b", at::zeros({2})}, {"s", "text"}}}}, {2});
  const KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true);
  EXPECT_EQ(KeysRepr(td.keys(KeysOptions(leaves).is_leaf(default_is_leaf))), "['a', ('n', 'b')]");
  EXPECT_EQ(KeysRepr(td.keys(KeysOptions(leaves).is_leaf(is_leaf_nontensor))),
            "['a', ('n', 'b'), ('n', 's')]");
  EXPECT_EQ(KeysRepr(td.keys(KeysOptions(leaves).is_leaf(is_leaf_nontensor))), KeysRepr(td.keys(leaves)));
  // Without leaves_only, the non-tensor entry is a node under default_is_leaf: still listed.
  EXPECT_EQ(td.keys(KeysOptions().include_nested(true).is_leaf(default_is_leaf)).size(), 4u);
}

TEST(Utils, MergeTensordicts) {
  TensorDict td0({{"a", {{"b0", at::scalar_tensor(0, at::kLong)}}}, {"common", at::scalar_tensor(0, at::kLong)}}, {});
  TensorDict td1({{"a", {{"b1", at::scalar_tensor(1, at::kLong)}}}, {"f", {{"g", at::scalar_tensor(1, at::kLong)}}}, {"common", at::scalar_tensor(1, at::kLong)}}, {});
  TensorDict td2({{"a", {{"b2", at::scalar_tensor(2, at::kLong)}}}, {"f", {{"g", at::scalar_tensor(2, at::kLong)}}}, {"common", at::scalar_tensor(2, at::kLong)}}, {});
  TensorDict first = merge_tensordicts({td0, td1, td2});
  EXPECT_EQ(first.get("common").item<int64_t>(), 0);
  EXPECT_EQ(first.get({"f", "g"}).item<int64_t>(), 1);
  EXPECT_EQ(first.get({"a", "b2"}).item<int64_t>(), 2);
  TensorDict stacked = merge_tensordicts(
      {td0, td1, td2}, MergeOptions().callback_exist([](const std::vector<at::Tensor>& v) { return at::stack(v); }));
  EXPECT_TRUE(stacked.get("common").equal(at::tensor({0, 1, 2}, at::kLong)));
  EXPECT_EQ(stacked.get({"f", "g"}).item<int64_t>(), 1);  // not in every input: first value
  TensorDict summed = merge_tensordicts(
      {td0, td1}, MergeOptions().callbacks({{NestedKey("common"), [](const std::vector<at::Tensor>& v) {
                                               return v[0] + v[1] + 10;
                                             }}}));
  EXPECT_EQ(summed.get("common").item<int64_t>(), 11);
  TD_EXPECT_THROW_MSG(merge_tensordicts({td0}), ValueError, {"at least 2", "got 1"});
  TensorDict batched({{"x", at::zeros({4})}}, {4});
  TensorDict other({{"x", at::zeros({3})}, {"y", at::zeros({3})}}, {3});
  TD_EXPECT_THROW_MSG(merge_tensordicts({batched, other}), BatchSizeError, {"'y'"});
}

TEST(Utils, AssertClose) {
  TensorDict a({{"x", at::ones({3})}, {"n", {{"i", at::arange(3)}}}, {"s", "t"}}, {3});
  TensorDict b = a.clone();
  EXPECT_TRUE(assert_close(a, b));
  b.set({"n", "i"}, at::tensor({0, 1, 3}, at::kLong));
  TD_EXPECT_THROW_MSG(assert_close(a, b, AssertCloseOptions().msg("step 4")), c10::Error,
                      {"step 4", "('n', 'i')", "1 of 3 elements differ", "largest absolute difference 1"});
  TensorDict c = a.clone();
  c.set("x", at::ones({3}) + 1e-7);  // within float32's default tolerance
  EXPECT_TRUE(assert_close(a, c));
  c.set("x", at::ones({3}) + 1e-3);
  TD_EXPECT_THROW_MSG(assert_close(a, c), c10::Error, {"'x'", "rtol 1.3e-06"});
  EXPECT_TRUE(assert_close(a, c, AssertCloseOptions().atol(1e-2)));
  TensorDict d = a.clone();
  d.set("x", at::ones({3}, at::kDouble));
  TD_EXPECT_THROW_MSG(assert_close(a, d), c10::Error, {"'x'", "Float", "Double"});
  TensorDict e = a.clone();
  e.set("extra", at::zeros({3}));
  TD_EXPECT_THROW_MSG(assert_close(a, e), c10::Error, {"'extra'", "only in expected"});
  EXPECT_TRUE(assert_close(a, e, AssertCloseOptions().intersection(true)));
  TensorDict nan_a({{"x", at::full({2}, NAN)}}, {2});
  EXPECT_TRUE(assert_close(nan_a, nan_a.clone()));
  TD_EXPECT_THROW_MSG(assert_close(nan_a, nan_a.clone(), AssertCloseOptions().equal_nan(false)),
                      c10::Error, {"'x'"});
}

TEST(Utils, ParseTensorDictString) {
  TensorDict td({{"a", at::ones({3, 4}, at::kDouble)},
                 {"n", TensorDict({{"x", at::ones({3, 2}, at::kInt)}, {"s", "skip me (really)"}}, {3, 2})},
                 {"flag", at::ones({3}, at::kBool)}},
                {3});
  std::ostringstream os;
  os << td;
  TensorDict parsed = parse_tensor_dict_string(os.str());
  EXPECT_EQ(parsed.batch_size().vec(), std::vector<int64_t>{3});
  EXPECT_EQ(parsed.get("a").scalar_type(), at::kDouble);
  EXPECT_TRUE(parsed.get("a").equal(at::zeros({3, 4}, at::kDouble)));  // zeros of each shape
  EXPECT_EQ(parsed.get_tensordict("n").batch_size().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(parsed.get({"n", "x"}).scalar_type(), at::kInt);
  EXPECT_FALSE(parsed.contains({"n", "s"}));  // non-tensor data is skipped, as upstream
  EXPECT_EQ(parsed.get("flag").scalar_type(), at::kBool);
  TD_EXPECT_THROW_MSG(parse_tensor_dict_string("TensorDict(fields={a: Tensor(shape=torch.Size([2]), "
                                               "device=cpu, dtype=torch.nope, is_shared=False)}"),
                      ValueError, {"torch.nope"});
  TD_EXPECT_THROW_MSG(parse_tensor_dict_string("Dict()"), ValueError, {"'TensorDict('", "offset 0"});
}

}  // namespace
}  // namespace td
