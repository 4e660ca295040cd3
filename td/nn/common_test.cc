#include "td/nn/common.h"

#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/optim/sgd.h>

#include <sstream>

#include "td/core/testing.h"
#include "td/nn/functional.h"

namespace {

namespace tnn = torch::nn;
using td::nn::TensorDictModule;

std::vector<int64_t> Shape(const at::Tensor& t) { return t.sizes().vec(); }

// The tutorial's two-input module.
struct MergeLinearImpl : tnn::Module {
  MergeLinearImpl(int64_t in_1, int64_t in_2, int64_t out)
      : linear_1(register_module("linear_1", tnn::Linear(in_1, out))),
        linear_2(register_module("linear_2", tnn::Linear(in_2, out))) {}
  at::Tensor forward(const at::Tensor& x_1, const at::Tensor& x_2) {
    return (linear_1(x_1) + linear_2(x_2)) / 2;
  }
  tnn::Linear linear_1, linear_2;
};
TORCH_MODULE(MergeLinear);

// The tutorial's one-input, two-output module.
struct MultiHeadLinearImpl : tnn::Module {
  MultiHeadLinearImpl(int64_t in_1, int64_t out_1, int64_t out_2)
      : linear_1(register_module("linear_1", tnn::Linear(in_1, out_1))),
        linear_2(register_module("linear_2", tnn::Linear(in_1, out_2))) {}
  std::tuple<at::Tensor, at::Tensor> forward(at::Tensor x) { return {linear_1(x), linear_2(x)}; }
  tnn::Linear linear_1, linear_2;
};
TORCH_MODULE(MultiHeadLinear);

TEST(TensorDictModule, TutorialLinear) {
  td::TensorDict tensordict({{"a", at::randn({5, 3})}, {"b", at::randn({5, 4, 3})}}, {5});
  TensorDictModule linear(tnn::Linear(3, 10), {"a"}, {"a_out"});
  td::TensorDict out = linear(tensordict);
  EXPECT_TRUE(out.is_same(tensordict));
  EXPECT_EQ(td::KeysRepr(tensordict.keys()), "['a', 'b', 'a_out']");
  EXPECT_EQ(Shape(tensordict.get("a_out")), std::vector<int64_t>({5, 10}));
  // In place: the output replaces the input key.
  TensorDictModule inplace(tnn::Linear(3, 10), {"a"}, {"a"});
  inplace(tensordict);
  EXPECT_EQ(Shape(tensordict.get("a")), std::vector<int64_t>({5, 10}));
}

TEST(TensorDictModule, TutorialMergeAndMultiHead) {
  td::TensorDict tensordict(
      {{"a", at::randn({5, 3})}, {"b", at::randn({5, 4, 3})}, {"c", at::randn({5, 4})}}, {5});
  MergeLinear merge(3, 4, 10);
  TensorDictModule mergelinear(merge, {"a", "c"}, {"output"});
  mergelinear(tensordict);
  EXPECT_TRUE(at::allclose(tensordict.get("output"),
                           merge->forward(tensordict.get("a"), tensordict.get("c"))));
  TensorDictModule multihead(MultiHeadLinear(3, 4, 10), {"a"}, {"output_1", "output_2"});
  multihead(tensordict);
  EXPECT_EQ(Shape(tensordict.get("output_1")), std::vector<int64_t>({5, 4}));
  EXPECT_EQ(Shape(tensordict.get("output_2")), std::vector<int64_t>({5, 10}));
}

TEST(TensorDictModule, ReferenceTransformer) {
  // Seed: TensorDictModule(nn.Transformer(128), in_keys=["input", "tgt"], out_keys=["out"]).
  tnn::Transformer transformer(tnn::TransformerOptions(128, 8).num_encoder_layers(1)
                                   .num_decoder_layers(1).dim_feedforward(64));
  TensorDictModule module(transformer, {"input", "tgt"}, {"out"});
  const at::Tensor input = at::ones({2, 3, 128});
  const at::Tensor tgt = at::zeros({2, 3, 128});
  td::TensorDict data({{"input", input}, {"tgt", tgt}}, {2, 3});
  data = module(data);
  EXPECT_EQ(data.repr(),
            "TensorDict(\n"
            "    fields={\n"
            "        input: Tensor(shape=torch.Size([2, 3, 128]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        out: Tensor(shape=torch.Size([2, 3, 128]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        tgt: Tensor(shape=torch.Size([2, 3, 128]), device=cpu, dtype=torch.float32, "
            "is_shared=False)},\n"
            "    batch_size=torch.Size([2, 3]),\n"
            "    device=None,\n"
            "    is_shared=False)");
  // "We can also pass directly the tensors".
  std::vector<at::Tensor> out = module->forward_tensors({input, tgt});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), input.sizes());
}

TEST(TensorDictModule, ReferenceLambdaWithNestedKeys) {
  TensorDictModule module([](at::Tensor x) { return std::make_tuple(x - 1, x + 1); },
                          {{"input", "x"}}, {{"output", "x-1"}, {"output", "x+1"}});
  td::TensorDict data;
  data.set({"input", "x"}, at::zeros({}));
  td::TensorDict out = module(data);
  EXPECT_EQ(out.repr(),
            "TensorDict(\n"
            "    fields={\n"
            "        input: TensorDict(\n"
            "            fields={\n"
            "                x: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.float32, "
            "is_shared=False)},\n"
            "            batch_size=torch.Size([]),\n"
            "            device=None,\n"
            "            is_shared=False),\n"
            "        output: TensorDict(\n"
            "            fields={\n"
            "                x+1: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "                x-1: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.float32, "
            "is_shared=False)},\n"
            "            batch_size=torch.Size([]),\n"
            "            device=None,\n"
            "            is_shared=False)},\n"
            "    batch_size=torch.Size([]),\n"
            "    device=None,\n"
            "    is_shared=False)");
  EXPECT_EQ(out.get({"output", "x+1"}).item<float>(), 1.0f);
  EXPECT_EQ(out.get({"output", "x-1"}).item<float>(), -1.0f);
}

TEST(TensorDictModule, ReferencePopulateAndKeywordDispatch) {
  // module = TensorDictModule(lambda: torch.randn(3), in_keys=[], out_keys=["x"])
  TensorDictModule populate([] { return at::randn({3}); }, {}, {"x"});
  td::TensorDict filled = populate(td::TensorDict());
  EXPECT_EQ(Shape(filled.get("x")), std::vector<int64_t>({3}));
  // in_keys={'1': 'x', '2': 'y'}: in C++ the keys are passed in the order of the arguments.
  TensorDictModule add([](at::Tensor x, at::Tensor y) { return x + y; }, {"1", "2"}, {"z"});
  td::TensorDict data({{"1", at::ones({})}, {"2", at::ones({}) * 2}}, {});
  EXPECT_EQ(add(data).get("z").item<float>(), 3.0f);
}

TEST(TensorDictModule, ReferenceGRUCellFunctionalAndStateful) {
  td::TensorDict data({{"input", at::randn({3, 4})}, {"hidden", at::randn({3, 8})}}, {3});
  TensorDictModule td_module(tnn::GRUCell(4, 8), {"input", "hidden"}, {"output"});
  td::TensorDict params = td::nn::from_module(td_module);
  EXPECT_EQ(td::KeysRepr(params.keys(td::KeysOptions().include_nested(true).leaves_only(true))),
            "[('module', 'weight_ih'), ('module', 'weight_hh'), ('module', 'bias_ih'), "
            "('module', 'bias_hh')]");
  td::TensorDict td_functional;
  {
    auto guard = td::nn::to_module(params, td_module);
    td_functional = td_module(data.clone());
  }
  const std::string expected =
      "TensorDict(\n"
      "    fields={\n"
      "        hidden: Tensor(shape=torch.Size([3, 8]), device=cpu, dtype=torch.float32, "
      "is_shared=False),\n"
      "        input: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, "
      "is_shared=False),\n"
      "        output: Tensor(shape=torch.Size([3, 8]), device=cpu, dtype=torch.float32, "
      "is_shared=False)},\n"
      "    batch_size=torch.Size([3]),\n"
      "    device=None,\n"
      "    is_shared=False)";
  EXPECT_EQ(td_functional.repr(), expected);
  td::TensorDict td_stateful = td_module(data.clone());
  EXPECT_EQ(td_stateful.repr(), expected);
  EXPECT_TRUE(at::allclose(td_functional.get("output"), td_stateful.get("output")));
  // Other parameters really change the functional result.
  td::TensorDict zeros = params.apply([](const at::Tensor& t) { return at::zeros_like(t); });
  auto guard = td::nn::to_module(zeros, td_module);
  const at::Tensor h = data.get("hidden");
  EXPECT_TRUE(at::allclose(td_module(data.clone()).get("output"), 0.5 * h));
}

TEST(TensorDictModule, SelectAndResetOutKeys) {
  TensorDictModule mod([](at::Tensor x, at::Tensor y) { return std::make_tuple(x + 2, y + 2); },
                       {"a", "b"}, {"c", "d"});
  td::TensorDict data({{"a", at::zeros({})}, {"b", at::ones({})}}, {});
  EXPECT_EQ(td::KeysRepr(mod(data.copy()).keys()), "['a', 'b', 'c', 'd']");
  mod->select_out_keys({"d"});
  EXPECT_EQ(td::KeysRepr(mod->out_keys()), "['d']");
  EXPECT_EQ(td::KeysRepr(mod->out_keys_source()), "['c', 'd']");
  EXPECT_EQ(td::KeysRepr(mod(data.copy()).keys()), "['a', 'b', 'd']");
  // Dispatch with tensors: only the selected output, tensor(3.).
  std::vector<at::Tensor> out = mod->forward_tensors({at::zeros({}), at::ones({})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].item<float>(), 3.0f);
  mod->reset_out_keys();
  EXPECT_EQ(td::KeysRepr(mod(data.copy()).keys()), "['a', 'b', 'c', 'd']");
  TD_EXPECT_THROW_MSG(mod->select_out_keys({"zz"}), td::KeyError, {"'zz'", "['c', 'd']"});
}

TEST(TensorDictModule, DiscardAndOutputModes) {
  TensorDictModule mod([](at::Tensor x) { return std::make_tuple(x + 1, x + 2); }, {"x"},
                       {"_", "y"});
  td::TensorDict data({{"x", at::zeros({2})}}, {2});
  mod(data);
  EXPECT_EQ(td::KeysRepr(data.keys()), "['x', 'y']");
  EXPECT_EQ(mod->forward_tensors({at::zeros({2})}).size(), 1u);

  td::TensorDict input({{"x", at::zeros({2})}}, {2});
  mod->set_output_mode(td::nn::OutputMode::kCopy);
  td::TensorDict copied = mod(input);
  EXPECT_FALSE(copied.is_same(input));
  EXPECT_EQ(td::KeysRepr(input.keys()), "['x']");
  EXPECT_EQ(td::KeysRepr(copied.keys()), "['x', 'y']");
  mod->set_output_mode(td::nn::OutputMode::kEmpty);
  td::TensorDict empty = mod(input);
  EXPECT_EQ(td::KeysRepr(empty.keys()), "['y']");
  EXPECT_EQ(empty.batch_size(), at::IntArrayRef({2}));
  TensorDictModule into([](at::Tensor x) { return x * 3; }, {"x"}, {"z"});
  td::TensorDict dest({}, {2});
  EXPECT_TRUE(into->forward_into(input, dest).is_same(dest));
  EXPECT_EQ(td::KeysRepr(dest.keys()), "['z']");
  EXPECT_EQ(td::KeysRepr(input.keys()), "['x']");
}

TEST(TensorDictModule, ErrorsNameKeysAndModule) {
  TensorDictModule linear(tnn::Linear(3, 4), {"a"}, {"b"});
  td::TensorDict data({{"x", at::zeros({2, 3})}}, {2});
  TD_EXPECT_THROW_MSG(linear(data), td::KeyError, {"'a'", "torch::nn::Linear", "['x']"});
  TensorDictModule two([](at::Tensor x) { return std::make_tuple(x, x); }, {"x"}, {"y"});
  TD_EXPECT_THROW_MSG(two(data), td::ValueError, {"2 tensor(s)", "['y']"});
  EXPECT_FALSE(data.contains("y"));
  TD_EXPECT_THROW_MSG(TensorDictModule([](at::Tensor x) { return x; }, {"x", "z"}, {"y"}),
                      td::ValueError, {"1 tensor argument", "['x', 'z']"});
  TD_EXPECT_THROW_MSG(TensorDictModule([](at::Tensor x) { return x; }, {"x"}, {"y", "y"}),
                      td::ValueError, {"'y'", "twice"});
  // The second output does not fit the batch size: nothing is written, not even the first.
  TensorDictModule bad([](at::Tensor x) { return std::make_tuple(x, at::zeros({5})); }, {"x"},
                       {"ok", {"nested", "bad"}});
  TD_EXPECT_THROW_MSG(bad(data), td::BatchSizeError, {"('nested', 'bad')", "torch.Size([5])"});
  EXPECT_EQ(td::KeysRepr(data.keys()), "['x']");
  // Errors of the wrapped module say which TensorDictModule it was.
  TensorDictModule wrong(tnn::Linear(5, 4), {"x"}, {"y"});
  TD_EXPECT_THROW_MSG(wrong(data), c10::Error, {"TensorDictModule(module=torch::nn::Linear"});
  // A module returning a TensorDict without the out key.
  TensorDictModule returns_td([](at::Tensor x) { return td::TensorDict({{"q", x}}, {2}); },
                              {"x"}, {"y"});
  TD_EXPECT_THROW_MSG(returns_td(data), td::KeyError, {"'y'", "['q']"});
}

TEST(TensorDictModule, ReturnsTensorDictOrVector) {
  TensorDictModule returns_td(
      [](at::Tensor x) { return td::TensorDict({{"q", x + 1}, {"r", x + 2}}, {2}); }, {"x"},
      {"r"});
  td::TensorDict data({{"x", at::zeros({2})}}, {2});
  returns_td(data);
  EXPECT_EQ(td::KeysRepr(data.keys()), "['x', 'r']");
  TensorDictModule variadic(
      [](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in[0] + in[1]}; },
      {"x", "r"}, {"s"});
  EXPECT_TRUE(at::equal(variadic(data).get("s"), at::full({2}, 2.0)));
}

TEST(TensorDictModule, LstmSequentialAndAnyModule) {
  td::TensorDict data({{"x", at::randn({5, 3, 4})}}, {});
  tnn::LSTM lstm(tnn::LSTMOptions(4, 6));
  TensorDictModule recurrent(lstm, {"x"}, {"out", "h", "c"});
  recurrent(data);
  EXPECT_EQ(Shape(data.get("out")), std::vector<int64_t>({5, 3, 6}));
  EXPECT_EQ(Shape(data.get("h")), std::vector<int64_t>({1, 3, 6}));

  tnn::Sequential mlp(tnn::Linear(4, 8), tnn::ReLU(), tnn::Linear(8, 2));
  td::TensorDict flat({{"x", at::randn({7, 4})}}, {7});
  TensorDictModule seq(mlp, {"x"}, {"y"});
  seq(flat);
  EXPECT_TRUE(at::allclose(flat.get("y"), mlp->forward(flat.get("x"))));
  TensorDictModule any(tnn::AnyModule(tnn::Linear(4, 3)), {"x"}, {"z"});
  EXPECT_EQ(Shape(any(flat).get("z")), std::vector<int64_t>({7, 3}));
}

TEST(TensorDictModule, IsATorchModule) {
  tnn::Linear lin(3, 4);
  TensorDictModule module(lin, {"a"}, {"b"});
  // Printing shows the keys and the wrapped module.
  std::ostringstream os;
  os << *module;
  EXPECT_NE(os.str().find("td::nn::TensorDictModule(in_keys=['a'], out_keys=['b'])"),
            std::string::npos)
      << os.str();
  EXPECT_NE(os.str().find("(module): torch::nn::Linear(in_features=3, out_features=4"),
            std::string::npos)
      << os.str();
  std::ostringstream os2;
  os2 << *TensorDictModule([](at::Tensor x) { return x; }, {"a"}, {"b"});
  EXPECT_EQ(os2.str(), "td::nn::TensorDictModule(module=<callable>, in_keys=['a'], out_keys=['b'])");

  // parameters() reach optimizers.
  EXPECT_EQ(module->parameters().size(), 2u);
  torch::optim::SGD sgd(module->parameters(), torch::optim::SGDOptions(0.1));
  const at::Tensor before = lin->weight.detach().clone();
  td::TensorDict data({{"a", at::randn({6, 3})}}, {6});
  module(data).get("b").sum().backward();
  sgd.step();
  EXPECT_FALSE(at::equal(lin->weight, before));

  // to() converts the wrapped module.
  module->to(at::kDouble);
  EXPECT_EQ(lin->weight.scalar_type(), at::kDouble);
  td::TensorDict ddata({{"a", at::randn({6, 3}, at::kDouble)}}, {6});
  EXPECT_EQ(module(ddata).get("b").scalar_type(), at::kDouble);
  module->to(at::kFloat);

  // Inside torch::nn::Sequential.
  tnn::Sequential pipeline(TensorDictModule(tnn::Linear(3, 4), {"a"}, {"h"}),
                           TensorDictModule(tnn::Linear(4, 2), {"h"}, {"y"}));
  td::TensorDict result = pipeline->forward<td::TensorDict>(data);
  EXPECT_EQ(Shape(result.get("y")), std::vector<int64_t>({6, 2}));

  // clone() copies the wrapped module: same values, independent tensors.
  auto copy = std::dynamic_pointer_cast<td::nn::TensorDictModuleImpl>(module->clone());
  ASSERT_TRUE(copy);
  td::TensorDict a = module(data.copy());
  td::TensorDict b = copy->forward(data.copy());
  EXPECT_TRUE(at::allclose(a.get("b"), b.get("b")));
  {
    torch::NoGradGuard no_grad;
    lin->weight.zero_();
  }
  EXPECT_FALSE(at::allclose(copy->forward(data.copy()).get("b"), module(data.copy()).get("b")));
  EXPECT_EQ(copy->parameters().size(), 2u);
  EXPECT_FALSE(copy->parameters()[0].is_same(lin->weight));
}

}  // namespace

namespace {

// A module holder's forward() signature is known: a count mismatch that default arguments cannot
// explain (more in keys than parameters) fails at construction, naming the in keys; fewer in keys
// than parameters is left to the call (default arguments), whose error names the in keys.
TEST(TensorDictModule, ArityOfModulesIsCheckedAtConstruction) {
  TD_EXPECT_THROW_MSG(TensorDictModule(tnn::Linear(3, 4), {"a", "b"}, {"y"}), td::ValueError,
                      {"torch::nn::Linear", "1 tensor argument", "['a', 'b']"});
  TensorDictModule one_in(MergeLinear(3, 4, 10), {"a"}, {"y"});
  td::TensorDict data({{"a", at::zeros({2, 3})}}, {2});
  TD_EXPECT_THROW_MSG(one_in(data), c10::Error,
                      {"takes 2 tensor argument(s)", "in_keys lists 1: ['a']"});
  EXPECT_FALSE(data.contains("y"));
  // An AnyModule hides forward()'s signature: the call-time error names the in keys.
  TensorDictModule any(tnn::AnyModule(tnn::Linear(3, 4)), {"a", "b"}, {"y"});
  data.set("b", at::zeros({2, 3}));
  TD_EXPECT_THROW_MSG(any(data), c10::Error, {"in_keys=['a', 'b']"});
  EXPECT_FALSE(data.contains("y"));
}

// A lambda's captured modules are registered when passed alongside it: parameters() lists them
// and an optimizer built from it changes them.
TEST(TensorDictModule, CapturedModulesAreRegistered) {
  tnn::Linear lin(3, 2);
  tnn::Linear head(2, 1);
  TensorDictModule policy({{"lin", lin}, {"head", head.ptr()}},
                          [lin, head](at::Tensor x) mutable { return head(lin(x).tanh()); },
                          {"obs"}, {"value"});
  EXPECT_EQ(policy->parameters().size(), 4u);
  const auto named = policy->named_parameters();
  EXPECT_TRUE(named.contains("lin.weight"));
  EXPECT_TRUE(named.contains("head.bias"));
  at::Tensor before = lin->weight.detach().clone();
  torch::optim::SGD sgd(policy->parameters(), 0.5);
  td::TensorDict data({{"obs", at::randn({8, 3})}}, {8});
  policy(data).get("value").pow(2).sum().backward();
  sgd.step();
  EXPECT_FALSE(at::equal(lin->weight.detach(), before));
  // Without the module list the lambda's Linear is invisible (the documented difference).
  TensorDictModule bare([lin](at::Tensor x) mutable { return lin(x); }, {"obs"}, {"h"});
  EXPECT_TRUE(bare->parameters().empty());
  TD_EXPECT_THROW_MSG(policy->clone(), td::ValueError, {"captured modules", "lin"});
  TD_EXPECT_THROW_MSG(TensorDictModule({{"lin", lin}}, [](at::Tensor x) { return x; },
                                       {"a", "b"}, {"y"}),
                      td::ValueError, {"['a', 'b']"});
}

// One key alone stands for a list of one, for in keys and out keys alike, as Python accepts
// out_keys="loc": a literal, a std::string, a NestedKey (a nested key alone needs the NestedKey
// or double braces; a braced pair of strings is two keys).
TEST(TensorDictModule, OneKeyAloneIsAList) {
  td::TensorDict data({{"obs", at::randn({5, 4})}, {"next", {{"obs", at::randn({5, 4})}}}}, {5});
  TensorDictModule policy(tnn::Linear(4, 2), {"obs"}, "loc");
  EXPECT_EQ(td::KeysRepr(policy->out_keys()), "['loc']");
  EXPECT_EQ(Shape(policy(data).get("loc")), std::vector<int64_t>({5, 2}));
  TensorDictModule both(tnn::Linear(4, 2), "obs", std::string("scale"));
  EXPECT_EQ(td::KeysRepr(both->in_keys()), "['obs']");
  EXPECT_EQ(Shape(both(data).get("scale")), std::vector<int64_t>({5, 2}));
  TensorDictModule nested(tnn::Linear(4, 2), td::NestedKey({"next", "obs"}),
                          td::NestedKey({"next", "loc"}), td::nn::OutputMode::kCopy);
  EXPECT_EQ(td::KeysRepr(nested->in_keys()), "[('next', 'obs')]");
  EXPECT_EQ(Shape(nested(data).get({"next", "loc"})), std::vector<int64_t>({5, 2}));
  EXPECT_FALSE(data.contains({"next", "loc"}));  // kCopy: the input is left alone
  TensorDictModule same(tnn::Linear(4, 2), {{"next", "obs"}}, {{"next", "loc"}});
  EXPECT_EQ(td::KeysRepr(same->out_keys()), "[('next', 'loc')]");
  TensorDictModule two([](at::Tensor x) { return std::make_tuple(x - 1, x + 1); }, "obs",
                       {"lo", "hi"});
  EXPECT_EQ(td::KeysRepr(two->out_keys()), "['lo', 'hi']");
  // The other constructors take it too: options, a Kwargs callable, by_name, captured modules.
  TensorDictModule skip(tnn::Linear(4, 2), "obs", "loc",
                        td::nn::TensorDictModuleOptions().skip_existing(true));
  EXPECT_EQ(td::KeysRepr(skip->out_keys()), "['loc']");
  TensorDictModule kw([](const td::nn::Kwargs& k) { return k.at("x") * 2; }, {{"obs", "x"}}, "y");
  EXPECT_EQ(Shape(kw(data).get("y")), std::vector<int64_t>({5, 4}));
  TensorDictModule named(tnn::Linear(4, 2), td::nn::by_name({{"obs", "input"}}), "z",
                         td::nn::TensorDictModuleOptions().arg_names({"input"}));
  EXPECT_EQ(Shape(named(data).get("z")), std::vector<int64_t>({5, 2}));
  tnn::Linear lin(4, 3);
  TensorDictModule captured({{"lin", lin}}, [lin](at::Tensor x) mutable { return lin(x); }, "obs",
                            "h");
  EXPECT_EQ(Shape(captured(data).get("h")), std::vector<int64_t>({5, 3}));
  // The argument count is checked against the one key as against any list.
  TD_EXPECT_THROW_MSG(
      TensorDictModule([](at::Tensor a, at::Tensor b) { return a + b; }, "obs", "loc"),
      td::ValueError, {"['obs']"});
}

}  // namespace
