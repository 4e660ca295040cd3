// Python tensordict.nn call styles in C++: in_keys by argument name (Kwargs callables, by_name()
// with arg_names), skipping modules whose outputs exist (SetSkipExisting), TensorDictSequential's
// tensordict_out (forward_into), and partial_tolerant sequences on lazy stacks.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <cmath>
#include <sstream>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/testing.h"
#include "td/nn/common.h"
#include "td/nn/probabilistic.h"
#include "td/nn/sequence.h"

namespace {

namespace tnn = torch::nn;
using td::TensorDict;
using td::nn::Kwargs;
using td::nn::TensorDictModule;
using td::nn::TensorDictModuleOptions;
using td::nn::TensorDictSequential;
using Keys = std::vector<td::NestedKey>;

// Two inputs with distinct roles, so that swapping them shows.
struct MergeLinearImpl : tnn::Module {
  MergeLinearImpl()
      : linear_1(register_module("linear_1", tnn::Linear(3, 5))),
        linear_2(register_module("linear_2", tnn::Linear(4, 5))) {}
  at::Tensor forward(const at::Tensor& x_1, const at::Tensor& x_2) {
    return linear_1(x_1) - linear_2(x_2);
  }
  tnn::Linear linear_1, linear_2;
};
TORCH_MODULE(MergeLinear);

// ---- in_keys by argument name ---------------------------------------------------------------------

TEST(Kwargs, NamedTensorsInOrder) {
  const at::Tensor x = at::ones({2}), h = at::zeros({2});
  Kwargs kw({{"x", x}, {"h", h}});
  EXPECT_EQ(kw.size(), 2u);
  EXPECT_TRUE(kw.at("x").is_same(x));
  EXPECT_TRUE(kw.at("h").is_same(h));
  EXPECT_EQ(kw.names(), (std::vector<std::string>{"x", "h"}));
  EXPECT_EQ(kw.find("z"), nullptr);
  TD_EXPECT_THROW_MSG(kw.at("z"), td::KeyError, {"no argument named 'z'", "['x', 'h']"});
  kw.set("x", h);
  EXPECT_TRUE(kw.at("x").is_same(h));
  EXPECT_EQ(kw.names(), (std::vector<std::string>{"x", "h"}));  // replaced in place
  TD_EXPECT_THROW_MSG(Kwargs({{"x", x}, {"x", h}}), td::ValueError, {"'x'", "twice"});
}

TEST(KeywordDispatch, KwargsCallableGetsTheEntriesByName) {
  // Python: TensorDictModule(lambda x, h: x - 2 * h, in_keys={"obs": "x", "hidden": "h"}, ...)
  auto fn = [](const Kwargs& kw) { return kw.at("x") - 2 * kw.at("h"); };
  const at::Tensor obs = at::randn({4, 3}), hidden = at::randn({4, 3});
  const at::Tensor expected = at::sub(obs, at::mul(hidden, 2));
  for (const auto& in_keys : {std::vector<std::pair<td::NestedKey, std::string>>{
                                  {"obs", "x"}, {"hidden", "h"}},
                              std::vector<std::pair<td::NestedKey, std::string>>{
                                  {"hidden", "h"}, {"obs", "x"}}}) {
    TensorDictModule m(fn, in_keys, {"y"});
    TensorDict data({{"obs", obs}, {"hidden", hidden}}, {4});
    m(data);
    EXPECT_TRUE(at::allclose(data.get("y"), expected));
  }
  TensorDictModule m(fn, {{"obs", "x"}, {"hidden", "h"}}, {"y"});
  EXPECT_EQ(m->in_keys(), (Keys{"obs", "hidden"}));  // still the keys
  EXPECT_EQ(m->in_key_args(), (std::vector<std::string>{"x", "h"}));
  // The tensor calling convention: inputs in in_keys order.
  EXPECT_TRUE(at::allclose(m->forward_tensors({obs, hidden})[0], expected));
  std::ostringstream os;
  os << *m;
  EXPECT_NE(os.str().find("in_keys={'obs': 'x', 'hidden': 'h'}"), std::string::npos) << os.str();

  // Nested keys, and by_name() works for Kwargs callables too.
  TensorDictModule nested(fn, td::nn::by_name({{{"agent", "obs"}, "x"}, {"hidden", "h"}}), {"y"});
  TensorDict data({{"agent", {{"obs", obs}}}, {"hidden", hidden}}, {4});
  nested(data);
  EXPECT_TRUE(at::allclose(data.get("y"), expected));

  // A missing key names the key and its argument; nothing is written.
  TensorDict partial({{"obs", obs}}, {4});
  TD_EXPECT_THROW_MSG(m(partial), td::KeyError,
                      {"input key 'hidden' (argument 'h') is missing", "['obs']"});
  EXPECT_FALSE(partial.contains("y"));
  // The callable asking for an argument it was not given: the names present and the module.
  TensorDictModule asks_z([](const Kwargs& kw) { return kw.at("z"); }, {{"obs", "x"}}, {"y"});
  TD_EXPECT_THROW_MSG(asks_z(partial), td::KeyError,
                      {"no argument named 'z'", "['x']", "in TensorDictModule(module=<callable>"});
  // Repeated keys or names, and names outside arg_names.
  TD_EXPECT_THROW_MSG(TensorDictModule(fn, {{"obs", "x"}, {"obs", "h"}}, {"y"}), td::ValueError,
                      {"in key 'obs' is given twice"});
  TD_EXPECT_THROW_MSG(TensorDictModule(fn, {{"obs", "x"}, {"hidden", "x"}}, {"y"}),
                      td::ValueError, {"argument 'x' is filled by two in keys", "'hidden'"});
  TD_EXPECT_THROW_MSG(TensorDictModule(fn, {{"obs", "x"}, {"hidden", "hh"}}, {"y"},
                                       TensorDictModuleOptions().arg_names({"x", "h"})),
                      td::ValueError, {"'hh'", "['x', 'h']"});
}

TEST(KeywordDispatch, PositionalModuleByArgumentNames) {
  MergeLinear merge;
  const at::Tensor a = at::randn({6, 3}), c = at::randn({6, 4});
  // The pairs' order does not matter: arg_names places them.
  TensorDictModule m(merge, td::nn::by_name({{"c", "x_2"}, {"a", "x_1"}}), {"out"},
                     TensorDictModuleOptions().arg_names({"x_1", "x_2"}));
  EXPECT_EQ(m->in_keys(), (Keys{"c", "a"}));
  TensorDict data({{"a", a}, {"c", c}}, {6});
  m(data);
  EXPECT_TRUE(at::allclose(data.get("out"), merge->forward(a, c)));
  EXPECT_TRUE(at::allclose(m->forward_tensors({c, a})[0], merge->forward(a, c)));
  EXPECT_EQ(m->parameters().size(), 4u);

  // A callable with tensor parameters, the same way.
  TensorDictModule masked([](at::Tensor x, at::Tensor mask) { return x * mask; },
                          td::nn::by_name({{"m", "mask"}, {"v", "x"}}), {"y"},
                          TensorDictModuleOptions().arg_names({"x", "mask"}));
  const at::Tensor v = at::randn({5}), mask = at::randint(2, {5}).to(at::kFloat);
  TensorDict d2({{"v", v}, {"m", mask}}, {5});
  masked(d2);
  EXPECT_TRUE(at::equal(d2.get("y"), at::mul(v, mask)));

  // Leaving out a trailing default argument: GRUCell's forward(input, hx = {}).
  tnn::GRUCell cell(4, 8);
  TensorDictModule first_step(cell, td::nn::by_name({{"obs", "input"}}), {"h1"},
                              TensorDictModuleOptions().arg_names({"input", "hx"}));
  const at::Tensor obs = at::randn({3, 4}), h0 = at::randn({3, 8});
  TensorDict d3({{"obs", obs}, {"h0", h0}}, {3});
  first_step(d3);
  EXPECT_TRUE(at::allclose(d3.get("h1"), cell(obs)));
  TensorDictModule step(cell, td::nn::by_name({{"h0", "hx"}, {"obs", "input"}}), {"h1"},
                        TensorDictModuleOptions().arg_names({"input", "hx"}));
  step(d3);
  EXPECT_TRUE(at::allclose(d3.get("h1"), cell(obs, h0)));

  // Errors name the argument and what was expected.
  TD_EXPECT_THROW_MSG(TensorDictModule(merge, td::nn::by_name({{"a", "x_1"}}), {"out"}),
                      td::ValueError, {"{'a': 'x_1'}", "arg_names"});
  TD_EXPECT_THROW_MSG(TensorDictModule(merge, td::nn::by_name({{"a", "x_1"}, {"c", "x_3"}}),
                                       {"out"},
                                       TensorDictModuleOptions().arg_names({"x_1", "x_2"})),
                      td::ValueError, {"in key 'c' names argument 'x_3'", "['x_1', 'x_2']"});
  TD_EXPECT_THROW_MSG(TensorDictModule(cell, td::nn::by_name({{"h0", "hx"}}), {"h1"},
                                       TensorDictModuleOptions().arg_names({"input", "hx"})),
                      td::ValueError, {"argument 'input' (position 0", "trailing"});
  TensorDict missing({{"a", a}}, {6});
  TD_EXPECT_THROW_MSG(m(missing), td::KeyError, {"input key 'c' (argument 'x_2') is missing"});
  // Plain in_keys with arg_names: the names appear in the errors.
  TensorDictModule named(merge, {"a", "c"}, {"out"},
                         TensorDictModuleOptions().arg_names({"x_1", "x_2"}));
  TD_EXPECT_THROW_MSG(named(missing), td::KeyError, {"'c' (argument 'x_2')"});
  TD_EXPECT_THROW_MSG(TensorDictModule(merge, {"a", "c"}, {"out"},
                                       TensorDictModuleOptions().arg_names({"x_1"})),
                      td::ValueError, {"['x_1']", "in_keys lists 2"});
}

// ---- skip existing --------------------------------------------------------------------------------

TEST(SkipExisting, ScopeAndModuleDefault) {
  int calls = 0;
  TensorDictModule plus1([&calls](at::Tensor x) { ++calls; return x + 1; }, {"x"}, {"y"});
  const at::Tensor x = at::arange(3.0), y_old = at::full({3}, 7.0);
  TensorDict data({{"x", x}, {"y", y_old}}, {3});
  EXPECT_FALSE(td::nn::skip_existing().has_value());
  plus1(data);  // off by default: runs and overwrites
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(at::equal(data.get("y"), x + 1));
  {
    td::nn::SetSkipExisting skip(true);
    EXPECT_EQ(td::nn::skip_existing(), true);
    data.set("y", y_old);
    plus1(data);
    EXPECT_EQ(calls, 1);  // "y" exists: not run
    EXPECT_TRUE(data.get("y").is_same(y_old));
    TensorDict fresh({{"x", x}}, {3});
    plus1(fresh);  // "y" missing: runs
    EXPECT_EQ(calls, 2);
    EXPECT_TRUE(at::equal(fresh.get("y"), x + 1));
    {
      td::nn::SetSkipExisting off(false);
      plus1(data);
      EXPECT_EQ(calls, 3);
    }
    EXPECT_EQ(td::nn::skip_existing(), true);
  }
  EXPECT_FALSE(td::nn::skip_existing().has_value());

  // The per-module default, used outside any scope; a scope overrides it.
  TensorDictModule lazy([&calls](at::Tensor x) { ++calls; return x + 1; }, {"x"}, {"y"},
                        TensorDictModuleOptions().skip_existing(true));
  calls = 0;
  lazy(data);
  EXPECT_EQ(calls, 0);
  {
    td::nn::SetSkipExisting off(false);
    lazy(data);
    EXPECT_EQ(calls, 1);
  }
  lazy->set_skip_existing(false);
  lazy(data);
  EXPECT_EQ(calls, 2);
}

TEST(SkipExisting, AllOutKeysNeededAndInPlaceModulesRun) {
  td::nn::SetSkipExisting skip(true);
  int calls = 0;
  TensorDictModule two([&calls](at::Tensor x) { ++calls; return std::make_tuple(x + 1, x + 2); },
                       {"x"}, {"y", "z"});
  TensorDict data({{"x", at::zeros({2})}, {"y", at::ones({2})}}, {2});
  two(data);  // "z" missing: runs
  EXPECT_EQ(calls, 1);
  two(data);  // both present now
  EXPECT_EQ(calls, 1);
  // A module writing its own input always runs (as in Python).
  TensorDictModule inplace([&calls](at::Tensor x) { ++calls; return x + 1; }, {"x"}, {"x"});
  inplace(data);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(at::equal(data.get("x"), at::ones({2})));

  // kEmpty output mode: the existing outputs are what the result holds.
  TensorDictModule empty_out([&calls](at::Tensor x) { ++calls; return x * 10; }, {"x"}, {"y"},
                             td::nn::OutputMode::kEmpty);
  TensorDict out = empty_out(data);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(out.keys(), (Keys{"y"}));
  EXPECT_TRUE(out.get("y").is_same(data.get("y")));
}

TEST(SkipExisting, SequentialChecksEachModule) {
  int first = 0, second = 0;
  TensorDictSequential seq(
      TensorDictModule([&first](at::Tensor x) { ++first; return x + 1; }, {"x"}, {"y"}),
      TensorDictModule([&second](at::Tensor y) { ++second; return y * 2; }, {"y"}, {"z"}));
  const at::Tensor y = at::full({3}, 5.0);
  TensorDict data({{"x", at::zeros({3})}, {"y", y}}, {3});
  {
    td::nn::SetSkipExisting skip(true);
    seq(data);
  }
  EXPECT_EQ(first, 0);   // "y" existed
  EXPECT_EQ(second, 1);  // "z" did not: computed from the existing "y"
  EXPECT_TRUE(at::equal(data.get("z"), at::mul(y, 2)));
}

TEST(SkipExisting, ProbabilisticModule) {
  td::nn::ProbabilisticTensorDictModule prob(
      {"loc", "scale"}, {"a"}, td::nn::Normal::factory(),
      td::nn::ProbabilisticTensorDictModuleOptions().return_log_prob(true));
  const at::Tensor loc = at::randn({4}), scale = at::rand({4}) + 0.5, a = at::full({4}, 9.0);
  TensorDict data({{"loc", loc}, {"scale", scale}, {"a", a}}, {4});
  td::nn::SetSkipExisting skip(true);
  prob(data);  // the log-prob is missing: runs (deterministic: the mean)
  EXPECT_TRUE(at::equal(data.get("a"), loc));
  const at::Tensor lp = data.get("a_log_prob");
  EXPECT_TRUE(at::allclose(lp, -at::log(scale) - 0.5 * std::log(2 * M_PI)));
  data.set("a", a);
  prob(data);  // both present: not run
  EXPECT_TRUE(data.get("a").is_same(a));
  EXPECT_TRUE(data.get("a_log_prob").is_same(lp));
  // The module default, when no scope is live.
  td::nn::SetSkipExisting off(false);
  td::nn::ProbabilisticTensorDictModule lazy(
      {"loc", "scale"}, {"a"}, td::nn::Normal::factory(),
      td::nn::ProbabilisticTensorDictModuleOptions().skip_existing(true));
  lazy(data);  // the scope (false) wins
  EXPECT_TRUE(at::equal(data.get("a"), loc));
}

// ---- TensorDictSequential::forward_into -----------------------------------------------------------

TensorDictSequential PlusOneTimesTwo() {
  return TensorDictSequential(
      TensorDictModule([](at::Tensor x) { return x + 1; }, {"x"}, {"y"}),
      TensorDictModule([](at::Tensor y) { return y * 2; }, {"y"}, {{"next", "z"}}));
}

TEST(TensorDictSequential, ForwardIntoAnotherTensorDict) {
  TensorDictSequential seq = PlusOneTimesTwo();
  const at::Tensor x = at::randn({3});
  TensorDict data({{"x", x}, {"next", {{"w", at::zeros({3})}}}}, {3});
  TensorDict out({}, {3});
  TensorDict result = seq->forward_into(data, out);
  EXPECT_TRUE(result.is_same(out));
  EXPECT_EQ(out.keys(td::test::kLeaves), (Keys{"y", {"next", "z"}}));
  EXPECT_TRUE(at::allclose(out.get("y"), at::add(x, 1)));
  EXPECT_TRUE(at::allclose(out.get({"next", "z"}), at::mul(at::add(x, 1), 2)));
  // The input is unchanged, its nested TensorDict included.
  EXPECT_EQ(data.keys(td::test::kLeaves), (Keys{"x", {"next", "w"}}));

  // out = td: the same as forward(td).
  TensorDict same = seq->forward_into(data, data);
  EXPECT_TRUE(same.is_same(data));
  EXPECT_TRUE(at::allclose(data.get({"next", "z"}), at::mul(at::add(x, 1), 2)));

  // Only the selected out keys are written.
  TensorDictSequential selected = PlusOneTimesTwo();
  selected->select_out_keys({{"next", "z"}});
  TensorDict only_z({}, {3});
  selected->forward_into(TensorDict({{"x", x}}, {3}), only_z);
  EXPECT_EQ(only_z.keys(td::test::kLeaves), (Keys{{"next", "z"}}));
}

TEST(TensorDictSequential, ForwardIntoWritesNothingOnError) {
  // "y" fits out's batch size [3, 2]; "z" (a sum over the last dim) does not.
  TensorDictSequential seq(
      TensorDictModule([](at::Tensor x) { return x + 1; }, {"x"}, {"y"}),
      TensorDictModule([](at::Tensor y) { return y.sum(-1); }, {"y"}, {"z"}));
  TensorDict data({{"x", at::zeros({3, 2})}}, {3});
  TensorDict out({{"keep", at::ones({3, 2})}}, {3, 2});
  TD_EXPECT_THROW_MSG(seq->forward_into(data, out), td::BatchSizeError, {"'z'"});
  EXPECT_EQ(out.keys(), (Keys{"keep"}));
  EXPECT_EQ(data.keys(), (Keys{"x"}));
  // A failing module: neither TensorDict changes.
  TensorDictSequential failing(
      TensorDictModule([](at::Tensor x) { return x + 1; }, {"x"}, {"y"}),
      TensorDictModule(tnn::Linear(5, 1), {"y"}, {"z"}));
  TensorDict out2({}, {3});
  EXPECT_THROW(failing->forward_into(data, out2), c10::Error);
  EXPECT_EQ(out2.keys(), Keys{});
  EXPECT_EQ(data.keys(), (Keys{"x"}));
}

// ---- partial_tolerant on lazy stacks --------------------------------------------------------------

TensorDictSequential TolerantPolicy() {
  return TensorDictSequential(
      td::nn::TensorDictSequentialOptions().partial_tolerant(true),
      TensorDictModule([](at::Tensor obs) { return obs * 2; }, {"obs"}, {"action"}),
      TensorDictModule([](at::Tensor other) { return other - 1; }, {"other"}, {"value"}));
}

TEST(TensorDictSequential, PartialTolerantRunsOnLazyStackMembers) {
  const at::Tensor o0 = at::randn({4}), t1 = at::randn({4}), o2 = at::randn({4}),
                   t2 = at::randn({4});
  TensorDict m0({{"obs", o0}}, {});
  TensorDict m1({{"other", t1}}, {});
  TensorDict m2({{"obs", o2}, {"other", t2}}, {});
  td::LazyStackedTensorDict stack = td::lazy_stack({m0, m1, m2}, 0);
  TensorDict result = TolerantPolicy()(stack);
  EXPECT_TRUE(result.is_same(stack));
  EXPECT_EQ(m0.keys(), (Keys{"obs", "action"}));
  EXPECT_EQ(m1.keys(), (Keys{"other", "value"}));
  EXPECT_EQ(m2.keys(), (Keys{"obs", "other", "action", "value"}));
  EXPECT_TRUE(at::equal(m0.get("action"), at::mul(o0, 2)));
  EXPECT_TRUE(at::equal(m1.get("value"), at::sub(t1, 1)));
  EXPECT_TRUE(at::equal(m2.get("action"), at::mul(o2, 2)));
  EXPECT_TRUE(at::equal(m2.get("value"), at::sub(t2, 1)));

  // Members that are lazy stacks themselves are searched too.
  TensorDict a({{"obs", o0}}, {}), b({{"other", t1}}, {});
  td::LazyStackedTensorDict outer =
      td::lazy_stack({td::lazy_stack({a, b}, 0), td::lazy_stack({b.clone(), a.clone()}, 0)}, 0);
  TolerantPolicy()(outer);
  EXPECT_TRUE(at::equal(a.get("action"), at::mul(o0, 2)));
  EXPECT_TRUE(at::equal(b.get("value"), at::sub(t1, 1)));

  // Without partial_tolerant the missing key is an error.
  TensorDictSequential strict(
      TensorDictModule([](at::Tensor obs) { return obs * 2; }, {"obs"}, {"action"}));
  TD_EXPECT_THROW_MSG(strict(td::lazy_stack({TensorDict({{"obs", o0}}, {}),
                                             TensorDict({{"other", t1}}, {})},
                                            0)),
                      td::KeyError, {"'obs'"});
}

TEST(TensorDictSequential, PartialTolerantLazyStackAllOrNothing) {
  // The module fails on the second member holding "obs" (5 features for a Linear(4, 2)): no
  // member gets "action".
  TensorDictSequential seq(td::nn::TensorDictSequentialOptions().partial_tolerant(true),
                           TensorDictModule(tnn::Linear(4, 2), {"obs"}, {"action"}));
  TensorDict m0({{"obs", at::randn({4})}}, {});
  TensorDict m1({{"other", at::randn({4})}}, {});
  TensorDict m2({{"obs", at::randn({5})}}, {});
  EXPECT_THROW(seq(td::lazy_stack({m0, m1, m2}, 0)), c10::Error);
  EXPECT_FALSE(m0.contains("action"));
  EXPECT_FALSE(m2.contains("action"));
}

TEST(TensorDictSequential, ForwardIntoLazyStackMembers) {
  const at::Tensor o0 = at::randn({4}), t1 = at::randn({4});
  TensorDict m0({{"obs", o0}}, {});
  TensorDict m1({{"other", t1}}, {});
  td::LazyStackedTensorDict in = td::lazy_stack({m0, m1}, 0);
  TensorDict e0({}, {}), e1({}, {});
  td::LazyStackedTensorDict out = td::lazy_stack({e0, e1}, 0);
  TolerantPolicy()->forward_into(in, out);
  EXPECT_EQ(e0.keys(), (Keys{"action"}));
  EXPECT_EQ(e1.keys(), (Keys{"value"}));
  EXPECT_TRUE(at::equal(e0.get("action"), at::mul(o0, 2)));
  EXPECT_TRUE(at::equal(e1.get("value"), at::sub(t1, 1)));
  // The input's members are unchanged.
  EXPECT_EQ(m0.keys(), (Keys{"obs"}));
  EXPECT_EQ(m1.keys(), (Keys{"other"}));
}

}  // namespace
