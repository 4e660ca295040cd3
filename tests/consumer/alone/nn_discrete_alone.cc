// @tensordict//td/nn:discrete alone (MaskedCategorical).
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/nn/discrete.h"

int main() {
  const at::Tensor mask = at::tensor({0, 1, 0}, at::kLong).ne(0);
  auto d = td::nn::MaskedCategorical::from_logits(at::tensor({5.0, 0.0, 1.0}), mask);
  REQUIRE(d.mode().item<int64_t>() == 1);
  REQUIRE(d.sample({10}).eq(1).all().item<bool>());
  return 0;
}
