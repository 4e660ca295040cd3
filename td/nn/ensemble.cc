#include "td/nn/ensemble.h"

#include "td/nn/wrappers.h"

#include <ATen/ATen.h>
#include <torch/nn.h>

#include <string>

namespace td::nn {

namespace internal {

int64_t EnsembleSize(const TensorDict& stacked_params) {
  if (stacked_params.batch_dims() == 0) {
    TD_FAIL(ValueError, "ensemble: the stacked parameters need a leading batch dim (one entry per "
                     "member); got batch size ",
                     SizeRepr(stacked_params.batch_size()));
  }
  return stacked_params.batch_size()[0];
}

bool IsUnbatchable(const c10::Error& e) {
  return std::string(e.what_without_backtrace()).find("Batching rule not implemented") !=
         std::string::npos;
}

std::vector<TensorDict> EnsembleMembers(const TensorDict& stacked_params) {
  EnsembleSize(stacked_params);
  return stacked_params.unbind(0);
}

}  // namespace internal

// ---- EnsembleModuleImpl -----------------------------------------------------------------------

EnsembleModuleImpl::EnsembleModuleImpl(std::vector<std::shared_ptr<TensorDictModuleBase>> members,
                                       EnsembleOptions options)
    : options_(options) {
  if (members.empty()) TD_FAIL(ValueError, "EnsembleModule needs at least one member");
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!members[i]) TD_FAIL(ValueError, "EnsembleModule: member ", i, " is null");
    modules.push_back(members[i]);
  }
  module_ = members.front();
  init(from_modules(modules).apply([](const at::Tensor& t) { return t.detach(); }));
}

EnsembleModuleImpl::EnsembleModuleImpl(std::shared_ptr<TensorDictModuleBase> module,
                                       int64_t num_copies, EnsembleOptions options)
    : options_(options) {
  if (!module) TD_FAIL(ValueError, "EnsembleModule: the module is null");
  if (num_copies < 1) TD_FAIL(ValueError, "EnsembleModule: num_copies must be >= 1, got ", num_copies);
  module_ = std::move(module);
  init(from_module(*module_).expand({num_copies}).apply([](const at::Tensor& t) {
    return t.detach().clone();
  }));
}

void EnsembleModuleImpl::init(TensorDict stacked) {
  num_members_ = stacked.batch_size()[0];
  initial_ = stacked;
  params_ = register_module("params_td", TensorDictParams(stacked));
  in_keys_ = module_->in_keys();
  out_keys_source_ = module_->out_keys();
  out_keys_ = out_keys_source_;
}

TensorDict EnsembleModuleImpl::reset_parameters_recursive() {
  const TensorDict params = params_->params();
  for (int64_t i = 0; i < num_members_; ++i) {
    // The functional form resets views of member i's slices in place.
    td::nn::reset_parameters_recursive(*module_, params.index({i}));
  }
  return params;
}

void EnsembleModuleImpl::reset() {
  params_ = register_module("params_td", TensorDictParams(initial_));
}

TensorDict EnsembleModuleImpl::forward(const TensorDict& td) {
  const TensorDict params = params_->params();
  std::vector<int64_t> batch = {num_members_};
  batch.insert(batch.end(), td.batch_size().begin(), td.batch_size().end());
  TensorDict result = td.expand(batch);
  if (options_.batched()) {
    auto run = [this](const TensorDict& input, const TensorDict& member) {
      ModuleParamsGuard guard = to_module(member, *module_);
      return module_->forward(input);
    };
    std::optional<TensorDict> outs;
    try {
      outs = vmap(run, {kNone, 0}, 0, VmapOptions().randomness(Randomness::kDifferent))(td, params);
    } catch (const c10::Error& e) {
      if (!internal::IsUnbatchable(e)) throw;
    }
    if (outs) {
      for (const NestedKey& k : out_keys_) {
        if (k != NestedKey("_")) result.set(k, outs->get(k));
      }
      return result;
    }
  }
  std::vector<TensorDict> outs;
  outs.reserve(static_cast<size_t>(num_members_));
  for (const TensorDict& member : params.unbind(0)) {
    ModuleParamsGuard guard = to_module(member, *module_);
    outs.push_back(module_->forward(td.copy()));
  }
  std::vector<at::Tensor> values(outs.size());
  for (const NestedKey& k : out_keys_) {
    if (k == NestedKey("_")) continue;
    for (size_t i = 0; i < outs.size(); ++i) values[i] = outs[i].get(k);
    result.set(k, at::stack(values, 0));
  }
  return result;
}

void EnsembleModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::EnsembleModule(num_members=" << num_members_
         << ", in_keys=" << KeysRepr(in_keys_) << ", out_keys=" << KeysRepr(out_keys_)
         << ", module=" << module_->name() << ")";
}

}  // namespace td::nn
