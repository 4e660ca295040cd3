// @tensordict//td/data alone: BatchLoader over a dense TensorDict.
#include <ATen/ATen.h>

#include <cstdint>

#include "alone/check.h"
#include "td/data/batches.h"

int main() {
  td::TensorDict data({{"x", at::arange(10)}}, {10});
  td::data::BatchLoader loader(data, td::data::BatchOptions(4));
  int64_t rows = 0;
  for (const td::TensorDict& batch : loader) rows += batch.batch_size()[0];
  REQUIRE(rows == 10);
  return 0;
}
