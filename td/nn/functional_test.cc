#include "td/nn/functional.h"

#include <gtest/gtest.h>
#include <torch/nn.h>

#include <stdexcept>

#include "td/core/testing.h"

namespace {

namespace tnn = torch::nn;

// New values for every floating leaf (integer buffers such as num_batches_tracked are kept).
td::TensorDict Perturbed(const td::TensorDict& params) {
  return params.apply([](const at::Tensor& t) {
    return t.is_floating_point() ? at::rand_like(t) + 0.5 : t.clone();
  });
}

// Writes `params` into the module's own tensors through named_parameters()/named_buffers() only:
// the reference that does not use to_module.
void LoadByHand(tnn::Module& module, const td::TensorDict& params) {
  const td::TensorDict flat = params.flatten_keys(".");
  torch::NoGradGuard no_grad;
  for (auto& p : module.named_parameters()) p.value().copy_(flat.get(p.key()));
  for (auto& b : module.named_buffers()) b.value().copy_(flat.get(b.key()));
}

// Checks that forward() really reads the swapped tensors, and reads the old ones afterwards.
template <class Holder, class Forward>
void ExpectSwapReachesForward(Holder module, Forward forward) {
  module->eval();
  const at::Tensor before = forward(module);
  const td::TensorDict params = td::nn::from_module(module);
  ASSERT_FALSE(params.is_empty());
  const td::TensorDict fresh = Perturbed(params);

  Holder reference = std::dynamic_pointer_cast<typename Holder::ContainedType>(module->clone());
  reference->eval();
  LoadByHand(*reference, fresh);
  const at::Tensor expected = forward(reference);
  ASSERT_FALSE(at::allclose(expected, before));
  {
    auto guard = td::nn::to_module(fresh, module);
    EXPECT_EQ(guard.size(), fresh.keys(td::KeysOptions().include_nested(true).leaves_only(true))
                                .size());
    const at::Tensor during = forward(module);
    EXPECT_TRUE(at::allclose(during, expected, 1e-5, 1e-6))
        << "forward did not see the swapped tensors";
    // The registry sees them too.
    EXPECT_TRUE(td::nn::from_module(module).flatten_keys(".").get(
        module->named_parameters().begin()->key()).is_same(
        fresh.flatten_keys(".").get(module->named_parameters().begin()->key())));
  }
  EXPECT_TRUE(at::equal(forward(module), before)) << "forward did not see the restored tensors";
  // The module holds its original TensorImpls again.
  const td::TensorDict after = td::nn::from_module(module);
  for (const auto& key : params.keys(td::KeysOptions().include_nested(true).leaves_only(true))) {
    EXPECT_TRUE(after.get(key).is_same(params.get(key))) << key;
  }
}

TEST(FromModule, NestedLayoutSharesTensors) {
  tnn::Linear layer1(3, 4), layer2(4, 4);
  tnn::Sequential model(layer1, tnn::ReLU(), layer2);
  td::TensorDict params = td::nn::from_module(*model);
  EXPECT_EQ(params.batch_size().size(), 0u);
  EXPECT_EQ(td::KeysRepr(params.keys()), "['0', '2']");
  EXPECT_TRUE(params.get({"0", "weight"}).is_same(layer1->weight));
  EXPECT_TRUE(params.get({"2", "bias"}).is_same(layer2->bias));
  // The README: the params equal the layers' state dicts, unflattened.
  td::TensorDict weights1 = td::TensorDict().load_state_dict(layer1->named_parameters(), false);
  td::TensorDict weights2 = td::TensorDict().load_state_dict(layer2->named_parameters(), false);
  EXPECT_TRUE((params == td::TensorDict({{"0", weights1}, {"2", weights2}}, {})).all());

  td::TensorDict with_empty = td::nn::from_module(*model, td::nn::FromModuleOptions().keep_empty(true));
  EXPECT_EQ(td::KeysRepr(with_empty.keys()), "['0', '1', '2']");
  EXPECT_TRUE(td::nn::from_module(*model, td::nn::FromModuleOptions().lock(true)).is_locked());
  EXPECT_TRUE(td::nn::from_module(*model).is_locked());   // locked by default, as upstream
  EXPECT_FALSE(td::nn::from_module(*model, td::nn::FromModuleOptions().lock(false)).is_locked());
}

TEST(FromModule, BuffersAndUndefined) {
  tnn::BatchNorm1d bn(3);
  td::TensorDict p = td::nn::from_module(bn);
  EXPECT_EQ(td::KeysRepr(p.keys()),
            "['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']");
  td::TensorDict no_buffers = td::nn::from_module(bn, td::nn::FromModuleOptions().include_buffers(false));
  EXPECT_EQ(td::KeysRepr(no_buffers.keys()), "['weight', 'bias']");
  tnn::Linear no_bias(tnn::LinearOptions(3, 2).bias(false));
  EXPECT_EQ(td::KeysRepr(td::nn::from_module(no_bias).keys()), "['weight']");
}

TEST(ToModule, LinearSeesSwappedTensors) {
  ExpectSwapReachesForward(tnn::Linear(3, 4), [x = at::randn({5, 3})](auto& m) { return m->forward(x); });
}

TEST(ToModule, Conv2dSeesSwappedTensors) {
  ExpectSwapReachesForward(tnn::Conv2d(tnn::Conv2dOptions(2, 3, 3).padding(1)),
                           [x = at::randn({2, 2, 5, 5})](auto& m) { return m->forward(x); });
}

TEST(ToModule, LayerNormSeesSwappedTensors) {
  ExpectSwapReachesForward(tnn::LayerNorm(tnn::LayerNormOptions({3, 5})),
                           [x = at::randn({4, 3, 5})](auto& m) { return m->forward(x); });
}

TEST(ToModule, GRUCellSeesSwappedTensors) {
  ExpectSwapReachesForward(tnn::GRUCell(4, 8), [x = at::randn({3, 4}), h = at::randn({3, 8})](
                                                   auto& m) { return m->forward(x, h); });
}

TEST(ToModule, TransformerSeesSwappedTensors) {
  ExpectSwapReachesForward(
      tnn::Transformer(tnn::TransformerOptions(8, 2, 1, 1).dim_feedforward(16)),
      [src = at::randn({5, 2, 8}), tgt = at::randn({4, 2, 8})](auto& m) {
        return m->forward(src, tgt);
      });
}

TEST(ToModule, LstmSeesSwappedTensors) {
  ExpectSwapReachesForward(tnn::LSTM(tnn::LSTMOptions(4, 6).num_layers(2)),
                           [x = at::randn({5, 3, 4})](auto& m) {
                             return std::get<0>(m->forward(x));
                           });
}

TEST(ToModule, BatchNormBuffersAndEmbeddingAndMha) {
  ExpectSwapReachesForward(tnn::BatchNorm1d(3), [x = at::randn({4, 3})](auto& m) { return m->forward(x); });
  ExpectSwapReachesForward(tnn::Embedding(10, 3), [i = at::arange(6) % 10](auto& m) {
    return m->forward(i);
  });
  ExpectSwapReachesForward(tnn::MultiheadAttention(tnn::MultiheadAttentionOptions(6, 2)),
                           [q = at::randn({3, 2, 6})](auto& m) {
                             return std::get<0>(m->forward(q, q, q));
                           });
}

TEST(ToModule, NestedSequentialAndSlice) {
  tnn::Sequential model(tnn::Linear(3, 4), tnn::ReLU(), tnn::Linear(4, 2));
  const at::Tensor x = at::randn({6, 3});
  td::TensorDict params = td::nn::from_module(*model);
  td::TensorDict zeros = params.apply([](const at::Tensor& t) { return at::zeros_like(t); });
  {
    auto guard = td::nn::to_module(zeros, *model);
    EXPECT_TRUE(at::equal(model->forward(x), at::zeros({6, 2})));
  }
  EXPECT_FALSE(at::equal(model->forward(x), at::zeros({6, 2})));
  // Only a slice of the model: params["2"] into model[2].
  {
    auto guard = td::nn::to_module(zeros.get_tensordict("2"), *model[2]);
    EXPECT_TRUE(at::equal(model->forward(x), at::zeros({6, 2})));
  }
}

TEST(ToModule, RestoresWhenForwardThrows) {
  tnn::Linear lin(3, 4);
  const at::Tensor weight = lin->weight;
  td::TensorDict fresh = Perturbed(td::nn::from_module(lin));
  try {
    auto guard = td::nn::to_module(fresh, lin);
    EXPECT_TRUE(lin->weight.is_same(fresh.get("weight")));
    lin->forward(at::randn({2, 7}));  // wrong input width: throws
    FAIL() << "forward should have thrown";
  } catch (const c10::Error&) {
  }
  EXPECT_TRUE(lin->weight.is_same(weight));
  EXPECT_TRUE(lin->named_parameters()["weight"].is_same(weight));
}

TEST(ToModule, GradientsReachSwappedInLeaves) {
  tnn::Linear lin(3, 2);
  const at::Tensor x = at::randn({5, 3});
  td::TensorDict fresh = td::nn::from_module(lin).apply([](const at::Tensor& t) {
    return at::randn_like(t).requires_grad_();
  });
  at::Tensor loss;
  {
    auto guard = td::nn::to_module(fresh, lin);
    loss = lin->forward(x).pow(2).sum();
  }
  loss.backward();  // after the scope: the graph kept the swapped-in tensors
  const at::Tensor w = fresh.get("weight");
  const at::Tensor b = fresh.get("bias");
  ASSERT_TRUE(w.grad().defined());
  const at::Tensor y = (at::matmul(x, w.t()) + b).detach();
  EXPECT_TRUE(at::allclose(w.grad(), 2 * at::matmul(y.t(), x)));
  EXPECT_TRUE(at::allclose(b.grad(), 2 * y.sum(0)));
  EXPECT_FALSE(lin->weight.grad().defined()) << "the module's own parameter got a gradient";
}

TEST(ToModule, GradientsReachStackedEnsembleThroughSlices) {
  tnn::Linear a(3, 2), b(3, 2);
  td::TensorDict stacked = td::nn::from_modules(a, b);
  EXPECT_EQ(std::vector<int64_t>(stacked.batch_size().begin(), stacked.batch_size().end()),
            std::vector<int64_t>({2}));
  tnn::Linear runner(3, 2);
  td::TensorDict member0 = stacked.apply([](const at::Tensor& t) { return t.select(0, 0); },
                                         std::vector<int64_t>{});
  const at::Tensor x = at::randn({4, 3});
  {
    auto guard = td::nn::to_module(member0, runner);
    EXPECT_TRUE(at::allclose(runner->forward(x), a->forward(x)));
    runner->forward(x).sum().backward();
  }
  ASSERT_TRUE(a->weight.grad().defined());
  EXPECT_TRUE(at::allclose(a->weight.grad(), x.sum(0).expand({2, 3})));
  EXPECT_FALSE(b->weight.grad().defined() && b->weight.grad().abs().sum().item<float>() != 0);
  EXPECT_FALSE(runner->weight.grad().defined());
}

TEST(ToModule, InplaceKeepsTensorImpls) {
  tnn::Linear lin(3, 2);
  const at::Tensor weight = lin->weight;
  const at::Tensor old_values = weight.detach().clone();
  td::TensorDict fresh = Perturbed(td::nn::from_module(lin));
  {
    auto guard = td::nn::to_module(fresh, lin, td::nn::ToModuleOptions().inplace(true));
    EXPECT_TRUE(lin->weight.is_same(weight));
    EXPECT_TRUE(at::equal(lin->weight, fresh.get("weight")));
    EXPECT_TRUE(at::equal(guard.swapped_out().get("weight"), old_values));
  }
  EXPECT_TRUE(lin->weight.is_same(weight));
  EXPECT_TRUE(at::equal(lin->weight, old_values));
}

TEST(ToModule, NonScopedSwapReturnsPrevious) {
  tnn::Sequential model(tnn::Linear(3, 4), tnn::Linear(4, 4));
  td::TensorDict original = td::nn::from_module(*model);
  td::TensorDict fresh = Perturbed(original);
  td::TensorDict previous = td::nn::swap_into_module(fresh, *model);
  EXPECT_TRUE(previous.get({"1", "weight"}).is_same(original.get({"1", "weight"})));
  EXPECT_TRUE(model[1]->as<tnn::Linear>()->weight.is_same(fresh.get({"1", "weight"})));
  td::nn::swap_into_module(previous, *model);
  EXPECT_TRUE(model[1]->as<tnn::Linear>()->weight.is_same(original.get({"1", "weight"})));
  // release() on a guard is the same thing.
  auto guard = td::nn::to_module(fresh, *model);
  td::TensorDict prev2 = guard.release();
  EXPECT_FALSE(guard.active());
  EXPECT_TRUE(prev2.get({"0", "bias"}).is_same(original.get({"0", "bias"})));
  EXPECT_TRUE(model[0]->as<tnn::Linear>()->bias.is_same(fresh.get({"0", "bias"})));
}

TEST(ToModule, SharedSubmoduleRestoresInReverse) {
  tnn::Linear shared(2, 2);
  tnn::Sequential model(shared, shared);
  const at::Tensor w = shared->weight;
  td::TensorDict a = Perturbed(td::nn::from_module(*model));
  {
    auto guard = td::nn::to_module(a, *model);
    EXPECT_TRUE(shared->weight.is_same(a.get({"1", "weight"})));
  }
  EXPECT_TRUE(shared->weight.is_same(w));
}

TEST(ToModule, ErrorsNameTheKeyAndSwapNothing) {
  tnn::Sequential model(tnn::Linear(3, 4), tnn::Linear(4, 2));
  const at::Tensor w0 = model[0]->as<tnn::Linear>()->weight;
  td::TensorDict params = Perturbed(td::nn::from_module(*model));
  td::TensorDict bad = params.clone();
  bad.set({"1", "bogus"}, at::zeros({1}));
  TD_EXPECT_THROW_MSG(td::nn::to_module(bad, *model), td::KeyError,
                      {"('1', 'bogus')", "submodule '1'", "['weight', 'bias']"});
  EXPECT_TRUE(model[0]->as<tnn::Linear>()->weight.is_same(w0)) << "half-applied swap";

  td::TensorDict wrong_shape = params.clone();
  wrong_shape.set({"1", "weight"}, at::zeros({3, 3}));
  TD_EXPECT_THROW_MSG(td::nn::to_module(wrong_shape, *model), td::ValueError,
                      {"('1', 'weight')", "torch.Size([3, 3])", "torch.Size([2, 4])"});
  EXPECT_TRUE(model[0]->as<tnn::Linear>()->weight.is_same(w0));

  td::TensorDict td_for_param({{"weight", {{"x", at::zeros({1})}}}}, {});
  TD_EXPECT_THROW_MSG(td::nn::to_module(td_for_param, *model[0]), td::TypeError,
                      {"'weight'", "names a tensor"});
  td::TensorDict tensor_for_module({{"0", at::zeros({1})}}, {});
  TD_EXPECT_THROW_MSG(td::nn::to_module(tensor_for_module, *model), td::TypeError,
                      {"'0'", "names a submodule"});
}

struct ScaleImpl : tnn::Cloneable<ScaleImpl> {
  ScaleImpl() { reset(); }
  void reset() override { w = register_parameter("w", at::ones({3})); }
  at::Tensor forward(const at::Tensor& x) { return x * w; }
  at::Tensor w;
};
TORCH_MODULE(Scale);

struct ByNameImpl : tnn::Cloneable<ByNameImpl> {
  ByNameImpl() { reset(); }
  void reset() override { register_parameter("w", at::ones({3})); }
  at::Tensor forward(const at::Tensor& x) { return x * named_parameters(false)["w"]; }
};
TORCH_MODULE(ByName);

TEST(ToModule, UserModulesNeedTheirMembersDeclared) {
  Scale scale;
  td::TensorDict twos({{"w", at::full({3}, 2.0)}}, {});
  TD_EXPECT_THROW_MSG(td::nn::to_module(twos, scale), td::TypeError,
                      {"ScaleImpl", "register_tensor_members", "'w'"});
  EXPECT_FALSE(td::nn::has_tensor_members(typeid(ScaleImpl)));
  td::nn::register_tensor_members<ScaleImpl>({{"w", &ScaleImpl::w}});
  EXPECT_TRUE(td::nn::has_tensor_members(typeid(ScaleImpl)));
  {
    auto guard = td::nn::to_module(twos, scale);
    EXPECT_TRUE(at::equal(scale->forward(at::ones({3})), at::full({3}, 2.0)));
  }
  EXPECT_TRUE(at::equal(scale->forward(at::ones({3})), at::ones({3})));

  ByName by_name;
  td::nn::register_tensor_members<ByNameImpl>({});
  {
    auto guard = td::nn::to_module(twos, by_name);
    EXPECT_TRUE(at::equal(by_name->forward(at::ones({3})), at::full({3}, 2.0)));
  }
  EXPECT_TRUE(at::equal(by_name->forward(at::ones({3})), at::ones({3})));
  // In-place mode needs no declaration.
  Scale other;
  td::TensorDict threes({{"w", at::full({3}, 3.0)}}, {});
  auto guard = td::nn::to_module(threes, other, td::nn::ToModuleOptions().inplace(true));
  EXPECT_TRUE(at::equal(other->forward(at::ones({3})), at::full({3}, 3.0)));
}

TEST(FromModules, StacksAndChecksStructure) {
  tnn::Sequential a(tnn::Linear(3, 4), tnn::Linear(4, 4));
  tnn::Sequential b(tnn::Linear(3, 4), tnn::Linear(4, 4));
  td::TensorDict stacked = td::nn::from_modules(a, b);
  EXPECT_EQ(stacked.get({"1", "weight"}).sizes(), at::IntArrayRef({2, 4, 4}));
  EXPECT_EQ(stacked.get_tensordict("1").batch_size(), at::IntArrayRef({2}));
  EXPECT_TRUE(at::equal(stacked.get({"0", "bias"})[1], b[0]->as<tnn::Linear>()->bias));
  tnn::Sequential c(tnn::Linear(3, 5), tnn::Linear(5, 4));
  TD_EXPECT_THROW_MSG(td::nn::from_modules(a, c), c10::Error,
                      {"('0', 'weight')", "[5, 3]", "from_modules"});
  tnn::Sequential d(tnn::Linear(3, 4));
  TD_EXPECT_THROW_MSG(td::nn::from_modules(a, d), td::KeyError, {"'1'"});
}

}  // namespace
