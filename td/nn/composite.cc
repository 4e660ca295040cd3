#include "td/nn/composite.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/env.h"

namespace td::nn {
namespace {

std::string LeafKeys(const TensorDict& td) {
  return KeysRepr(td.keys(KeysOptions().include_nested(true).leaves_only(true)));
}

bool StartsWith(at::IntArrayRef shape, at::IntArrayRef prefix) {
  return shape.size() >= prefix.size() && shape.slice(0, prefix.size()) == prefix;
}

NestedKey LogProbKey(const NestedKey& key) { return add_suffix(key, "_log_prob"); }

bool DefaultLpAggregate() {
  static const bool value = td::internal::EnvFlag("COMPOSITE_LP_AGGREGATE");
  return value;
}

thread_local std::optional<bool> lp_aggregate;

// The parameters of the part drawn under `key`.
DistParams PartParams(const TensorDict& params, const NestedKey& key, const CompositePart& part) {
  DistParams out;
  if (part.param_keys.empty()) {
    std::optional<Value> sub = params.find(key);
    if (!sub || !sub->is_tensordict()) {
      TD_FAIL(KeyError, "CompositeDistribution: the parameters of ", key.repr(), " (",
                     part.factory.name, ") are read from the sub-TensorDict params[", key.repr(),
                     "], which ", sub ? "is not a TensorDict" : "does not exist",
                     "; params has keys ", LeafKeys(params),
                     " (or give the part its param_keys)");
    }
    const TensorDict sub_td = sub->tensordict();
    for (const NestedKey& k : sub_td.keys()) {
      const Value v = sub_td.get_value(k);
      if (!v.is_tensor()) {
        TD_FAIL(TypeError, "CompositeDistribution: parameter ", (key + k).repr(), " of ",
                        key.repr(), " (", part.factory.name, ") is a ", v.kind(),
                        ", not a Tensor");
      }
      out.emplace_back(k.back(), v.tensor());
    }
    return out;
  }
  for (const NestedKey& k : part.param_keys) {
    std::optional<Value> v = params.find(k);
    if (!v || !v->is_tensor()) {
      TD_FAIL(KeyError, "CompositeDistribution: parameter key ", k.repr(), " of ", key.repr(), " (",
                     part.factory.name, ") ", v ? "is not a Tensor" : "is missing",
                     "; params has keys ", LeafKeys(params));
    }
    out.emplace_back(k.back(), v->tensor());
  }
  return out;
}

}  // namespace

bool composite_lp_aggregate() { return lp_aggregate.value_or(DefaultLpAggregate()); }

SetCompositeLpAggregate::SetCompositeLpAggregate(bool mode) : previous_(lp_aggregate) {
  lp_aggregate = mode;
}

SetCompositeLpAggregate::~SetCompositeLpAggregate() { lp_aggregate = previous_; }

NestedKey add_suffix(const NestedKey& key, const std::string& suffix) {
  std::vector<std::string> parts(key.begin(), key.end());
  parts.back() += suffix;
  return NestedKey(parts);
}

// ---- CompositePart / factory ----------------------------------------------------------------------

CompositePart::CompositePart(DistributionFactory factory) : factory(std::move(factory)) {}

CompositePart::CompositePart(DistributionFactory factory, std::vector<NestedKey> param_keys)
    : factory(std::move(factory)), param_keys(std::move(param_keys)) {}

std::shared_ptr<CompositeDistribution> CompositeDistributionFactory::make(
    const TensorDict& params) const {
  return std::make_shared<CompositeDistribution>(params, map, options);
}

std::string CompositeDistributionFactory::name() const {
  std::string out = "CompositeDistribution(";
  for (size_t i = 0; i < map.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", map[i].first.join("."), ": ", map[i].second.factory.name);
  }
  return out + ")";
}

std::vector<NestedKey> CompositeDistributionFactory::keys() const {
  std::vector<NestedKey> out;
  out.reserve(map.size());
  for (const auto& entry : map) out.push_back(entry.first);
  return out;
}

CompositeDistributionFactory CompositeDistribution::factory(CompositeMap map,
                                                            CompositeDistributionOptions options) {
  return CompositeDistributionFactory{std::move(map), std::move(options)};
}

// ---- CompositeDistribution ------------------------------------------------------------------------

CompositeDistribution::CompositeDistribution(const TensorDict& params, CompositeMap map,
                                             CompositeDistributionOptions options)
    : options_(std::move(options)), batch_shape_(params.batch_size().vec()), device_(params.device()) {
  if (map.empty()) TD_FAIL(ValueError, "CompositeDistribution: the distribution map is empty");
  for (const auto& [key, part] : map) {
    if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) {
      TD_FAIL(ValueError, "CompositeDistribution: out key ", key.repr(), " appears twice");
    }
    if (!part.factory.make) {
      TD_FAIL(ValueError, "CompositeDistribution: the factory of ", key.repr(), " is empty");
    }
    std::shared_ptr<Distribution> dist;
    try {
      dist = part.factory.make(PartParams(params, key, part));
    } catch (c10::Error& e) {
      e.add_context(absl::StrCat("building ", key.repr(), " (", part.factory.name,
                                 ") of a CompositeDistribution"));
      throw;
    }
    add_part(key, std::move(dist));
  }
}

void CompositeDistribution::add_part(const NestedKey& key, std::shared_ptr<Distribution> dist) {
  if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) {
    TD_FAIL(ValueError, "CompositeDistribution: out key ", key.repr(), " appears twice");
  }
  if (!dist) TD_FAIL(ValueError, "CompositeDistribution: the distribution of ", key.repr(), " is null");
  if (!StartsWith(dist->batch_shape(), batch_shape_)) {
    TD_FAIL(ValueError, "CompositeDistribution: ", key.repr(), " (", dist->name(),
                     ") has batch shape ", SizeRepr(dist->batch_shape()),
                     ", which does not start with the parameters' batch size ",
                     SizeRepr(batch_shape_));
  }
  keys_.push_back(key);
  dists_.push_back(std::move(dist));
}

CompositeDistribution CompositeDistribution::from_distributions(
    const TensorDict& params,
    std::vector<std::pair<NestedKey, std::shared_ptr<Distribution>>> distributions,
    const std::vector<std::pair<NestedKey, NestedKey>>& name_map,
    CompositeDistributionOptions options) {
  if (distributions.empty()) {
    TD_FAIL(ValueError, "CompositeDistribution::from_distributions: no distributions given");
  }
  std::vector<NestedKey> given;
  for (const auto& entry : distributions) given.push_back(entry.first);
  for (const auto& [from, to] : name_map) {
    if (std::find(given.begin(), given.end(), from) == given.end()) {
      TD_FAIL(KeyError, "CompositeDistribution::from_distributions: name_map renames ", from.repr(),
              ", which is not one of the distributions' keys ", KeysRepr(given));
    }
  }
  CompositeDistribution out;
  out.options_ = std::move(options);
  out.batch_shape_ = params.batch_size().vec();
  out.device_ = params.device();
  for (auto& [key, dist] : distributions) {
    NestedKey write = key;
    for (const auto& [from, to] : name_map) {
      if (from == key) write = to;
    }
    out.add_part(write, std::move(dist));
  }
  return out;
}

std::string CompositeDistribution::name() const {
  std::string out = "CompositeDistribution(";
  for (size_t i = 0; i < keys_.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", keys_[i].join("."), ": ", dists_[i]->name());
  }
  return out + ")";
}

const Distribution& CompositeDistribution::dist(const NestedKey& key) const {
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return *dists_[i];
  }
  TD_FAIL(KeyError, "CompositeDistribution: no distribution under ", key.repr(), "; its keys are ",
                 KeysRepr(keys_));
}

template <class Fn>
TensorDict CompositeDistribution::collect(at::IntArrayRef sample_shape, const char* what,
                                          Fn fn) const {
  std::vector<int64_t> shape(sample_shape.begin(), sample_shape.end());
  shape.insert(shape.end(), batch_shape_.begin(), batch_shape_.end());
  TensorDict out({}, shape, device_);
  for (size_t i = 0; i < keys_.size(); ++i) {
    try {
      out.set(keys_[i], fn(*dists_[i]));
    } catch (c10::Error& e) {
      e.add_context(absl::StrCat("in CompositeDistribution::", what, " of ", keys_[i].repr(),
                                 " (", dists_[i]->name(), ")"));
      throw;
    }
  }
  return out;
}

TensorDict CompositeDistribution::sample(at::IntArrayRef sample_shape) const {
  return collect(sample_shape, "sample",
                 [&](const Distribution& d) { return d.sample(sample_shape); });
}

bool CompositeDistribution::has_rsample() const {
  return std::all_of(dists_.begin(), dists_.end(),
                     [](const auto& d) { return d->has_rsample(); });
}

TensorDict CompositeDistribution::rsample(at::IntArrayRef sample_shape) const {
  std::vector<std::string> lacking;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!dists_[i]->has_rsample()) {
      lacking.push_back(absl::StrCat(keys_[i].repr(), " (", dists_[i]->name(), ")"));
    }
  }
  if (!lacking.empty()) {
    TD_FAIL(TypeError, "CompositeDistribution::rsample needs a reparameterized sample of every "
                    "part; ", absl::StrJoin(lacking, ", "), " has none; use sample()");
  }
  return collect(sample_shape, "rsample",
                 [&](const Distribution& d) { return d.rsample(sample_shape); });
}

TensorDict CompositeDistribution::mode() const {
  return collect({}, "mode", [](const Distribution& d) { return d.mode(); });
}

TensorDict CompositeDistribution::mean() const {
  return collect({}, "mean", [](const Distribution& d) { return d.mean(); });
}

TensorDict CompositeDistribution::median() const {
  return collect({}, "median", [](const Distribution& d) { return d.median(); });
}

TensorDict CompositeDistribution::deterministic_sample() const {
  return collect({}, "deterministic_sample",
                 [](const Distribution& d) { return d.deterministic_sample(); });
}

at::Tensor CompositeDistribution::reduce(const at::Tensor& t, size_t i) const {
  const int64_t extra = static_cast<int64_t>(dists_[i]->batch_shape().size()) -
                        static_cast<int64_t>(batch_shape_.size());
  if (extra == 0) return t;
  std::vector<int64_t> dims;
  for (int64_t d = 1; d <= extra; ++d) dims.push_back(-d);
  return t.sum(dims);
}

std::pair<at::Tensor, at::Tensor> CompositeDistribution::part_log_prob(const TensorDict& sample,
                                                                       size_t i) const {
  const NestedKey& key = keys_[i];
  const Distribution& d = *dists_[i];
  std::optional<Value> v = sample.find(key);
  if (!v || !v->is_tensor()) {
    TD_FAIL(KeyError, "CompositeDistribution::log_prob: the sample's entry ", key.repr(), " (",
                   d.name(), ") ", v ? "is not a Tensor" : "is missing", "; it has keys ",
                   LeafKeys(sample));
  }
  const at::Tensor& value = v->tensor();
  std::vector<int64_t> drawn = d.batch_shape().vec();
  drawn.insert(drawn.end(), d.event_shape().begin(), d.event_shape().end());
  const auto n = static_cast<int64_t>(drawn.size());
  if (value.dim() < n || value.sizes().slice(value.dim() - n) != at::IntArrayRef(drawn)) {
    TD_FAIL(ValueError, "CompositeDistribution::log_prob: the sample's entry ", key.repr(),
                     " has shape ", SizeRepr(value.sizes()), " but ", d.name(), " draws shape ",
                     SizeRepr(drawn), " (batch ", SizeRepr(d.batch_shape()), " + event ",
                     SizeRepr(d.event_shape()), "), after any sample dims");
  }
  at::Tensor lp = d.log_prob(value);
  return {lp, reduce(lp, i)};
}

at::Tensor CompositeDistribution::log_prob(const TensorDict& sample) const {
  return log_prob_composite(sample, /*include_sum=*/true).get(options_.log_prob_key());
}

TensorDict CompositeDistribution::log_prob_composite(const TensorDict& sample,
                                                     bool include_sum) const {
  std::vector<std::pair<at::Tensor, at::Tensor>> parts;
  parts.reserve(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i) {
    parts.push_back(part_log_prob(sample, i));
    if (parts[i].second.sizes() != parts[0].second.sizes()) {
      TD_FAIL(ValueError, "CompositeDistribution::log_prob: ", keys_[i].repr(), " gives log-probs "
                       "of shape ", SizeRepr(parts[i].second.sizes()), " but ", keys_[0].repr(),
                       " gives ", SizeRepr(parts[0].second.sizes()),
                       "; the sample's entries must share their sample dims");
    }
  }
  TensorDict out({}, parts[0].second.sizes(), device_);
  at::Tensor total;
  for (size_t i = 0; i < keys_.size(); ++i) {
    const NestedKey lp_key = LogProbKey(keys_[i]);
    if (out.contains(lp_key) || (include_sum && lp_key == options_.log_prob_key())) {
      TD_FAIL(ValueError, "CompositeDistribution::log_prob_composite: the log-prob key ",
                       lp_key.repr(), " of ", keys_[i].repr(), " is taken by another entry");
    }
    out.set(lp_key, parts[i].first);
    total = total.defined() ? total + parts[i].second : parts[i].second;
  }
  if (include_sum) out.set(options_.log_prob_key(), total);
  return out;
}

at::Tensor CompositeDistribution::entropy() const {
  at::Tensor total;
  for (size_t i = 0; i < keys_.size(); ++i) {
    at::Tensor h = reduce(dists_[i]->entropy(), i);
    total = total.defined() ? total + h : h;
  }
  return total;
}

TensorDict CompositeDistribution::entropy_composite(bool include_sum) const {
  TensorDict out({}, batch_shape_, device_);
  at::Tensor total;
  for (size_t i = 0; i < keys_.size(); ++i) {
    const NestedKey key = add_suffix(keys_[i], "_entropy");
    if (out.contains(key) || (include_sum && key == options_.entropy_key())) {
      TD_FAIL(ValueError, "CompositeDistribution::entropy_composite: the entropy key ", key.repr(),
              " of ", keys_[i].repr(), " is taken by another entry");
    }
    const at::Tensor h = dists_[i]->entropy();
    out.set(key, h);
    const at::Tensor r = reduce(h, i);
    total = total.defined() ? total + r : r;
  }
  if (include_sum) out.set(options_.entropy_key(), total);
  return out;
}

TensorDict CompositeDistribution::cdf(TensorDict sample) const {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < keys_.size(); ++i) {
    std::optional<Value> v = sample.find(keys_[i]);
    if (!v || !v->is_tensor()) {
      TD_FAIL(KeyError, "CompositeDistribution::cdf: the sample has no tensor under ",
              keys_[i].repr(), "; its keys are ", KeysRepr(sample.keys(KeysOptions().include_nested(true))));
    }
    out.push_back(dists_[i]->cdf(v->tensor()));
  }
  for (size_t i = 0; i < keys_.size(); ++i) sample.set(add_suffix(keys_[i], "_cdf"), out[i]);
  return sample;
}

TensorDict CompositeDistribution::icdf(TensorDict sample) const {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < keys_.size(); ++i) {
    const NestedKey cdf_key = add_suffix(keys_[i], "_cdf");
    at::Tensor prob;
    if (std::optional<Value> p = sample.find(cdf_key); p && p->is_tensor()) {
      prob = p->tensor();
    } else if (std::optional<Value> v = sample.find(keys_[i]); v && v->is_tensor()) {
      prob = dists_[i]->cdf(v->tensor());
    } else {
      TD_FAIL(KeyError, "CompositeDistribution::icdf: the sample has neither ", cdf_key.repr(),
              " nor ", keys_[i].repr());
    }
    out.push_back(dists_[i]->icdf(prob));
  }
  for (size_t i = 0; i < keys_.size(); ++i) sample.set(add_suffix(keys_[i], "_icdf"), out[i]);
  return sample;
}

}  // namespace td::nn
