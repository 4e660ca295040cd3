// @tensordict//td/nn:scale alone (scale mappings, AddStateIndependentNormalScale).
#include <ATen/ATen.h>

#include <tuple>

#include "alone/check.h"
#include "td/nn/scale.h"

int main() {
  REQUIRE(td::nn::mappings("biased_softplus_1.0")(at::zeros({3})).allclose(at::ones({3})));
  td::nn::AddStateIndependentNormalScale add(
      td::nn::AddStateIndependentNormalScaleOptions().scale_shape({2}));
  REQUIRE(std::get<1>(add(at::zeros({4, 2}))).equal(at::ones({4, 2})));
  return 0;
}
