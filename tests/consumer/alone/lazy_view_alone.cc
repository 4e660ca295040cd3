// @tensordict//td/backends/lazy_view alone.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/backends/lazy_view/lazy_view.h"

int main() {
  td::TensorDict data({{"x", at::zeros({4, 2})}}, {4});
  td::TensorDict row = td::index_view(data, {1});
  row.set_("x", at::ones({2}));
  REQUIRE(td::LazyViewTensorDict::from(row).has_value());
  REQUIRE(data.get("x").sum().item<float>() == 2.0f);
  return 0;
}
