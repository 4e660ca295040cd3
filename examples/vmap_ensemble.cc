// The seeds' "Functional Programming" section in C++: a model's weights as a nested TensorDict,
// the model run with those weights, and an ensemble — the parameters stacked along a first dim
// and the model mapped over them with td::vmap, as Python's `vmap(model, (None, 0))(x,
// params_stack)`. Exits non-zero when a check fails.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/functional/vmap.h"
#include "td/nn/ensemble.h"
#include "td/nn/functional.h"

namespace nn = torch::nn;

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "check failed: " << what << "\n";
    ++failures;
  }
}

}  // namespace

int main() {
  torch::manual_seed(0);
  nn::Linear layer1(3, 4), layer2(4, 4);
  nn::Sequential model(layer1, layer2);
  // we represent the weights hierarchically
  td::TensorDict weights1 = td::TensorDict().load_state_dict(layer1->named_parameters(), false);
  td::TensorDict weights2 = td::TensorDict().load_state_dict(layer2->named_parameters(), false);
  td::TensorDict params = td::nn::from_module(*model);
  // params provided by from_module match the state dicts
  Check((params == td::TensorDict({{"0", weights1}, {"1", weights2}}, {})).all(),
        "params == {0: weights1, 1: weights2}");

  // Let's use our functional module: the model with `params` (the last argument).
  auto functional_model = [&](const at::Tensor& x, const td::TensorDict& p) {
    auto guard = td::nn::to_module(p, *model);
    return model->forward(x);
  };
  const at::Tensor x = torch::randn({10, 3});
  const at::Tensor out = functional_model(x, params);

  // an ensemble of models: we stack params along the first dimension...
  td::TensorDict params_stack = td::stack({params, params}, 0);
  // ... and use it as an input we'd like to pass through the model
  at::Tensor y = td::vmap(functional_model, {td::kNone, 0})(x, params_stack);
  std::cout << "y.shape: " << y.sizes() << "\n";  // [2, 10, 4]
  Check(y.sizes() == at::IntArrayRef({2, 10, 4}), "y has shape [2, 10, 4]");
  Check(at::allclose(y[0], out) && at::allclose(y[1], out), "each member computes model(x)");

  // Five MLPs with their own initializations: vmap == running them one by one.
  std::vector<std::shared_ptr<nn::Module>> mlps;
  std::vector<nn::Sequential> holders;
  for (int i = 0; i < 5; ++i) {
    holders.emplace_back(nn::Linear(3, 32), nn::ReLU(), nn::Linear(32, 32), nn::ReLU(),
                         nn::Linear(32, 1));
    mlps.push_back(holders.back().ptr());
  }
  td::TensorDict stacked = td::nn::from_modules(mlps);  // batch [5]
  auto mlp = [&](const at::Tensor& input, const td::TensorDict& p) {
    auto guard = td::nn::to_module(p, *holders[0]);
    return holders[0]->forward(input);
  };
  const at::Tensor vmapped = td::vmap(mlp, {td::kNone, 0})(x, stacked);
  const at::Tensor looped = td::nn::ensemble_map(stacked, *holders[0],
                                                 [&] { return holders[0]->forward(x); });
  std::cout << "5 MLPs through vmap: " << vmapped.sizes() << "\n";  // [5, 10, 1]
  Check(at::allclose(vmapped, looped, 1e-5, 1e-6), "vmap == member by member");
  Check(at::allclose(vmapped[3], holders[3]->forward(x), 1e-5, 1e-6),
        "member 3 computes MLP 3's output");

  // Gradients flow to the stacked parameters.
  at::Tensor loss = vmapped.pow(2).mean();
  loss.backward();
  Check(holders[2][0]->as<nn::Linear>()->weight.grad().defined(),
        "the members' own parameters get gradients through from_modules' stack");

  if (failures != 0) return EXIT_FAILURE;
  std::cout << "vmap_ensemble example: OK\n";
  return EXIT_SUCCESS;
}
