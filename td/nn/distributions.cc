#include "td/nn/distributions.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <ostream>

#include "td/compat/functorch.h"
#include "td/compat/torch.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/nested_key.h"

namespace td::nn {
namespace {

constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log(sqrt(2 * pi))
constexpr double kInvSqrt2 = 0.70710678118654752440;

std::vector<int64_t> BroadcastShape(const at::Tensor& a, const at::Tensor& b, const char* dist,
                                    const char* a_name, const char* b_name) {
  try {
    return at::infer_size(a.sizes(), b.sizes());
  } catch (const c10::Error&) {
    TD_FAIL(ValueError, dist, ": ", a_name, " of shape ", SizeRepr(a.sizes()), " and ", b_name,
                     " of shape ", SizeRepr(b.sizes()), " do not broadcast together");
  }
}

// Inside td::vmap the checks read the values of every member (compat::functorch::UnwrapAll):
// a batched tensor's data cannot be read.
void CheckPositive(const at::Tensor& scale_in, const char* dist) {
  const at::Tensor scale = compat::functorch::UnwrapAll(scale_in);
  if (scale.numel() > 0 && !(scale > 0).all().item<bool>()) {
    TD_FAIL(ValueError, dist, ": scale must be positive everywhere; got min ",
                     scale.min().item<double>(), " (shape ", SizeRepr(scale_in.sizes()), ")");
  }
}

std::vector<int64_t> Concat(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

at::Tensor NormalCdf(const at::Tensor& x) { return 0.5 * (1 + at::erf(x * kInvSqrt2)); }
at::Tensor NormalLogPdf(const at::Tensor& x) { return -0.5 * x * x - kLogSqrt2Pi; }

thread_local at::Generator current_generator;

// What ATen's sampling functions take: the thread's generator, or none (the default one).
td::compat::Optional<at::Generator> Gen() {
  if (!current_generator.defined()) return td::compat::kNullopt;
  return current_generator;
}

}  // namespace

at::Generator sampling_generator() { return current_generator; }

SetSamplingGenerator::SetSamplingGenerator(at::Generator generator)
    : previous_(current_generator) {
  current_generator = std::move(generator);
}

SetSamplingGenerator::~SetSamplingGenerator() { current_generator = previous_; }

// ---- Distribution ---------------------------------------------------------------------------------

at::Tensor Distribution::rsample(at::IntArrayRef) const {
  TD_FAIL(TypeError, name(), " has no reparameterized sampling (rsample); use sample()");
}

std::pair<at::Tensor, at::Tensor> Distribution::rsample_and_log_prob(
    at::IntArrayRef sample_shape) const {
  at::Tensor x = rsample(sample_shape);
  at::Tensor lp = log_prob(x);
  return {std::move(x), std::move(lp)};
}

std::pair<at::Tensor, at::Tensor> Distribution::sample_and_log_prob(
    at::IntArrayRef sample_shape) const {
  at::Tensor x = sample(sample_shape);
  at::Tensor lp = log_prob(x);
  return {std::move(x), std::move(lp)};
}

at::Tensor Distribution::median() const {
  TD_FAIL(c10::NotImplementedError, name(), " has no median (torch.distributions defines none for "
                                 "it); use InteractionType::kMode (mode()) instead");
}

at::Tensor Distribution::cdf(const at::Tensor&) const {
  TD_FAIL(c10::NotImplementedError, name(), " has no cdf (torch.distributions defines none for it)");
}

at::Tensor Distribution::icdf(const at::Tensor&) const {
  TD_FAIL(c10::NotImplementedError, name(), " has no icdf (torch.distributions defines none for it)");
}

std::vector<int64_t> Distribution::extended_shape(at::IntArrayRef sample_shape) const {
  return Concat(Concat(sample_shape, batch_shape_), event_shape_);
}

const at::Tensor& DistParam(const DistParams& params, const std::string& name,
                            const std::string& distribution) {
  for (const auto& [k, v] : params) {
    if (k == name) return v;
  }
  std::vector<std::string> given;
  for (const auto& p : params) given.push_back(p.first);
  TD_FAIL(KeyError, distribution, " needs a parameter named '", name, "'; got ", KeysRepr(given),
                 " (the distribution parameter names are the last components of in_keys, or "
                 "dist_param_names)");
}

// ---- Normal ---------------------------------------------------------------------------------------

Normal::Normal(at::Tensor loc, at::Tensor scale) {
  batch_shape_ = BroadcastShape(loc, scale, "Normal", "loc", "scale");
  CheckPositive(scale, "Normal");
  loc_ = loc.expand(batch_shape_);
  scale_ = scale.expand(batch_shape_);
}

DistributionFactory Normal::factory() {
  return {"Normal", [](const DistParams& p) {
            return std::make_shared<Normal>(DistParam(p, "loc", "Normal"),
                                            DistParam(p, "scale", "Normal"));
          }};
}

at::Tensor Normal::sample(at::IntArrayRef sample_shape) const {
  at::NoGradGuard no_grad;
  const auto shape = extended_shape(sample_shape);
  return at::normal(loc_.expand(shape), scale_.expand(shape), Gen());
}

at::Tensor Normal::rsample(at::IntArrayRef sample_shape) const {
  const auto shape = extended_shape(sample_shape);
  const at::Tensor eps = at::randn(shape, Gen(), loc_.options().requires_grad(false));
  return loc_ + eps * scale_;
}

at::Tensor Normal::log_prob(const at::Tensor& value) const {
  const at::Tensor z = (value - loc_) / scale_;
  return -0.5 * z * z - at::log(scale_) - kLogSqrt2Pi;
}

at::Tensor Normal::entropy() const { return 0.5 + kLogSqrt2Pi + at::log(scale_); }

at::Tensor Normal::cdf(const at::Tensor& value) const {
  return 0.5 * (1 + at::erf((value - loc_) / (scale_ * std::sqrt(2.0))));
}

at::Tensor Normal::icdf(const at::Tensor& prob) const {
  return loc_ + scale_ * at::erfinv(2 * prob - 1) * std::sqrt(2.0);
}

// ---- Categorical --------------------------------------------------------------------------------

Categorical::Categorical(at::Tensor logits, at::Tensor probs)
    : logits_(std::move(logits)), probs_(std::move(probs)) {
  batch_shape_ = logits_.sizes().slice(0, logits_.dim() - 1).vec();
}

Categorical Categorical::from_logits(const at::Tensor& logits) {
  if (logits.dim() < 1) {
    TD_FAIL(ValueError, "Categorical: logits need at least one dim (the classes); got shape ",
                     SizeRepr(logits.sizes()));
  }
  at::Tensor normalized = logits - logits.logsumexp(-1, /*keepdim=*/true);
  at::Tensor probs = at::softmax(normalized, -1);
  return Categorical(std::move(normalized), std::move(probs));
}

Categorical Categorical::from_probs(const at::Tensor& probs) {
  if (probs.dim() < 1) {
    TD_FAIL(ValueError, "Categorical: probs need at least one dim (the classes); got shape ",
                     SizeRepr(probs.sizes()));
  }
  const at::Tensor all_probs = compat::functorch::UnwrapAll(probs);
  if (all_probs.numel() > 0 && !(all_probs >= 0).all().item<bool>()) {
    TD_FAIL(ValueError, "Categorical: probs must be non-negative; got min ",
                     all_probs.min().item<double>());
  }
  at::Tensor normalized = probs / probs.sum(-1, /*keepdim=*/true);
  at::Tensor logits = at::log(normalized.clamp_min(std::numeric_limits<float>::min()));
  return Categorical(std::move(logits), std::move(normalized));
}

DistributionFactory Categorical::factory() {
  return {"Categorical", [](const DistParams& p) {
            for (const auto& [k, v] : p) {
              if (k == "logits") return std::make_shared<Categorical>(from_logits(v));
            }
            return std::make_shared<Categorical>(
                from_probs(DistParam(p, "probs", "Categorical (logits or probs)")));
          }};
}

at::Tensor Categorical::sample(at::IntArrayRef sample_shape) const {
  at::NoGradGuard no_grad;
  const int64_t k = num_events();
  int64_t n = 1;
  for (int64_t s : sample_shape) n *= s;
  const at::Tensor flat = probs_.reshape({-1, k});
  // [batch, n] -> [n, batch] -> sample_shape + batch_shape
  at::Tensor draws = at::multinomial(flat, n, /*replacement=*/true, Gen()).t();
  return draws.reshape(Concat(sample_shape, batch_shape_));
}

at::Tensor Categorical::log_prob(const at::Tensor& value) const {
  at::Tensor v = value.to(at::kLong).unsqueeze(-1);
  std::vector<at::Tensor> b = at::broadcast_tensors({v, logits_});
  v = b[0].narrow(-1, 0, 1);
  return b[1].gather(-1, v).squeeze(-1);
}

at::Tensor Categorical::entropy() const {
  const double min_real = std::numeric_limits<float>::lowest();
  return -(logits_.clamp_min(min_real) * probs_).sum(-1);
}

at::Tensor Categorical::mode() const { return probs_.argmax(-1); }

at::Tensor Categorical::mean() const {
  return at::full(batch_shape_, std::numeric_limits<double>::quiet_NaN(), probs_.options());
}

// ---- OneHotCategorical ----------------------------------------------------------------------------

OneHotCategorical::OneHotCategorical(Categorical c) : categorical_(std::move(c)) {
  batch_shape_ = categorical_.batch_shape().vec();
  event_shape_ = {categorical_.num_events()};
}

OneHotCategorical OneHotCategorical::from_logits(const at::Tensor& logits) {
  return OneHotCategorical(Categorical::from_logits(logits));
}

OneHotCategorical OneHotCategorical::from_probs(const at::Tensor& probs) {
  return OneHotCategorical(Categorical::from_probs(probs));
}

DistributionFactory OneHotCategorical::factory() {
  return {"OneHotCategorical", [](const DistParams& p) {
            for (const auto& [k, v] : p) {
              if (k == "logits") return std::make_shared<OneHotCategorical>(from_logits(v));
            }
            return std::make_shared<OneHotCategorical>(
                from_probs(DistParam(p, "probs", "OneHotCategorical (logits or probs)")));
          }};
}

at::Tensor OneHotCategorical::sample(at::IntArrayRef sample_shape) const {
  at::NoGradGuard no_grad;
  return at::one_hot(categorical_.sample(sample_shape), categorical_.num_events())
      .to(categorical_.probs().scalar_type());
}

at::Tensor OneHotCategorical::log_prob(const at::Tensor& value) const {
  return categorical_.log_prob(value.argmax(-1));
}

at::Tensor OneHotCategorical::mode() const {
  return at::one_hot(categorical_.mode(), categorical_.num_events())
      .to(categorical_.probs().scalar_type());
}

// ---- Delta ----------------------------------------------------------------------------------------

Delta::Delta(at::Tensor param, double atol, double rtol)
    : param_(std::move(param)), atol_(atol), rtol_(rtol) {
  if (param_.dim() >= 1) {
    batch_shape_ = param_.sizes().slice(0, param_.dim() - 1).vec();
    event_shape_ = {param_.size(-1)};
  }
}

DistributionFactory Delta::factory(double atol, double rtol) {
  return {"Delta", [atol, rtol](const DistParams& p) {
            return std::make_shared<Delta>(DistParam(p, "param", "Delta"), atol, rtol);
          }};
}

at::Tensor Delta::rsample(at::IntArrayRef sample_shape) const {
  return param_.expand(extended_shape(sample_shape));
}

at::Tensor Delta::sample(at::IntArrayRef sample_shape) const {
  at::NoGradGuard no_grad;
  return param_.detach().expand(extended_shape(sample_shape));
}

at::Tensor Delta::log_prob(const at::Tensor& value) const {
  at::Tensor equal = (value - param_).abs() <= (atol_ + rtol_ * param_.abs());
  if (!event_shape_.empty()) equal = equal.all(-1);
  return at::log(equal.to(param_.is_floating_point() ? param_.scalar_type() : at::kFloat));
}

at::Tensor Delta::entropy() const {
  return at::zeros(batch_shape_, param_.is_floating_point() ? param_.options()
                                                            : param_.options().dtype(at::kFloat));
}

// ---- TruncatedNormal ------------------------------------------------------------------------------

TruncatedNormal::TruncatedNormal(at::Tensor loc, at::Tensor scale, double low, double high)
    : low_(low), high_(high) {
  if (!(low < high)) {
    TD_FAIL(ValueError, "TruncatedNormal: low (", low, ") must be smaller than high (", high, ")");
  }
  batch_shape_ = BroadcastShape(loc, scale, "TruncatedNormal", "loc", "scale");
  CheckPositive(scale, "TruncatedNormal");
  loc_ = loc.expand(batch_shape_);
  scale_ = scale.expand(batch_shape_);
  alpha_ = (low - loc_) / scale_;
  beta_ = (high - loc_) / scale_;
  const double eps = std::numeric_limits<float>::epsilon();
  log_z_ = at::log((NormalCdf(beta_) - NormalCdf(alpha_)).clamp_min(eps));
}

DistributionFactory TruncatedNormal::factory(double low, double high) {
  return {"TruncatedNormal", [low, high](const DistParams& p) {
            return std::make_shared<TruncatedNormal>(DistParam(p, "loc", "TruncatedNormal"),
                                                     DistParam(p, "scale", "TruncatedNormal"),
                                                     low, high);
          }};
}

at::Tensor TruncatedNormal::rsample(at::IntArrayRef sample_shape) const {
  const auto shape = extended_shape(sample_shape);
  const double eps = std::numeric_limits<float>::epsilon();
  const at::Tensor u = at::rand(shape, Gen(), loc_.options().requires_grad(false));
  const at::Tensor cdf_a = NormalCdf(alpha_);
  const at::Tensor p = (cdf_a + u * (NormalCdf(beta_) - cdf_a)).clamp(eps, 1 - eps);
  const at::Tensor xi = std::sqrt(2.0) * at::erfinv(2 * p - 1);
  return (loc_ + scale_ * xi).clamp(low_, high_);
}

at::Tensor TruncatedNormal::sample(at::IntArrayRef sample_shape) const {
  at::NoGradGuard no_grad;
  return rsample(sample_shape);
}

at::Tensor TruncatedNormal::log_prob(const at::Tensor& value) const {
  const at::Tensor xi = (value - loc_) / scale_;
  const at::Tensor lp = NormalLogPdf(xi) - at::log(scale_) - log_z_;
  const at::Tensor inside = (value >= low_) & (value <= high_);
  return at::where(inside, lp, at::full({}, -std::numeric_limits<double>::infinity(), lp.options()));
}

at::Tensor TruncatedNormal::mean() const {
  const at::Tensor z = at::exp(log_z_);
  return loc_ + scale_ * (at::exp(NormalLogPdf(alpha_)) - at::exp(NormalLogPdf(beta_))) / z;
}

at::Tensor TruncatedNormal::mode() const { return loc_.clamp(low_, high_); }

at::Tensor TruncatedNormal::median() const {
  // Phi^-1((Phi(alpha) + Phi(beta)) / 2), computed in the lower tail (where ndtr and ndtri keep
  // their precision) by symmetry when the interval lies above loc, and in double precision (float
  // ndtri loses digits in the tails).
  const at::Tensor a = alpha_.to(at::kDouble), b = beta_.to(at::kDouble);
  const at::Tensor lower = at::special_ndtri(0.5 * (at::special_ndtr(a) + at::special_ndtr(b)));
  const at::Tensor upper = -at::special_ndtri(0.5 * (at::special_ndtr(-a) + at::special_ndtr(-b)));
  const at::Tensor z = at::where(a > 0, upper, lower).to(loc_.scalar_type());
  return (loc_ + scale_ * z).clamp(low_, high_);
}

at::Tensor TruncatedNormal::entropy() const {
  const at::Tensor z = at::exp(log_z_);
  const at::Tensor pa = at::exp(NormalLogPdf(alpha_));
  const at::Tensor pb = at::exp(NormalLogPdf(beta_));
  // log(sqrt(2 pi e) sigma Z) + (alpha phi(alpha) - beta phi(beta)) / (2 Z)
  return kLogSqrt2Pi + 0.5 + at::log(scale_) + log_z_ + (alpha_ * pa - beta_ * pb) / (2 * z);
}

// ---- NormalParamExtractor -------------------------------------------------------------------------

NormalParamExtractorImpl::NormalParamExtractorImpl(NormalParamExtractorOptions options)
    : options_(std::move(options)) {
  if (options_.scale_mapping_fn()) {
    mapping_ = options_.scale_mapping_fn();
    return;
  }
  try {
    mapping_ = mappings(options_.scale_mapping());
  } catch (c10::Error& e) {
    e.add_context("in NormalParamExtractor");
    throw;
  }
}

std::tuple<at::Tensor, at::Tensor> NormalParamExtractorImpl::forward(const at::Tensor& x) {
  if (x.dim() < 1 || x.size(-1) % 2 != 0) {
    TD_FAIL(ValueError, "NormalParamExtractor: the last dim must be even (loc and scale halves); "
                     "got shape ",
                     SizeRepr(x.sizes()));
  }
  std::vector<at::Tensor> halves = x.chunk(2, -1);
  return {halves[0], mapping_(halves[1]).clamp_min(options_.scale_lb())};
}

void NormalParamExtractorImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::NormalParamExtractor(scale_mapping="
         << (options_.scale_mapping_fn() ? "<custom>" : options_.scale_mapping())
         << ", scale_lb=" << options_.scale_lb() << ")";
}

}  // namespace td::nn
