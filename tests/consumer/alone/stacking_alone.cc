// @tensordict//td/stacking alone: maybe_dense_stack and pad_sequence.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/stacking/stacking.h"

int main() {
  td::TensorDict a({{"x", at::ones({2})}}, {2});
  td::TensorDict b({{"x", at::ones({3})}}, {3});
  td::TensorDict padded = td::pad_sequence({a, b});
  REQUIRE(padded.batch_size()[0] == 2 && padded.batch_size()[1] == 3);
  REQUIRE(td::maybe_dense_stack({a, a}, 0).batch_size()[0] == 2);
  return 0;
}
