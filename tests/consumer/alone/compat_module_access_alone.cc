// @tensordict//td/compat:module_access alone.
#include <torch/nn/modules/linear.h>

#include "alone/check.h"
#include "td/compat/module_access.h"

int main() {
  torch::nn::Linear lin(2, 3);
  REQUIRE(td::compat::ParametersOf(*lin).size() == 2);
  REQUIRE(td::compat::ParametersOf(*lin)["weight"].is_same(lin->weight));
  return 0;
}
