#include "td/nn/continuous.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"

namespace td::nn {
namespace {

constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log(sqrt(2 * pi))
constexpr double kLog2 = 0.69314718055994530942;

// torch.finfo(dtype).resolution: the clamp of torchrl's safe tanh.
double Resolution(at::ScalarType t) {
  switch (t) {
    case at::kDouble:
      return 1e-15;
    case at::kHalf:
      return 1e-3;
    case at::kBFloat16:
      return 1e-2;
    default:
      return 1e-6;
  }
}

at::Tensor SumLast(const at::Tensor& t, int64_t n) {
  if (n <= 0) return t;
  std::vector<int64_t> dims(static_cast<size_t>(n));
  std::iota(dims.begin(), dims.end(), -n);
  return t.sum(dims);
}

}  // namespace

// ---- Independent ----------------------------------------------------------------------------------

Independent::Independent(std::shared_ptr<Distribution> base, int64_t reinterpreted_batch_ndims)
    : base_(std::move(base)), ndims_(reinterpreted_batch_ndims) {
  if (!base_) TD_FAIL(ValueError, "Independent: the base distribution is null");
  const at::IntArrayRef batch = base_->batch_shape();
  const int64_t nb = static_cast<int64_t>(batch.size());
  if (ndims_ < 0 || ndims_ > nb) {
    TD_FAIL(ValueError, "Independent: reinterpreted_batch_ndims (", ndims_,
            ") must be between 0 and the number of batch dims of ", base_->name(),
            " (batch_shape ", SizeRepr(batch), ")");
  }
  batch_shape_ = batch.slice(0, nb - ndims_).vec();
  event_shape_ = batch.slice(nb - ndims_).vec();
  const at::IntArrayRef event = base_->event_shape();
  event_shape_.insert(event_shape_.end(), event.begin(), event.end());
}

DistributionFactory Independent::factory(DistributionFactory base,
                                         int64_t reinterpreted_batch_ndims) {
  const std::string name = absl::StrCat("Independent(", base.name, ", ",
                                        reinterpreted_batch_ndims, ")");
  return {name, [base = std::move(base), reinterpreted_batch_ndims](const DistParams& p) {
            return std::make_shared<Independent>(base.make(p), reinterpreted_batch_ndims);
          }};
}

std::string Independent::name() const {
  return absl::StrCat("Independent(", base_->name(), ", ", ndims_, ")");
}

at::Tensor Independent::sum_rightmost(const at::Tensor& t) const { return SumLast(t, ndims_); }

at::Tensor Independent::log_prob(const at::Tensor& value) const {
  return sum_rightmost(base_->log_prob(value));
}

std::pair<at::Tensor, at::Tensor> Independent::rsample_and_log_prob(
    at::IntArrayRef sample_shape) const {
  auto [x, lp] = base_->rsample_and_log_prob(sample_shape);
  return {std::move(x), sum_rightmost(lp)};
}

std::pair<at::Tensor, at::Tensor> Independent::sample_and_log_prob(
    at::IntArrayRef sample_shape) const {
  auto [x, lp] = base_->sample_and_log_prob(sample_shape);
  return {std::move(x), sum_rightmost(lp)};
}

at::Tensor Independent::entropy() const { return sum_rightmost(base_->entropy()); }

// ---- IndependentNormal ------------------------------------------------------------------------------

namespace {

at::Tensor MaybeTanhLoc(const at::Tensor& loc, bool tanh_loc, double upscale) {
  return tanh_loc ? upscale * at::tanh(loc / upscale) : loc;
}

}  // namespace

IndependentNormal::IndependentNormal(const at::Tensor& loc, const at::Tensor& scale,
                                     IndependentNormalOptions options)
    : Independent(std::make_shared<Normal>(MaybeTanhLoc(loc, options.tanh_loc(), options.upscale()),
                                           scale),
                  options.event_dims()) {}

DistributionFactory IndependentNormal::factory(IndependentNormalOptions options) {
  return {"IndependentNormal", [options](const DistParams& p) {
            return std::make_shared<IndependentNormal>(DistParam(p, "loc", "IndependentNormal"),
                                                       DistParam(p, "scale", "IndependentNormal"),
                                                       options);
          }};
}

// ---- TanhNormal -----------------------------------------------------------------------------------

TanhNormal::TanhNormal(const at::Tensor& loc, const at::Tensor& scale, TanhNormalOptions options)
    : options_(std::move(options)) {
  const double low = options_.low(), high = options_.high();
  if (!(low < high)) {
    TD_FAIL(ValueError, "TanhNormal: low (", low, ") must be smaller than high (", high, ")");
  }
  affine_ = low != -1.0 || high != 1.0;
  at::Tensor l = loc;
  if (options_.tanh_loc()) {
    l = options_.upscale() * at::tanh(loc / options_.upscale());
    if (affine_) l = l + (high - low) / 2 + low;
  }
  const Normal normal(l, scale);  // broadcasts and checks scale > 0
  loc_ = normal.loc();
  scale_ = normal.scale();
  const int64_t dim = loc_.dim();
  event_dims_ = options_.event_dims().value_or(std::min<int64_t>(1, dim));
  if (event_dims_ < 0 || event_dims_ > dim) {
    TD_FAIL(ValueError, "TanhNormal: event_dims (", event_dims_,
            ") must be between 0 and the number of dims of loc and scale (broadcast shape ",
            SizeRepr(loc_.sizes()), ")");
  }
  batch_shape_ = loc_.sizes().slice(0, dim - event_dims_).vec();
  event_shape_ = loc_.sizes().slice(dim - event_dims_).vec();
}

DistributionFactory TanhNormal::factory(TanhNormalOptions options) {
  return {"TanhNormal", [options](const DistParams& p) {
            return std::make_shared<TanhNormal>(DistParam(p, "loc", "TanhNormal"),
                                                DistParam(p, "scale", "TanhNormal"), options);
          }};
}

at::Tensor TanhNormal::transform(const at::Tensor& x) const {
  at::Tensor y = at::tanh(x);
  if (options_.safe_tanh()) {
    const double lim = 1.0 - Resolution(x.scalar_type());
    // Clamped values, tanh's gradient (torchrl's SafeTanhTransform backward is 1 - y^2).
    y = y + (y.clamp(-lim, lim) - y).detach();
  }
  if (affine_) {
    const double low = options_.low(), high = options_.high();
    y = y * ((high - low) / 2) + (high + low) / 2;
  }
  return y;
}

at::Tensor TanhNormal::inverse(const at::Tensor& y) const {
  at::Tensor u = y;
  if (affine_) {
    const double low = options_.low(), high = options_.high();
    u = (y - (high + low) / 2) / ((high - low) / 2);
  }
  if (options_.safe_tanh()) {
    const double lim = 1.0 - Resolution(y.scalar_type());
    u = u.clamp(-lim, lim);
  }
  return at::atanh(u);
}

at::Tensor TanhNormal::sum_event(const at::Tensor& t) const { return SumLast(t, event_dims_); }

at::Tensor TanhNormal::log_prob_pre(const at::Tensor& x) const {
  const at::Tensor z = (x - loc_) / scale_;
  at::Tensor lp = -0.5 * z * z - at::log(scale_) - kLogSqrt2Pi;
  lp = lp - 2 * (kLog2 - x - at::softplus(-2 * x));
  if (affine_) lp = lp - std::log((options_.high() - options_.low()) / 2);
  return sum_event(lp);
}

at::Tensor TanhNormal::log_prob(const at::Tensor& value) const {
  return log_prob_pre(inverse(value));
}

at::Tensor TanhNormal::rsample(at::IntArrayRef sample_shape) const {
  return transform(Normal(loc_, scale_).rsample(sample_shape));
}

at::Tensor TanhNormal::sample(at::IntArrayRef sample_shape) const {
  at::NoGradGuard no_grad;
  return transform(Normal(loc_, scale_).sample(sample_shape));
}

std::pair<at::Tensor, at::Tensor> TanhNormal::rsample_and_log_prob(
    at::IntArrayRef sample_shape) const {
  const at::Tensor x = Normal(loc_, scale_).rsample(sample_shape);
  return {transform(x), log_prob_pre(x)};
}

std::pair<at::Tensor, at::Tensor> TanhNormal::sample_and_log_prob(
    at::IntArrayRef sample_shape) const {
  const at::Tensor x = Normal(loc_, scale_).sample(sample_shape);
  at::Tensor y;
  {
    at::NoGradGuard no_grad;
    y = transform(x);
  }
  return {y, log_prob_pre(x)};
}

at::Tensor TanhNormal::entropy() const {
  TD_FAIL(c10::NotImplementedError, "TanhNormal has no closed-form entropy; estimate it as "
          "-log_prob(x).mean(0) over x = rsample({N}), or "
          "-rsample_and_log_prob({N}).second.mean(0)");
}

at::Tensor TanhNormal::mode() const {
  TD_FAIL(c10::NotImplementedError, "TanhNormal has no analytical mode; use "
          "InteractionType::kDeterministic (the transformed loc) instead");
}

at::Tensor TanhNormal::mean() const {
  TD_FAIL(c10::NotImplementedError, "TanhNormal has no closed-form mean; estimate it as "
          "sample({N}).mean(0) (ProbabilisticTensorDictModule does, see n_empirical_estimate)");
}

}  // namespace td::nn
