// Continuous distributions that RL policies use with ProbabilisticTensorDictModule (torchrl's
// IndependentNormal and TanhNormal, torch's Independent), on top of td/nn/distributions.h.
//
//   td::nn::TanhNormal pi(loc, scale);                 // loc, scale: [B, A]; event_shape [A]
//   auto [action, lp] = pi.rsample_and_log_prob();     // action in (-1, 1)^A, lp: [B]
//   td::nn::ProbabilisticTensorDictModule actor({"loc", "scale"}, "action",
//                                               td::nn::TanhNormal::factory());
//
// The formulas are those of torch.distributions (Independent, Normal, TransformedDistribution
// with TanhTransform and AffineTransform); continuous_test.cc checks them against values
// computed by torch 1.13.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "td/nn/distributions.h"

namespace td::nn {

// torch's Independent(base, n): the last `n` batch dims of `base` become event dims, so
// log_prob() and entropy() are summed over them. batch_shape = base's batch_shape[:-n],
// event_shape = base's batch_shape[-n:] + base's event_shape. Draws, mode, mean and median are
// the base's. Throws ValueError naming the base and its batch shape when n exceeds its batch
// dims, or when n < 0.
//   td::nn::Independent d(std::make_shared<td::nn::Normal>(loc, scale), 1);   // loc: [B, A]
//   d.log_prob(x);   // [B]: Normal's log-densities summed over A
class Independent : public Distribution {
 public:
  Independent(std::shared_ptr<Distribution> base, int64_t reinterpreted_batch_ndims);
  // Reads `base`'s parameters and wraps what it builds.
  //   td::nn::Independent::factory(td::nn::Normal::factory(), 1);
  static DistributionFactory factory(DistributionFactory base, int64_t reinterpreted_batch_ndims);
  std::string name() const override;
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override {
    return base_->sample(sample_shape);
  }
  bool has_rsample() const override { return base_->has_rsample(); }
  at::Tensor rsample(at::IntArrayRef sample_shape = {}) const override {
    return base_->rsample(sample_shape);
  }
  at::Tensor log_prob(const at::Tensor& value) const override;
  // The base's draw and log-probability (its own, e.g. TanhNormal's exact one), summed over the
  // reinterpreted dims.
  std::pair<at::Tensor, at::Tensor> rsample_and_log_prob(
      at::IntArrayRef sample_shape = {}) const override;
  std::pair<at::Tensor, at::Tensor> sample_and_log_prob(
      at::IntArrayRef sample_shape = {}) const override;
  at::Tensor entropy() const override;
  at::Tensor mode() const override { return base_->mode(); }
  at::Tensor mean() const override { return base_->mean(); }
  at::Tensor median() const override { return base_->median(); }
  at::Tensor deterministic_sample() const override { return base_->deterministic_sample(); }
  const Distribution& base() const { return *base_; }
  int64_t reinterpreted_batch_ndims() const { return ndims_; }

 protected:
  // Sums the last ndims_ dims of `t`.
  at::Tensor sum_rightmost(const at::Tensor& t) const;

 private:
  std::shared_ptr<Distribution> base_;
  int64_t ndims_;
};

struct IndependentNormalOptions {
  // With tanh_loc, loc is replaced by upscale * tanh(loc / upscale).
  TORCH_ARG(double, upscale) = 5.0;
  TORCH_ARG(bool, tanh_loc) = false;
  // How many trailing dims of loc form the event.
  TORCH_ARG(int64_t, event_dims) = 1;
};

// torchrl's IndependentNormal: Independent(Normal(loc, scale), event_dims). mode() is loc;
// deterministic_sample() the mean (loc). Throws as Normal and Independent do.
//   td::nn::IndependentNormal d(loc, scale);   // log_prob summed over the last dim
class IndependentNormal : public Independent {
 public:
  IndependentNormal(const at::Tensor& loc, const at::Tensor& scale,
                    IndependentNormalOptions options = {});
  // Reads parameters "loc" and "scale".
  static DistributionFactory factory(IndependentNormalOptions options = {});
  std::string name() const override { return "IndependentNormal"; }
  const Normal& normal() const { return static_cast<const Normal&>(base()); }
};

struct TanhNormalOptions {
  // The support (low, high): draws are low + (high - low) * (tanh(x) + 1) / 2. Must satisfy
  // low < high.
  TORCH_ARG(double, low) = -1.0;
  TORCH_ARG(double, high) = 1.0;
  // With tanh_loc, loc is replaced by upscale * tanh(loc / upscale) (shifted to the middle of
  // [low, high] when the bounds are not -1, 1).
  TORCH_ARG(double, upscale) = 5.0;
  TORCH_ARG(bool, tanh_loc) = false;
  // How many trailing dims form the event; nullopt: min(1, loc.dim()).
  TORCH_ARG(std::optional<int64_t>, event_dims) = std::nullopt;
  // Clamp tanh to +-(1 - resolution of the dtype) so that atanh stays finite (torchrl's
  // SafeTanhTransform): 1e-6 for float, 1e-15 for double.
  TORCH_ARG(bool, safe_tanh) = true;
};

// torchrl's TanhNormal: a Normal(loc, scale) (Independent over event_dims) pushed through tanh
// and, when (low, high) != (-1, 1), the affine map onto (low, high). log_prob(y) is the Normal's
// log-density of x = atanh(unscaled y) minus log|d tanh / dx| = 2 (log 2 - x - softplus(-2x))
// and log((high - low) / 2) per event coordinate. deterministic_sample() and median() are the
// transformed loc; mean(), mode() and entropy() have no closed form and throw
// c10::NotImplementedError naming the distribution (ProbabilisticTensorDictModule's kMean falls
// back to an empirical mean, see n_empirical_estimate). Throws ValueError when low >= high and
// as Normal does.
class TanhNormal : public Distribution {
 public:
  TanhNormal(const at::Tensor& loc, const at::Tensor& scale, TanhNormalOptions options = {});
  // Reads parameters "loc" and "scale".
  static DistributionFactory factory(TanhNormalOptions options = {});
  std::string name() const override { return "TanhNormal"; }
  at::Tensor sample(at::IntArrayRef sample_shape = {}) const override;
  bool has_rsample() const override { return true; }
  at::Tensor rsample(at::IntArrayRef sample_shape = {}) const override;
  at::Tensor log_prob(const at::Tensor& value) const override;
  at::Tensor entropy() const override;
  at::Tensor mode() const override;
  at::Tensor mean() const override;
  at::Tensor median() const override { return deterministic_sample(); }
  at::Tensor deterministic_sample() const override { return transform(loc_); }
  // A reparameterized draw and its log-probability, scored at the exact pre-tanh value drawn
  // (no atanh round trip, which saturates): shapes sample_shape + batch + event and
  // sample_shape + batch.
  std::pair<at::Tensor, at::Tensor> rsample_and_log_prob(
      at::IntArrayRef sample_shape = {}) const override;
  // The same without gradients through the draw (the log-probability keeps its gradients with
  // respect to loc and scale).
  std::pair<at::Tensor, at::Tensor> sample_and_log_prob(
      at::IntArrayRef sample_shape = {}) const override;
  // loc after tanh_loc (the Normal's location), and scale.
  const at::Tensor& loc() const { return loc_; }
  const at::Tensor& scale() const { return scale_; }
  const TanhNormalOptions& options() const { return options_; }

 private:
  // x -> low + (high - low) * (tanh(x) + 1) / 2, and back.
  at::Tensor transform(const at::Tensor& x) const;
  at::Tensor inverse(const at::Tensor& y) const;
  // The log-probability of the draw y = transform(x), from x.
  at::Tensor log_prob_pre(const at::Tensor& x) const;
  at::Tensor sum_event(const at::Tensor& t) const;

  TanhNormalOptions options_;
  at::Tensor loc_, scale_;
  int64_t event_dims_;
  bool affine_;
};

}  // namespace td::nn
