// ProbabilisticTensorDictModule as tensordict 0.14 has it: "<out_key>_log_prob" keys and
// composite_lp_aggregate, log_prob_keys, num_samples, generators, cache_dist, and the
// ProbabilisticTensorDictSequential queries.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn.h>

#include <cmath>
#include <vector>

#include "td/core/testing.h"
#include "td/nn/probabilistic.h"

namespace {

using td::NestedKey;
using td::TensorDict;
using td::nn::CompositeDistribution;
using td::nn::InteractionType;
using td::nn::ProbabilisticTensorDictModule;
using td::nn::ProbabilisticTensorDictModuleOptions;
using td::nn::ProbabilisticTensorDictSequential;
using td::nn::TensorDictModule;
using Keys = std::vector<NestedKey>;

constexpr int64_t kB = 3;

ProbabilisticTensorDictModuleOptions WithLogProb() {
  return ProbabilisticTensorDictModuleOptions().return_log_prob(true);
}

TensorDict NormalParams() {
  return TensorDict({{"loc", at::randn({kB, 2})}, {"scale", at::rand({kB, 2}) + 0.5}}, {kB});
}

at::Tensor NormalLogPdf(const at::Tensor& x, const at::Tensor& loc, const at::Tensor& scale) {
  return -at::pow((x - loc) / scale, 2) / 2 - at::log(scale) - 0.5 * std::log(2 * M_PI);
}

TEST(ProbabilisticLogProbKeys, OutKeySuffixedByDefault) {
  EXPECT_FALSE(td::nn::composite_lp_aggregate());
  ProbabilisticTensorDictModule m({"loc", "scale"}, "action", td::nn::Normal::factory(),
                                  WithLogProb());
  EXPECT_EQ(m->log_prob_keys(), (Keys{"action_log_prob"}));
  EXPECT_EQ(m->log_prob_key(), NestedKey("action_log_prob"));
  EXPECT_EQ(m->out_keys(), (Keys{"action", "action_log_prob"}));
  EXPECT_EQ(m->dist_sample_keys(), (Keys{"action"}));
  EXPECT_EQ(m->dist_params_keys(), (Keys{"loc", "scale"}));
  TensorDict data = NormalParams();
  m(data);
  EXPECT_TRUE(at::allclose(data.get("action_log_prob"),
                           NormalLogPdf(data.get("action"), data.get("loc"), data.get("scale"))));
  // A nested out key: its last component suffixed.
  ProbabilisticTensorDictModule nested({"loc", "scale"}, {{"agent", "action"}},
                                       td::nn::Normal::factory(), WithLogProb());
  EXPECT_EQ(nested->log_prob_keys(), (Keys{{"agent", "action_log_prob"}}));
  // An explicit key still wins.
  ProbabilisticTensorDictModule named({"loc", "scale"}, "action", td::nn::Normal::factory(),
                                      WithLogProb().log_prob_key("lp"));
  EXPECT_EQ(named->log_prob_keys(), (Keys{"lp"}));
  ProbabilisticTensorDictModule listed({"loc", "scale"}, "action", td::nn::Normal::factory(),
                                       WithLogProb().log_prob_keys({"lp2"}));
  EXPECT_EQ(listed->out_keys(), (Keys{"action", "lp2"}));
}

TEST(ProbabilisticLogProbKeys, AggregateSetting) {
  {
    td::nn::SetCompositeLpAggregate summed(true);
    EXPECT_TRUE(td::nn::composite_lp_aggregate());
    {
      td::nn::SetCompositeLpAggregate inner(false);
      EXPECT_FALSE(td::nn::composite_lp_aggregate());
    }
    EXPECT_TRUE(td::nn::composite_lp_aggregate());
    ProbabilisticTensorDictModule m({"loc", "scale"}, "action", td::nn::Normal::factory(),
                                    WithLogProb());
    EXPECT_EQ(m->log_prob_keys(), (Keys{"sample_log_prob"}));
    TensorDict data = NormalParams();
    m(data);
    EXPECT_TRUE(data.contains("sample_log_prob"));
    // log_prob_keys is for the per-draw setting.
    TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"loc", "scale"}, "action",
                                                      td::nn::Normal::factory(),
                                                      WithLogProb().log_prob_keys({"a"})),
                        td::ValueError, {"composite_lp_aggregate() is true", "log_prob_key"});
  }
  EXPECT_FALSE(td::nn::composite_lp_aggregate());
  // Built under one setting, run under the other: refused, nothing written.
  std::optional<ProbabilisticTensorDictModule> m;
  {
    td::nn::SetCompositeLpAggregate summed(true);
    m.emplace(Keys{"loc", "scale"}, "action", td::nn::Normal::factory(), WithLogProb());
  }
  TensorDict data = NormalParams();
  TD_EXPECT_THROW_MSG((*m)(data), c10::Error,
                      {"composite_lp_aggregate() is false but was true", "'sample_log_prob'"});
  TD_EXPECT_THROW_MSG((*m)->log_prob_keys(), c10::Error, {"run it under the same setting"});
  EXPECT_FALSE(data.contains("action"));
}

// params {"disc": {"logits": [B, 3]}, "cont": {"loc": [B, 2], "scale": [B, 2]}}.
TensorDict CompositeParams() {
  return TensorDict({{"params",
                      {{"disc", {{"logits", at::randn({kB, 3})}}},
                       {"cont", {{"loc", at::randn({kB, 2})}, {"scale", at::rand({kB, 2}) + 0.5}}}}}},
                    {kB});
}

td::nn::CompositeDistributionFactory Composite() {
  return CompositeDistribution::factory(
      {{"disc", td::nn::Categorical::factory()}, {"cont", td::nn::Normal::factory()}});
}

TEST(ProbabilisticLogProbKeys, CompositePerDrawOrSummed) {
  TensorDict data = CompositeParams();
  const at::Tensor logits = data.get({"params", "disc", "logits"});
  const at::Tensor loc = data.get({"params", "cont", "loc"});
  const at::Tensor scale = data.get({"params", "cont", "scale"});
  // Per draw (the default): each part's log-prob, not reduced.
  ProbabilisticTensorDictModule per({"params"}, {"disc", "cont"}, Composite(), WithLogProb());
  EXPECT_EQ(per->log_prob_keys(), (Keys{"disc_log_prob", "cont_log_prob"}));
  TD_EXPECT_THROW_MSG(per->log_prob_key(), td::ValueError,
                      {"['disc_log_prob', 'cont_log_prob']", "log_prob_keys()"});
  per(data);
  EXPECT_TRUE(at::allclose(data.get("disc_log_prob"),
                           at::log_softmax(logits, -1).gather(-1, data.get("disc").unsqueeze(-1))
                               .squeeze(-1)));
  EXPECT_TRUE(at::allclose(data.get("cont_log_prob"), NormalLogPdf(data.get("cont"), loc, scale)));
  // Named per draw.
  ProbabilisticTensorDictModule named({"params"}, {"disc", "cont"}, Composite(),
                                      WithLogProb().log_prob_keys({"ld", {"lp", "c"}}));
  TensorDict data2 = CompositeParams();
  named(data2);
  EXPECT_TRUE(data2.contains("ld"));
  EXPECT_EQ(data2.get({"lp", "c"}).sizes(), at::IntArrayRef({kB, 2}));
  // One summed key is for the aggregated setting.
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"params"}, {"disc", "cont"}, Composite(),
                                                    WithLogProb().log_prob_key("lp")),
                      td::ValueError, {"'lp'", "SetCompositeLpAggregate(true)", "log_prob_keys"});
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"params"}, {"disc", "cont"}, Composite(),
                                                    WithLogProb().log_prob_keys({"a"})),
                      td::ValueError, {"['a']", "one key per draw", "['disc', 'cont']"});
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"params"}, {"disc", "cont"}, Composite(),
                                                    WithLogProb().log_prob_keys({"a", "a"})),
                      td::ValueError, {"'a' is given twice"});
  // Summed.
  td::nn::SetCompositeLpAggregate summed(true);
  ProbabilisticTensorDictModule sum({"params"}, {"disc", "cont"}, Composite(), WithLogProb());
  EXPECT_EQ(sum->log_prob_key(), NestedKey("sample_log_prob"));
  TensorDict data3 = CompositeParams();
  sum(data3);
  EXPECT_FALSE(data3.contains("disc_log_prob"));
  const at::Tensor by_hand =
      at::log_softmax(data3.get({"params", "disc", "logits"}), -1)
          .gather(-1, data3.get("disc").unsqueeze(-1))
          .squeeze(-1) +
      NormalLogPdf(data3.get("cont"), data3.get({"params", "cont", "loc"}),
                   data3.get({"params", "cont", "scale"}))
          .sum(-1);
  EXPECT_TRUE(at::allclose(data3.get("sample_log_prob"), by_hand));
}

TEST(ProbabilisticModule, NumSamples) {
  ProbabilisticTensorDictModule m({"loc", "scale"}, "action", td::nn::Normal::factory(),
                                  WithLogProb().num_samples({5}).seed(0));
  TensorDict data = NormalParams();
  TensorDict out;
  {
    td::nn::SetInteractionType random(InteractionType::kRandom);
    out = m(data);
  }
  EXPECT_EQ(out.batch_size(), at::IntArrayRef({5, kB}));
  EXPECT_EQ(out.get("action").sizes(), at::IntArrayRef({5, kB, 2}));
  EXPECT_EQ(out.get("action_log_prob").sizes(), at::IntArrayRef({5, kB, 2}));
  EXPECT_EQ(out.get("loc").sizes(), at::IntArrayRef({5, kB, 2}));
  EXPECT_FALSE(data.contains("action"));  // the input is left unchanged
  // The draws are the generator's, leaf by leaf: loc + randn * scale.
  at::Generator g = at::detail::createCPUGenerator(0);
  const at::Tensor eps = at::randn({5, kB, 2}, g);
  EXPECT_TRUE(at::allclose(out.get("action"), data.get("loc") + eps * data.get("scale")));
  // A deterministic draw is expanded the same way.
  TensorDict det = m(data);
  EXPECT_TRUE(at::equal(det.get("action"), data.get("loc").expand({5, kB, 2})));
  TD_EXPECT_THROW_MSG(ProbabilisticTensorDictModule({"loc", "scale"}, "a",
                                                    td::nn::Normal::factory(),
                                                    WithLogProb().num_samples({-1})),
                      td::ValueError, {"num_samples", "negative"});
}

TEST(ProbabilisticModule, Generators) {
  auto make = [](ProbabilisticTensorDictModuleOptions o) {
    return ProbabilisticTensorDictModule({"loc", "scale"}, "action", td::nn::Normal::factory(),
                                         o.default_interaction_type(InteractionType::kRandom));
  };
  const TensorDict params = NormalParams();
  auto draw = [&](ProbabilisticTensorDictModule& m) {
    TensorDict d = params.clone();
    return m(d).get("action");
  };
  // seed: reproducible across modules, advancing across calls.
  auto a = make(ProbabilisticTensorDictModuleOptions().seed(42));
  auto b = make(ProbabilisticTensorDictModuleOptions().seed(42));
  const at::Tensor a1 = draw(a), a2 = draw(a);
  EXPECT_TRUE(at::equal(a1, draw(b)));
  EXPECT_FALSE(at::equal(a1, a2));
  // clone(): the copy draws from a clone of the generator (same state, advanced on its own).
  auto copy = std::dynamic_pointer_cast<td::nn::ProbabilisticTensorDictModuleImpl>(a->clone());
  ASSERT_TRUE(copy);
  ProbabilisticTensorDictModule a_copy(copy);
  const at::Tensor from_copy = draw(a_copy);
  EXPECT_TRUE(at::equal(from_copy, draw(a)));
  EXPECT_FALSE(at::equal(draw(a_copy), from_copy));
  // A given generator: its state advances in place.
  at::Generator g = at::detail::createCPUGenerator(42);
  auto c = make(ProbabilisticTensorDictModuleOptions().generator(g));
  EXPECT_TRUE(at::equal(draw(c), a1));
  EXPECT_TRUE(c->generator().defined());
  at::Generator same = at::detail::createCPUGenerator(42);
  (void)at::randn({kB, 2}, same);
  EXPECT_EQ(g.current_seed(), same.current_seed());
  EXPECT_TRUE(at::equal(at::randn({2}, g), at::randn({2}, same)));
  // generator_key: the seed is read from the input and the next one written back: an integer
  // (non-tensor data, what a batched TensorDict holds) ...
  auto k = make(ProbabilisticTensorDictModuleOptions().generator_key("rng"));
  TensorDict d1 = params.clone();
  d1.set("rng", td::NonTensorData(nlohmann::json(42)));
  k(d1);
  EXPECT_TRUE(at::equal(d1.get("action"), a1));
  const int64_t next = d1.get_value("rng").non_tensor().get<int64_t>();
  at::Generator replay = at::detail::createCPUGenerator(42);
  (void)at::randn({kB, 2}, replay);
  EXPECT_EQ(next, at::randint(0, int64_t{1} << 62, {}, replay, at::kLong).item<int64_t>());
  // ... or a one-element integer tensor (here in an unbatched TensorDict).
  TensorDict d0({{"loc", params.get("loc")}, {"scale", params.get("scale")},
                 {"rng", at::scalar_tensor(42, at::kLong)}},
                {});
  k(d0);
  EXPECT_TRUE(at::equal(d0.get("action"), a1));
  EXPECT_EQ(d0.get("rng").item<int64_t>(), next);
  EXPECT_EQ(d0.get("rng").dim(), 0);
  // An absent entry: the default generator; a bad one: ValueError naming it, nothing written.
  TensorDict d2 = params.clone();
  k(d2);
  EXPECT_TRUE(d2.contains("action"));
  TensorDict d3 = params.clone();
  d3.set("rng", td::NonTensorData(nlohmann::json("seed")));
  TD_EXPECT_THROW_MSG(k(d3), td::ValueError, {"'rng'", "must hold a seed", "\"seed\""});
  EXPECT_FALSE(d3.contains("action"));
  d3.set("rng", at::full({kB}, 1.5, at::kDouble));
  TD_EXPECT_THROW_MSG(k(d3), td::ValueError, {"'rng'", "Double of shape torch.Size([3])"});
  TD_EXPECT_THROW_MSG(make(ProbabilisticTensorDictModuleOptions().seed(1).generator_key("rng")),
                      td::ValueError, {"at most one of generator, seed and generator_key"});
}

TEST(ProbabilisticModule, CacheDist) {
  ProbabilisticTensorDictModule m({"loc", "scale"}, "action", td::nn::Normal::factory(),
                                  WithLogProb().cache_dist(true));
  EXPECT_EQ(m->cached_dist(), nullptr);
  TensorDict data = NormalParams();
  m(data);
  ASSERT_NE(m->cached_dist(), nullptr);
  EXPECT_TRUE(at::equal(m->cached_dist()->log_prob(data.get("action")),
                        data.get("action_log_prob")));
  ProbabilisticTensorDictModule no_cache({"loc", "scale"}, "action", td::nn::Normal::factory());
  no_cache(data);
  EXPECT_EQ(no_cache->cached_dist(), nullptr);
  ProbabilisticTensorDictModule comp({"params"}, {"disc", "cont"}, Composite(),
                                     ProbabilisticTensorDictModuleOptions().cache_dist(true));
  TensorDict cd = CompositeParams();
  comp(cd);
  ASSERT_NE(comp->cached_composite_dist(), nullptr);
  EXPECT_EQ(comp->cached_composite_dist()->keys(), (Keys{"disc", "cont"}));
}

TEST(ProbabilisticSequential, Queries) {
  torch::nn::Linear net(4, 4);
  ProbabilisticTensorDictSequential policy(
      TensorDictModule(net, {"obs"}, {"params"}),
      TensorDictModule(td::nn::NormalParamExtractor(), {"params"}, {"loc", "scale"}),
      ProbabilisticTensorDictModule(
          {"loc", "scale"}, "action", td::nn::Normal::factory(),
          WithLogProb().num_samples({2}).default_interaction_type(InteractionType::kMode)));
  EXPECT_EQ(policy->log_prob_keys(), (Keys{"action_log_prob"}));
  EXPECT_EQ(policy->dist_sample_keys(), (Keys{"action"}));
  EXPECT_EQ(policy->dist_params_keys(), (Keys{"loc", "scale"}));
  EXPECT_EQ(policy->num_samples(), (std::vector<int64_t>{2}));
  EXPECT_EQ(policy->default_interaction_type(), InteractionType::kMode);
  // det_part: the two deterministic modules.
  td::nn::TensorDictSequential det = policy->det_part();
  EXPECT_EQ(det->modules().size(), 2u);
  EXPECT_EQ(det->out_keys(), (Keys{"params", "loc", "scale"}));
  TensorDict data({{"obs", at::randn({kB, 4})}}, {kB});
  TensorDict params = policy->get_dist_params(data);
  EXPECT_TRUE(params.contains("loc"));
  EXPECT_FALSE(params.contains("action"));
  auto dist = policy->build_dist_from_params(params);
  EXPECT_TRUE(at::equal(dist->mode(), params.get("loc")));
  TensorDict out = policy(TensorDict({{"obs", at::randn({kB, 4})}}, {kB}));
  EXPECT_EQ(out.batch_size(), at::IntArrayRef({2, kB}));
  EXPECT_EQ(out.get("action_log_prob").sizes(), at::IntArrayRef({2, kB, 2}));
}

TEST(CompositeDistribution, EntropyComposite) {
  TensorDict data = CompositeParams();
  CompositeDistribution dist(data.get_value("params").tensordict(),
                             {{"disc", td::nn::Categorical::factory()},
                              {"cont", td::nn::Normal::factory()}});
  TensorDict h = dist.entropy_composite();
  EXPECT_EQ(h.keys(), (Keys{"disc_entropy", "cont_entropy", "entropy"}));
  const at::Tensor scale = data.get({"params", "cont", "scale"});
  EXPECT_TRUE(at::allclose(h.get("cont_entropy"), 0.5 + 0.5 * std::log(2 * M_PI) + at::log(scale)));
  EXPECT_TRUE(at::allclose(h.get("entropy"), dist.entropy()));
  EXPECT_FALSE(dist.entropy_composite(false).contains("entropy"));
  EXPECT_EQ(td::nn::add_suffix({"a", "b"}, "_x"), NestedKey({"a", "b_x"}));
}

}  // namespace
