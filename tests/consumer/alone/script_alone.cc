// @tensordict//td/nn:script alone: a TorchScript module (defined here, not loaded) as a
// TensorDictModule.
#include <ATen/ATen.h>
#include <torch/script.h>

#include "alone/check.h"
#include "td/nn/script_module.h"

int main() {
  torch::jit::Module m("Double");
  m.define("def forward(self, x):\n  return x * 2\n");
  td::nn::TensorDictModule doubler = td::nn::script_module(m, {"obs"}, {"out"});
  td::TensorDict data({{"obs", at::ones({3, 2})}}, {3});
  doubler(data);
  REQUIRE(data.get("out").equal(at::full({3, 2}, 2.0)));
  return 0;
}
