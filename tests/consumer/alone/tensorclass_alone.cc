// @tensordict//td/tensorclass alone: a class declared with TD_TENSORCLASS keeps its type through
// TensorDict operations.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/tensorclass/tensorclass.h"

class Step : public td::TensorClass<Step> {
 public:
  TD_TENSORCLASS(Step, (at::Tensor, obs), (at::Tensor, reward))
};

int main() {
  Step s(at::ones({4, 3}), at::zeros({4}), {4});
  Step first = s.index({0});
  REQUIRE(first.obs().sizes() == at::IntArrayRef({3}));
  Step grid = s.reshape({2, 2});
  REQUIRE(grid.reward().sizes() == at::IntArrayRef({2, 2}));
  REQUIRE(td::stack({s, s}, 0).batch_size()[0] == 2);
  return 0;
}
