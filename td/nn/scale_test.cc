#include "td/nn/scale.h"

#include <gtest/gtest.h>
#include <torch/nn.h>

#include <cmath>
#include <sstream>
#include <vector>

#include "td/core/testing.h"
#include "td/nn/distributions.h"
#include "td/nn/functional.h"

namespace {

at::Tensor D(std::vector<double> v) { return at::tensor(v, at::kDouble); }

// Input and reference values of td/nn/testdata/distribution_reference.py (torch 1.13).
const at::Tensor kX() { return D({-3.0, -0.5, 0.0, 0.25, 2.0}); }

TEST(ScaleMappings, BiasedSoftplusMatchesTorch) {
  // softplus(x + inv_softplus(1.0 - 0.01)) + 0.01 and the same with bias 2, min 0.1.
  const at::Tensor ref1 =
      D({0.09084386939709016, 0.7159575563168046, 1.0, 1.164232423987684, 2.6124397573730445});
  const at::Tensor ref2 =
      D({0.3492665669893269, 1.5926050193539742, 2.0, 2.2163558688621143, 3.861511532468081});
  EXPECT_TRUE(at::allclose(td::nn::mappings("biased_softplus_1.0")(kX()), ref1, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(td::nn::mappings("biased_softplus")(kX()), ref1, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(td::nn::biased_softplus(1.0)(kX()), ref1, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(td::nn::mappings("biased_softplus_2.0_0.1")(kX()), ref2, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(td::nn::biased_softplus(2.0, 0.1)(kX()), ref2, 1e-12, 1e-12));
}

TEST(ScaleMappings, InvSoftplusMatchesTorch) {
  const at::Tensor ref = D({-0.4327521295671885, 0.5413248546129181, 2.9489308190572983});
  EXPECT_TRUE(at::allclose(td::nn::inv_softplus(D({0.5, 1.0, 3.0})), ref, 1e-12, 1e-12));
  EXPECT_NEAR(td::nn::inv_softplus(1.0), 0.5413248546129181, 1e-12);
  // expm1 is clamped at 1e-6, as in Python: no NaN for y <= 0.
  EXPECT_DOUBLE_EQ(td::nn::inv_softplus(-1.0), std::log(1e-6));
  // softplus(inv_softplus(y)) == y.
  EXPECT_TRUE(at::allclose(at::softplus(td::nn::inv_softplus(D({0.5, 1.0, 3.0}))),
                           D({0.5, 1.0, 3.0})));
}

TEST(ScaleMappings, NamedMappingsAreTheAtenOps) {
  const at::Tensor x = kX();
  EXPECT_TRUE(at::equal(td::nn::mappings("softplus")(x), at::softplus(x)));
  EXPECT_TRUE(at::equal(td::nn::mappings("exp")(x), at::exp(x)));
  EXPECT_TRUE(at::equal(td::nn::mappings("relu")(x), at::relu(x)));
  EXPECT_TRUE(at::equal(td::nn::mappings("none")(x), x));
  // expln: exp below 0, log1p + 1 above, leaf by leaf.
  const at::Tensor e = td::nn::mappings("expln")(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x[i].item<double>();
    EXPECT_DOUBLE_EQ(e[i].item<double>(), v <= 0 ? std::exp(v) : std::log1p(v) + 1);
  }
}

TEST(ScaleMappings, CustomMappingsAndErrors) {
  td::nn::add_custom_mapping("square_plus_one", [](const at::Tensor& x) { return x * x + 1; });
  EXPECT_TRUE(at::equal(td::nn::mappings("square_plus_one")(kX()), kX() * kX() + 1));
  // NormalParamExtractor finds it by name, or takes the function itself.
  td::nn::NormalParamExtractor by_name(
      td::nn::NormalParamExtractorOptions().scale_mapping("square_plus_one").scale_lb(0.0));
  const at::Tensor in = D({1.0, 2.0, 3.0, -0.5, 0.0, 2.0});
  auto [loc, scale] = by_name(in);
  EXPECT_TRUE(at::equal(loc, D({1.0, 2.0, 3.0})));
  EXPECT_TRUE(at::equal(scale, D({1.25, 1.0, 5.0})));
  td::nn::NormalParamExtractor by_fn(td::nn::NormalParamExtractorOptions().scale_mapping_fn(
      [](const at::Tensor& x) { return x.abs(); }));
  EXPECT_TRUE(at::equal(std::get<1>(by_fn(in)), D({0.5, 1e-4, 2.0})));
  std::ostringstream os;
  os << *by_fn;
  EXPECT_NE(os.str().find("scale_mapping=<custom>"), std::string::npos) << os.str();

  TD_EXPECT_THROW_MSG(td::nn::mappings("cube"), td::ValueError,
                      {"'cube'", "'expln'", "'square_plus_one'", "add_custom_mapping"});
  TD_EXPECT_THROW_MSG(td::nn::mappings("biased_softplus_x"), td::ValueError,
                      {"'biased_softplus_x'", "<bias>"});
  TD_EXPECT_THROW_MSG(td::nn::biased_softplus(0.01, 0.01), td::ValueError,
                      {"bias (0.01)", "min_val (0.01)"});
  TD_EXPECT_THROW_MSG(td::nn::NormalParamExtractor(
                          td::nn::NormalParamExtractorOptions().scale_mapping("cube")),
                      td::ValueError, {"'cube'", "NormalParamExtractor"});
  TD_EXPECT_THROW_MSG(td::nn::add_custom_mapping("", [](const at::Tensor& x) { return x; }),
                      td::ValueError, {"name is empty"});
  TD_EXPECT_THROW_MSG(td::nn::add_custom_mapping("f", nullptr), td::ValueError, {"'f'", "empty"});
}

TEST(AddStateIndependentNormalScale, ScaleIsTheMappedParameter) {
  td::nn::AddStateIndependentNormalScale add(
      td::nn::AddStateIndependentNormalScaleOptions().scale_shape({4}).init_value(0.5));
  ASSERT_EQ(add->parameters().size(), 1u);
  EXPECT_EQ(add->named_parameters().keys(), std::vector<std::string>{"state_independent_scale"});
  const at::Tensor loc = at::randn({2, 3, 4});
  auto [loc_out, scale] = add(loc);
  EXPECT_TRUE(loc_out.is_same(loc));
  EXPECT_EQ(scale.sizes(), loc.sizes());
  // exp (the default mapping) of the parameter, expanded: leaf by leaf.
  EXPECT_TRUE(at::allclose(scale, at::exp(at::full({4}, 0.5)).expand({2, 3, 4})));
  // Gradients reach the parameter.
  scale.sum().backward();
  EXPECT_TRUE(at::allclose(add->state_independent_scale.grad(), at::full({4}, 6 * std::exp(0.5))));

  // scale_lb floors it; reset_parameters() refills init_value.
  td::nn::AddStateIndependentNormalScale floored(td::nn::AddStateIndependentNormalScaleOptions()
                                                     .scale_shape({2})
                                                     .scale_mapping("relu")
                                                     .scale_lb(0.3)
                                                     .init_value(-1.0));
  EXPECT_TRUE(at::equal(std::get<1>(floored(at::zeros({2}))), at::full({2}, 0.3)));
  {
    at::NoGradGuard no_grad;
    floored->state_independent_scale.fill_(5.0);
  }
  floored->reset_parameters();
  EXPECT_TRUE(at::equal(floored->state_independent_scale, at::full({2}, -1.0)));

  // A buffer instead of a parameter.
  td::nn::AddStateIndependentNormalScale buffer(
      td::nn::AddStateIndependentNormalScaleOptions().scale_shape({3}).make_param(false));
  EXPECT_TRUE(buffer->parameters().empty());
  EXPECT_EQ(buffer->buffers().size(), 1u);
  EXPECT_TRUE(at::equal(std::get<1>(buffer(at::zeros({3}))), at::ones({3})));

  // Functional use: to_module swaps the tensor forward() reads.
  td::TensorDict params = td::nn::from_module(*add);
  td::TensorDict ones = params.apply([](const at::Tensor& t) { return at::ones_like(t); });
  {
    auto guard = td::nn::to_module(ones, *add);
    EXPECT_TRUE(at::allclose(std::get<1>(add(loc)), at::full({2, 3, 4}, std::exp(1.0))));
  }
  EXPECT_TRUE(at::allclose(std::get<1>(add(loc)), at::full({2, 3, 4}, std::exp(0.5))));

  // clone() copies the values into a fresh parameter.
  auto copy = std::dynamic_pointer_cast<td::nn::AddStateIndependentNormalScaleImpl>(add->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(at::equal(copy->state_independent_scale, add->state_independent_scale));
  EXPECT_FALSE(copy->state_independent_scale.is_same(add->state_independent_scale));
}

TEST(AddStateIndependentNormalScale, Errors) {
  td::nn::AddStateIndependentNormalScale add(
      td::nn::AddStateIndependentNormalScaleOptions().scale_shape({4}));
  TD_EXPECT_THROW_MSG(add(at::zeros({4, 3})), td::ValueError,
                      {"torch.Size([4, 3])", "scale_shape torch.Size([4])"});
  TD_EXPECT_THROW_MSG(add(at::zeros({})), td::ValueError, {"torch.Size([])"});
  TD_EXPECT_THROW_MSG(td::nn::AddStateIndependentNormalScale(
                          td::nn::AddStateIndependentNormalScaleOptions().scale_mapping("cube")),
                      td::ValueError, {"'cube'"});
  // The default scale_shape [] fits any loc.
  td::nn::AddStateIndependentNormalScale scalar;
  EXPECT_TRUE(at::equal(std::get<1>(scalar(at::zeros({2, 5}))), at::ones({2, 5})));
}

}  // namespace
