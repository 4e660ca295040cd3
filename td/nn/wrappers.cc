#include "td/nn/wrappers.h"

#include <torch/nn.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_join.h"
#include "td/core/dtype.h"
#include "td/nn/functional.h"
#include "td/nn/scale.h"

namespace td::nn {

// ---- TensorDictModuleWrapper ------------------------------------------------------------------

TensorDictModuleWrapperImpl::TensorDictModuleWrapperImpl(
    std::shared_ptr<TensorDictModuleBase> td_module)
    : td_module_(std::move(td_module)) {
  if (!td_module_) TD_FAIL(ValueError, "TensorDictModuleWrapper: the wrapped module is null");
  register_module("td_module", std::shared_ptr<torch::nn::Module>(td_module_));
  mirror_keys();
}

void TensorDictModuleWrapperImpl::mirror_keys() {
  in_keys_ = td_module_->in_keys();
  out_keys_ = td_module_->out_keys();
  out_keys_source_ = td_module_->out_keys_source();
}

TensorDictModuleBase& TensorDictModuleWrapperImpl::select_out_keys(
    const std::vector<NestedKey>& keys) {
  td_module_->select_out_keys(keys);
  mirror_keys();
  return *this;
}

TensorDictModuleBase& TensorDictModuleWrapperImpl::reset_out_keys() {
  td_module_->reset_out_keys();
  mirror_keys();
  return *this;
}

std::shared_ptr<torch::nn::Module> TensorDictModuleWrapperImpl::clone(
    const td::compat::OptionalDevice& device) const {
  auto inner = std::dynamic_pointer_cast<TensorDictModuleBase>(td_module_->clone(device));
  if (!inner) {
    TD_FAIL(c10::Error, "TensorDictModuleWrapper::clone: the clone of ", td_module_->name(),
            " is not a TensorDict module");
  }
  return make_like(std::move(inner));
}

std::shared_ptr<TensorDictModuleWrapperImpl> TensorDictModuleWrapperImpl::make_like(
    std::shared_ptr<TensorDictModuleBase> td_module) const {
  return std::make_shared<TensorDictModuleWrapperImpl>(std::move(td_module));
}

void TensorDictModuleWrapperImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::TensorDictModuleWrapper(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_) << ")";
}

// ---- WrapModule -------------------------------------------------------------------------------

WrapModuleImpl::WrapModuleImpl(Function fn, WrapModuleOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {
  if (!fn_) TD_FAIL(ValueError, "WrapModule: the function is empty");
  in_keys_ = options_.in_keys();
  out_keys_ = options_.out_keys();
  out_keys_source_ = out_keys_;
}

TensorDict WrapModuleImpl::forward(const TensorDict& td) {
  TensorDict result = fn_(td);
  if (options_.inplace() && !result.is_same(td)) {
    TensorDict out = td;
    out.update(result);
    return out;
  }
  return result;
}

void WrapModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::WrapModule(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_)
         << ", inplace=" << (options_.inplace() ? "true" : "false") << ")";
}

// ---- reset_parameters_recursive ---------------------------------------------------------------

namespace {

template <class Impl>
bool TryReset(torch::nn::Module& m) {
  if (auto* impl = dynamic_cast<Impl*>(&m)) {
    impl->reset_parameters();
    return true;
  }
  return false;
}

bool ResetOne(torch::nn::Module& m) {
  namespace tnn = torch::nn;
  if (auto* own = dynamic_cast<ResetsParameters*>(&m)) {
    own->reset_parameters();
    return true;
  }
  if (auto* mha = dynamic_cast<tnn::MultiheadAttentionImpl*>(&m)) {
    mha->_reset_parameters();
    return true;
  }
  return TryReset<tnn::LinearImpl>(m) || TryReset<tnn::BilinearImpl>(m) ||
         TryReset<tnn::Conv1dImpl>(m) || TryReset<tnn::Conv2dImpl>(m) ||
         TryReset<tnn::Conv3dImpl>(m) || TryReset<tnn::ConvTranspose1dImpl>(m) ||
         TryReset<tnn::ConvTranspose2dImpl>(m) || TryReset<tnn::ConvTranspose3dImpl>(m) ||
         TryReset<tnn::EmbeddingImpl>(m) || TryReset<tnn::EmbeddingBagImpl>(m) ||
         TryReset<tnn::BatchNorm1dImpl>(m) || TryReset<tnn::BatchNorm2dImpl>(m) ||
         TryReset<tnn::BatchNorm3dImpl>(m) || TryReset<tnn::InstanceNorm1dImpl>(m) ||
         TryReset<tnn::InstanceNorm2dImpl>(m) || TryReset<tnn::InstanceNorm3dImpl>(m) ||
         TryReset<tnn::LayerNormImpl>(m) || TryReset<tnn::GroupNormImpl>(m) ||
         TryReset<tnn::RNNImpl>(m) || TryReset<tnn::LSTMImpl>(m) || TryReset<tnn::GRUImpl>(m) ||
         TryReset<tnn::RNNCellImpl>(m) || TryReset<tnn::LSTMCellImpl>(m) ||
         TryReset<tnn::GRUCellImpl>(m) || TryReset<AddStateIndependentNormalScaleImpl>(m);
}

}  // namespace

bool reset_parameters_recursive(torch::nn::Module& module) {
  bool any = false;
  for (const auto& m : module.modules(/*include_self=*/true)) any = ResetOne(*m) || any;
  return any;
}

TensorDict reset_parameters_recursive(torch::nn::Module& module, const TensorDict& params) {
  if (params.batch_dims() != 0) {
    TD_FAIL(ValueError, "reset_parameters_recursive: params must have batch size [] (the "
            "module's own shapes); got batch size ", SizeRepr(params.batch_size()));
  }
  TensorDict fresh = params.apply([](const at::Tensor& t) {
    at::Tensor d = t.detach();
    if (d.is_floating_point() || d.is_complex()) d.requires_grad_(true);
    return d;
  });
  {
    ModuleParamsGuard guard = to_module(fresh, module);
    reset_parameters_recursive(module);
  }
  return fresh;
}

// ---- dispatch ---------------------------------------------------------------------------------

namespace {

std::string ArgName(const NestedKey& key, const std::string& separator) {
  return absl::StrJoin(key.begin(), key.end(), separator);
}

}  // namespace

std::vector<at::Tensor> dispatch(TensorDictModuleBase& module, const NamedTensors& named,
                                 const DispatchOptions& options) {
  return dispatch(module, {}, named, options);
}

std::vector<at::Tensor> dispatch(TensorDictModuleBase& module,
                                 const std::vector<at::Tensor>& positional,
                                 const NamedTensors& named, const DispatchOptions& options) {
  const std::vector<NestedKey>& in_keys = module.in_keys();
  std::vector<std::string> names;
  names.reserve(in_keys.size());
  for (const NestedKey& k : in_keys) names.push_back(ArgName(k, options.separator()));
  if (positional.size() > in_keys.size()) {
    TD_FAIL(ValueError, "dispatch(", module.name(), "): ", positional.size(),
            " positional tensors for ", in_keys.size(), " in keys ", KeysRepr(in_keys));
  }
  std::vector<at::Tensor> inputs(in_keys.size());
  for (size_t i = 0; i < positional.size(); ++i) inputs[i] = positional[i];
  for (const auto& [name, tensor] : named) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      TD_FAIL(KeyError, "dispatch(", module.name(), "): no in key is named '", name,
              "'; the argument names are ", KeysRepr(names), " (in keys ", KeysRepr(in_keys),
              ", components joined by '", options.separator(), "')");
    }
    const size_t i = static_cast<size_t>(it - names.begin());
    if (inputs[i].defined()) {
      TD_FAIL(ValueError, "dispatch(", module.name(), "): in key ", in_keys[i].repr(), " ('",
              name, "') is given twice", i < positional.size() ? " (positionally and by name)" : "");
    }
    inputs[i] = tensor;
  }
  TensorDict td({}, std::vector<int64_t>{});
  for (size_t i = 0; i < in_keys.size(); ++i) {
    if (!inputs[i].defined()) {
      TD_FAIL(KeyError, "dispatch(", module.name(), "): in key ", in_keys[i].repr(),
              " got no tensor; pass it as '", names[i], "' or positionally (position ", i, ")");
    }
    td.set(in_keys[i], inputs[i]);
  }
  if (options.auto_batch_size()) td.auto_batch_size_();
  const TensorDict out = module.forward(td);
  std::vector<at::Tensor> result;
  for (const NestedKey& k : module.out_keys()) {
    if (k == NestedKey("_")) continue;
    std::optional<Value> v = out.find(k);
    if (!v || !v->is_tensor()) {
      TD_FAIL(KeyError, "dispatch(", module.name(), "): out key ", k.repr(),
              v ? " is not a Tensor" : " was not written", " by the module");
    }
    result.push_back(v->tensor());
  }
  return result;
}

}  // namespace td::nn
