#include "td/nn/probabilistic.h"

#include <ATen/ATen.h>

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
    std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys,
    DistributionFactory distribution, ProbabilisticTensorDictModuleOptions options)
    : distribution_(std::move(distribution)), options_(std::move(options)) {
  if (!distribution_.make) {
    Fail<ValueError>("ProbabilisticTensorDictModule: the distribution factory is empty");
  }
  if (out_keys.size() != 1) {
    Fail<ValueError>("ProbabilisticTensorDictModule: out_keys must hold exactly one key (the "
                     "draw); got ",
                     KeysRepr(out_keys));
  }
  const auto& names = options_.dist_param_names();
  if (!names.empty() && names.size() != in_keys.size()) {
    Fail<ValueError>("ProbabilisticTensorDictModule: dist_param_names ", KeysRepr(names),
                     " must name each of the in_keys ", KeysRepr(in_keys));
  }
  for (size_t i = 0; i < in_keys.size(); ++i) {
    param_names_.push_back(names.empty() ? in_keys[i].back() : names[i]);
  }
  in_keys_ = std::move(in_keys);
  out_keys_source_ = std::move(out_keys);
  if (options_.return_log_prob()) {
    if (options_.log_prob_key() == out_keys_source_[0]) {
      Fail<ValueError>("ProbabilisticTensorDictModule: log_prob_key ",
                       options_.log_prob_key().repr(), " is also the draw's key");
    }
    out_keys_source_.push_back(options_.log_prob_key());
  }
  out_keys_ = out_keys_source_;
}

InteractionType ProbabilisticTensorDictModuleImpl::current_interaction_type() const {
  return interaction_type().value_or(options_.default_interaction_type());
}

std::shared_ptr<Distribution> ProbabilisticTensorDictModuleImpl::get_dist(
    const TensorDict& td) const {
  DistParams params;
  params.reserve(in_keys_.size());
  for (size_t i = 0; i < in_keys_.size(); ++i) {
    std::optional<Value> v = td.find(in_keys_[i]);
    if (!v || !v->is_tensor()) {
      Fail<KeyError>("ProbabilisticTensorDictModule(", distribution_.name, "): parameter key ",
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

at::Tensor ProbabilisticTensorDictModuleImpl::log_prob(const TensorDict& td) const {
  return get_dist(td)->log_prob(td.get(out_keys_source_[0]));
}

TensorDict ProbabilisticTensorDictModuleImpl::forward(const TensorDict& td) {
  if (should_skip(td, options_.skip_existing())) return td;
  const std::shared_ptr<Distribution> dist = get_dist(td);
  at::Tensor draw;
  switch (current_interaction_type()) {
    case InteractionType::kMode:
      draw = dist->mode();
      break;
    case InteractionType::kMean:
      draw = dist->mean();
      break;
    case InteractionType::kRandom:
      draw = dist->has_rsample() ? dist->rsample() : dist->sample();
      break;
    case InteractionType::kDeterministic:
      draw = dist->deterministic_sample();
      break;
    case InteractionType::kMedian:
      draw = dist->median();
      break;
  }
  const bool selected_draw = std::find(out_keys_.begin(), out_keys_.end(),
                                       out_keys_source_[0]) != out_keys_.end();
  const bool selected_lp = options_.return_log_prob() &&
                           std::find(out_keys_.begin(), out_keys_.end(),
                                     options_.log_prob_key()) != out_keys_.end();
  at::Tensor lp;
  if (selected_lp) lp = dist->log_prob(draw);
  // Both writes or neither.
  TensorDict out = td;
  std::optional<Value> previous;
  if (selected_draw) {
    previous = out.find(out_keys_source_[0]);
    out.set(out_keys_source_[0], draw);
  }
  if (selected_lp) {
    try {
      out.set(options_.log_prob_key(), lp);
    } catch (...) {
      if (selected_draw) {
        if (previous) {
          out.set(out_keys_source_[0], *previous);
        } else {
          out.del_(out_keys_source_[0]);
        }
      }
      throw;
    }
  }
  return out;
}

void ProbabilisticTensorDictModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::ProbabilisticTensorDictModule(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_) << ", distribution=" << distribution_.name
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
    Fail<ValueError>("ProbabilisticTensorDictSequential needs at least one module");
  }
  if (!std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(modules_.back())) {
    Fail<TypeError>("ProbabilisticTensorDictSequential: the last module must be a "
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

at::Tensor ProbabilisticTensorDictSequentialImpl::log_prob(const TensorDict& td) {
  std::shared_ptr<Distribution> dist = get_dist(td);
  return dist->log_prob(td.get(probabilistic_module().out_keys_source()[0]));
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
