// td::nn::forward: TensorDictModule and TensorDictSequential called on a TensorClass.
#include "td/tensorclass/nn.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>

#include <optional>

#include "td/core/testing.h"
#include "td/nn/sequence.h"

namespace td {
namespace {

class Transition : public TensorClass<Transition> {
 public:
  TD_TENSORCLASS(Transition, (at::Tensor, obs), (std::optional<at::Tensor>, action),
                 (std::optional<at::Tensor>, value), (std::string, env))
};

TEST(TensorClassNn, ModuleAndSequence) {
  torch::manual_seed(0);
  Transition data(at::randn({5, 4}), std::nullopt, std::nullopt, "cartpole", {5});
  nn::TensorDictModule actor(torch::nn::Linear(4, 2), {"obs"}, {"action"});
  Transition out = nn::forward(*actor, data);
  ASSERT_TRUE(out.action());
  EXPECT_EQ(out.action()->sizes(), at::IntArrayRef({5, 2}));
  EXPECT_TRUE(out.obs().is_same(data.obs()));
  EXPECT_EQ(out.env(), "cartpole");
  EXPECT_FALSE(data.action());  // the input is not modified

  torch::nn::Linear critic_net(6, 1);
  nn::TensorDictModule critic(
      [critic_net](const at::Tensor& obs, const at::Tensor& action) mutable {
        return critic_net->forward(at::cat({obs, action}, -1));
      },
      {"obs", "action"}, {"value"});
  nn::TensorDictSequential policy(actor, critic);
  Transition both = nn::forward(*policy, data);
  ASSERT_TRUE(both.value());
  EXPECT_EQ(both.value()->sizes(), at::IntArrayRef({5, 1}));
}

TEST(TensorClassNn, Errors) {
  Transition data(at::randn({5, 4}), std::nullopt, std::nullopt, "cartpole", {5});
  nn::TensorDictModule wrong(torch::nn::Linear(4, 2), {"obs"}, {"logits"});
  TD_EXPECT_THROW_MSG(nn::forward(*wrong, data), KeyError,
                      {"'logits'", "not a field of Transition", "'obs', 'action'"});
  nn::TensorDictModule into_string(torch::nn::Linear(4, 2), {"obs"}, {"env"});
  TD_EXPECT_THROW_MSG(nn::forward(*into_string, data), TypeError,
                      {"field 'env' holds a Tensor", "std::string"});
  EXPECT_EQ(data.env(), "cartpole");
}

}  // namespace
}  // namespace td
