// @tensordict//td/nn:module alone (TensorDictModule without the rest of td::nn).
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/nn/common.h"

int main() {
  td::nn::TensorDictModule m([](at::Tensor x) { return x * 2; }, {"x"}, {"y"});
  td::TensorDict data({{"x", at::ones({2, 3})}}, {2});
  td::TensorDict out = m(data);
  REQUIRE(out.get("y").equal(at::full({2, 3}, 2.0)));
  return 0;
}
