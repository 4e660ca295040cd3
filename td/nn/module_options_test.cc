// TensorDictModule's strict / get_kwargs options (how in keys are read) and method / bound
// arguments (Python's method= and method_kwargs=).
#include <gtest/gtest.h>
#include <torch/nn.h>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/testing.h"
#include "td/nn/common.h"

namespace {

namespace tnn = torch::nn;
using td::TensorDict;
using td::nn::GetKwargs;
using td::nn::TensorDictModule;
using td::nn::TensorDictModuleOptions;

// ---- strict / get_kwargs ------------------------------------------------------------------------

// x + (h when given, else 0): a module that accepts LibTorch's None (an undefined tensor).
at::Tensor AddOptional(at::Tensor x, at::Tensor h) { return h.defined() ? x + h : x.clone(); }

TEST(TensorDictModuleStrict, MissingKeyThrowsByDefaultNamingIt) {
  TensorDictModule m(AddOptional, {"x", "h"}, {"y"});
  EXPECT_TRUE(m->options().strict());
  TensorDict data({{"x", at::ones({3})}}, {3});
  TD_EXPECT_THROW_MSG(m(data), td::KeyError, {"'h'", "is missing", "['x']", "strict(false)"});
  EXPECT_FALSE(data.contains("y"));
}

TEST(TensorDictModuleStrict, NonStrictPassesUndefinedOrTheDefault) {
  TensorDictModule m(AddOptional, {"x", "h"}, {"y"}, TensorDictModuleOptions().strict(false));
  TensorDict data({{"x", at::ones({3})}}, {3});
  m(data);
  EXPECT_TRUE(data.get("y").equal(at::ones({3})));  // h was None
  data.set("h", at::full({3}, 2.0));
  m(data);
  EXPECT_TRUE(data.get("y").equal(at::full({3}, 3.0)));
  // get_kwargs.default_value stands in for the missing key.
  TensorDictModule d(AddOptional, {"x", "h"}, {"y"},
                     TensorDictModuleOptions().strict(false).get_kwargs(
                         GetKwargs().default_value(at::full({3}, 5.0))));
  TensorDict other({{"x", at::ones({3})}}, {3});
  d(other);
  EXPECT_TRUE(other.get("y").equal(at::full({3}, 6.0)));
}

TEST(TensorDictModuleStrict, ModuleRejectingNoneNamesTheMissingKeys) {
  TensorDictModule lin(tnn::Linear(3, 2), {"obs"}, {"y"}, TensorDictModuleOptions().strict(false));
  TensorDict data({{"other", at::ones({4, 3})}}, {4});
  TD_EXPECT_THROW_MSG(lin(data), c10::Error, {"['obs']", "missing", "undefined tensors"});
  EXPECT_FALSE(data.contains("y"));
}

TEST(TensorDictModuleGetKwargs, PadsARaggedLazyStackEntry) {
  // Two members whose "r" differ in length: a dense get() fails, as_padded_tensor pads.
  TensorDict a({{"r", at::ones({2})}}, {});
  TensorDict b({{"r", at::full({4}, 2.0)}}, {});
  td::LazyStackedTensorDict s = td::lazy_stack({a, b}, 0);
  auto sum_rows = [](at::Tensor r) { return r.sum(-1); };
  TensorDictModule plain(sum_rows, {"r"}, {"total"});
  TD_EXPECT_THROW_MSG(plain(s), c10::ValueError, {"'r'", "get_padded"});
  TensorDictModule padded(sum_rows, {"r"}, {"total"},
                          TensorDictModuleOptions().get_kwargs(
                              GetKwargs().as_padded_tensor(true).padding_value(-1)));
  TensorDict out = padded(s);
  EXPECT_TRUE(out.get("total").equal(at::tensor({0.0, 8.0})));  // 1 + 1 - 1 - 1, 2 * 4
  // Nested under a dense TensorDict: the key's path leads to the stack.
  TensorDict outer({{"stack", s}}, {2});
  TensorDictModule nested([](at::Tensor r) { return r; }, td::NestedKey{"stack", "r"}, "p",
                          TensorDictModuleOptions().get_kwargs(GetKwargs().as_padded_tensor(true)));
  EXPECT_EQ(nested(outer).get("p").sizes(), at::IntArrayRef({2, 4}));
  // as_nested_tensor: one nested tensor over the members.
  TensorDictModule as_nested(
      [](at::Tensor r) {
        std::vector<at::Tensor> parts = r.unbind(0);  // the members' tensors, [2] and [4]
        return at::stack({parts[0].sum(), parts[1].sum()});
      },
      {"r"}, {"sums"},
                             TensorDictModuleOptions().get_kwargs(
                                 GetKwargs().as_nested_tensor(true)));
  TensorDict single = td::lazy_stack({a, b}, 0);
  EXPECT_TRUE(as_nested->forward(single).get("sums").equal(at::tensor({2.0, 8.0})));
}

TEST(TensorDictModuleGetKwargs, PadsANestedTensorLeaf) {
  const at::Tensor nested =
      at::_nested_tensor_from_tensor_list({at::ones({2, 3}), at::full({4, 3}, 2.0)});
  TensorDict data({{"ragged", nested}}, {2});
  TensorDictModule m([](at::Tensor r) { return r.sum({1, 2}); }, {"ragged"}, {"s"},
                     TensorDictModuleOptions().get_kwargs(
                         GetKwargs().as_padded_tensor(true).padding_value(1.0)));
  EXPECT_TRUE(m(data).get("s").equal(at::tensor({12.0, 24.0})));  // 6 ones + 6 of padding
  TensorDictModule left([](at::Tensor r) { return r.sum({1, 2}); }, {"ragged"}, {"s"},
                        TensorDictModuleOptions().get_kwargs(
                            GetKwargs().as_padded_tensor(true).padding_side("left")));
  TD_EXPECT_THROW_MSG(left(data), c10::ValueError, {"'ragged'", "nested tensor", "'left'"});
}

// ---- method / bound arguments ---------------------------------------------------------------------

struct NetImpl : tnn::Cloneable<NetImpl> {
  NetImpl() { reset(); }
  void reset() override { lin = register_module("lin", tnn::Linear(3, 2)); }
  at::Tensor forward(at::Tensor x) { return lin(x); }
  at::Tensor act(at::Tensor x) { return lin(x).tanh(); }
  at::Tensor shift(const at::Tensor& x, int64_t amount) const {
    if (amount < 0) TD_FAIL(td::ValueError, "NetImpl::shift: amount must be >= 0, got ", amount);
    return x + amount;
  }
  tnn::Linear lin{nullptr};
};
TORCH_MODULE(Net);

TEST(TensorDictModuleMethod, CallsTheMethodAndExposesTheModule) {
  Net net;
  TensorDictModule m(net, &NetImpl::act, {"obs"}, {"action"});
  TensorDict data({{"obs", at::randn({4, 3})}}, {4});
  m(data);
  EXPECT_TRUE(at::allclose(data.get("action"), net->lin(data.get("obs")).tanh()));
  EXPECT_EQ(m->parameters().size(), 2u);  // the module's, unlike a lambda around net->act
  EXPECT_EQ(m->module(), net.ptr());
  // A shared_ptr to the module works the same way.
  TensorDictModule s(net.ptr(), &NetImpl::act, {"obs"}, {"a2"});
  EXPECT_TRUE(s(data).get("a2").equal(data.get("action")));
}

TEST(TensorDictModuleMethod, BoundArgumentsFollowTheTensors) {
  Net net;
  TensorDictModule m(net, td::nn::method(&NetImpl::shift, int64_t{2}), {"a"}, {"b"});
  TensorDict data({{"a", at::zeros({2})}}, {2});
  EXPECT_TRUE(m(data).get("b").equal(at::full({2}, 2.0)));
  EXPECT_EQ(m->forward_tensors({at::ones({})})[0].item<double>(), 3.0);
}

TEST(TensorDictModuleMethod, CloneCopiesTheModuleAndKeepsTheMethod) {
  Net net;
  TensorDictModule m(net, &NetImpl::act, {"obs"}, {"action"});
  auto copy = std::dynamic_pointer_cast<td::nn::TensorDictModuleImpl>(m->clone());
  ASSERT_NE(copy, nullptr);
  ASSERT_NE(copy->module(), net.ptr());
  {
    torch::NoGradGuard no_grad;
    net->lin->weight.fill_(0);  // changes the original only
  }
  TensorDict data({{"obs", at::ones({1, 3})}}, {1});
  const at::Tensor original = m(data.clone()).get("action");
  const at::Tensor copied = copy->forward(data.clone()).get("action");
  auto copied_net = std::dynamic_pointer_cast<NetImpl>(copy->module());
  ASSERT_NE(copied_net, nullptr);
  EXPECT_TRUE(at::allclose(copied, copied_net->lin(data.get("obs")).tanh()));
  EXPECT_FALSE(at::allclose(original, copied));
  // Bound arguments survive the copy.
  TensorDictModule k(net, td::nn::method(&NetImpl::shift, int64_t{4}), {"a"}, {"b"});
  auto k_copy = std::dynamic_pointer_cast<td::nn::TensorDictModuleImpl>(k->clone());
  EXPECT_EQ(k_copy->forward_tensors({at::zeros({})})[0].item<double>(), 4.0);
}

TEST(TensorDictModuleMethod, BadInput) {
  Net net;
  // The method takes one tensor before the bound argument; two in keys do not fit.
  TD_EXPECT_THROW_MSG(
      TensorDictModule(net, td::nn::method(&NetImpl::shift, int64_t{1}), {"a", "b"}, {"c"}),
      td::ValueError, {"NetImpl method", "takes 1 tensor argument", "['a', 'b']"});
  // A bound argument the method rejects: its error names the TensorDictModule.
  TensorDictModule bad(net, td::nn::method(&NetImpl::shift, int64_t{-1}), {"a"}, {"b"});
  TensorDict data({{"a", at::zeros({2})}}, {2});
  TD_EXPECT_THROW_MSG(bad(data), td::ValueError,
                      {"amount must be >= 0, got -1", "NetImpl method, in_keys=['a']"});
  EXPECT_FALSE(data.contains("b"));
  TD_EXPECT_THROW_MSG(TensorDictModule(std::shared_ptr<NetImpl>(), &NetImpl::act, {"a"}, {"b"}),
                      td::ValueError, {"null"});
}

}  // namespace
