// @tensordict//td/tensorclass:nn alone: a TensorDictModule run on a class fills its fields.
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/tensorclass/nn.h"

class Step : public td::TensorClass<Step> {
 public:
  TD_TENSORCLASS(Step, (at::Tensor, obs), (at::Tensor, action))
};

int main() {
  td::nn::TensorDictModule policy([](at::Tensor obs) { return obs * 2; }, "obs", "action");
  Step step = Step::unset({3});
  step.set_obs(at::ones({3, 2}));
  Step out = td::nn::forward(*policy, step);
  REQUIRE(out.action().equal(at::full({3, 2}, 2.0)));
  return 0;
}
