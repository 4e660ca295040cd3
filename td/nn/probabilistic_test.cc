#include "td/nn/probabilistic.h"

#include <gtest/gtest.h>
#include <torch/nn.h>

#include <sstream>

#include "td/core/testing.h"
#include "td/nn/functional.h"

namespace {

namespace tnn = torch::nn;
using td::nn::InteractionType;
using td::nn::ProbabilisticTensorDictModule;
using td::nn::ProbabilisticTensorDictModuleOptions;
using td::nn::ProbabilisticTensorDictSequential;
using td::nn::TensorDictModule;
using td::nn::TensorDictSequential;

struct SeedPipeline {
  tnn::Linear net1{4, 8};
  tnn::Linear module2{4, 8};
  ProbabilisticTensorDictSequential td_module1{
      TensorDictModule(net1, {"input"}, {"params"}),
      TensorDictModule(td::nn::NormalParamExtractor(), {"params"}, {"loc", "scale"}),
      ProbabilisticTensorDictModule({"loc", "scale"}, {"hidden"}, td::nn::Normal::factory(),
                                    ProbabilisticTensorDictModuleOptions().return_log_prob(true))};
  TensorDictModule td_module2{module2, {"hidden"}, {"output"}};
  TensorDictSequential td_module{td_module1, td_module2};
};

TEST(ProbabilisticTensorDictSequential, SeedExample) {
  SeedPipeline p;
  td::TensorDict data({{"input", at::randn({3, 4})}}, {3});
  td::TensorDict params = td::nn::from_module(p.td_module);
  {
    auto guard = td::nn::to_module(params, p.td_module);
    p.td_module(data);
  }
  EXPECT_EQ(data.repr(),
            "TensorDict(\n"
            "    fields={\n"
            "        hidden: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        hidden_log_prob: Tensor(shape=torch.Size([3, 4]), device=cpu, "
            "dtype=torch.float32, is_shared=False),\n"
            "        input: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        loc: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        output: Tensor(shape=torch.Size([3, 8]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        params: Tensor(shape=torch.Size([3, 8]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        scale: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, "
            "is_shared=False)},\n"
            "    batch_size=torch.Size([3]),\n"
            "    device=None,\n"
            "    is_shared=False)");
  // The default interaction type (DETERMINISTIC) draws the mean.
  EXPECT_TRUE(at::equal(data.get("hidden"), data.get("loc")));
  const at::Tensor scale = data.get("scale");
  EXPECT_TRUE(at::allclose(data.get("hidden_log_prob"),
                           -at::log(scale) - 0.5 * std::log(2 * 3.14159265358979323846)));
  EXPECT_EQ(td::KeysRepr(p.td_module->in_keys()), "['input']");
  EXPECT_EQ(td::KeysRepr(p.td_module->out_keys()),
            "['params', 'loc', 'scale', 'hidden', 'hidden_log_prob', 'output']");
  // Parameters are laid out as in Python: module.<i>.module.<param>.
  EXPECT_TRUE(params.get({"module", "0", "module", "0", "module", "weight"}).is_same(p.net1->weight));
}

// One key alone is a list of one (td::nn::Keys), as for TensorDictModule.
TEST(ProbabilisticTensorDictModule, OneKeyAlone) {
  ProbabilisticTensorDictModule head({"loc", "scale"}, "action", td::nn::Normal::factory());
  EXPECT_EQ(td::KeysRepr(head->out_keys()), "['action']");
  td::TensorDict data({{"loc", at::zeros({3, 2})}, {"scale", at::ones({3, 2})}}, {3});
  EXPECT_EQ(head(data).get("action").sizes(), at::IntArrayRef({3, 2}));
  ProbabilisticTensorDictModule cat("logits", td::NestedKey({"next", "action"}),
                                    td::nn::Categorical::factory());
  EXPECT_EQ(td::KeysRepr(cat->in_keys()), "['logits']");
  EXPECT_EQ(td::KeysRepr(cat->out_keys()), "[('next', 'action')]");
}

TEST(ProbabilisticTensorDictModule, InteractionTypes) {
  SeedPipeline p;
  td::TensorDict data({{"input", at::randn({3, 4})}}, {3});
  auto& prob = p.td_module1->probabilistic_module();
  EXPECT_EQ(prob.current_interaction_type(), InteractionType::kDeterministic);
  EXPECT_FALSE(td::nn::interaction_type().has_value());
  {
    td::nn::SetInteractionType random(InteractionType::kRandom);
    EXPECT_EQ(prob.current_interaction_type(), InteractionType::kRandom);
    p.td_module1(data);
    EXPECT_FALSE(at::allclose(data.get("hidden"), data.get("loc")));
    // rsample: the draw carries gradients back to the network.
    data.get("hidden").sum().backward();
    EXPECT_TRUE(p.net1->weight.grad().defined());
    {
      td::nn::SetInteractionType mode(InteractionType::kMode);
      p.td_module1(data);
      EXPECT_TRUE(at::equal(data.get("hidden"), data.get("loc")));
    }
    EXPECT_EQ(td::nn::interaction_type(), InteractionType::kRandom);
  }
  EXPECT_FALSE(td::nn::interaction_type().has_value());
  {
    td::nn::SetInteractionType mean(InteractionType::kMean);
    p.td_module1(data);
    EXPECT_TRUE(at::equal(data.get("hidden"), data.get("loc")));
  }
  // get_dist / log_prob of the sequence.
  std::shared_ptr<td::nn::Distribution> dist = p.td_module1->get_dist(data);
  EXPECT_EQ(dist->name(), "Normal");
  EXPECT_TRUE(at::allclose(dist->mean(), data.get("loc")));
  EXPECT_TRUE(at::allclose(p.td_module1->log_prob(data), dist->log_prob(data.get("hidden"))));
}

TEST(ProbabilisticTensorDictModule, CategoricalAndParamNames) {
  ProbabilisticTensorDictModule actor(
      {{"net", "out"}}, {"action"}, td::nn::Categorical::factory(),
      ProbabilisticTensorDictModuleOptions().dist_param_names({"logits"}).return_log_prob(true)
          .log_prob_key({"extra", "lp"}));
  td::TensorDict data({}, {4});
  data.set({"net", "out"}, torch::tensor({{0.f, 5.f, 0.f}, {9.f, 0.f, 0.f}, {0.f, 0.f, 1.f},
                                       {0.f, 2.f, 0.f}}));
  actor(data);
  EXPECT_TRUE(at::equal(data.get("action"), at::tensor({1, 0, 2, 1}, at::kLong)));
  EXPECT_EQ(data.get({"extra", "lp"}).sizes(), at::IntArrayRef({4}));
  EXPECT_EQ(td::KeysRepr(actor->out_keys()), "['action', ('extra', 'lp')]");
  td::nn::SetInteractionType random(InteractionType::kRandom);
  actor(data);
  EXPECT_EQ(data.get("action").scalar_type(), at::kLong);
  // select_out_keys: only the draw.
  actor->select_out_keys({"action"});
  td::TensorDict fresh({}, {4});
  fresh.set({"net", "out"}, at::zeros({4, 3}));
  actor(fresh);
  EXPECT_FALSE(fresh.contains("extra"));
}

TEST(ProbabilisticTensorDictModule, MedianInteraction) {
  EXPECT_EQ(td::nn::InteractionTypeName(InteractionType::kMedian), "MEDIAN");
  ProbabilisticTensorDictModule tn({"loc", "scale"}, {"action"},
                                   td::nn::TruncatedNormal::factory(-1.0, 1.0),
                                   ProbabilisticTensorDictModuleOptions().return_log_prob(true));
  const at::Tensor loc = at::tensor({0.9f, -0.2f, 3.0f}), scale = at::tensor({0.5f, 2.0f, 1.0f});
  td::TensorDict data({{"loc", loc}, {"scale", scale}}, {3});
  {
    td::nn::SetInteractionType median(InteractionType::kMedian);
    tn(data);
  }
  td::nn::TruncatedNormal dist(loc, scale, -1.0, 1.0);
  EXPECT_TRUE(at::equal(data.get("action"), dist.median()));
  EXPECT_TRUE(at::allclose(data.get("action_log_prob"), dist.log_prob(dist.median())));
  // The default interaction type can be the median too.
  ProbabilisticTensorDictModule normal(
      {"loc", "scale"}, {"x"}, td::nn::Normal::factory(),
      ProbabilisticTensorDictModuleOptions().default_interaction_type(InteractionType::kMedian));
  normal(data);
  EXPECT_TRUE(at::equal(data.get("x"), loc));
  std::ostringstream os;
  os << *normal;
  EXPECT_NE(os.str().find("default_interaction_type=MEDIAN"), std::string::npos) << os.str();
  // A categorical head has none: the error names it and suggests kMode; nothing is written.
  ProbabilisticTensorDictModule cat({"logits"}, {"a"}, td::nn::Categorical::factory());
  td::TensorDict d2({{"logits", at::randn({3, 4})}}, {3});
  td::nn::SetInteractionType median(InteractionType::kMedian);
  TD_EXPECT_THROW_MSG(cat(d2), c10::NotImplementedError, {"Categorical has no median", "kMode"});
  EXPECT_FALSE(d2.contains("a"));
}

TEST(ProbabilisticTensorDictModule, Errors) {
  ProbabilisticTensorDictModule m({"loc", "scale"}, {"x"}, td::nn::Normal::factory());
  TD_EXPECT_THROW_MSG(m(td::TensorDict({{"loc", at::zeros({2})}}, {2})), td::KeyError,
                      {"'scale'", "['loc']"});
  TD_EXPECT_THROW_MSG(m(td::TensorDict({{"loc", at::zeros({2})}, {"scale", at::zeros({2})}}, {2})),
                      td::ValueError, {"scale must be positive", "ProbabilisticTensorDictModule"});
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"loc"}, {"a", "b"}, td::nn::Normal::factory()),
                      td::ValueError, {"exactly one key"});
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictSequential(TensorDictModule(
                          [](at::Tensor x) { return x; }, {"a"}, {"b"})),
                      td::TypeError, {"last module must be a ProbabilisticTensorDictModule"});
  // The log-prob does not fit the batch size: neither entry is written.
  ProbabilisticTensorDictModule wide({"loc", "scale"}, {"x"}, td::nn::Normal::factory(),
                                     ProbabilisticTensorDictModuleOptions().return_log_prob(true)
                                         .log_prob_key({"loc", "lp"}));
  td::TensorDict data({{"loc", at::zeros({2})}, {"scale", at::ones({2})}}, {2});
  EXPECT_THROW(wide(data), c10::Error);
  EXPECT_FALSE(data.contains("x"));
}

TEST(ProbabilisticTensorDictSequential, PrintsAndClones) {
  SeedPipeline p;
  std::ostringstream os;
  os << *p.td_module1;
  EXPECT_NE(os.str().find("td::nn::ProbabilisticTensorDictSequential(in_keys=['input']"),
            std::string::npos)
      << os.str();
  EXPECT_NE(os.str().find("distribution=Normal"), std::string::npos) << os.str();
  auto copy = std::dynamic_pointer_cast<td::nn::ProbabilisticTensorDictSequentialImpl>(
      p.td_module1->clone());
  ASSERT_TRUE(copy);
  td::TensorDict data({{"input", at::randn({3, 4})}}, {3});
  EXPECT_TRUE(at::allclose(copy->forward(data.copy()).get("hidden"),
                           p.td_module1(data.copy()).get("hidden")));
}

// ---- return_composite ------------------------------------------------------------------------------

// Upstream's docstring example: x -> loc -> sample0 -> loc2 -> sample1, Normal(loc, 1) each.
std::vector<std::shared_ptr<td::nn::TensorDictModuleBase>> TwoDraws() {
  auto loc_and_scale = [](at::Tensor x) { return std::make_tuple(x + 1, at::ones_like(x)); };
  return {
      TensorDictModule(loc_and_scale, {"x"}, {"loc", "scale"}).ptr(),
      ProbabilisticTensorDictModule({"loc", "scale"}, "sample0", td::nn::Normal::factory()).ptr(),
      TensorDictModule(loc_and_scale, {"sample0"}, {"loc2", "scale2"}).ptr(),
      ProbabilisticTensorDictModule(
          {"loc2", "scale2"}, "sample1", td::nn::Normal::factory(),
          ProbabilisticTensorDictModuleOptions().dist_param_names({"loc", "scale"}))
          .ptr()};
}

TEST(ProbabilisticTensorDictSequential, ReturnCompositeGathersEveryDistribution) {
  ProbabilisticTensorDictSequential seq(TwoDraws());  // two probabilistic modules: composite
  EXPECT_TRUE(seq->return_composite());
  td::TensorDict input({{"x", at::ones({3})}}, {3});
  auto dist = seq->get_composite_dist(input);
  EXPECT_EQ(dist->keys(), (std::vector<td::NestedKey>{"sample0", "sample1"}));
  EXPECT_EQ(input.keys(), (std::vector<td::NestedKey>{"x"}));  // the input is left unchanged
  // sample1's distribution is conditioned on the draw of sample0 (deterministic: its mean, 2).
  EXPECT_TRUE(dist->dist("sample0").mean().equal(at::full({3}, 2.0)));
  EXPECT_TRUE(dist->dist("sample1").mean().equal(at::full({3}, 3.0)));
  EXPECT_EQ(dist->batch_shape(), at::IntArrayRef({3}));
  // forward runs every module; log_prob scores both draws: 2 * log N(0; 0, 1) per element.
  td::TensorDict out = seq(input.copy());
  EXPECT_TRUE(out.get("sample1").equal(at::full({3}, 3.0)));
  EXPECT_TRUE(at::allclose(seq->log_prob(out), at::full({3}, -2 * 0.91893853320467)));
  // Under kRandom, sample1's loc is sample0's draw plus one, not 3.
  {
    at::manual_seed(0);
    td::nn::SetInteractionType random(InteractionType::kRandom);
    auto drawn = seq->get_composite_dist(input);
    EXPECT_FALSE(at::allclose(drawn->dist("sample1").mean(), at::full({3}, 3.0)));
  }
  TD_EXPECT_THROW_MSG(seq->get_dist(input), td::TypeError, {"return_composite", "get_composite_dist"});
}

TEST(ProbabilisticTensorDictSequential, ReturnCompositeFalseUsesTheLastModule) {
  ProbabilisticTensorDictSequential seq(
      TwoDraws(), td::nn::ProbabilisticTensorDictSequentialOptions().return_composite(false));
  EXPECT_FALSE(seq->return_composite());
  td::TensorDict input({{"x", at::ones({3})}}, {3});
  auto dist = seq->get_dist(input);
  EXPECT_EQ(dist->name(), "Normal");
  EXPECT_TRUE(dist->mean().equal(at::full({3}, 3.0)));
  td::TensorDict out = seq(td::TensorDict({{"x", at::ones({3})}}, {3}));
  EXPECT_TRUE(at::allclose(seq->log_prob(out), at::full({3}, -0.91893853320467)));
}

TEST(ProbabilisticTensorDictSequential, ReturnCompositeWithAnIntermediateDistributionOnly) {
  std::vector<std::shared_ptr<td::nn::TensorDictModuleBase>> mods = TwoDraws();
  mods.resize(3);  // x -> loc -> sample0 -> loc2: the last module is not probabilistic
  ProbabilisticTensorDictSequential seq(mods);
  EXPECT_TRUE(seq->return_composite());
  td::TensorDict input({{"x", at::ones({3})}}, {3});
  EXPECT_EQ(seq->get_composite_dist(input)->keys(), (std::vector<td::NestedKey>{"sample0"}));
  EXPECT_TRUE(seq(input).get("loc2").equal(at::full({3}, 3.0)));
  // Not allowed without return_composite, nor with no probabilistic module at all.
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictSequential(
                          mods, td::nn::ProbabilisticTensorDictSequentialOptions()
                                    .return_composite(false)),
                      td::TypeError, {"last module must be", "unless return_composite is true"});
  TD_EXPECT_THROW_MSG(
      ProbabilisticTensorDictSequential(
          std::vector<std::shared_ptr<td::nn::TensorDictModuleBase>>{mods[0]},
          td::nn::ProbabilisticTensorDictSequentialOptions().return_composite(true)),
      td::TypeError, {"no module is probabilistic", "TensorDictSequential"});
}

}  // namespace

TEST(ProbabilisticTensorDictModule, DefaultDistributionIsDelta) {
  // Upstream's distribution_class defaults to Delta: the draw is the parameter itself.
  ProbabilisticTensorDictModule point({"param"}, {"action"},
                                      ProbabilisticTensorDictModuleOptions().return_log_prob(true));
  const at::Tensor param = at::randn({4, 2});
  td::TensorDict out = point(td::TensorDict({{"param", param}}, {4}));
  EXPECT_TRUE(at::equal(out.get("action"), param));
  // Delta's log-density at its own point (as upstream's Delta: 0 per element, summed over the
  // event dims).
  EXPECT_EQ(out.get("action_log_prob").sizes(), at::IntArrayRef({4}));
  EXPECT_TRUE(at::equal(out.get("action_log_prob"), at::zeros({4})));
  {
    td::nn::SetInteractionType random(InteractionType::kRandom);
    EXPECT_TRUE(at::equal(point(td::TensorDict({{"param", param}}, {4})).get("action"), param));
  }
  // The parameter must be named "param" (or dist_param_names says which in key it is).
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"loc"}, {"action"})(td::TensorDict({{"loc", param}}, {4})),
                      c10::Error, {"param"});
  ProbabilisticTensorDictModule named({"loc"}, {"action"},
                                      ProbabilisticTensorDictModuleOptions().dist_param_names({"param"}));
  EXPECT_TRUE(at::equal(named(td::TensorDict({{"loc", param}}, {4})).get("action"), param));
}
