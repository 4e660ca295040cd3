// @tensordict//td/parallel alone: td::parallel::map over batch chunks.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/parallel/map.h"

int main() {
  td::TensorDict data({{"x", at::arange(8, at::kFloat)}}, {8});
  td::TensorDict out = td::parallel::map(
      data, [](td::TensorDict& chunk) { return chunk * 2; },
      td::parallel::MapOptions().num_workers(2).chunksize(2));
  REQUIRE(out.get("x").equal(at::arange(8, at::kFloat) * 2));
  return 0;
}
