#include "td/nn/discrete.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "td/core/testing.h"
#include "td/nn/probabilistic.h"

namespace {

using td::nn::MaskedCategorical;

at::Tensor D(std::vector<double> v, std::vector<int64_t> shape) {
  return at::tensor(v, at::kDouble).reshape(shape);
}

// The inputs of td/nn/testdata/distribution_reference.py; the reference values are what it
// printed (torch 1.13's torch.distributions, double precision).
at::Tensor Logits() { return D({0.3, -1.0, 2.0, 0.5, 1.5, 0.2, -0.7, 0.0}, {2, 4}); }
at::Tensor Mask() {
  return at::tensor({1, 0, 1, 1, 0, 1, 1, 0}, at::kLong).reshape({2, 4}).ne(0);
}
at::Tensor Classes() { return at::tensor({2, 1}, at::kLong); }

constexpr double kTol = 1e-10;
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MaskedCategorical, MatchesTorchCategoricalOnMaskedLogits) {
  auto d = MaskedCategorical::from_logits(Logits(), Mask());
  EXPECT_EQ(d.batch_shape(), at::IntArrayRef({2}));
  EXPECT_TRUE(at::allclose(d.log_prob(Classes()), D({-0.3406162698146993, -0.34115387473208786}, {2}),
                           kTol, kTol));
  EXPECT_TRUE(at::allclose(d.entropy(), D({0.7996082673772731, 0.6012993223695843}, {2}), kTol,
                           kTol));
  EXPECT_TRUE(at::allclose(d.probs(),
                           D({0.1299486027954993, 0.0, 0.7113318153310174, 0.15871958187348323,
                              0.0, 0.7109495026250039, 0.28905049737499605, 0.0},
                             {2, 4}),
                           kTol, kTol));
  // The same with ATen by hand: log_softmax of the masked logits, gathered.
  const at::Tensor by_hand = at::log_softmax(Logits().masked_fill(~Mask(), -kInf), -1)
                                 .gather(-1, Classes().unsqueeze(-1))
                                 .squeeze(-1);
  EXPECT_TRUE(at::allclose(d.log_prob(Classes()), by_hand));
  // A masked class: -inf (or neg_inf).
  EXPECT_TRUE(at::equal(d.log_prob(at::tensor({1, 0}, at::kLong)), at::full({2}, -kInf, at::kDouble)));
  auto finite = MaskedCategorical::from_logits(
      Logits(), Mask(), td::nn::MaskedCategoricalOptions().neg_inf(-1e9));
  EXPECT_TRUE(at::allclose(finite.log_prob(Classes()), by_hand));
  EXPECT_TRUE(at::allclose(finite.entropy(), d.entropy()));
  // mode: the most likely allowed class (class 0 of row 1 has the largest logit but is masked).
  EXPECT_TRUE(at::equal(d.mode(), at::tensor({2, 1}, at::kLong)));
  EXPECT_TRUE(at::equal(d.deterministic_sample(), d.mode()));
  EXPECT_TRUE(at::isnan(d.mean()).all().item<bool>());
  // Draws never hit a masked class.
  at::Generator g = at::detail::createCPUGenerator(0);
  td::nn::SetSamplingGenerator use(g);
  const at::Tensor draws = d.sample({2000});
  EXPECT_EQ(draws.sizes(), at::IntArrayRef({2000, 2}));
  EXPECT_TRUE(Mask().gather(-1, draws.t()).all().item<bool>());
  // from_probs: the masked probabilities zeroed and the rest renormalized.
  auto p = MaskedCategorical::from_probs(at::softmax(Logits(), -1), Mask());
  EXPECT_TRUE(at::allclose(p.probs(), d.probs()));
}

TEST(MaskedCategorical, SparseIndices) {
  // Row 0 allows classes {0, 2, 3}, row 1 {1, 2} (the last entry is padding).
  const at::Tensor indices = at::tensor({0, 2, 3, 1, 2, -1}, at::kLong).reshape({2, 3});
  auto sparse = MaskedCategorical::from_logits_indices(
      Logits(), indices, td::nn::MaskedCategoricalOptions().padding_value(-1));
  auto dense = MaskedCategorical::from_logits(Logits(), Mask());
  EXPECT_TRUE(sparse.sparse());
  EXPECT_TRUE(at::allclose(sparse.log_prob(Classes()), dense.log_prob(Classes())));
  EXPECT_TRUE(at::allclose(sparse.entropy(), dense.entropy()));
  EXPECT_TRUE(at::equal(sparse.mode(), dense.mode()));
  EXPECT_TRUE(at::equal(sparse.log_prob(at::tensor({1, 0}, at::kLong)),
                        at::full({2}, -kInf, at::kDouble)));
  const at::Tensor draws = sparse.sample({500});
  EXPECT_TRUE(Mask().gather(-1, draws.t()).all().item<bool>());
  TD_EXPECT_THROW_MSG(MaskedCategorical::from_logits_indices(Logits(), indices), td::ValueError,
                      {"[0, 4)", "min -1"});
  TD_EXPECT_THROW_MSG(MaskedCategorical::from_logits_indices(Logits(), indices.to(at::kFloat)),
                      td::ValueError, {"integers"});
}

TEST(MaskedCategorical, Errors) {
  TD_EXPECT_THROW_MSG(MaskedCategorical::from_logits(Logits(), Mask().to(at::kLong)),
                      td::ValueError, {"bool", "Long"});
  TD_EXPECT_THROW_MSG(MaskedCategorical::from_logits(Logits(), at::ones({3}, at::kBool)),
                      td::ValueError, {"torch.Size([3])", "torch.Size([2, 4])"});
  at::Tensor none = Mask().clone();
  none[1].fill_(false);
  TD_EXPECT_THROW_MSG(MaskedCategorical::from_logits(Logits(), none), td::ValueError,
                      {"allows no class", "torch.Size([2, 4])"});
  // The factory: "mask" (or "indices") next to "logits" (or "probs").
  auto f = MaskedCategorical::factory();
  TD_EXPECT_THROW_MSG((f.make({{"logits", Logits()}})), td::KeyError, {"'mask'", "['logits']"});
  TD_EXPECT_THROW_MSG((f.make({{"mask", Mask()}})), td::KeyError, {"'logits'"});
}

TEST(MaskedCategorical, InAProbabilisticModule) {
  td::nn::ProbabilisticTensorDictModule actor(
      {"logits", "action_mask"}, "action", MaskedCategorical::factory(),
      td::nn::ProbabilisticTensorDictModuleOptions().dist_param_names({"logits", "mask"})
          .return_log_prob(true));
  td::TensorDict data({{"logits", Logits()}, {"action_mask", Mask()}}, {2});
  actor(data);  // deterministic: the mode
  EXPECT_TRUE(at::equal(data.get("action"), at::tensor({2, 1}, at::kLong)));
  EXPECT_TRUE(at::allclose(data.get("action_log_prob"),
                           MaskedCategorical::from_logits(Logits(), Mask()).log_prob(
                               at::tensor({2, 1}, at::kLong))));
}

TEST(OneHotCategorical, MatchesTorch) {
  auto d = td::nn::OneHotCategorical::from_logits(Logits());
  const at::Tensor onehot = at::one_hot(Classes(), 4).to(at::kDouble);
  EXPECT_TRUE(at::allclose(d.log_prob(onehot), D({-0.3754187037721044, -1.7740361822789945}, {2}),
                           kTol, kTol));
  EXPECT_TRUE(at::allclose(d.entropy(), D({0.9213228157433592, 1.0546610043562448}, {2}), kTol,
                           kTol));
}

TEST(RandOneHot, OneHotRows) {
  at::Generator g = at::detail::createCPUGenerator(1);
  td::nn::SetSamplingGenerator use(g);
  const at::Tensor r = td::nn::rand_one_hot(at::randn({100, 5}));
  EXPECT_EQ(r.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(r.sum(-1), at::ones({100}, at::kLong)));
  // All the mass on one class: always that class.
  const at::Tensor certain = at::full({10, 3}, -kInf).index_fill(1, at::tensor({1}, at::kLong), 0.0);
  EXPECT_TRUE(at::equal(td::nn::rand_one_hot(certain).argmax(-1), at::ones({10}, at::kLong)));
  // Probabilities given directly (do_softmax false).
  const at::Tensor probs = at::tensor({0.0, 0.0, 1.0}).expand({7, 3});
  EXPECT_TRUE(at::equal(td::nn::rand_one_hot(probs, false).argmax(-1),
                        at::full({7}, 2, at::kLong)));
  TD_EXPECT_THROW_MSG(td::nn::rand_one_hot(at::zeros({})), td::ValueError, {"torch.Size([])"});
}

}  // namespace

TEST(DistributionsMaps, NamesToDefaultFactories) {
  const auto& maps = td::nn::distributions_maps();
  EXPECT_EQ(maps.size(), 8u);
  for (const char* name : {"delta", "onehotcategorical", "normal", "categorical", "truncatednormal",
                           "tanhnormal", "independentnormal", "maskedcategorical"}) {
    ASSERT_TRUE(maps.count(name)) << name;
    std::string lower = maps.at(name).name;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    EXPECT_EQ(lower.substr(0, std::string(name).size()), name) << maps.at(name).name;
  }
  // The factory builds the distribution from its named parameters.
  td::nn::ProbabilisticTensorDictModule head({"logits"}, {"action"}, maps.at("onehotcategorical"));
  td::TensorDict out = head(td::TensorDict({{"logits", at::randn({5, 3})}}, {5}));
  EXPECT_TRUE(at::equal(out.get("action").sum(-1), at::ones({5}, out.get("action").scalar_type())));
  EXPECT_THROW(maps.at("normalparamextractor"), std::out_of_range);  // a module, not a distribution
}
