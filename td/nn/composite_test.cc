#include "td/nn/composite.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <sstream>

#include "td/core/testing.h"
#include "td/nn/probabilistic.h"

namespace {

namespace tnn = torch::nn;
using td::TensorDict;
using td::nn::Categorical;
using td::nn::CompositeDistribution;
using td::nn::InteractionType;
using td::nn::Normal;
using td::nn::ProbabilisticTensorDictModule;
using td::nn::ProbabilisticTensorDictModuleOptions;
using td::nn::TensorDictModule;
using Keys = std::vector<td::NestedKey>;

constexpr int64_t kB = 5;

// log softmax(logits)[action], by hand.
at::Tensor CategoricalLogProb(const at::Tensor& logits, const at::Tensor& action) {
  return at::log_softmax(logits, -1).gather(-1, action.unsqueeze(-1)).squeeze(-1);
}

// The Normal log-density summed over the last dim, by hand.
at::Tensor NormalLogProb(const at::Tensor& loc, const at::Tensor& scale, const at::Tensor& x) {
  const at::Tensor z = (x - loc) / scale;
  return (-0.5 * z * z - at::log(scale) - 0.5 * std::log(2 * M_PI)).sum(-1);
}

struct Params {
  at::Tensor logits = at::randn({kB, 3});
  at::Tensor loc = at::randn({kB, 2});
  at::Tensor scale = at::rand({kB, 2}) + 0.5;
  TensorDict td() const {
    return TensorDict({{"disc", {{"logits", logits}}}, {"cont", {{"loc", loc}, {"scale", scale}}}},
                      {kB});
  }
};

td::nn::CompositeMap DiscreteAndContinuous() {
  return {{"disc", Categorical::factory()}, {"cont", Normal::factory()}};
}

TEST(CompositeDistribution, DrawsLogProbsAndEntropy) {
  at::manual_seed(0);
  Params p;
  CompositeDistribution dist(p.td(), DiscreteAndContinuous());
  EXPECT_EQ(dist.name(), "CompositeDistribution(disc: Categorical, cont: Normal)");
  EXPECT_EQ(dist.batch_shape(), at::IntArrayRef({kB}));
  EXPECT_EQ(dist.keys(), (Keys{"disc", "cont"}));
  EXPECT_EQ(dist.dist("cont").name(), "Normal");

  const TensorDict draw = dist.sample();
  EXPECT_EQ(draw.batch_size(), at::IntArrayRef({kB}));
  EXPECT_EQ(draw.keys(), (Keys{"disc", "cont"}));
  EXPECT_EQ(draw.get("disc").sizes(), at::IntArrayRef({kB}));
  EXPECT_EQ(draw.get("disc").scalar_type(), at::kLong);
  EXPECT_EQ(draw.get("cont").sizes(), at::IntArrayRef({kB, 2}));
  const at::Tensor by_hand = CategoricalLogProb(p.logits, draw.get("disc")) +
                             NormalLogProb(p.loc, p.scale, draw.get("cont"));
  const at::Tensor lp = dist.log_prob(draw);
  EXPECT_EQ(lp.sizes(), at::IntArrayRef({kB}));
  EXPECT_TRUE(at::allclose(lp, by_hand));

  // Python's log_prob_composite: the parts unreduced, and their sum.
  const TensorDict parts = dist.log_prob_composite(draw);
  EXPECT_EQ(parts.keys(), (Keys{"disc_log_prob", "cont_log_prob", "sample_log_prob"}));
  EXPECT_TRUE(at::allclose(parts.get("disc_log_prob"),
                           CategoricalLogProb(p.logits, draw.get("disc"))));
  EXPECT_EQ(parts.get("cont_log_prob").sizes(), at::IntArrayRef({kB, 2}));
  EXPECT_TRUE(at::allclose(parts.get("sample_log_prob"), by_hand));
  EXPECT_FALSE(dist.log_prob_composite(draw, false).contains("sample_log_prob"));

  // Entropy: the Categorical's plus the Normal's summed over dim 1.
  const at::Tensor probs = at::softmax(p.logits, -1);
  const at::Tensor h = -(probs * at::log(probs)).sum(-1) +
                       (0.5 + 0.5 * std::log(2 * M_PI) + at::log(p.scale)).sum(-1);
  EXPECT_TRUE(at::allclose(dist.entropy(), h));

  // Deterministic draws, and sample dims in front.
  const TensorDict mode = dist.mode();
  EXPECT_TRUE(at::equal(mode.get("disc"), p.logits.argmax(-1)));
  EXPECT_TRUE(at::equal(mode.get("cont"), p.loc));
  EXPECT_TRUE(at::equal(dist.deterministic_sample().get("disc"), p.logits.argmax(-1)));
  EXPECT_TRUE(at::equal(dist.mean().get("cont"), p.loc));
  const TensorDict many = dist.sample({7});
  EXPECT_EQ(many.batch_size(), at::IntArrayRef({7, kB}));
  EXPECT_EQ(dist.log_prob(many).sizes(), at::IntArrayRef({7, kB}));
  EXPECT_TRUE(at::allclose(dist.log_prob(many)[3],
                           CategoricalLogProb(p.logits, many.get("disc")[3]) +
                               NormalLogProb(p.loc, p.scale, many.get("cont")[3])));

  // No rsample / median for the Categorical part: the errors name it.
  EXPECT_FALSE(dist.has_rsample());
  TD_EXPECT_THROW_MSG(dist.rsample(), td::TypeError, {"'disc' (Categorical)", "sample()"});
  TD_EXPECT_THROW_MSG(dist.median(), c10::NotImplementedError,
                      {"Categorical has no median", "'disc'"});
}

TEST(CompositeDistribution, ParamKeysNestedKeysAndReparameterizedDraws) {
  // Parameters found by param_keys (named by their last components), nested out keys.
  const at::Tensor loc = at::randn({kB, 2}).requires_grad_();
  const at::Tensor scale = at::rand({kB, 2}) + 0.5;
  const at::Tensor tn_loc = at::rand({kB}), tn_scale = at::rand({kB}) + 0.2;
  TensorDict params(
      {{"loc", loc}, {"scale", scale}, {"tn", {{"loc", tn_loc}, {"scale", tn_scale}}}}, {kB});
  CompositeDistribution dist(
      params, {{{"agent", "move"}, {Normal::factory(), {"loc", "scale"}}},
               {"speed", {td::nn::TruncatedNormal::factory(0.0, 1.0),
                          {{"tn", "loc"}, {"tn", "scale"}}}}});
  EXPECT_TRUE(dist.has_rsample());
  const TensorDict draw = dist.rsample();
  EXPECT_EQ(draw.keys(td::test::kLeaves), (Keys{{"agent", "move"}, "speed"}));
  td::nn::TruncatedNormal tn(tn_loc, tn_scale, 0.0, 1.0);
  const at::Tensor by_hand = NormalLogProb(loc, scale, draw.get({"agent", "move"})) +
                             tn.log_prob(draw.get("speed"));
  const at::Tensor lp = dist.log_prob(draw);
  EXPECT_TRUE(at::allclose(lp, by_hand));
  lp.sum().backward();  // reparameterized: gradients reach loc
  EXPECT_TRUE(loc.grad().defined());
  EXPECT_TRUE(dist.log_prob_composite(draw).contains({"agent", "move_log_prob"}));
  const TensorDict median = dist.median();
  EXPECT_TRUE(at::equal(median.get({"agent", "move"}), loc));
  EXPECT_TRUE(at::allclose(median.get("speed"), tn.median()));
}

TEST(CompositeDistribution, Errors) {
  Params p;
  TensorDict no_cont({{"disc", {{"logits", p.logits}}}}, {kB});
  TD_EXPECT_THROW_MSG(CompositeDistribution(no_cont, DiscreteAndContinuous()), td::KeyError,
                      {"'cont' (Normal)", "params['cont']", "does not exist",
                       "[('disc', 'logits')]"});
  TensorDict no_scale({{"cont", {{"loc", p.loc}}}}, {kB});
  TD_EXPECT_THROW_MSG(
      CompositeDistribution(no_scale, {{"cont", {Normal::factory(), {{"cont", "loc"},
                                                                      {"cont", "scale"}}}}}),
      td::KeyError, {"('cont', 'scale')", "'cont' (Normal)", "is missing"});
  // The part's own error gets the out key.
  TD_EXPECT_THROW_MSG(CompositeDistribution(no_scale, {{"cont", Normal::factory()}}), td::KeyError,
                      {"needs a parameter named 'scale'", "building 'cont' (Normal)"});
  // A part whose batch shape does not start with the parameters' batch size.
  TensorDict flat({{"disc", {{"logits", at::randn({kB})}}}}, {kB});
  TD_EXPECT_THROW_MSG(CompositeDistribution(flat, {{"disc", Categorical::factory()}}),
                      td::ValueError,
                      {"'disc' (Categorical)", "torch.Size([])", "torch.Size([5])"});
  TD_EXPECT_THROW_MSG(CompositeDistribution(p.td(), {}), td::ValueError, {"empty"});
  TD_EXPECT_THROW_MSG(
      CompositeDistribution(p.td(), {{"disc", Categorical::factory()},
                                     {"disc", Categorical::factory()}}),
      td::ValueError, {"'disc' appears twice"});

  CompositeDistribution dist(p.td(), DiscreteAndContinuous());
  TensorDict missing({{"cont", p.loc}}, {kB});
  TD_EXPECT_THROW_MSG(dist.log_prob(missing), td::KeyError, {"'disc'", "is missing", "['cont']"});
  TensorDict wide({{"disc", at::zeros({kB}, at::kLong)}, {"cont", at::zeros({kB, 3})}}, {kB});
  TD_EXPECT_THROW_MSG(dist.log_prob(wide), td::ValueError,
                      {"'cont'", "torch.Size([5, 3])", "Normal draws shape torch.Size([5, 2])"});
  TD_EXPECT_THROW_MSG(dist.dist("nope"), td::KeyError, {"'nope'", "['disc', 'cont']"});
}

// ---- in a ProbabilisticTensorDictModule -----------------------------------------------------------

// obs [B, 4] -> params {"disc": {"logits": [B, 3]}, "cont": {"loc": [B, 2], "scale": [B, 2]}}.
td::nn::ProbabilisticTensorDictSequential Policy(
    ProbabilisticTensorDictModuleOptions options = ProbabilisticTensorDictModuleOptions()
                                                       .return_log_prob(true)) {
  return td::nn::ProbabilisticTensorDictSequential(
      TensorDictModule(tnn::Linear(4, 7), {"obs"}, {"hidden"}),
      TensorDictModule(
          [](at::Tensor h) {
            std::vector<at::Tensor> parts = h.split_with_sizes({3, 2, 2}, -1);
            return std::make_tuple(parts[0], parts[1], at::softplus(parts[2]) + 1e-3);
          },
          {"hidden"}, {{"params", "disc", "logits"}, {"params", "cont", "loc"},
                       {"params", "cont", "scale"}}),
      ProbabilisticTensorDictModule({"params"}, {"disc", "cont"},
                                    CompositeDistribution::factory(DiscreteAndContinuous()),
                                    options));
}

TEST(CompositeDistribution, LogProbAndEntropyKeys) {
  at::manual_seed(0);
  Params p;
  CompositeDistribution dist(p.td(), DiscreteAndContinuous(),
                             td::nn::CompositeDistributionOptions()
                                 .log_prob_key(td::NestedKey{"agent", "lp"})
                                 .entropy_key("h"));
  EXPECT_EQ(dist.log_prob_key(), (td::NestedKey{"agent", "lp"}));
  const TensorDict draw = dist.sample();
  const TensorDict parts = dist.log_prob_composite(draw);
  EXPECT_TRUE(parts.contains({"agent", "lp"}));
  EXPECT_FALSE(parts.contains("sample_log_prob"));
  EXPECT_TRUE(at::allclose(parts.get({"agent", "lp"}), dist.log_prob(draw)));
  const TensorDict h = dist.entropy_composite();
  EXPECT_TRUE(at::allclose(h.get("h"), dist.entropy()));
  EXPECT_FALSE(h.contains("entropy"));
  // Through the factory too; a sum key colliding with a part's key is refused, naming it.
  auto f = CompositeDistribution::factory(DiscreteAndContinuous(),
                                          td::nn::CompositeDistributionOptions().entropy_key("disc_entropy"));
  TD_EXPECT_THROW_MSG(f.make(p.td())->entropy_composite(), td::ValueError, {"'disc_entropy'"});
}

TEST(CompositeDistribution, FromDistributions) {
  at::manual_seed(0);
  Params p;
  auto cat = std::make_shared<Categorical>(Categorical::from_logits(p.logits));
  auto normal = std::make_shared<Normal>(p.loc, p.scale);
  CompositeDistribution dist = CompositeDistribution::from_distributions(
      p.td(), {{"disc", cat}, {"cont", normal}}, {{td::NestedKey("cont"), td::NestedKey{"act", "cont"}}});
  EXPECT_EQ(dist.keys(), (Keys{"disc", td::NestedKey{"act", "cont"}}));
  EXPECT_EQ(dist.batch_shape(), at::IntArrayRef({kB}));
  EXPECT_EQ(dist.sample({3}).get({"act", "cont"}).sizes(), at::IntArrayRef({3, kB, 2}));
  const TensorDict draw = dist.sample();
  const at::Tensor by_hand = CategoricalLogProb(p.logits, draw.get("disc")) +
                             NormalLogProb(p.loc, p.scale, draw.get({"act", "cont"}));
  EXPECT_TRUE(at::allclose(dist.log_prob(draw), by_hand));
  TD_EXPECT_THROW_MSG(CompositeDistribution::from_distributions(p.td(), {{"disc", cat}},
                                                                {{td::NestedKey("typo"), td::NestedKey("x")}}),
                      td::KeyError, {"'typo'", "['disc']"});
  TensorDict wide({}, {kB + 1});
  TD_EXPECT_THROW_MSG(CompositeDistribution::from_distributions(wide, {{"disc", cat}}), td::ValueError,
                      {"'disc'", "batch shape"});
  TD_EXPECT_THROW_MSG(CompositeDistribution::from_distributions(p.td(), {{"disc", nullptr}}),
                      td::ValueError, {"'disc'", "null"});
}

TEST(CompositeDistribution, CdfAndIcdf) {
  at::manual_seed(0);
  Params p;
  CompositeDistribution dist(TensorDict({{"a", {{"loc", p.loc}, {"scale", p.scale}}},
                                         {"b", {{"loc", p.loc * 2}, {"scale", p.scale}}}},
                                        {kB}),
                             {{"a", Normal::factory()}, {td::NestedKey{"n", "b"}, td::nn::CompositePart(Normal::factory(), {{"b", "loc"}, {"b", "scale"}})}});
  TensorDict draw = dist.sample();
  TensorDict same = dist.cdf(draw);
  EXPECT_TRUE(same.is_same(draw));  // written into the sample, as upstream
  const at::Tensor by_hand = 0.5 * (1 + at::erf((draw.get("a") - p.loc) / (p.scale * std::sqrt(2.0))));
  EXPECT_TRUE(at::allclose(draw.get("a_cdf"), by_hand));
  EXPECT_TRUE(draw.contains({"n", "b_cdf"}));
  dist.icdf(draw);
  EXPECT_TRUE(at::allclose(draw.get("a_icdf"), draw.get("a"), 1e-4, 1e-4));
  EXPECT_TRUE(at::allclose(draw.get({"n", "b_icdf"}), draw.get({"n", "b"}), 1e-4, 1e-4));
  // icdf from the draws alone (no "_cdf" entries): their cdf first.
  TensorDict fresh = dist.sample();
  dist.icdf(fresh);
  EXPECT_TRUE(at::allclose(fresh.get("a_icdf"), fresh.get("a"), 1e-4, 1e-4));
  TD_EXPECT_THROW_MSG(dist.icdf(TensorDict({}, {kB})), td::KeyError, {"'a_cdf'", "'a'"});
  // A part without a cdf: NotImplementedError naming it, nothing written.
  CompositeDistribution mixed(p.td(), DiscreteAndContinuous());
  TensorDict d = mixed.sample();
  TD_EXPECT_THROW_MSG(mixed.cdf(d), c10::NotImplementedError, {"Categorical", "cdf"});
  EXPECT_FALSE(d.contains("cont_cdf"));
  TD_EXPECT_THROW_MSG(mixed.cdf(TensorDict({}, {kB})), td::KeyError, {"'disc'"});
}

TEST(ProbabilisticCompositeModule, DiscreteAndContinuousHeads) {
  at::manual_seed(0);
  auto policy = Policy();
  auto& head = policy->probabilistic_module();
  EXPECT_TRUE(head.is_composite());
  EXPECT_EQ(head.out_keys(), (Keys{"disc", "cont", "disc_log_prob", "cont_log_prob"}));
  TensorDict data({{"obs", at::randn({kB, 4})}}, {kB});
  {
    td::nn::SetInteractionType random(InteractionType::kRandom);
    policy(data);
  }
  const at::Tensor logits = data.get({"params", "disc", "logits"});
  const at::Tensor loc = data.get({"params", "cont", "loc"});
  const at::Tensor scale = data.get({"params", "cont", "scale"});
  const at::Tensor disc = data.get("disc"), cont = data.get("cont");
  EXPECT_EQ(disc.sizes(), at::IntArrayRef({kB}));
  EXPECT_EQ(disc.scalar_type(), at::kLong);
  EXPECT_EQ(cont.sizes(), at::IntArrayRef({kB, 2}));
  // One log-prob per head (tensordict 0.14's default), not reduced: computed by hand.
  EXPECT_TRUE(at::allclose(data.get("disc_log_prob"), CategoricalLogProb(logits, disc)));
  EXPECT_EQ(data.get("cont_log_prob").sizes(), at::IntArrayRef({kB, 2}));
  const at::Tensor by_hand = CategoricalLogProb(logits, disc) + NormalLogProb(loc, scale, cont);
  EXPECT_TRUE(at::allclose(data.get("disc_log_prob") + data.get("cont_log_prob").sum(-1),
                           by_hand));
  EXPECT_TRUE(at::allclose(policy->log_prob(data), by_hand));
  EXPECT_EQ(policy->get_composite_dist(data)->entropy().sizes(), at::IntArrayRef({kB}));
  TD_EXPECT_THROW_MSG(policy->get_dist(data), td::TypeError, {"get_composite_dist"});

  // The default (deterministic) draw: the Categorical's mode and the Normal's mean.
  policy(data);
  EXPECT_TRUE(at::equal(data.get("disc"), logits.argmax(-1)));
  EXPECT_TRUE(at::equal(data.get("cont"), loc));
  std::ostringstream os;
  os << head;
  EXPECT_NE(os.str().find("distribution=CompositeDistribution(disc: Categorical, cont: Normal)"),
            std::string::npos)
      << os.str();

  // Skipping when every draw and the log-prob exist.
  const at::Tensor kept = data.get("cont");
  {
    td::nn::SetSkipExisting skip(true);
    td::nn::SetInteractionType random(InteractionType::kRandom);
    policy(data);
  }
  EXPECT_TRUE(data.get("cont").is_same(kept));
}

TEST(ProbabilisticCompositeModule, ParameterKeysAsInKeys) {
  // in_keys are the parameter keys themselves; the parts name theirs. One summed log-prob under
  // a key of ours: composite_lp_aggregate() is true while the module is built and run.
  td::nn::SetCompositeLpAggregate summed(true);
  ProbabilisticTensorDictModule head(
      {"logits", "loc", "scale"}, {"cont", "disc"},
      CompositeDistribution::factory({{"disc", {Categorical::factory(), {"logits"}}},
                                      {"cont", {Normal::factory(), {"loc", "scale"}}}}),
      ProbabilisticTensorDictModuleOptions().return_log_prob(true).log_prob_key({"lp", "sum"}));
  Params p;
  TensorDict data({{"logits", p.logits}, {"loc", p.loc}, {"scale", p.scale}}, {kB});
  td::nn::SetInteractionType mode(InteractionType::kMode);
  head(data);
  EXPECT_TRUE(at::equal(data.get("disc"), p.logits.argmax(-1)));
  EXPECT_TRUE(at::equal(data.get("cont"), p.loc));
  EXPECT_TRUE(at::allclose(data.get({"lp", "sum"}),
                           CategoricalLogProb(p.logits, p.logits.argmax(-1)) +
                               NormalLogProb(p.loc, p.scale, p.loc)));
  TensorDict no_scale({{"logits", p.logits}, {"loc", p.loc}}, {kB});
  TD_EXPECT_THROW_MSG(head(no_scale), td::KeyError, {"parameter key 'scale' is missing"});
  EXPECT_EQ(no_scale.keys(), (Keys{"logits", "loc"}));
}

TEST(ProbabilisticCompositeModule, ErrorsWriteNothing) {
  auto factory = CompositeDistribution::factory(DiscreteAndContinuous());
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"params"}, {"disc", "other"}, factory),
                      td::ValueError, {"['disc', 'other']", "['disc', 'cont']"});
  TD_EXPECT_THROW_MSG(
      ProbabilisticTensorDictModule({"params"}, {"disc", "cont"}, factory,
                                    ProbabilisticTensorDictModuleOptions().return_log_prob(true)
                                        .log_prob_keys({"cont_lp", "cont"})),
      td::ValueError, {"log-prob key 'cont'", "draw"});
  TD_EXPECT_THROW_MSG(
      ProbabilisticTensorDictModule({"params"}, {"disc", "cont"}, factory,
                                    ProbabilisticTensorDictModuleOptions().dist_param_names({"x"})),
      td::ValueError, {"dist_param_names", "param_keys"});

  // A missing part: KeyError naming it; nothing written.
  ProbabilisticTensorDictModule head({"params"}, {"disc", "cont"}, factory);
  Params p;
  TensorDict data({{"params", {{"disc", {{"logits", p.logits}}}}}}, {kB});
  TD_EXPECT_THROW_MSG(head(data), td::KeyError,
                      {"params['cont']", "ProbabilisticTensorDictModule"});
  EXPECT_EQ(data.keys(), (Keys{"params"}));
  // The log-prob write fails ("disc" was just written as a tensor): the draws are undone.
  ProbabilisticTensorDictModule bad_lp(
      {"params"}, {"disc", "cont"}, factory,
      ProbabilisticTensorDictModuleOptions().return_log_prob(true).log_prob_keys(
          {{"disc", "lp"}, "cont_lp"}));
  TensorDict full({{"params", p.td()}}, {kB});
  EXPECT_THROW(bad_lp(full), c10::Error);
  EXPECT_EQ(full.keys(), (Keys{"params"}));
}

}  // namespace
