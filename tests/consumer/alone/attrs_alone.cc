// @tensordict//td/attrs alone: attrs, to(td, attrs) and TensorAttrs.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/attrs/attrs.h"

int main() {
  td::TensorDict a({{"x", at::ones({2})}, {"i", at::zeros({2}, at::kInt)}}, {2});
  td::TensorDict spec = td::attrs(a);
  REQUIRE(td::TensorAttrs::get(spec, "i").tgt_dtype == at::kInt);
  REQUIRE(td::to(a.to(at::kDouble), spec).get("i").scalar_type() == at::kInt);
  return 0;
}
