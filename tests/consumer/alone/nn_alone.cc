// @tensordict//td/nn alone.
#include <torch/nn.h>

#include "alone/check.h"
#include "td/nn/common.h"

int main() {
  td::nn::TensorDictModule m(torch::nn::Linear(3, 4), {"x"}, {"y"});
  td::TensorDict data({{"x", torch::ones({2, 3})}}, {2});
  td::TensorDict out = m(data);
  REQUIRE(out.get("y").size(1) == 4);
  return 0;
}
