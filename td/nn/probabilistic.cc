#include "td/nn/probabilistic.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace td::nn {
namespace {

thread_local std::optional<InteractionType> current_interaction_type;

std::string LeafKeys(const TensorDict& td) {
  return KeysRepr(td.keys(KeysOptions().include_nested(true).leaves_only(true)));
}

}  // namespace

std::string_view InteractionTypeName(InteractionType type) {
  switch (type) {
    case InteractionType::kMode:
      return "MODE";
    case InteractionType::kMean:
      return "MEAN";
    case InteractionType::kRandom:
      return "RANDOM";
    case InteractionType::kDeterministic:
      return "DETERMINISTIC";
    case InteractionType::kMedian:
      return "MEDIAN";
  }
  return "?";
}

std::optional<InteractionType> interaction_type() { return current_interaction_type; }

SetInteractionType::SetInteractionType(InteractionType type)
    : previous_(current_interaction_type) {
  current_interaction_type = type;
}

SetInteractionType::~SetInteractionType() { current_interaction_type = previous_; }

// ---- ProbabilisticTensorDictModuleImpl ----------------------------------------------------------

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    Keys in_list, Keys out_list,
    DistributionFactory distribution, ProbabilisticTensorDictModuleOptions options)
    : distribution_(std::move(distribution)), options_(std::move(options)) {
  std::vector<NestedKey> in_keys = std::move(in_list).take();
  std::vector<NestedKey> out_keys = std::move(out_list).take();
  if (!distribution_.make) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: the distribution factory is empty");
  }
  if (out_keys.size() != 1) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: out_keys must hold exactly one key (the "
                     "draw); got ",
                     KeysRepr(out_keys));
  }
  const auto& names = options_.dist_param_names();
  if (!names.empty() && names.size() != in_keys.size()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: dist_param_names ", KeysRepr(names),
                     " must name each of the in_keys ", KeysRepr(in_keys));
  }
  for (size_t i = 0; i < in_keys.size(); ++i) {
    param_names_.push_back(names.empty() ? in_keys[i].back() : names[i]);
  }
  set_keys(std::move(in_keys), std::move(out_keys));
}

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    Keys in_list, Keys out_list,
    CompositeDistributionFactory distribution, ProbabilisticTensorDictModuleOptions options)
    : composite_(std::move(distribution)), options_(std::move(options)) {
  std::vector<NestedKey> in_keys = std::move(in_list).take();
  std::vector<NestedKey> out_keys = std::move(out_list).take();
  const std::vector<NestedKey> map_keys = composite_->keys();
  std::vector<NestedKey> sorted_out = out_keys, sorted_map = map_keys;
  std::sort(sorted_out.begin(), sorted_out.end());
  std::sort(sorted_map.begin(), sorted_map.end());
  if (map_keys.empty() || sorted_out != sorted_map) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: with a composite distribution, out_keys ",
                     KeysRepr(out_keys), " must be the keys of its distribution map ",
                     KeysRepr(map_keys), " (in any order)");
  }
  if (!options_.dist_param_names().empty()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: dist_param_names ",
                     KeysRepr(options_.dist_param_names()), " does not apply to ",
                     composite_->name(), ": its parts name their parameters (CompositePart's "
                     "param_keys)");
  }
  if (in_keys.empty()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: ", composite_->name(),
                     " needs in_keys (a sub-TensorDict of parameters, or the parameter keys)");
  }
  num_draws_ = out_keys.size();
  set_keys(std::move(in_keys), std::move(out_keys));
}

void ProbabilisticTensorDictModuleImpl::set_keys(std::vector<NestedKey> in_keys,
                                                 std::vector<NestedKey> draw_keys) {
  in_keys_ = std::move(in_keys);
  out_keys_source_ = std::move(draw_keys);
  if (options_.return_log_prob()) {
    if (std::find(out_keys_source_.begin(), out_keys_source_.end(), options_.log_prob_key()) !=
        out_keys_source_.end()) {
      TD_FAIL(ValueError, "ProbabilisticTensorDictModule: log_prob_key ",
                       options_.log_prob_key().repr(), " is also the key of a draw ",
                       KeysRepr(out_keys_source_));
    }
    out_keys_source_.push_back(options_.log_prob_key());
  }
  out_keys_ = out_keys_source_;
}

std::string ProbabilisticTensorDictModuleImpl::distribution_name() const {
  return composite_ ? composite_->name() : distribution_.name;
}

InteractionType ProbabilisticTensorDictModuleImpl::current_interaction_type() const {
  return interaction_type().value_or(options_.default_interaction_type());
}

std::shared_ptr<Distribution> ProbabilisticTensorDictModuleImpl::get_dist(
    const TensorDict& td) const {
  if (composite_) {
    TD_FAIL(TypeError, "ProbabilisticTensorDictModule: the distribution is a ", composite_->name(),
                    "; use get_composite_dist()");
  }
  DistParams params;
  params.reserve(in_keys_.size());
  for (size_t i = 0; i < in_keys_.size(); ++i) {
    std::optional<Value> v = td.find(in_keys_[i]);
    if (!v || !v->is_tensor()) {
      TD_FAIL(KeyError, "ProbabilisticTensorDictModule(", distribution_.name, "): parameter key ",
                     in_keys_[i].repr(), v ? " is not a Tensor" : " is missing",
                     "; the TensorDict has keys ", LeafKeys(td));
    }
    params.emplace_back(param_names_[i], v->tensor());
  }
  try {
    return distribution_.make(params);
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("in ProbabilisticTensorDictModule(distribution=",
                               distribution_.name, ", in_keys=", KeysRepr(in_keys_), ")"));
    throw;
  }
}

std::shared_ptr<CompositeDistribution> ProbabilisticTensorDictModuleImpl::get_composite_dist(
    const TensorDict& td) const {
  if (!composite_) {
    TD_FAIL(TypeError, "ProbabilisticTensorDictModule: the distribution is a ", distribution_.name,
                    ", not a CompositeDistribution; use get_dist()");
  }
  std::optional<TensorDict> params;
  if (in_keys_.size() == 1) {
    std::optional<Value> v = td.find(in_keys_[0]);
    if (v && v->is_tensordict()) params = v->tensordict();
  }
  if (!params) {
    params = TensorDict({}, td.batch_size(), td.device());
    for (const NestedKey& k : in_keys_) {
      std::optional<Value> v = td.find(k);
      if (!v) {
        TD_FAIL(KeyError, "ProbabilisticTensorDictModule(", composite_->name(), "): parameter key ",
                       k.repr(), " is missing; the TensorDict has keys ", LeafKeys(td));
      }
      params->set(k, *std::move(v));
    }
  }
  try {
    return composite_->make(*params);
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("in ProbabilisticTensorDictModule(distribution=",
                               composite_->name(), ", in_keys=", KeysRepr(in_keys_), ")"));
    throw;
  }
}

at::Tensor ProbabilisticTensorDictModuleImpl::log_prob(const TensorDict& td) const {
  if (composite_) return get_composite_dist(td)->log_prob(td);
  return get_dist(td)->log_prob(td.get(out_keys_source_[0]));
}

namespace {

bool Selected(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

template <class Dist>
auto Draw(const Dist& dist, InteractionType type) {
  switch (type) {
    case InteractionType::kMode:
      return dist.mode();
    case InteractionType::kMean:
      return dist.mean();
    case InteractionType::kRandom:
      return dist.has_rsample() ? dist.rsample() : dist.sample();
    case InteractionType::kMedian:
      return dist.median();
    case InteractionType::kDeterministic:
      break;
  }
  return dist.deterministic_sample();
}

}  // namespace

TensorDict ProbabilisticTensorDictModuleImpl::forward(const TensorDict& td) {
  if (should_skip(td, options_.skip_existing())) return td;
  if (composite_) return forward_composite(td);
  const std::shared_ptr<Distribution> dist = get_dist(td);
  const at::Tensor draw = Draw(*dist, current_interaction_type());
  const bool selected_draw = Selected(out_keys_, out_keys_source_[0]);
  const bool selected_lp =
      options_.return_log_prob() && Selected(out_keys_, options_.log_prob_key());
  at::Tensor lp;
  if (selected_lp) lp = dist->log_prob(draw);
  // Both writes or neither.
  TensorDict out = td;
  internal::WriteTransaction tx;
  if (selected_draw) tx.set(out, out_keys_source_[0], draw);
  if (selected_lp) tx.set(out, options_.log_prob_key(), lp);
  tx.commit();
  return out;
}

TensorDict ProbabilisticTensorDictModuleImpl::forward_composite(const TensorDict& td) {
  const std::shared_ptr<CompositeDistribution> dist = get_composite_dist(td);
  const TensorDict draw = Draw(*dist, current_interaction_type());
  const bool selected_lp =
      options_.return_log_prob() && Selected(out_keys_, options_.log_prob_key());
  at::Tensor lp;
  if (selected_lp) lp = dist->log_prob(draw);
  // Every write or none.
  TensorDict out = td;
  internal::WriteTransaction tx;
  for (size_t i = 0; i < num_draws_; ++i) {
    const NestedKey& k = out_keys_source_[i];
    if (Selected(out_keys_, k)) tx.set(out, k, draw.get_value(k));
  }
  if (selected_lp) tx.set(out, options_.log_prob_key(), lp);
  tx.commit();
  return out;
}

void ProbabilisticTensorDictModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::ProbabilisticTensorDictModule(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_) << ", distribution=" << distribution_name()
         << ", default_interaction_type="
         << InteractionTypeName(options_.default_interaction_type())
         << ", return_log_prob=" << (options_.return_log_prob() ? "true" : "false") << ")";
}

// ---- ProbabilisticTensorDictSequentialImpl --------------------------------------------------------

ProbabilisticTensorDictSequentialImpl::ProbabilisticTensorDictSequentialImpl(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
    TensorDictSequentialOptions options)
    : TensorDictSequentialImpl(std::move(modules), std::move(options)) {
  if (modules_.empty()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictSequential needs at least one module");
  }
  if (!std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(modules_.back())) {
    TD_FAIL(TypeError, "ProbabilisticTensorDictSequential: the last module must be a "
                    "ProbabilisticTensorDictModule; got ",
                    modules_.back()->name());
  }
}

ProbabilisticTensorDictModuleImpl& ProbabilisticTensorDictSequentialImpl::probabilistic_module()
    const {
  return dynamic_cast<ProbabilisticTensorDictModuleImpl&>(*modules_.back());
}

std::shared_ptr<Distribution> ProbabilisticTensorDictSequentialImpl::get_dist(
    const TensorDict& td) {
  return probabilistic_module().get_dist(run_chain(td, modules_.size() - 1));
}

std::shared_ptr<CompositeDistribution> ProbabilisticTensorDictSequentialImpl::get_composite_dist(
    const TensorDict& td) {
  return probabilistic_module().get_composite_dist(run_chain(td, modules_.size() - 1));
}

at::Tensor ProbabilisticTensorDictSequentialImpl::log_prob(const TensorDict& td) {
  // The draw is read from `td` itself (a module before the last may write elsewhere).
  ProbabilisticTensorDictModuleImpl& last = probabilistic_module();
  if (last.is_composite()) return get_composite_dist(td)->log_prob(td);
  return get_dist(td)->log_prob(td.get(last.out_keys_source()[0]));
}

std::shared_ptr<TensorDictSequentialImpl> ProbabilisticTensorDictSequentialImpl::make_like(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules) const {
  return std::make_shared<ProbabilisticTensorDictSequentialImpl>(std::move(modules), options_);
}

void ProbabilisticTensorDictSequentialImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::ProbabilisticTensorDictSequential(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_) << ")";
}

}  // namespace td::nn
