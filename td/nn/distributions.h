// Probability distributions for probabilistic TensorDict modules (LibTorch has no
// torch.distributions): Normal, Categorical, OneHotCategorical, Delta and TruncatedNormal, and
// NormalParamExtractor, the module that turns a network output into (loc, scale).
//
//   td::nn::Normal dist(at::zeros({3}), at::ones({3}));
//   at::Tensor x = dist.rsample();            // differentiable draw, shape [3]
//   at::Tensor lp = dist.log_prob(x);         // shape [3]
//
// Shapes follow torch.distributions: a draw has shape sample_shape + batch_shape + event_shape;
// log_prob() and entropy() have shape batch_shape. sample() never records gradients;
// rsample() (where it exists: Normal, Delta, TruncatedNormal) does.
//
// More distributions: td/nn/continuous.h (Independent, IndependentNormal, TanhNormal) and
// td/nn/discrete.h (MaskedCategorical, rand_one_hot); scale mappings: td/nn/scale.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "td/nn/scale.h"

namespace td::nn {

// The generator the built-in distributions draw from on this thread: the one set by the
// innermost live SetSamplingGenerator, or an undefined at::Generator (draws then use the default
// generator of the parameters' device). A Distribution subclass of yours honours
// ProbabilisticTensorDictModuleOptions::generator by passing it to its ATen sampling calls.
at::Generator sampling_generator();

// While it lives, the built-in distributions' sample() / rsample() on this thread draw from
// `generator` (an undefined one: the default generator). Scopes nest.
//   at::Generator g = at::detail::createCPUGenerator(7);
//   { td::nn::SetSamplingGenerator use(g); x = dist.sample(); }   // reproducible draws
class SetSamplingGenerator {
 public:
  explicit SetSamplingGenerator(at::Generator generator);
  ~SetSamplingGenerator();
  SetSamplingGenerator(const SetSamplingGenerator&) = delete;
  SetSamplingGenerator& operator=(const SetSamplingGenerator&) = delete;

 private:
  at::Generator previous_;
};

// Named distribution parameters, in order ({"loc", t}, {"scale", t}).
using DistParams = std::vector<std::pair<std::string, at::Tensor>>;

class Distribution {
 public:
  virtual ~Distribution() = default;
  // "Normal", "Categorical", ...
  virtual std::string name() const = 0;
  at::IntArrayRef batch_shape() const { return batch_shape_; }
  at::IntArrayRef event_shape() const { return event_shape_; }

  // A draw of shape sample_shape + batch_shape + event_shape, without gradient.
  virtual at::Tensor sample(at::IntArrayRef sample_shape = {}) const = 0;
  virtual bool has_rsample() const { return false; }
  // A reparameterized draw: gradients flow to the parameters. Throws TypeError (naming the
  // distribution) when has_rsample() is false.
  virtual at::Tensor rsample(at::IntArrayRef sample_shape = {}) const;
  // A reparameterized draw and its log-probability (shapes sample_shape + batch + event and
  // sample_shape + batch), so that an entropy estimate -lp.mean(0) over a policy's get_dist()
  // needs no cast to the concrete type. The default is rsample() then log_prob() of the draw;
  // TanhNormal (and Independent over it) scores the exact pre-tanh value drawn instead. Throws
  // as rsample() does.
  //   auto [x, lp] = policy->get_dist(data)->rsample_and_log_prob({16});
  //   at::Tensor entropy = -lp.mean(0);
  virtual std::pair<at::Tensor, at::Tensor> rsample_and_log_prob(
      at::IntArrayRef sample_shape = {}) const;
  // The same with sample(): no gradient through the draw (the log-probability keeps its
  // gradients with respect to the parameters).
  virtual std::pair<at::Tensor, at::Tensor> sample_and_log_prob(
      at::IntArrayRef sample_shape = {}) const;
  // Log density (or mass) of `value`, shape batch_shape (broadcast with `value`).
  virtual at::Tensor log_prob(const at::Tensor& value) const = 0;
  virtual at::Tensor entropy() const = 0;
  virtual at::Tensor mode() const = 0;
  virtual at::Tensor mean() const = 0;
  // What InteractionType::kDeterministic draws: mean() by default, mode() for the discrete
  // distributions (whose mean is not a possible value).
  virtual at::Tensor deterministic_sample() const { return mean(); }
  // The median (what InteractionType::kMedian draws), shape batch_shape + event_shape. The
  // default throws c10::NotImplementedError naming the distribution and suggesting mode():
  // Categorical and OneHotCategorical have none (nor in torch).
  //   at::Tensor m = td::nn::TruncatedNormal(loc, scale, -1, 1).median();
  virtual at::Tensor median() const;
  // The cumulative distribution function at `value`, and its inverse at probabilities `prob`
  // (shape: batch_shape broadcast with the argument). The defaults throw
  // c10::NotImplementedError naming the distribution (torch defines them for Normal, not for
  // the discrete distributions).
  virtual at::Tensor cdf(const at::Tensor& value) const;
  virtual at::Tensor icdf(const at::Tensor& prob) const;

 protected:
  std::vector<int64_t> extended_shape(at::IntArrayRef sample_shape) const;
  std::vector<int64_t> batch_shape_;
  std::vector<int64_t> event_shape_;
};

// Builds a distribution from named parameters (see ProbabilisticTensorDictModule).
struct DistributionFactory {
  std::string name;
  std::function<std::shared_ptr<Distribution>(const DistParams&)> make;
};

// The parameter `name` of `params`; throws KeyError naming the distribution, the expected and
// the given names when it is missing.
const at::Tensor& DistParam(const DistParams& params, const std::string& name,
                            const std::string& distribution);

// Normal(loc, scale): loc and scale broadcast together (batch_shape = their broadcast shape,
// event_shape = []). Throws ValueError naming both shapes when they do not broadcast, and when
// scale has a non-positive entry.
class Normal : public Distribution {
 public:
  Normal(at::Tensor loc, at::Tensor scale);
  // Reads parameters "loc" and "scale".
  static DistributionFactory factory();
  std::string name() const override { return "Normal"; }
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  at::Tensor rsample(at::IntArrayRef sample_shape = {}) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mode() const override { return loc_; }
  at::Tensor mean() const override { return loc_; }
  at::Tensor median() const override { return loc_; }
  at::Tensor cdf(const at::Tensor& value) const override;
  at::Tensor icdf(const at::Tensor& prob) const override;
  const at::Tensor& loc() const { return loc_; }
  const at::Tensor& scale() const { return scale_; }

 private:
  at::Tensor loc_, scale_;
};

// Categorical over the last dim of `logits` (or `probs`): batch_shape = shape[:-1], draws are
// int64 class indices (event_shape = []). mean() is NaN (as in torch); deterministic_sample()
// is mode(). Throws ValueError for a 0-dim input or negative probabilities.
class Categorical : public Distribution {
 public:
  static Categorical from_logits(const at::Tensor& logits);
  static Categorical from_probs(const at::Tensor& probs);
  // Reads parameter "logits", or "probs" when there is no "logits".
  static DistributionFactory factory();
  std::string name() const override { return "Categorical"; }
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mode() const override;
  at::Tensor mean() const override;
  at::Tensor deterministic_sample() const override { return mode(); }
  // Normalized: logsumexp over the last dim is 0.
  const at::Tensor& logits() const { return logits_; }
  const at::Tensor& probs() const { return probs_; }
  int64_t num_events() const { return logits_.size(-1); }

 private:
  Categorical(at::Tensor logits, at::Tensor probs);
  at::Tensor logits_, probs_;
};

// OneHotCategorical: a Categorical whose draws are one-hot vectors (event_shape = [K]) in the
// dtype of the parameters. mean() is probs(); deterministic_sample() is mode().
class OneHotCategorical : public Distribution {
 public:
  static OneHotCategorical from_logits(const at::Tensor& logits);
  static OneHotCategorical from_probs(const at::Tensor& probs);
  // Reads parameter "logits", or "probs".
  static DistributionFactory factory();
  std::string name() const override { return "OneHotCategorical"; }
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override { return categorical_.entropy(); }
  at::Tensor mode() const override;
  at::Tensor mean() const override { return categorical_.probs(); }
  at::Tensor deterministic_sample() const override { return mode(); }
  const Categorical& categorical() const { return categorical_; }

 private:
  explicit OneHotCategorical(Categorical c);
  Categorical categorical_;
};

// Delta(param): all mass at `param`. The last dim of `param` is the event (event_shape =
// param.shape[-1:], batch_shape the rest; a 0-dim param has no event dims). log_prob is 0 where
// `value` equals `param` within atol + rtol * |param| over the whole event, -inf elsewhere;
// entropy is 0. rsample() returns param itself (expanded), so gradients reach it.
class Delta : public Distribution {
 public:
  explicit Delta(at::Tensor param, double atol = 1e-6, double rtol = 1e-6);
  // Reads parameter "param".
  static DistributionFactory factory(double atol = 1e-6, double rtol = 1e-6);
  std::string name() const override { return "Delta"; }
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  at::Tensor rsample(at::IntArrayRef sample_shape = {}) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mode() const override { return param_; }
  at::Tensor mean() const override { return param_; }
  at::Tensor median() const override { return param_; }
  const at::Tensor& param() const { return param_; }

 private:
  at::Tensor param_;
  double atol_, rtol_;
};

// A Normal(loc, scale) restricted to [low, high] and renormalized. rsample() inverts the CDF
// (differentiable in loc and scale). mode() is loc clamped to [low, high]; mean() and entropy()
// are the closed forms; median() is the inverse CDF at 0.5: loc + scale * Phi^-1((Phi(alpha) +
// Phi(beta)) / 2). Throws ValueError when low >= high, and as Normal does.
class TruncatedNormal : public Distribution {
 public:
  TruncatedNormal(at::Tensor loc, at::Tensor scale, double low = -1.0, double high = 1.0);
  // Reads parameters "loc" and "scale".
  static DistributionFactory factory(double low = -1.0, double high = 1.0);
  std::string name() const override { return "TruncatedNormal"; }
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  at::Tensor rsample(at::IntArrayRef sample_shape = {}) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mode() const override;
  at::Tensor mean() const override;
  at::Tensor median() const override;
  double low() const { return low_; }
  double high() const { return high_; }

 private:
  at::Tensor loc_, scale_;
  at::Tensor alpha_, beta_, log_z_;  // standardized bounds and log(Phi(beta) - Phi(alpha))
  double low_, high_;
};

struct NormalParamExtractorOptions {
  // How the second half is mapped to a positive scale: a td::nn::mappings() name
  // ("biased_softplus_<bias>": softplus shifted so that 0 maps to <bias>, floor 0.01;
  // "biased_softplus_<bias>_<min>", "softplus", "exp", "relu", "expln", "none", or a name given to
  // add_custom_mapping).
  TORCH_ARG(std::string, scale_mapping) = "biased_softplus_1.0";
  // A custom mapping used instead of scale_mapping when set (Python passes a callable by
  // registering it with add_custom_mapping; both work here).
  //   NormalParamExtractorOptions().scale_mapping_fn([](const at::Tensor& x) { return x * x; })
  TORCH_ARG(ScaleMapping, scale_mapping_fn) = nullptr;
  // Lower bound of the scale (applied after the mapping).
  TORCH_ARG(double, scale_lb) = 1e-4;
};

// Splits the last dim of its input in two halves: (loc, scale) with scale =
// max(mapping(second half), scale_lb). Throws ValueError for an unknown mapping (at
// construction, see td::nn::mappings) and for an odd last dim (naming the shape).
//   td::nn::NormalParamExtractor extract;
//   auto [loc, scale] = extract(at::randn({3, 8}));   // both [3, 4]
class NormalParamExtractorImpl : public torch::nn::Cloneable<NormalParamExtractorImpl> {
 public:
  explicit NormalParamExtractorImpl(NormalParamExtractorOptions options = {});
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x);
  void reset() override {}
  void pretty_print(std::ostream& stream) const override;
  const NormalParamExtractorOptions& options() const { return options_; }

 private:
  NormalParamExtractorOptions options_;
  std::function<at::Tensor(const at::Tensor&)> mapping_;
};
TORCH_MODULE(NormalParamExtractor);

}  // namespace td::nn
