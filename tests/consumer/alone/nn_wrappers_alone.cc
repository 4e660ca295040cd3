// @tensordict//td/nn:wrappers alone (dispatch, TensorDictModuleWrapper).
#include <ATen/ATen.h>

#include <vector>

#include "alone/check.h"
#include "td/nn/wrappers.h"

int main() {
  td::nn::TensorDictModule m([](at::Tensor x) { return x * 2; }, {"x"}, {"y"});
  td::nn::TensorDictModuleWrapper w(m);
  std::vector<at::Tensor> out = td::nn::dispatch(w, {{"x", at::ones({2})}});
  REQUIRE(out.size() == 1 && out[0].equal(at::full({2}, 2.0)));
  return 0;
}
