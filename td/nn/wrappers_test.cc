#include "td/nn/wrappers.h"

#include <gtest/gtest.h>
#include <torch/nn.h>

#include <sstream>
#include <vector>

#include "td/core/testing.h"
#include "td/nn/functional.h"
#include "td/nn/scale.h"
#include "td/nn/sequence.h"

namespace {

namespace tnn = torch::nn;
using td::NestedKey;
using td::TensorDict;
using td::nn::TensorDictModule;
using Keys = std::vector<NestedKey>;

// A wrapper that changes the wrapped module's output (as torchrl's exploration wrappers do).
struct AddOneImpl : td::nn::TensorDictModuleWrapperImpl {
  using TensorDictModuleWrapperImpl::TensorDictModuleWrapperImpl;
  TensorDict forward(const TensorDict& td) override {
    TensorDict out = td_module()->forward(td);
    out.set("y", out.get("y") + 1);
    return out;
  }

 protected:
  std::shared_ptr<td::nn::TensorDictModuleWrapperImpl> make_like(
      std::shared_ptr<td::nn::TensorDictModuleBase> m) const override {
    return std::make_shared<AddOneImpl>(std::move(m));
  }
};

TEST(TensorDictModuleWrapper, BehavesAsTheWrappedModule) {
  tnn::Linear lin(3, 2);
  TensorDictModule inner(lin, {"x"}, {"y"});
  td::nn::TensorDictModuleWrapper w(inner);
  EXPECT_EQ(w->in_keys(), (Keys{"x"}));
  EXPECT_EQ(w->out_keys(), (Keys{"y"}));
  EXPECT_EQ(w->td_module(), inner.ptr());
  const at::Tensor x = at::randn({4, 3});
  TensorDict data({{"x", x}}, {4});
  w(data);
  EXPECT_TRUE(at::allclose(data.get("y"), lin(x)));
  EXPECT_TRUE(at::allclose(w->forward_tensors({x})[0], lin(x)));
  // Its parameters are the wrapped module's, under "td_module".
  const TensorDict params = td::nn::from_module(*w);
  EXPECT_TRUE(params.contains({"td_module", "module", "weight"}));
  EXPECT_EQ(w->parameters().size(), 2u);
  // select_out_keys reaches the wrapped module.
  TensorDictModule two([](at::Tensor a) { return std::make_tuple(a + 1, a + 2); }, {"a"},
                       {"b", "c"});
  td::nn::TensorDictModuleWrapper w2(two);
  w2->select_out_keys({"c"});
  EXPECT_EQ(w2->out_keys(), (Keys{"c"}));
  EXPECT_EQ(two->out_keys(), (Keys{"c"}));
  w2->reset_out_keys();
  EXPECT_EQ(w2->out_keys(), (Keys{"b", "c"}));
  std::ostringstream os;
  os << *w;
  EXPECT_NE(os.str().find("td::nn::TensorDictModuleWrapper(in_keys=['x'], out_keys=['y'])"),
            std::string::npos)
      << os.str();
  TD_EXPECT_THROW_MSG(td::nn::TensorDictModuleWrapperImpl(nullptr), td::ValueError, {"null"});
}

TEST(TensorDictModuleWrapper, SubclassAndClone) {
  tnn::Linear lin(3, 2);
  auto w = std::make_shared<AddOneImpl>(TensorDictModule(lin, {"x"}, {"y"}));
  const at::Tensor x = at::randn({4, 3});
  TensorDict data({{"x", x}}, {4});
  w->forward(data);
  EXPECT_TRUE(at::allclose(data.get("y"), lin(x) + 1));
  // In a sequence, as any TensorDict module.
  td::nn::TensorDictSequential seq(
      w, TensorDictModule([](at::Tensor y) { return y * 2; }, {"y"}, {"z"}));
  TensorDict d2({{"x", x}}, {4});
  seq(d2);
  EXPECT_TRUE(at::allclose(d2.get("z"), (lin(x) + 1) * 2));
  // clone() keeps the subclass and deep-copies the parameters.
  auto copy = std::dynamic_pointer_cast<AddOneImpl>(w->clone());
  ASSERT_TRUE(copy);
  const TensorDict p = td::nn::from_module(*w), q = td::nn::from_module(*copy);
  EXPECT_TRUE(at::equal(p.get({"td_module", "module", "weight"}),
                        q.get({"td_module", "module", "weight"})));
  EXPECT_FALSE(p.get({"td_module", "module", "weight"})
                   .is_same(q.get({"td_module", "module", "weight"})));
  TensorDict d3({{"x", x}}, {4});
  copy->forward(d3);
  EXPECT_TRUE(at::allclose(d3.get("y"), lin(x) + 1));
}

TEST(WrapModule, WholeTensorDictSteps) {
  td::nn::WrapModule flatten([](const TensorDict& td) { return td.reshape({-1}); },
                             td::nn::WrapModuleOptions().in_keys({"x"}));
  EXPECT_EQ(flatten->in_keys(), (Keys{"x"}));
  td::nn::TensorDictSequential seq(
      TensorDictModule([](at::Tensor x) { return x * 2; }, {"x"}, {"y"}), flatten);
  TensorDict data({{"x", at::ones({2, 3})}}, {2, 3});
  TensorDict out = seq(data);
  EXPECT_EQ(out.batch_size(), at::IntArrayRef({6}));
  EXPECT_TRUE(at::equal(out.get("y"), at::full({6}, 2.0)));
  // inplace: the function's result is written into the input, which is returned.
  td::nn::WrapModule add([](const TensorDict& td) {
    return TensorDict({{"z", td.get("x") + 1}}, td.batch_size());
  }, td::nn::WrapModuleOptions().inplace(true).out_keys({"z"}));
  TensorDict d2({{"x", at::zeros({2})}}, {2});
  TensorDict r = add(d2);
  EXPECT_TRUE(r.is_same(d2));
  EXPECT_TRUE(at::equal(d2.get("z"), at::ones({2})));
  td::nn::WrapModule fresh([](const TensorDict& td) {
    return TensorDict({{"z", td.get("x") + 1}}, td.batch_size());
  });
  TensorDict d3({{"x", at::zeros({2})}}, {2});
  EXPECT_FALSE(fresh(d3).is_same(d3));
  EXPECT_FALSE(d3.contains("z"));
  TD_EXPECT_THROW_MSG(td::nn::WrapModuleImpl(nullptr), td::ValueError, {"empty"});
}

struct CustomImpl : tnn::Cloneable<CustomImpl>, td::nn::ResetsParameters {
  at::Tensor w;
  CustomImpl() { reset(); }
  void reset() override { w = register_parameter("w", at::ones({2})); }
  void reset_parameters() override {
    at::NoGradGuard no_grad;
    w.fill_(7.0);
  }
};

TEST(ResetParametersRecursive, ResetsEveryKnownModule) {
  tnn::Sequential net(tnn::Linear(4, 8), tnn::ReLU(), tnn::LayerNorm(tnn::LayerNormOptions({8})),
                      tnn::GRUCell(8, 3));
  TensorDictModule m(net, {"x"}, {"y"});
  const TensorDict before = td::nn::from_module(*m).clone();
  {
    at::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.fill_(0.5);
  }
  EXPECT_TRUE(td::nn::reset_parameters_recursive(m));
  const TensorDict after = td::nn::from_module(*m);
  const at::Tensor w = after.get({"module", "0", "weight"});
  EXPECT_FALSE(at::equal(w, at::full_like(w, 0.5)));
  // Linear's init: uniform in +-1/sqrt(fan_in).
  EXPECT_LE(w.abs().max().item<double>(), 1.0 / std::sqrt(4.0) + 1e-6);
  // LayerNorm back to ones and zeros.
  EXPECT_TRUE(at::equal(after.get({"module", "2", "weight"}), at::ones({8})));
  EXPECT_TRUE(at::equal(after.get({"module", "2", "bias"}), at::zeros({8})));
  EXPECT_FALSE(at::equal(after.get({"module", "3", "weight_ih"}),
                         at::full_like(before.get({"module", "3", "weight_ih"}), 0.5)));
  // Modules of yours, and AddStateIndependentNormalScale.
  auto custom = std::make_shared<CustomImpl>();
  EXPECT_TRUE(td::nn::reset_parameters_recursive(*custom));
  EXPECT_TRUE(at::equal(custom->w, at::full({2}, 7.0)));
  td::nn::AddStateIndependentNormalScale scale(
      td::nn::AddStateIndependentNormalScaleOptions().scale_shape({2}).init_value(0.25));
  {
    at::NoGradGuard no_grad;
    scale->state_independent_scale.fill_(3.0);
  }
  EXPECT_TRUE(td::nn::reset_parameters_recursive(scale));
  EXPECT_TRUE(at::equal(scale->state_independent_scale, at::full({2}, 0.25)));
  // Nothing to reset.
  TensorDictModule f([](at::Tensor x) { return x; }, {"x"}, {"y"});
  EXPECT_FALSE(td::nn::reset_parameters_recursive(f));
}

TEST(ResetParametersRecursive, FunctionalForm) {
  TensorDictModule m(tnn::Linear(4, 8), {"x"}, {"y"});
  const TensorDict own = td::nn::from_module(*m).clone();
  const TensorDict params =
      td::nn::from_module(*m).apply([](const at::Tensor& t) { return at::zeros_like(t); });
  const TensorDict fresh = td::nn::reset_parameters_recursive(*m, params);
  // The module keeps its tensors; the result holds new values, requiring grad.
  EXPECT_TRUE(at::equal(td::nn::from_module(*m).get({"module", "weight"}),
                        own.get({"module", "weight"})));
  const at::Tensor w = fresh.get({"module", "weight"});
  EXPECT_FALSE(at::equal(w, at::zeros_like(w)));
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  // As in Python, the given tensors share that memory.
  EXPECT_TRUE(at::equal(params.get({"module", "weight"}), w));
  TensorDict batched = params.expand({2});
  TD_EXPECT_THROW_MSG(td::nn::reset_parameters_recursive(*m, batched), td::ValueError,
                      {"batch size []", "torch.Size([2])"});
}

TEST(Dispatch, TensorsByName) {
  // Python's dispatch examples: in_keys [("a", "c"), "d"] are the arguments a_c and d.
  TensorDictModule m([](at::Tensor ac, at::Tensor d) { return std::make_tuple(ac + d, ac - d); },
                     {{"a", "c"}, "d"}, {"b", "e"});
  const at::Tensor ac = at::zeros({1, 2}), d = at::ones({1, 2});
  std::vector<at::Tensor> out = td::nn::dispatch(m, {{"a_c", ac}, {"d", d}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(at::equal(out[0], ac + d));
  EXPECT_TRUE(at::equal(out[1], ac - d));
  // Positional first, then by name; another separator.
  out = td::nn::dispatch(m, {ac}, {{"d", d}});
  EXPECT_TRUE(at::equal(out[0], ac + d));
  out = td::nn::dispatch(m, {{"asepc", ac}, {"d", d}},
                         td::nn::DispatchOptions().separator("sep"));
  EXPECT_TRUE(at::equal(out[1], ac - d));
  // A sequence, and the batch size inferred from the inputs.
  td::nn::TensorDictSequential seq(
      m, TensorDictModule([](at::Tensor b) { return b * 10; }, {"b"}, {"f"}));
  out = td::nn::dispatch(seq, {{"a_c", ac}, {"d", d}});
  EXPECT_EQ(out.size(), 3u);
  EXPECT_TRUE(at::equal(out[2], (ac + d) * 10));
  td::nn::WrapModule dims(
      [](const TensorDict& td) {
        TensorDict out = td;
        out.set("n", at::full(td.batch_size(), static_cast<double>(td.batch_dims())));
        return out;
      },
      td::nn::WrapModuleOptions().in_keys({"x"}).out_keys({"n"}));
  out = td::nn::dispatch(dims, {{"x", at::zeros({2, 3})}});
  EXPECT_TRUE(at::equal(out[0], at::full({2, 3}, 2.0)));
  out = td::nn::dispatch(dims, {{"x", at::zeros({2, 3})}},
                         td::nn::DispatchOptions().auto_batch_size(false));
  EXPECT_TRUE(at::equal(out[0], at::full({}, 0.0)));

  // Errors name the argument, the key and what was expected.
  TD_EXPECT_THROW_MSG(td::nn::dispatch(m, {{"a", ac}, {"d", d}}), td::KeyError,
                      {"'a'", "['a_c', 'd']"});
  TD_EXPECT_THROW_MSG(td::nn::dispatch(m, {{"d", d}}), td::KeyError,
                      {"('a', 'c')", "'a_c'", "position 0"});
  TD_EXPECT_THROW_MSG(td::nn::dispatch(m, {ac}, {{"a_c", ac}, {"d", d}}), td::ValueError,
                      {"('a', 'c')", "twice", "positionally and by name"});
  TD_EXPECT_THROW_MSG(td::nn::dispatch(m, {ac, d, d}, {}), td::ValueError,
                      {"3 positional tensors", "2 in keys"});
}

}  // namespace

TEST(AsTensorDictModule, DecoratesCallables) {
  auto decorate = td::nn::as_tensordict_module({"c"}, Keys{NestedKey{"out", "d"}});
  TensorDictModule plus_one = decorate([](at::Tensor c) { return c + 1; });
  TensorDict data({{"c", at::zeros({2})}}, {2});
  plus_one(data);
  EXPECT_TRUE(data.get({"out", "d"}).equal(at::ones({2})));
  EXPECT_EQ(td::KeysRepr(plus_one->in_keys()), "['c']");
  // Modules too, and the constructor's errors: a missing input names the key.
  TensorDictModule linear = td::nn::as_tensordict_module({"x"}, {"y"})(tnn::Linear(2, 3));
  TensorDict x({{"x", at::ones({4, 2})}}, {4});
  EXPECT_EQ(linear(x).get("y").sizes(), at::IntArrayRef({4, 3}));
  TD_EXPECT_THROW_MSG(plus_one(TensorDict({}, {2})), td::KeyError, {"'c'"});
}
