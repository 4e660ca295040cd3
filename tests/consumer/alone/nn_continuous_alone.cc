// @tensordict//td/nn:continuous alone (TanhNormal, IndependentNormal).
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/nn/continuous.h"

int main() {
  td::nn::TanhNormal d(at::zeros({4, 2}), at::ones({4, 2}));
  REQUIRE(d.deterministic_sample().equal(at::zeros({4, 2})));
  REQUIRE(d.log_prob(at::zeros({4, 2})).sizes() == at::IntArrayRef({4}));
  td::nn::IndependentNormal n(at::zeros({4, 2}), at::ones({4, 2}));
  REQUIRE(n.entropy().sizes() == at::IntArrayRef({4}));
  return 0;
}
