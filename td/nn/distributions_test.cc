#include "td/nn/distributions.h"

#include <gtest/gtest.h>
#include <torch/nn.h>

#include <cmath>

#include "td/core/errors.h"
#include "td/core/testing.h"

namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(Normal, DensityEntropyAndShapes) {
  const at::Tensor loc = at::tensor({0.0f, 1.0f, -2.0f});
  const at::Tensor scale = at::tensor({1.0f, 0.5f, 2.0f});
  td::nn::Normal d(loc, scale);
  EXPECT_EQ(d.batch_shape(), at::IntArrayRef({3}));
  const at::Tensor x = at::tensor({0.5f, 1.0f, 0.0f});
  const at::Tensor expected =
      -((x - loc) * (x - loc)) / (2 * scale * scale) - at::log(scale) - 0.5 * std::log(2 * kPi);
  EXPECT_TRUE(at::allclose(d.log_prob(x), expected));
  EXPECT_TRUE(at::allclose(d.entropy(), 0.5 + 0.5 * std::log(2 * kPi) + at::log(scale)));
  EXPECT_TRUE(at::equal(d.mode(), loc));
  EXPECT_EQ(d.sample({4, 2}).sizes(), at::IntArrayRef({4, 2, 3}));
  // Broadcasting parameters.
  td::nn::Normal b(at::zeros({2, 1}), at::ones({3}));
  EXPECT_EQ(b.batch_shape(), at::IntArrayRef({2, 3}));
  TD_EXPECT_THROW_MSG(td::nn::Normal(at::zeros({2}), at::ones({3})), td::ValueError,
                      {"torch.Size([2])", "torch.Size([3])", "broadcast"});
  TD_EXPECT_THROW_MSG(td::nn::Normal(at::zeros({2}), at::tensor({1.0f, 0.0f})), td::ValueError,
                      {"scale must be positive"});
}

TEST(Normal, SamplingStatisticsAndGradients) {
  at::manual_seed(0);
  const at::Tensor loc = at::tensor({1.0f, -3.0f}).requires_grad_();
  const at::Tensor scale = at::tensor({0.5f, 2.0f}).requires_grad_();
  td::nn::Normal d(loc, scale);
  const at::Tensor s = d.sample({20000});
  EXPECT_FALSE(s.requires_grad());
  EXPECT_TRUE(at::allclose(s.mean(0), loc.detach(), 0, 0.05));
  EXPECT_TRUE(at::allclose(s.std(0), scale.detach(), 0, 0.05));
  const at::Tensor r = d.rsample({8});
  r.sum().backward();
  EXPECT_TRUE(at::allclose(loc.grad(), at::full({2}, 8.0f)));
  EXPECT_TRUE(scale.grad().defined());
}

TEST(Categorical, MassEntropyModeSampling) {
  at::manual_seed(0);
  const at::Tensor probs = torch::tensor({{0.1f, 0.2f, 0.7f}, {0.5f, 0.25f, 0.25f}});
  td::nn::Categorical d = td::nn::Categorical::from_probs(probs * 4);  // normalized inside
  EXPECT_TRUE(at::allclose(d.probs(), probs));
  td::nn::Categorical from_logits = td::nn::Categorical::from_logits(at::log(probs) + 3);
  EXPECT_TRUE(at::allclose(from_logits.probs(), probs));
  EXPECT_EQ(d.batch_shape(), at::IntArrayRef({2}));
  const at::Tensor v = at::tensor({2, 0}, at::kLong);
  EXPECT_TRUE(at::allclose(d.log_prob(v), at::log(at::tensor({0.7f, 0.5f}))));
  EXPECT_TRUE(at::allclose(d.entropy(), -(probs * at::log(probs)).sum(-1)));
  EXPECT_TRUE(at::equal(d.mode(), at::tensor({2, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(d.deterministic_sample(), d.mode()));
  EXPECT_TRUE(at::isnan(d.mean()).all().item<bool>());
  const at::Tensor s = d.sample({20000});
  EXPECT_EQ(s.sizes(), at::IntArrayRef({20000, 2}));
  EXPECT_EQ(s.scalar_type(), at::kLong);
  const at::Tensor freq = at::one_hot(s, 3).to(at::kFloat).mean(0);
  EXPECT_TRUE(at::allclose(freq, probs, 0, 0.02));
  EXPECT_THROW(d.rsample(), td::TypeError);
  TD_EXPECT_THROW_MSG(td::nn::Categorical::from_probs(at::tensor({0.5f, -0.1f})), td::ValueError,
                      {"non-negative"});
}

TEST(OneHotCategorical, OneHotDraws) {
  const at::Tensor logits = at::randn({4, 5});
  td::nn::OneHotCategorical d = td::nn::OneHotCategorical::from_logits(logits);
  EXPECT_EQ(d.event_shape(), at::IntArrayRef({5}));
  const at::Tensor s = d.sample({3});
  EXPECT_EQ(s.sizes(), at::IntArrayRef({3, 4, 5}));
  EXPECT_TRUE(at::equal(s.sum(-1), at::ones({3, 4})));
  EXPECT_TRUE(at::allclose(d.log_prob(s[0]), d.categorical().log_prob(s[0].argmax(-1))));
  EXPECT_TRUE(at::equal(d.mode().argmax(-1), logits.argmax(-1)));
  EXPECT_TRUE(at::allclose(d.mean(), at::softmax(logits, -1)));
}

TEST(Delta, PointMass) {
  const at::Tensor param = torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}).requires_grad_();
  td::nn::Delta d(param);
  EXPECT_EQ(d.batch_shape(), at::IntArrayRef({2}));
  EXPECT_EQ(d.event_shape(), at::IntArrayRef({2}));
  const at::Tensor value = torch::tensor({{1.0f, 2.0f}, {3.0f, 4.5f}});
  const at::Tensor lp = d.log_prob(value);
  EXPECT_EQ(lp[0].item<float>(), 0.0f);
  EXPECT_TRUE(std::isinf(lp[1].item<float>()) && lp[1].item<float>() < 0);
  EXPECT_TRUE(at::equal(d.entropy(), at::zeros({2})));
  EXPECT_FALSE(d.sample().requires_grad());
  d.rsample({3}).sum().backward();
  EXPECT_TRUE(at::allclose(param.grad(), at::full({2, 2}, 3.0f)));
}

TEST(TruncatedNormal, SupportDensityMoments) {
  at::manual_seed(0);
  const at::Tensor loc = at::tensor({0.3f, -0.8f});
  const at::Tensor scale = at::tensor({0.5f, 1.5f});
  td::nn::TruncatedNormal d(loc, scale, -1.0, 1.0);
  const at::Tensor s = d.sample({20000});
  EXPECT_GE(s.min().item<float>(), -1.0f);
  EXPECT_LE(s.max().item<float>(), 1.0f);
  // The density integrates to 1 on [low, high]; mean and entropy match numerical integrals.
  const at::Tensor grid = at::linspace(-1, 1, 20001).unsqueeze(1);
  const at::Tensor p = at::exp(d.log_prob(grid));
  const double dx = 2.0 / 20000;
  const at::Tensor total = at::trapezoid(p, dx, 0);
  EXPECT_TRUE(at::allclose(total, at::ones({2}), 1e-3, 1e-3));
  EXPECT_TRUE(at::allclose(at::trapezoid(p * grid, dx, 0), d.mean(), 1e-3, 1e-3));
  EXPECT_TRUE(at::allclose(at::trapezoid(-p * at::log(p), dx, 0), d.entropy(), 1e-3, 1e-3));
  EXPECT_TRUE(at::allclose(s.mean(0), d.mean(), 0, 0.03));
  EXPECT_TRUE(at::equal(d.mode(), loc.clamp(-1, 1)));
  EXPECT_TRUE(std::isinf(d.log_prob(at::tensor({1.5f, 0.0f}))[0].item<float>()));
  // rsample is differentiable in loc.
  const at::Tensor l = loc.clone().requires_grad_();
  td::nn::TruncatedNormal(l, scale).rsample({16}).sum().backward();
  EXPECT_TRUE(l.grad().defined());
  EXPECT_GT(l.grad().abs().sum().item<float>(), 0);
  TD_EXPECT_THROW_MSG(td::nn::TruncatedNormal(loc, scale, 1.0, -1.0), td::ValueError,
                      {"low", "high"});
}

TEST(Median, ClosedForms) {
  // Normal: loc; Delta: the value.
  const at::Tensor loc = at::tensor({0.3, -0.8, -3.0}, at::kDouble);
  const at::Tensor scale = at::tensor({0.5, 1.5, 0.5}, at::kDouble);
  EXPECT_TRUE(at::equal(td::nn::Normal(loc, scale).median(), loc));
  const at::Tensor param = at::randn({2, 3});
  EXPECT_TRUE(at::equal(td::nn::Delta(param).median(), param));

  // TruncatedNormal on [-1, 1]: loc + scale * Phi^-1((Phi(alpha) + Phi(beta)) / 2), by hand
  // with erf / erfinv (the third one lies far below the interval: alpha = 4, beta = 8).
  td::nn::TruncatedNormal tn(loc, scale, -1.0, 1.0);
  const at::Tensor alpha = (-1.0 - loc) / scale, beta = (1.0 - loc) / scale;
  auto phi = [](const at::Tensor& x) { return 0.5 * (1 + at::erf(x / std::sqrt(2.0))); };
  const at::Tensor p = 0.5 * (phi(alpha) + phi(beta));
  const at::Tensor expected = loc + scale * std::sqrt(2.0) * at::erfinv(2 * p - 1);
  const at::Tensor median = tn.median();
  EXPECT_TRUE(at::allclose(median, expected, 1e-9, 1e-9)) << median << expected;
  // The truncated CDF is 1/2 there: integrate the density from low to the median.
  for (int64_t i = 0; i < 3; ++i) {
    const double m = median[i].item<double>();
    const at::Tensor grid = at::linspace(-1.0, m, 200001, at::kDouble);
    td::nn::TruncatedNormal one(loc[i], scale[i], -1.0, 1.0);
    const double mass = at::trapezoid(at::exp(one.log_prob(grid)), grid).item<double>();
    EXPECT_NEAR(mass, 0.5, 1e-6) << "i=" << i;
  }
  // float32 parameters give the same value (also in the tail).
  const at::Tensor median32 =
      td::nn::TruncatedNormal(loc.to(at::kFloat), scale.to(at::kFloat)).median();
  EXPECT_EQ(median32.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::allclose(median32.to(at::kDouble), expected, 1e-6, 1e-6))
      << median32.to(at::kDouble) - expected;

  // No median for the categorical distributions: a clear error pointing at kMode.
  TD_EXPECT_THROW_MSG(td::nn::Categorical::from_logits(at::randn({3})).median(),
                      c10::NotImplementedError,
                      {"Categorical has no median", "InteractionType::kMode"});
  TD_EXPECT_THROW_MSG(td::nn::OneHotCategorical::from_logits(at::randn({3})).median(),
                      c10::NotImplementedError, {"OneHotCategorical has no median", "kMode"});
}

TEST(DistributionFactory, NamedParameters) {
  td::nn::DistParams params = {{"loc", at::zeros({2})}, {"scale", at::ones({2})}};
  auto d = td::nn::Normal::factory().make(params);
  EXPECT_EQ(d->name(), "Normal");
  td::nn::DistParams wrong = {{"mu", at::zeros({2})}, {"scale", at::ones({2})}};
  TD_EXPECT_THROW_MSG(td::nn::Normal::factory().make(wrong), td::KeyError,
                      {"'loc'", "['mu', 'scale']"});
  auto c = td::nn::Categorical::factory().make({{"probs", at::tensor({0.2f, 0.8f})}});
  EXPECT_EQ(c->name(), "Categorical");
}

TEST(NormalParamExtractor, SplitsAndMapsScale) {
  td::nn::NormalParamExtractor extract;
  auto [loc, scale] = extract(at::zeros({3, 8}));
  EXPECT_EQ(loc.sizes(), at::IntArrayRef({3, 4}));
  // biased_softplus_1.0 maps 0 to 1.
  EXPECT_TRUE(at::allclose(scale, at::ones({3, 4})));
  auto [l2, s2] = extract(at::full({1, 2}, -100.0));
  EXPECT_GE(s2.min().item<float>(), 1e-4f);
  td::nn::NormalParamExtractor exp_map(td::nn::NormalParamExtractorOptions().scale_mapping("exp"));
  EXPECT_TRUE(at::allclose(std::get<1>(exp_map(at::zeros({2, 2}))), at::ones({2, 1})));
  td::nn::NormalParamExtractor lb(
      td::nn::NormalParamExtractorOptions().scale_mapping("relu").scale_lb(0.5));
  EXPECT_TRUE(at::allclose(std::get<1>(lb(at::zeros({2}))), at::full({1}, 0.5)));
  TD_EXPECT_THROW_MSG(extract(at::zeros({3, 5})), td::ValueError, {"torch.Size([3, 5])"});
  TD_EXPECT_THROW_MSG(
      td::nn::NormalParamExtractor(td::nn::NormalParamExtractorOptions().scale_mapping("bogus")),
      td::ValueError, {"'bogus'"});
}

}  // namespace
