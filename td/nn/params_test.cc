#include "td/nn/params.h"

#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/optim/sgd.h>

#include <sstream>

#include "td/core/testing.h"
#include "td/nn/functional.h"

namespace {

namespace tnn = torch::nn;

TEST(TensorDictParams, RegistersLeavesWithNestedNames) {
  tnn::Sequential a(tnn::Linear(3, 4), tnn::Linear(4, 2));
  tnn::Sequential b(tnn::Linear(3, 4), tnn::Linear(4, 2));
  td::TensorDict stacked = td::nn::from_modules(a, b);
  td::nn::TensorDictParams holder(stacked);
  std::vector<std::string> names;
  for (const auto& p : holder->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(td::KeysRepr(names), "['0.weight', '0.bias', '1.weight', '1.bias']");
  td::TensorDict params = holder->params();
  EXPECT_EQ(params.batch_size(), at::IntArrayRef({2}));
  EXPECT_EQ(params.get_tensordict("1").batch_size(), at::IntArrayRef({2}));
  EXPECT_TRUE(params.get({"1", "weight"}).is_same(holder->named_parameters()["1.weight"]));
  EXPECT_TRUE(params.get({"0", "bias"}).is_leaf());
  EXPECT_TRUE(params.get({"0", "bias"}).requires_grad());
  // Shares memory with the TensorDict it was built from.
  EXPECT_EQ(params.get({"0", "weight"}).data_ptr(), stacked.get({"0", "weight"}).data_ptr());
  std::ostringstream os;
  os << *holder;
  EXPECT_NE(os.str().find("td::nn::TensorDictParams(batch_size=torch.Size([2]), params=4"),
            std::string::npos)
      << os.str();
}

TEST(TensorDictParams, OptimizersTrainThemThroughToModule) {
  tnn::Linear model(3, 1);
  td::nn::TensorDictParams holder(td::nn::from_module(model).apply([](const at::Tensor& t) {
    return at::zeros_like(t);
  }));
  torch::optim::SGD sgd(holder->parameters(), torch::optim::SGDOptions(0.5));
  const at::Tensor x = at::ones({4, 3});
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    at::Tensor loss;
    {
      auto guard = td::nn::to_module(holder->params(), model);
      loss = (model->forward(x) - 1).pow(2).mean();
    }
    loss.backward();
    sgd.step();
  }
  // The holder's parameters moved towards the target; the model's own did not get gradients.
  EXPECT_GT(holder->params().get("bias").item<float>(), 0.0f);
  EXPECT_FALSE(model->bias.grad().defined());
}

TEST(TensorDictParams, BuffersToAndClone) {
  td::TensorDict data({{"w", at::ones({2, 3})}, {"count", at::zeros({2}, at::kLong)}}, {2});
  data.set({"sub", "v"}, at::zeros({2, 5}));
  data.set_non_tensor("note", "kept");
  td::nn::TensorDictParams holder(data);
  EXPECT_EQ(holder->parameters().size(), 2u);
  EXPECT_EQ(holder->buffers().size(), 1u);
  EXPECT_EQ(holder->params().get_non_tensor("note"), "kept");
  EXPECT_EQ(td::KeysRepr(holder->params().keys()), "['w', 'count', 'sub', 'note']");
  holder->to(at::kDouble);
  EXPECT_EQ(holder->params().get("w").scalar_type(), at::kDouble);
  auto copy = std::dynamic_pointer_cast<td::nn::TensorDictParamsImpl>(holder->clone());
  ASSERT_TRUE(copy);
  td::TensorDict cp = copy->params();
  EXPECT_TRUE(at::equal(cp.get("w"), holder->params().get("w")));
  EXPECT_FALSE(cp.get("w").is_same(holder->params().get("w")));
  EXPECT_EQ(cp.get({"sub", "v"}).sizes(), at::IntArrayRef({2, 5}));
  {
    torch::NoGradGuard no_grad;
    cp.get("w").zero_();
  }
  EXPECT_TRUE(at::equal(holder->params().get("w"), at::ones({2, 3}, at::kDouble)));
  TD_EXPECT_THROW_MSG(td::nn::TensorDictParams(td::TensorDict({{"a.b", at::ones({1})}}, {})),
                      td::ValueError, {"'a.b'"});
}

}  // namespace

TEST(TensorDictParams, NoConvertKeepsWhatRequiresGradAndLockLocks) {
  td::TensorDict data({{"w", at::ones({2, 3}).requires_grad_()},
                       {"stat", at::zeros({2})},
                       {"n", {{"b", at::ones({2}).requires_grad_()}, {"count", at::zeros({2}, at::kLong)}}}},
                      {2});
  // Default: every floating-point leaf is a parameter.
  td::nn::TensorDictParams converted(data);
  EXPECT_EQ(converted->named_parameters().size(), 3u);
  // no_convert: only the leaves that require grad are parameters, the rest buffers.
  td::nn::TensorDictParams kept(data, td::nn::TensorDictParamsOptions().no_convert(true));
  std::vector<std::string> params, buffers;
  for (const auto& p : kept->named_parameters()) params.push_back(p.key());
  for (const auto& b : kept->named_buffers()) buffers.push_back(b.key());
  EXPECT_EQ(td::KeysRepr(params), "['w', 'n.b']");
  EXPECT_EQ(td::KeysRepr(buffers), "['stat', 'n.count']");
  EXPECT_TRUE(kept->options().no_convert());
  EXPECT_FALSE(kept->params().is_locked());
  // lock: params() is locked, nested levels too; the clone keeps the options.
  td::nn::TensorDictParams locked(data, td::nn::TensorDictParamsOptions().lock(true));
  td::TensorDict p = locked->params();
  EXPECT_TRUE(p.is_locked());
  TD_EXPECT_THROW_MSG(p.set("new", at::zeros({2})), td::LockedError, {"'new'"});
  TD_EXPECT_THROW_MSG(p.get_tensordict("n").set("new", at::zeros({2})), td::LockedError, {"'new'"});
  {
    at::NoGradGuard no_grad;
    p.set_("w", at::full({2, 3}, 2.0));  // in place is allowed
  }
  EXPECT_TRUE(locked->params().get("w").equal(at::full({2, 3}, 2.0)));
  auto copy = std::dynamic_pointer_cast<td::nn::TensorDictParamsImpl>(locked->clone());
  EXPECT_TRUE(copy->params().is_locked());
}
