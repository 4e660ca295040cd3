#include "td/nn/continuous.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "td/core/testing.h"
#include "td/nn/probabilistic.h"

namespace {

using td::nn::IndependentNormal;
using td::nn::TanhNormal;
using td::nn::TanhNormalOptions;

at::Tensor D(std::vector<double> v, std::vector<int64_t> shape) {
  return at::tensor(v, at::kDouble).reshape(shape);
}

// The inputs of td/nn/testdata/distribution_reference.py; the kRef* values are what it printed
// (torch 1.13's torch.distributions, double precision).
at::Tensor Loc() { return D({0.1, -0.4, 0.7, -1.2, 0.3, 0.05}, {2, 3}); }
at::Tensor Scale() { return D({0.5, 1.3, 0.9, 0.2, 2.0, 0.75}, {2, 3}); }
at::Tensor Value() { return D({0.2, -0.5, 0.9, -0.95, 0.1, 0.3}, {2, 3}); }
at::Tensor ValueAB() { return D({1.0, -1.5, 2.5, -1.9, 0.0, 2.9}, {2, 3}); }

constexpr double kTol = 1e-10;

// Normal's log-density, leaf by leaf with ATen.
at::Tensor NormalLogPdf(const at::Tensor& x, const at::Tensor& loc, const at::Tensor& scale) {
  return -at::pow((x - loc) / scale, 2) / 2 - at::log(scale) - 0.5 * std::log(2 * M_PI);
}

TEST(IndependentNormal, MatchesTorch) {
  IndependentNormal d(Loc(), Scale());
  EXPECT_EQ(d.batch_shape(), at::IntArrayRef({2}));
  EXPECT_EQ(d.event_shape(), at::IntArrayRef({3}));
  EXPECT_EQ(d.name(), "IndependentNormal");
  EXPECT_TRUE(at::allclose(d.log_prob(Value()), D({-2.2683221057700855, -2.3946483508436374}, {2}),
                           kTol, kTol));
  EXPECT_TRUE(at::allclose(d.entropy(), D({3.7206721678637376, 3.0528427952880826}, {2}), kTol,
                           kTol));
  // The same as Normal's, summed over the event dim.
  EXPECT_TRUE(at::allclose(d.log_prob(Value()), NormalLogPdf(Value(), Loc(), Scale()).sum(-1)));
  EXPECT_TRUE(at::equal(d.mode(), Loc()));
  EXPECT_TRUE(at::equal(d.deterministic_sample(), Loc()));
  EXPECT_EQ(d.rsample({5}).sizes(), at::IntArrayRef({5, 2, 3}));
  // tanh_loc squashes loc into (-upscale, upscale).
  IndependentNormal squashed(Loc() * 100, Scale(),
                             td::nn::IndependentNormalOptions().tanh_loc(true).upscale(2.0));
  EXPECT_TRUE(at::allclose(squashed.mean(), 2.0 * at::tanh(Loc() * 100 / 2.0)));
  // event_dims 2: one log-prob for the whole [2, 3].
  IndependentNormal whole(Loc(), Scale(), td::nn::IndependentNormalOptions().event_dims(2));
  EXPECT_EQ(whole.log_prob(Value()).dim(), 0);
  TD_EXPECT_THROW_MSG(IndependentNormal(Loc(), Scale(),
                                        td::nn::IndependentNormalOptions().event_dims(3)),
                      td::ValueError, {"reinterpreted_batch_ndims (3)", "torch.Size([2, 3])"});
}

TEST(Independent, WrapsAnyDistribution) {
  auto base = std::make_shared<td::nn::Normal>(Loc(), Scale());
  td::nn::Independent d(base, 1);
  EXPECT_EQ(d.name(), "Independent(Normal, 1)");
  EXPECT_TRUE(at::allclose(d.entropy(), base->entropy().sum(-1)));
  td::nn::Independent none(base, 0);
  EXPECT_TRUE(at::equal(none.log_prob(Value()), base->log_prob(Value())));
  TD_EXPECT_THROW_MSG(td::nn::Independent(base, -1), td::ValueError, {"(-1)"});
  TD_EXPECT_THROW_MSG(td::nn::Independent(nullptr, 1), td::ValueError, {"null"});
  // The factory wraps what the base factory builds.
  auto f = td::nn::Independent::factory(td::nn::Normal::factory(), 1);
  EXPECT_EQ(f.name, "Independent(Normal, 1)");
  auto built = f.make({{"loc", Loc()}, {"scale", Scale()}});
  EXPECT_EQ(built->batch_shape(), at::IntArrayRef({2}));
}

TEST(TanhNormal, LogProbMatchesTorch) {
  TanhNormal d(Loc(), Scale());
  EXPECT_EQ(d.batch_shape(), at::IntArrayRef({2}));
  EXPECT_EQ(d.event_shape(), at::IntArrayRef({3}));
  // TransformedDistribution(Independent(Normal, 1), [TanhTransform()]).log_prob
  EXPECT_TRUE(at::allclose(d.log_prob(Value()), D({-0.6272407920467078, -4.174766774975514}, {2}),
                           kTol, kTol));
  // ... with AffineTransform onto (-2, 3).
  TanhNormal ab(Loc(), Scale(), TanhNormalOptions().low(-2.0).high(3.0));
  EXPECT_TRUE(at::allclose(ab.log_prob(ValueAB()),
                           D({-3.1490053527807995, -9.350486326140391}, {2}), kTol, kTol));
  // event_dims 0: one log-prob per coordinate.
  TanhNormal per(Loc(), Scale(), TanhNormalOptions().event_dims(0));
  EXPECT_TRUE(at::allclose(per.log_prob(Value()),
                           D({-0.20607731344942193, -0.9002160875682823, 0.47905260897099655,
                              -1.9709353246980479, -1.6070186245818252, -0.5968128256956413},
                             {2, 3}),
                           kTol, kTol));
  // The change of variables, leaf by leaf with ATen: x = atanh(y).
  const at::Tensor x = at::atanh(Value());
  EXPECT_TRUE(at::allclose(
      d.log_prob(Value()),
      (NormalLogPdf(x, Loc(), Scale()) - at::log1p(-at::pow(at::tanh(x), 2))).sum(-1)));
}

TEST(TanhNormal, DrawsAndPointEstimates) {
  const at::Tensor loc = Loc().to(at::kFloat).requires_grad_(true);
  const at::Tensor scale = Scale().to(at::kFloat);
  TanhNormal d(loc, scale, TanhNormalOptions().low(-2.0).high(3.0));
  // deterministic_sample / median: the transformed loc.
  EXPECT_TRUE(at::allclose(d.deterministic_sample(), at::tanh(loc) * 2.5 + 0.5));
  EXPECT_TRUE(at::allclose(d.median(), d.deterministic_sample()));
  at::Generator g1 = at::detail::createCPUGenerator(3), g2 = at::detail::createCPUGenerator(3);
  at::Tensor y;
  {
    td::nn::SetSamplingGenerator use(g1);
    y = d.rsample({1000});
  }
  EXPECT_EQ(y.sizes(), at::IntArrayRef({1000, 2, 3}));
  EXPECT_TRUE((y > -2).all().item<bool>() && (y < 3).all().item<bool>());
  // The draw is tanh of the Normal draw from the same generator, leaf by leaf.
  const at::Tensor eps = at::randn({1000, 2, 3}, g2);
  EXPECT_TRUE(at::allclose(y, at::tanh(loc + eps * scale) * 2.5 + 0.5, 1e-5, 1e-5));
  // rsample carries gradients to loc; sample() does not.
  y.sum().backward();
  EXPECT_TRUE(loc.grad().defined());
  EXPECT_FALSE(d.sample().requires_grad());
  // rsample_and_log_prob scores the pre-tanh draw: equal to log_prob(draw) away from the edges.
  auto [draw, lp] = d.rsample_and_log_prob({4});
  EXPECT_EQ(lp.sizes(), at::IntArrayRef({4, 2}));
  EXPECT_TRUE(at::allclose(lp, d.log_prob(draw), 1e-3, 1e-3));
  auto [sdraw, slp] = d.sample_and_log_prob();
  EXPECT_FALSE(sdraw.requires_grad());
  EXPECT_TRUE(slp.requires_grad());
  // No closed form for these.
  TD_EXPECT_THROW_MSG(d.mean(), c10::NotImplementedError, {"TanhNormal", "mean"});
  TD_EXPECT_THROW_MSG(d.mode(), c10::NotImplementedError, {"TanhNormal", "kDeterministic"});
  TD_EXPECT_THROW_MSG(d.entropy(), c10::NotImplementedError, {"TanhNormal", "entropy"});
  // safe_tanh keeps a saturated draw's log-prob finite.
  TanhNormal far(at::full({2}, 30.0f), at::full({2}, 0.1f));
  EXPECT_TRUE(at::isfinite(far.log_prob(far.rsample())).all().item<bool>());
  // tanh_loc (with bounds: shifted to the middle of [low, high]).
  TanhNormal squashed(at::full({3}, 40.0), at::ones({3}),
                      TanhNormalOptions().tanh_loc(true).upscale(5.0).low(-2.0).high(3.0));
  EXPECT_TRUE(at::allclose(squashed.loc(), at::full({3}, 5.0 * std::tanh(8.0) + 0.5)));
}

TEST(TanhNormal, Errors) {
  TD_EXPECT_THROW_MSG(TanhNormal(Loc(), Scale(), TanhNormalOptions().low(1.0).high(1.0)),
                      td::ValueError, {"low (1)", "high (1)"});
  TD_EXPECT_THROW_MSG(TanhNormal(Loc(), Scale(), TanhNormalOptions().event_dims(3)),
                      td::ValueError, {"event_dims (3)", "torch.Size([2, 3])"});
  TD_EXPECT_THROW_MSG(TanhNormal(at::zeros({2, 3}), at::ones({4})), td::ValueError,
                      {"torch.Size([2, 3])", "torch.Size([4])"});
  TD_EXPECT_THROW_MSG(TanhNormal(at::zeros({2}), -at::ones({2})), td::ValueError, {"positive"});
}

TEST(TanhNormal, InAProbabilisticModule) {
  // kMean has no closed form: the module averages n_empirical_estimate draws from its generator.
  td::nn::ProbabilisticTensorDictModule actor(
      {"loc", "scale"}, "action", TanhNormal::factory(),
      td::nn::ProbabilisticTensorDictModuleOptions()
          .return_log_prob(true)
          .n_empirical_estimate(50)
          .seed(11));
  td::TensorDict data({{"loc", Loc()}, {"scale", Scale()}}, {2});
  {
    td::nn::SetInteractionType mean(td::nn::InteractionType::kMean);
    actor(data);
  }
  at::Generator g = at::detail::createCPUGenerator(11);
  at::Tensor expected;
  {
    td::nn::SetSamplingGenerator use(g);
    expected = TanhNormal(Loc(), Scale()).rsample({50}).mean(0);
  }
  EXPECT_TRUE(at::allclose(data.get("action"), expected));
  EXPECT_TRUE(at::allclose(data.get("action_log_prob"),
                           TanhNormal(Loc(), Scale()).log_prob(expected)));
  // The default (deterministic) draw is tanh(loc).
  actor(data);
  EXPECT_TRUE(at::allclose(data.get("action"), at::tanh(Loc())));
}

// rsample_and_log_prob through the Distribution interface (a policy's get_dist()), no cast: each
// distribution's own scoring (TanhNormal's exact pre-tanh one, also under Independent), the
// default rsample-then-log_prob elsewhere, and rsample's TypeError where there is none.
TEST(Distribution, RsampleAndLogProbThroughTheBase) {
  td::nn::ProbabilisticTensorDictModule actor({"loc", "scale"}, "action", TanhNormal::factory());
  td::TensorDict data({{"loc", Loc().requires_grad_()}, {"scale", Scale()}}, {2});
  std::shared_ptr<td::nn::Distribution> dist = actor->get_dist(data);
  at::Generator g1 = at::detail::createCPUGenerator(5), g2 = at::detail::createCPUGenerator(5);
  at::Tensor x, lp, expected_x, expected_lp;
  {
    td::nn::SetSamplingGenerator use(g1);
    std::tie(x, lp) = dist->rsample_and_log_prob({16});
  }
  {
    td::nn::SetSamplingGenerator use(g2);
    std::tie(expected_x, expected_lp) = TanhNormal(Loc(), Scale()).rsample_and_log_prob({16});
  }
  EXPECT_TRUE(at::allclose(x, expected_x));
  EXPECT_TRUE(at::allclose(lp, expected_lp));
  EXPECT_EQ(lp.sizes(), at::IntArrayRef({16, 2}));
  at::Tensor entropy = -lp.mean(0);  // the estimate TanhNormal's entropy() error suggests
  entropy.sum().backward();
  EXPECT_TRUE(data.get("loc").grad().defined());

  // Independent forwards to its base's own scoring and sums the reinterpreted dims.
  const td::nn::Independent ind(std::make_shared<TanhNormal>(Loc(), Scale()), 1);
  const td::nn::Distribution& base = ind;
  auto [ix, ilp] = base.rsample_and_log_prob({3});
  EXPECT_EQ(ix.sizes(), at::IntArrayRef({3, 2, 3}));
  // TanhNormal has event [3]; Independent makes its batch dim [2] an event dim too.
  EXPECT_EQ(ilp.sizes(), at::IntArrayRef({3}));
  EXPECT_TRUE(at::allclose(ilp, ind.log_prob(ix), 1e-3, 1e-3));

  // The default: rsample() then log_prob().
  const td::nn::Normal normal(at::zeros({4}), at::ones({4}));
  const td::nn::Distribution& as_base = normal;
  auto [nx, nlp] = as_base.rsample_and_log_prob({2});
  EXPECT_TRUE(at::allclose(nlp, normal.log_prob(nx)));
  auto [sx, slp] = as_base.sample_and_log_prob();
  EXPECT_TRUE(at::allclose(slp, normal.log_prob(sx)));
  const td::nn::Categorical cat = td::nn::Categorical::from_logits(at::zeros({4, 3}));
  TD_EXPECT_THROW_MSG(static_cast<const td::nn::Distribution&>(cat).rsample_and_log_prob(),
                      td::TypeError, {"Categorical", "rsample"});
}

}  // namespace
