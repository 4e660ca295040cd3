// Discrete distributions for action masks (torchrl's MaskedCategorical) and rand_one_hot, on top
// of td/nn/distributions.h's Categorical and OneHotCategorical.
//
//   at::Tensor mask = ...;                                  // bool [B, K]: allowed actions
//   auto pi = td::nn::MaskedCategorical::from_logits(logits, mask);
//   at::Tensor a = pi.sample();                             // never a masked action
//   td::nn::ProbabilisticTensorDictModule actor(
//       {"logits", "action_mask"}, "action", td::nn::MaskedCategorical::factory(),
//       td::nn::ProbabilisticTensorDictModuleOptions().dist_param_names({"logits", "mask"}));
#pragma once

#include <ATen/core/Tensor.h>

#include <limits>
#include <map>
#include <optional>
#include <string>

#include "td/nn/distributions.h"

namespace td::nn {

// A one-hot vector per row of `values` drawn with probabilities softmax(values) (or `values`
// themselves when do_softmax is false), as int64, shape values.shape. Uses sampling_generator().
//   td::nn::rand_one_hot(at::zeros({4, 3}));   // four rows, one 1 each
at::Tensor rand_one_hot(const at::Tensor& values, bool do_softmax = true);

struct MaskedCategoricalOptions {
  // The log-probability given to values outside the mask.
  TORCH_ARG(double, neg_inf) = -std::numeric_limits<double>::infinity();
  // Sparse form only: the entry of `indices` that marks padding (its logit becomes neg_inf).
  TORCH_ARG(std::optional<int64_t>, padding_value) = std::nullopt;
};

// A Categorical restricted to the allowed classes. Dense form: `mask` is a bool tensor
// broadcastable to the logits' shape, false = not allowed (those logits become neg_inf). Sparse
// form: `indices` (int64, last dim <= K) lists the allowed classes of each row; draws are mapped
// back to class ids. log_prob() of a class outside the mask is neg_inf; entropy() counts the
// allowed classes only; mode() is the most likely allowed class; mean() is NaN (as Categorical);
// deterministic_sample() is mode(). Throws ValueError naming the shapes when the mask does not
// broadcast to the logits, when a row allows no class, or when the mask is not bool (dense) /
// the indices not integral (sparse).
class MaskedCategorical : public Distribution {
 public:
  static MaskedCategorical from_logits(const at::Tensor& logits, const at::Tensor& mask,
                                       MaskedCategoricalOptions options = {});
  // Probabilities outside the mask are zeroed, the rest renormalized.
  static MaskedCategorical from_probs(const at::Tensor& probs, const at::Tensor& mask,
                                      MaskedCategoricalOptions options = {});
  // The sparse form.
  static MaskedCategorical from_logits_indices(const at::Tensor& logits, const at::Tensor& indices,
                                               MaskedCategoricalOptions options = {});
  // Reads parameter "logits" (or "probs") and "mask" (or "indices", the sparse form).
  static DistributionFactory factory(MaskedCategoricalOptions options = {});
  std::string name() const override { return "MaskedCategorical"; }
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mode() const override;
  at::Tensor mean() const override { return categorical_.mean(); }
  at::Tensor deterministic_sample() const override { return mode(); }
  // The masked, normalized logits (over the allowed classes for the sparse form).
  const at::Tensor& logits() const { return categorical_.logits(); }
  const at::Tensor& probs() const { return categorical_.probs(); }
  bool sparse() const { return indices_.defined(); }

 private:
  MaskedCategorical(Categorical c, at::Tensor indices, MaskedCategoricalOptions options);
  Categorical categorical_;
  at::Tensor indices_;  // sparse form only
  at::Tensor pad_;      // sparse form with padding_value: true at the padding entries
  MaskedCategoricalOptions options_;
};

// Python's tensordict.nn.distributions_maps: the distributions of td::nn by lower-case class
// name, each as its default factory ("delta", "onehotcategorical" as upstream; also "normal",
// "categorical", "truncatednormal", "tanhnormal", "independentnormal", "maskedcategorical").
// Upstream's map also lists two modules, NormalParamExtractor and AddStateIndependentNormalScale,
// which are not distributions here (td/nn/distributions.h, td/nn/scale.h).
//   auto f = td::nn::distributions_maps().at("tanhnormal");
const std::map<std::string, DistributionFactory>& distributions_maps();

}  // namespace td::nn
