#include "td/nn/discrete.h"

#include "td/nn/continuous.h"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "td/compat/functorch.h"
#include "td/compat/torch.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"

namespace td::nn {
namespace {

td::compat::Optional<at::Generator> Gen() {
  at::Generator g = sampling_generator();
  if (!g.defined()) return td::compat::kNullopt;
  return g;
}

// Sets entries outside the support (-inf, or neg_inf, or masked) to the dtype's lowest value and
// renormalizes: what entropy() sums over (torchrl's MaskedCategorical.entropy).
at::Tensor EntropyOf(const at::Tensor& logits, const at::Tensor& excluded) {
  const double lowest = logits.scalar_type() == at::kDouble
                            ? std::numeric_limits<double>::lowest()
                            : std::numeric_limits<float>::lowest();
  at::Tensor l = logits.masked_fill(excluded | ~at::isfinite(logits), lowest);
  l = l - l.logsumexp(-1, /*keepdim=*/true);
  return -(l * l.exp()).sum(-1);
}

void CheckSomeAllowed(const at::Tensor& allowed_in, const at::Tensor& logits) {
  const at::Tensor allowed = compat::functorch::UnwrapAll(allowed_in);
  if (allowed.numel() > 0 && !allowed.any(-1).all().item<bool>()) {
    TD_FAIL(ValueError, "MaskedCategorical: a row of the mask allows no class (logits shape ",
            SizeRepr(logits.sizes()), ")");
  }
}

}  // namespace

at::Tensor rand_one_hot(const at::Tensor& values, bool do_softmax) {
  if (values.dim() < 1) {
    TD_FAIL(ValueError, "rand_one_hot: values need at least one dim (the classes); got shape ",
            SizeRepr(values.sizes()));
  }
  const at::Tensor p = do_softmax ? at::softmax(values, -1) : values;
  const at::Tensor u = at::rand(p.narrow(-1, 0, 1).sizes(), Gen(), p.options());
  const at::Tensor above = p.cumsum(-1) > u;
  return (above.to(at::kLong).cumsum(-1) == 1).to(at::kLong);
}

MaskedCategorical::MaskedCategorical(Categorical c, at::Tensor indices,
                                     MaskedCategoricalOptions options)
    : categorical_(std::move(c)), indices_(std::move(indices)), options_(std::move(options)) {
  batch_shape_ = categorical_.batch_shape().vec();
}

MaskedCategorical MaskedCategorical::from_logits(const at::Tensor& logits, const at::Tensor& mask,
                                                 MaskedCategoricalOptions options) {
  if (logits.dim() < 1) {
    TD_FAIL(ValueError, "MaskedCategorical: logits need at least one dim (the classes); got shape ",
            SizeRepr(logits.sizes()));
  }
  if (mask.scalar_type() != at::kBool) {
    TD_FAIL(ValueError, "MaskedCategorical: mask must be bool (false = not allowed); got ",
            mask.scalar_type(), " (use from_logits_indices for a list of allowed classes)");
  }
  std::vector<int64_t> shape;
  try {
    shape = at::infer_size(mask.sizes(), logits.sizes());
  } catch (const c10::Error&) {
    shape.clear();
  }
  if (shape != logits.sizes().vec()) {
    TD_FAIL(ValueError, "MaskedCategorical: mask of shape ", SizeRepr(mask.sizes()),
            " does not broadcast to the logits' shape ", SizeRepr(logits.sizes()));
  }
  CheckSomeAllowed(mask.expand(logits.sizes()), logits);
  return MaskedCategorical(
      Categorical::from_logits(logits.masked_fill(~mask, options.neg_inf())), at::Tensor(),
      options);
}

MaskedCategorical MaskedCategorical::from_probs(const at::Tensor& probs, const at::Tensor& mask,
                                                MaskedCategoricalOptions options) {
  if (probs.dim() < 1 || mask.scalar_type() != at::kBool) {
    return from_logits(probs, mask, options);  // throws the same errors
  }
  const at::Tensor kept = probs * mask;
  const at::Tensor p = kept / kept.sum(-1, /*keepdim=*/true);
  return from_logits(at::log(p), mask, options);
}

MaskedCategorical MaskedCategorical::from_logits_indices(const at::Tensor& logits,
                                                         const at::Tensor& indices,
                                                         MaskedCategoricalOptions options) {
  if (logits.dim() < 1 || indices.dim() < 1) {
    TD_FAIL(ValueError, "MaskedCategorical: logits (shape ", SizeRepr(logits.sizes()),
            ") and indices (shape ", SizeRepr(indices.sizes()), ") need a class dim");
  }
  if (!at::isIntegralType(indices.scalar_type(), /*includeBool=*/false)) {
    TD_FAIL(ValueError, "MaskedCategorical: indices must be integers (the allowed classes); got ",
            indices.scalar_type());
  }
  at::Tensor idx = indices.to(at::kLong);
  at::Tensor pad;
  if (options.padding_value()) {
    pad = idx == *options.padding_value();
    idx = idx.masked_fill(pad, 0);
  }
  const int64_t k = logits.size(-1);
  const at::Tensor all_idx = compat::functorch::UnwrapAll(idx);
  if (all_idx.numel() > 0 && (all_idx.min().item<int64_t>() < 0 ||
                              all_idx.max().item<int64_t>() >= k)) {
    TD_FAIL(ValueError, "MaskedCategorical: indices must lie in [0, ", k,
            ") (the logits' last dim, shape ", SizeRepr(logits.sizes()), "); got min ",
            all_idx.min().item<int64_t>(), " and max ", all_idx.max().item<int64_t>());
  }
  std::vector<int64_t> batch = logits.sizes().vec();
  batch.back() = idx.size(-1);
  std::vector<int64_t> shape;
  try {
    shape = at::infer_size(idx.sizes(), batch);
  } catch (const c10::Error&) {
    shape.clear();
  }
  if (shape != batch) {
    TD_FAIL(ValueError, "MaskedCategorical: indices of shape ", SizeRepr(indices.sizes()),
            " do not broadcast to the logits' batch shape (logits shape ",
            SizeRepr(logits.sizes()), ")");
  }
  idx = idx.expand(batch);
  at::Tensor gathered = logits.gather(-1, idx);
  if (pad.defined()) {
    pad = pad.expand(batch);
    CheckSomeAllowed(~pad, logits);
    gathered = gathered.masked_fill(pad, options.neg_inf());
  }
  MaskedCategorical out(Categorical::from_logits(gathered), std::move(idx), options);
  out.pad_ = pad;
  return out;
}

DistributionFactory MaskedCategorical::factory(MaskedCategoricalOptions options) {
  return {"MaskedCategorical", [options](const DistParams& p) {
            const at::Tensor* logits = nullptr;
            const at::Tensor* probs = nullptr;
            const at::Tensor* mask = nullptr;
            const at::Tensor* indices = nullptr;
            for (const auto& [k, v] : p) {
              if (k == "logits") logits = &v;
              if (k == "probs") probs = &v;
              if (k == "mask") mask = &v;
              if (k == "indices") indices = &v;
            }
            if (!logits && !probs) {
              DistParam(p, "logits", "MaskedCategorical (logits or probs)");  // throws
            }
            if (!mask && !indices) {
              DistParam(p, "mask", "MaskedCategorical (mask or indices)");  // throws
            }
            if (mask && indices) {
              TD_FAIL(ValueError, "MaskedCategorical: give a mask or indices, not both");
            }
            if (indices) {
              const at::Tensor l = logits ? *logits : at::log(*probs);
              return std::make_shared<MaskedCategorical>(from_logits_indices(l, *indices, options));
            }
            return std::make_shared<MaskedCategorical>(
                logits ? from_logits(*logits, *mask, options) : from_probs(*probs, *mask, options));
          }};
}

at::Tensor MaskedCategorical::sample(at::IntArrayRef sample_shape) const {
  at::NoGradGuard no_grad;
  at::Tensor draw = categorical_.sample(sample_shape);
  if (!sparse()) return draw;
  std::vector<int64_t> shape = draw.sizes().vec();
  shape.push_back(indices_.size(-1));
  return indices_.expand(shape).gather(-1, draw.unsqueeze(-1)).squeeze(-1);
}

at::Tensor MaskedCategorical::log_prob(const at::Tensor& value) const {
  const at::Tensor neg_inf = at::full({}, options_.neg_inf(), logits().options());
  if (!sparse()) {
    const at::Tensor lp = categorical_.log_prob(value);
    return at::where(at::isfinite(lp), lp, neg_inf);
  }
  const at::Tensor v = value.to(at::kLong).unsqueeze(-1);
  at::Tensor match = indices_ == v;
  // Padding entries (indices_ holds 0 there) never match.
  if (pad_.defined()) match = match & ~pad_;
  const at::Tensor position = match.to(at::kInt).argmax(-1);
  const at::Tensor lp = categorical_.log_prob(position);
  const at::Tensor found = match.any(-1);
  return at::where(found & at::isfinite(lp), lp, neg_inf);
}

at::Tensor MaskedCategorical::entropy() const {
  return EntropyOf(logits(), at::zeros({}, logits().options().dtype(at::kBool)));
}

at::Tensor MaskedCategorical::mode() const {
  at::Tensor m = categorical_.mode();
  if (!sparse()) return m;
  return indices_.gather(-1, m.unsqueeze(-1)).squeeze(-1);
}

const std::map<std::string, DistributionFactory>& distributions_maps() {
  static const std::map<std::string, DistributionFactory> maps = {
      {"normal", Normal::factory()},
      {"categorical", Categorical::factory()},
      {"onehotcategorical", OneHotCategorical::factory()},
      {"delta", Delta::factory()},
      {"truncatednormal", TruncatedNormal::factory()},
      {"tanhnormal", TanhNormal::factory()},
      {"independentnormal", IndependentNormal::factory()},
      {"maskedcategorical", MaskedCategorical::factory()},
  };
  return maps;
}

}  // namespace td::nn
