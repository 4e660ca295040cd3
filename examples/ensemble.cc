// The README's "TensorDict for functional programming" in C++: the parameters of a model as a
// nested TensorDict, the model run with other parameters (to_module), and an ensemble of MLPs
// from stacked parameters — run member by member, or all at once through td::vmap. Exits
// non-zero when a check fails.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/nn/common.h"
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
  td::TensorDict params = td::nn::from_module(*model);
  std::cout << "params = from_module(model):\n" << params << "\n";

  // We represent the weights hierarchically.
  td::TensorDict weights1 = td::TensorDict().load_state_dict(layer1->named_parameters(), false);
  td::TensorDict weights2 = td::TensorDict().load_state_dict(layer2->named_parameters(), false);
  Check((params == td::TensorDict({{"0", weights1}, {"1", weights2}}, {})).all(),
        "params == {0: weights1, 1: weights2}");

  // Our functional module.
  const at::Tensor x = torch::randn({10, 3});
  at::Tensor out;
  {
    auto guard = td::nn::to_module(params, model);
    out = model->forward(x);
  }

  // An ensemble: stack the params along the first dim, run the model once per member.
  td::TensorDict params_stack = td::stack({params, params}, 0);
  at::Tensor y = td::nn::ensemble_map(params_stack, *model, [&] { return model->forward(x); });
  std::cout << "y.shape: " << y.sizes() << "\n";  // [2, 10, 4]
  Check(y.sizes() == at::IntArrayRef({2, 10, 4}), "y has shape [2, 10, 4]");
  Check(at::allclose(y[1], out), "each member computes the model's output");

  // Five MLPs with their own initializations, stacked.
  std::vector<std::shared_ptr<nn::Module>> mlps;
  std::vector<nn::Sequential> holders;
  for (int i = 0; i < 5; ++i) {
    holders.emplace_back(nn::Linear(3, 32), nn::ReLU(), nn::Linear(32, 32), nn::ReLU(),
                         nn::Linear(32, 1));
    mlps.push_back(holders.back().ptr());
  }
  td::TensorDict stacked = td::nn::from_modules(mlps);
  std::cout << "from_modules(5 MLPs): batch size " << stacked.batch_size() << ", "
            << stacked.get({"0", "weight"}).sizes() << " for layer 0's weight\n";
  const at::Tensor batched = td::nn::ensemble_forward(holders[0], stacked, x);
  const at::Tensor looped = td::nn::ensemble_forward(
      holders[0], stacked, x, td::nn::EnsembleOptions().batched(false));
  std::cout << "ensemble output: " << batched.sizes() << "\n";  // [5, 10, 1]
  Check(at::allclose(batched, looped, 1e-5, 1e-6), "vmap == member-by-member");
  Check(at::allclose(batched[3], holders[3]->forward(x), 1e-5, 1e-6),
        "member 3 computes MLP 3's output");

  // The same as a TensorDict module whose members train together.
  std::vector<td::nn::TensorDictModule> members;
  for (int i = 0; i < 5; ++i) {
    members.emplace_back(nn::Sequential(nn::Linear(3, 32), nn::ReLU(), nn::Linear(32, 1)),
                         std::vector<td::NestedKey>{"x"}, std::vector<td::NestedKey>{"value"});
  }
  td::nn::EnsembleModule ensemble(members);
  torch::optim::Adam adam(ensemble->parameters(), torch::optim::AdamOptions(1e-2));
  td::TensorDict data({{"x", torch::randn({64, 3})}}, {64});
  const at::Tensor target = data.get("x").sum(-1, true);
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    td::TensorDict result = ensemble(data);  // batch [5, 64]
    at::Tensor loss = (result.get("value") - target).pow(2).mean();
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (step == 0) first = loss.item<float>();
    last = loss.item<float>();
  }
  std::cout << "ensemble of 5 regressors: loss " << first << " -> " << last << "\n";
  Check(last < 0.5f * first, "the ensemble learns");
  std::cout << *ensemble << "\n";
  if (failures != 0) return EXIT_FAILURE;
  std::cout << "ensemble example: OK\n";
  return EXIT_SUCCESS;
}
