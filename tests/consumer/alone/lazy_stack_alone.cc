// @tensordict//td/backends/lazy_stack alone.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/backends/lazy_stack/lazy_stack.h"

int main() {
  td::TensorDict a({{"x", at::zeros({3})}}, {3});
  td::TensorDict b({{"x", at::ones({3})}}, {3});
  td::LazyStackedTensorDict s = td::lazy_stack({a, b}, 0);
  REQUIRE(s.backend() == "lazy_stack");
  REQUIRE(s.get("x").sum().item<float>() == 3.0f);
  return 0;
}
