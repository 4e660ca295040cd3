// The seeds' TensorDictModule reference in C++: a GRUCell TensorDictModule called functionally
// (its parameters put in with to_module), then mapped with td::vmap over its parameters repeated
// 4 times (`params.expand(4)`), as Python's `vmap(func, (None, 0))(td.clone(), params_repeat)`.
// Exits non-zero when a check fails.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

#include "td/core/tensordict.h"
#include "td/functional/vmap.h"
#include "td/nn/common.h"
#include "td/nn/functional.h"

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
  td::TensorDict td({{"input", torch::randn({3, 4})}, {"hidden", torch::randn({3, 8})}}, {3});
  torch::nn::GRUCell module(4, 8);
  td::nn::TensorDictModule td_module(module, {"input", "hidden"}, {"output"});
  td::TensorDict params = td::nn::from_module(*td_module);
  // functional API
  td::TensorDict td_functional;
  {
    auto guard = td::nn::to_module(params, *td_module);
    td_functional = td_module(td.clone());
  }
  std::cout << td_functional << "\n";

  // One can use a vmap operator to call the functional module.
  td::TensorDict params_repeat = params.expand({4});
  std::cout << params_repeat << "\n";
  auto func = [&](const td::TensorDict& td, const td::TensorDict& params) {
    auto guard = td::nn::to_module(params, *td_module);
    return td_module(td);
  };
  td::TensorDict td_vmap = td::vmap(func, {td::kNone, 0})(td.clone(), params_repeat);
  std::cout << td_vmap << "\n";
  Check(td_vmap.batch_size() == at::IntArrayRef({4, 3}), "batch size [4, 3]");
  Check(td_vmap.get("output").sizes() == at::IntArrayRef({4, 3, 8}), "output [4, 3, 8]");
  Check(td_vmap.get("hidden").sizes() == at::IntArrayRef({4, 3, 8}), "hidden [4, 3, 8]");
  Check(td_vmap.get("input").sizes() == at::IntArrayRef({4, 3, 4}), "input [4, 3, 4]");
  for (int64_t i = 0; i < 4; ++i) {
    Check(at::allclose(td_vmap.get("output")[i], td_functional.get("output"), 1e-5, 1e-6),
          "every member computes the cell's output");
  }
  if (failures != 0) return EXIT_FAILURE;
  std::cout << "vmap_module example: OK\n";
  return EXIT_SUCCESS;
}
