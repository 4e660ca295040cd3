// @tensordict//td/functional alone.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/functional/vmap.h"

int main() {
  at::Tensor x = at::ones({4, 3});
  td::TensorDict data({{"x", x}}, {4});
  auto sum_rows = td::vmap([](const td::TensorDict& row) { return row.get("x").sum(); });
  at::Tensor s = sum_rows(data);
  REQUIRE(s.sizes() == at::IntArrayRef({4}));
  REQUIRE(s[2].item<float>() == 3.0f);
  REQUIRE(td::vmap_nesting() == 0);
  return 0;
}
