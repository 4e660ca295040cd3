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

// A transition whose fields are all required, the nested class too.
class Next : public TensorClass<Next> {
 public:
  TD_TENSORCLASS(Next, (at::Tensor, obs), (at::Tensor, reward))
};
class Step : public TensorClass<Step> {
 public:
  TD_TENSORCLASS(Step, (at::Tensor, obs), (at::Tensor, action), (Next, next))
};

// An environment as a module: (obs, action) -> next obs and reward, written under "next".
nn::TensorDictModule Env(int* calls = nullptr) {
  return nn::TensorDictModule(
      [calls](const at::Tensor& obs, const at::Tensor& action) {
        if (calls != nullptr) ++*calls;
        return std::make_tuple(obs + action.sum(-1, true), -action.pow(2).sum(-1, true));
      },
      {"obs", "action"}, {{"next", "obs"}, {"next", "reward"}});
}

// A module's outputs fill a class's required fields: a class with only `obs` set (unset() and a
// setter) goes through a policy and an environment that write `action` and `next`'s fields.
TEST(TensorClassNn, OutputsFillUnsetRequiredFields) {
  torch::manual_seed(0);
  Step step = Step::unset({5});
  step.set_obs(at::randn({5, 4}));
  nn::TensorDictModule policy(torch::nn::Linear(4, 2), "obs", "action");
  nn::TensorDictSequential act_and_step(policy, Env());
  Step out = nn::forward(*act_and_step, step);
  EXPECT_EQ(out.action().sizes(), at::IntArrayRef({5, 2}));
  EXPECT_EQ(out.next().obs().sizes(), at::IntArrayRef({5, 4}));
  EXPECT_TRUE(at::allclose(out.next().reward(), -out.action().pow(2).sum(-1, true)));
  EXPECT_TRUE(out.obs().is_same(step.obs()));
  EXPECT_FALSE(step.contains("action"));  // the input is not modified
  EXPECT_FALSE(step.contains("next"));
  // A field set on the input and written by the module: the result holds the module's value,
  // the input keeps its own.
  Step again = nn::forward(*policy, out);
  EXPECT_TRUE(at::allclose(again.action(), out.action()));
  EXPECT_FALSE(again.action().is_same(out.action()));
  // Writing into a nested class the input already holds leaves the input's nested class alone.
  Step twice = nn::forward(*Env(), out);
  EXPECT_FALSE(twice.next().obs().is_same(out.next().obs()));
  EXPECT_TRUE(at::allclose(out.next().obs(), twice.next().obs()));
}

// A required field that is neither set nor written is named before the module runs; one the
// module was expected to write but did not is named after, with the input unchanged.
TEST(TensorClassNn, MissingFieldsAreNamed) {
  Step step = Step::unset({5});
  step.set_obs(at::randn({5, 4}));
  int calls = 0;
  nn::TensorDictModule policy(
      [&calls](const at::Tensor& obs) {
        ++calls;
        return obs.narrow(-1, 0, 2);
      },
      "obs", "action");
  TD_EXPECT_THROW_MSG(nn::forward(*policy, step), KeyError,
                      {"td::nn::forward: Step requires field ['next']",
                       "does not write (its out keys: ['action'])", "std::optional"});
  EXPECT_EQ(calls, 0);
  // Part of a nested class: its missing required field is named by its full key.
  nn::TensorDictModule obs_only([](const at::Tensor& obs) { return obs * 2; }, "obs",
                                td::NestedKey({"next", "obs"}));
  nn::TensorDictSequential partial(policy, obs_only);
  TD_EXPECT_THROW_MSG(nn::forward(*partial, step), KeyError,
                      {"requires field [('next', 'reward')]"});
  EXPECT_EQ(calls, 0);
  // Nothing set at all: every required field the module does not write.
  TD_EXPECT_THROW_MSG(nn::forward(*Env(&calls), Step::unset({5})), KeyError,
                      {"requires fields ['obs', 'action']"});
  EXPECT_EQ(calls, 0);
  // A sequence whose selected out keys leave "action" out does not write it.
  nn::TensorDictSequential drops(policy, Env(&calls));
  drops->select_out_keys({{"next", "obs"}, {"next", "reward"}});
  TD_EXPECT_THROW_MSG(nn::forward(*drops, step), KeyError, {"requires field ['action']"});
  // With "action" set on the input, the check before the run passes; the sequence still removes
  // the unselected key it wrote, and the result's check names it. The input keeps its action.
  Step with_action = step.clone();
  with_action.set_action(at::zeros({5, 2}));
  TD_EXPECT_THROW_MSG(nn::forward(*drops, with_action), KeyError,
                      {"td::nn::forward: the module's result is not a Step",
                       "missing field ['action']"});
  EXPECT_TRUE(at::equal(with_action.action(), at::zeros({5, 2})));
  drops->reset_out_keys();
  Step done = nn::forward(*drops, with_action);
  EXPECT_EQ(done.next().reward().sizes(), at::IntArrayRef({5, 1}));
}

}  // namespace
}  // namespace td

namespace td {
namespace {

class InputTC : public TensorClass<InputTC> {
 public:
  TD_TENSORCLASS(InputTC, (at::Tensor, x), (std::string, tag))
};
class Inner : public TensorClass<Inner> {
 public:
  TD_TENSORCLASS(Inner, (at::Tensor, z))
};
class OutputTC : public TensorClass<OutputTC> {
 public:
  TD_TENSORCLASS(OutputTC, (at::Tensor, y), (std::optional<Inner>, inner))
};

struct AddOne : nn::TensorClassModuleBase<InputTC, OutputTC> {
  OutputTC forward(const InputTC& in) override {
    return OutputTC(in.x() + 1, Inner(in.x() * 2, in.batch_size()), in.batch_size());
  }
};

TEST(TensorClassModule, TypedForwardAndTensorDictWrapper) {
  auto m = std::make_shared<AddOne>();
  OutputTC out = (*m)(InputTC(at::zeros({3}), "t", {3}));
  EXPECT_TRUE(out.y().equal(at::ones({3})));
  auto wrapper = m->as_td_module();
  EXPECT_EQ(KeysRepr(wrapper->in_keys()), "['x', 'tag']");
  EXPECT_EQ(KeysRepr(wrapper->out_keys()), "['y', ('inner', 'z')]");
  EXPECT_EQ(nn::tensorclass_keys<OutputTC>(), (std::vector<NestedKey>{"y", NestedKey{"inner", "z"}}));
  // In a TensorDict pipeline: other keys of the input are ignored, the output is a new TensorDict.
  TensorDict data({{"x", at::ones({3})}, {"tag", "t"}, {"other", at::zeros({3})}}, {3});
  TensorDict result = wrapper->forward(data);
  EXPECT_TRUE(result.get("y").equal(at::full({3}, 2.0)));
  EXPECT_TRUE(result.get({"inner", "z"}).equal(at::full({3}, 2.0)));
  EXPECT_FALSE(data.contains("y"));
  EXPECT_EQ(wrapper->named_children().size(), 1u);  // "tc_module"
  TD_EXPECT_THROW_MSG(wrapper->forward(TensorDict({{"tag", "t"}}, {3})), KeyError, {"'x'"});
  AddOne on_stack;
  TD_EXPECT_THROW_MSG(on_stack.as_td_module(), ValueError, {"std::shared_ptr"});
}

}  // namespace
}  // namespace td
