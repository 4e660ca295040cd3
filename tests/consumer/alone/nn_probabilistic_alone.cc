// @tensordict//td/nn:probabilistic alone.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/nn/probabilistic.h"

int main() {
  td::nn::ProbabilisticTensorDictModule m({"loc", "scale"}, {"action"},
                                          td::nn::Normal::factory());
  td::TensorDict data({{"loc", at::zeros({4, 2})}, {"scale", at::ones({4, 2})}}, {4});
  m(data);  // the default interaction type is deterministic: the mean
  REQUIRE(data.get("action").equal(at::zeros({4, 2})));
  return 0;
}
