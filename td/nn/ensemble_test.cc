#include "td/nn/ensemble.h"

#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/optim/sgd.h>

#include "td/core/stack.h"
#include "td/core/testing.h"
#include "td/nn/distributions.h"
#include "td/nn/probabilistic.h"
#include "td/nn/sequence.h"

namespace {

namespace tnn = torch::nn;
using td::nn::TensorDictModule;

TEST(Ensemble, ReadmeFunctionalProgramming) {
  tnn::Linear layer1(3, 4), layer2(4, 4);
  tnn::Sequential model(layer1, layer2);
  td::TensorDict params = td::nn::from_module(model);
  // We represent the weights hierarchically.
  td::TensorDict weights1 = td::TensorDict().load_state_dict(layer1->named_parameters(), false);
  td::TensorDict weights2 = td::TensorDict().load_state_dict(layer2->named_parameters(), false);
  EXPECT_TRUE((params == td::TensorDict({{"0", weights1}, {"1", weights2}}, {})).all());
  const at::Tensor x = at::randn({10, 3});
  at::Tensor out;
  {
    auto guard = td::nn::to_module(params, model);
    out = model->forward(x);
  }
  // An ensemble: stack the params along the first dim and map the model over them.
  td::TensorDict params_stack = td::stack({params, params}, 0);
  at::Tensor y = td::nn::ensemble_map(params_stack, *model, [&] { return model->forward(x); });
  EXPECT_EQ(y.sizes(), at::IntArrayRef({2, 10, 4}));
  EXPECT_TRUE(at::allclose(y[0], out));
  EXPECT_TRUE(at::allclose(y[1], out));
  // The batched computation (td::vmap: all members in one call) gives the same values.
  EXPECT_TRUE(at::allclose(td::nn::ensemble_forward(model, params_stack, x), y, 1e-5, 1e-6));
  TD_EXPECT_THROW_MSG(td::nn::ensemble_map(params, *model, [&] { return model->forward(x); }),
                      td::ValueError, {"leading batch dim"});
}

tnn::Sequential Mlp() {
  return tnn::Sequential(tnn::Linear(5, 16), tnn::ReLU(), tnn::Linear(16, 8), tnn::Tanh(),
                         tnn::Linear(8, 3));
}

TEST(Ensemble, VmapPathMatchesLoopWithGradients) {
  tnn::Sequential m0 = Mlp(), m1 = Mlp(), m2 = Mlp();
  td::TensorDict stacked = td::nn::from_modules(m0, m1, m2).apply([](const at::Tensor& t) {
    return t.detach().requires_grad_();
  });
  const at::Tensor x = at::randn({2, 7, 5});
  const at::Tensor batched = td::nn::ensemble_forward(m0, stacked, x);
  EXPECT_EQ(batched.sizes(), at::IntArrayRef({3, 2, 7, 3}));
  const at::Tensor looped = td::nn::ensemble_forward(
      m0, stacked, x, td::nn::EnsembleOptions().batched(false));
  EXPECT_TRUE(at::allclose(batched, looped, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(looped[2], m2->forward(x), 1e-5, 1e-6));
  // Same gradients for the stacked parameters either way.
  const at::Tensor w = stacked.get({"2", "weight"});
  batched.pow(2).sum().backward();
  const at::Tensor g_batched = w.grad().clone();
  w.grad().zero_();
  looped.pow(2).sum().backward();
  EXPECT_TRUE(at::allclose(g_batched, w.grad(), 1e-4, 1e-5));
  // One input per member.
  const at::Tensor xs = at::randn({3, 4, 5});
  const at::Tensor per = td::nn::ensemble_forward(
      m0, stacked, xs, td::nn::EnsembleOptions().per_member_input(true));
  EXPECT_TRUE(at::allclose(per[1], m1->forward(xs[1]), 1e-5, 1e-6));
  TD_EXPECT_THROW_MSG(
      td::nn::ensemble_forward(m0, stacked, x, td::nn::EnsembleOptions().per_member_input(true)),
      td::ValueError, {"per_member_input", "torch.Size([2, 7, 5])"});
}

TEST(Ensemble, AnyModuleRunsBatched) {
  // Layers beyond Linear and activations: vmap batches them too, with the loop's values.
  tnn::Sequential a(tnn::Conv1d(2, 4, 3), tnn::LayerNorm(tnn::LayerNormOptions({4, 6})),
                    tnn::Flatten(), tnn::Linear(24, 3));
  tnn::Sequential b(tnn::Conv1d(2, 4, 3), tnn::LayerNorm(tnn::LayerNormOptions({4, 6})),
                    tnn::Flatten(), tnn::Linear(24, 3));
  td::TensorDict stacked = td::nn::from_modules(a, b);
  const at::Tensor x = at::randn({5, 2, 8});
  const at::Tensor y = td::nn::ensemble_forward(a, stacked, x);
  const at::Tensor looped =
      td::nn::ensemble_forward(a, stacked, x, td::nn::EnsembleOptions().batched(false));
  EXPECT_TRUE(at::allclose(y, looped, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(y[1], b->forward(x), 1e-5, 1e-6));
  // Dropout draws one mask per member, as the loop does.
  tnn::Sequential d(tnn::Linear(4, 64), tnn::Dropout(0.5));
  td::TensorDict two = td::nn::from_modules(d, d);
  const at::Tensor z = td::nn::ensemble_forward(d, two, at::ones({1, 4}));
  EXPECT_FALSE(at::equal(z[0] == 0, z[1] == 0));
}

TEST(EnsembleModule, MembersRunOnExpandedInput) {
  std::vector<TensorDictModule> members;
  for (int i = 0; i < 4; ++i) members.emplace_back(Mlp(), std::vector<td::NestedKey>{"obs"},
                                                   std::vector<td::NestedKey>{"value"});
  td::nn::EnsembleModule ensemble(members);
  EXPECT_EQ(ensemble->num_members(), 4);
  td::TensorDict data({{"obs", at::randn({6, 5})}}, {6});
  td::TensorDict out = ensemble(data);
  EXPECT_EQ(out.batch_size(), at::IntArrayRef({4, 6}));
  EXPECT_EQ(out.get("obs").sizes(), at::IntArrayRef({4, 6, 5}));
  EXPECT_EQ(out.get("value").sizes(), at::IntArrayRef({4, 6, 3}));
  EXPECT_FALSE(data.contains("value"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(at::allclose(out.get("value")[i], members[i](data.copy()).get("value"), 1e-5,
                             1e-6));
  }
  td::nn::EnsembleModule looped(members, td::nn::EnsembleOptions().batched(false));
  EXPECT_TRUE(at::allclose(looped(data).get("value"), out.get("value"), 1e-5, 1e-6));
  // Optimizers train the stacked parameters (and only those).
  EXPECT_EQ(ensemble->parameters().size(), 6u);
  torch::optim::SGD sgd(ensemble->parameters(), torch::optim::SGDOptions(0.1));
  const at::Tensor before = ensemble->params().get({"module", "4", "bias"}).detach().clone();
  ensemble(data).get("value").sum().backward();
  sgd.step();
  EXPECT_FALSE(at::equal(ensemble->params().get({"module", "4", "bias"}), before));
}

TEST(EnsembleModule, UnbatchableOpLoops) {
  // LSTMCell's op cannot run inside vmap (docs/functional.md): the ensemble loops instead.
  std::vector<TensorDictModule> members;
  for (int i = 0; i < 3; ++i) {
    members.emplace_back(tnn::LSTMCell(4, 5), std::vector<td::NestedKey>{"x"},
                         std::vector<td::NestedKey>{"h", "c"});
  }
  td::nn::EnsembleModule ensemble(members);
  td::TensorDict data({{"x", at::randn({2, 4})}}, {2});
  td::TensorDict out = ensemble(data);
  EXPECT_EQ(out.get("c").sizes(), at::IntArrayRef({3, 2, 5}));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(at::allclose(out.get("h")[i], members[i](data.copy()).get("h"), 1e-5, 1e-6));
  }
}

TEST(EnsembleModule, SeedGRUCellVmapCounterpart) {
  // params.expand(4) + vmap(func, (None, 0)) in the seed: 4 copies of the GRUCell module.
  td::TensorDict data({{"input", at::randn({3, 4})}, {"hidden", at::randn({3, 8})}}, {3});
  TensorDictModule td_module(tnn::GRUCell(4, 8), {"input", "hidden"}, {"output"});
  td::TensorDict params_repeat = td::nn::from_module(td_module).expand({4});
  EXPECT_EQ(params_repeat.get({"module", "weight_ih"}).sizes(), at::IntArrayRef({4, 24, 4}));
  EXPECT_EQ(params_repeat.get_tensordict("module").batch_size(), at::IntArrayRef({4}));
  td::nn::EnsembleModule ensemble(td_module, 4);
  td::TensorDict td_vmap = ensemble(data.clone());
  EXPECT_EQ(td_vmap.repr(),
            "TensorDict(\n"
            "    fields={\n"
            "        hidden: Tensor(shape=torch.Size([4, 3, 8]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        input: Tensor(shape=torch.Size([4, 3, 4]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        output: Tensor(shape=torch.Size([4, 3, 8]), device=cpu, dtype=torch.float32, "
            "is_shared=False)},\n"
            "    batch_size=torch.Size([4, 3]),\n"
            "    device=None,\n"
            "    is_shared=False)");
  const at::Tensor single = td_module(data.clone()).get("output");
  EXPECT_TRUE(at::allclose(td_vmap.get("output")[3], single));
}

TEST(EnsembleModule, SeedProbabilisticSequenceVmapCounterpart) {
  tnn::Linear net1(4, 8), module2(4, 8);
  td::nn::ProbabilisticTensorDictSequential td_module1(
      TensorDictModule(net1, {"input"}, {"params"}),
      TensorDictModule(td::nn::NormalParamExtractor(), {"params"}, {"loc", "scale"}),
      td::nn::ProbabilisticTensorDictModule(
          {"loc", "scale"}, {"hidden"}, td::nn::Normal::factory(),
          td::nn::ProbabilisticTensorDictModuleOptions().return_log_prob(true)));
  td::nn::TensorDictSequential td_module(td_module1, TensorDictModule(module2, {"hidden"}, {"output"}));
  td::TensorDict data({{"input", at::randn({3, 4})}}, {3});
  td::nn::EnsembleModule ensemble(td_module, 4);
  td::TensorDict td_vmap = ensemble(data);
  EXPECT_EQ(td_vmap.batch_size(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(td::KeysRepr(td_vmap.keys()),
            "['input', 'params', 'loc', 'scale', 'hidden', 'hidden_log_prob', 'output']");
  EXPECT_EQ(td_vmap.get("hidden").sizes(), at::IntArrayRef({4, 3, 4}));
  EXPECT_EQ(td_vmap.get("output").sizes(), at::IntArrayRef({4, 3, 8}));
  EXPECT_EQ(td_vmap.get("hidden_log_prob").sizes(), at::IntArrayRef({4, 3, 4}));
}

}  // namespace

TEST(EnsembleModule, ResetParametersRecursiveDrawsEachMember) {
  TensorDictModule td_module(tnn::Linear(4, 3), {"x"}, {"y"});
  td::nn::EnsembleModule ensemble(td_module, 3);  // three equal copies
  td::TensorDict params = ensemble->params();
  const at::Tensor w = params.get({"module", "weight"});
  const at::Tensor before = w.detach().clone();
  EXPECT_TRUE(at::equal(before[0], before[1]));
  td::TensorDict reset = ensemble->reset_parameters_recursive();
  // In place: the registered tensors (what optimizers hold) changed, shapes kept.
  EXPECT_TRUE(reset.get({"module", "weight"}).is_same(w));
  EXPECT_EQ(w.sizes(), at::IntArrayRef({3, 3, 4}));
  EXPECT_FALSE(at::equal(w[0], before[0]));
  EXPECT_FALSE(at::equal(w[0], w[1]));
  EXPECT_FALSE(at::equal(w[1], w[2]));
  EXPECT_FALSE(at::equal(params.get({"module", "bias"})[0], params.get({"module", "bias"})[2]));
  // Linear's init bound: |w| <= 1/sqrt(in_features).
  EXPECT_LE(w.abs().max().item<float>(), 0.5f + 1e-6f);
  td::TensorDict out = ensemble(td::TensorDict({{"x", at::ones({2, 4})}}, {2}));
  EXPECT_TRUE(at::allclose(out.get("y")[1], at::ones({2, 4}).matmul(w[1].t()) + params.get({"module", "bias"})[1]));
}
