#include "td/nn/ensemble.h"

#include <ATen/ATen.h>
#include <torch/nn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace td::nn {

namespace detail {

std::vector<TensorDict> EnsembleMembers(const TensorDict& stacked_params) {
  if (stacked_params.batch_dims() == 0) {
    TD_FAIL(ValueError, "ensemble: the stacked parameters need a leading batch dim (one entry per "
                     "member); got batch size ",
                     SizeRepr(stacked_params.batch_size()));
  }
  return stacked_params.unbind(0);
}

}  // namespace detail

namespace {

namespace tnn = torch::nn;

bool IsElementwise(const torch::nn::Module& m) {
  return dynamic_cast<const tnn::ReLUImpl*>(&m) || dynamic_cast<const tnn::TanhImpl*>(&m) ||
         dynamic_cast<const tnn::SigmoidImpl*>(&m) || dynamic_cast<const tnn::GELUImpl*>(&m) ||
         dynamic_cast<const tnn::SiLUImpl*>(&m) || dynamic_cast<const tnn::ELUImpl*>(&m) ||
         dynamic_cast<const tnn::LeakyReLUImpl*>(&m) ||
         dynamic_cast<const tnn::SoftplusImpl*>(&m) ||
         dynamic_cast<const tnn::IdentityImpl*>(&m) || dynamic_cast<const tnn::DropoutImpl*>(&m);
}

// One step of the batched computation: a Linear (with its stacked parameters, or null to use
// the module's own) or an element-wise module.
struct Step {
  const tnn::LinearImpl* linear = nullptr;
  std::optional<TensorDict> params;
  tnn::AnyModule* elementwise = nullptr;
};

// Whether `params` (may be absent) only holds keys a Linear has.
bool LinearKeysOnly(const std::optional<TensorDict>& params) {
  if (!params) return true;
  bool only = true;
  params->for_each_entry([&only](const std::string& k, const Value&) {
    only = only && (k == "weight" || k == "bias");
  });
  return only;
}

at::Tensor StackedOrOwn(const std::optional<TensorDict>& params, const char* name,
                        const at::Tensor& own, int64_t n) {
  if (params) {
    std::optional<Value> v = params->find(name);
    if (v && v->is_tensor()) return v->tensor();
  }
  if (!own.defined()) return own;
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), own.sizes().begin(), own.sizes().end());
  return own.unsqueeze(0).expand(shape);
}

}  // namespace

std::optional<at::Tensor> batched_ensemble_forward(torch::nn::Module& module,
                                                   const TensorDict& stacked_params,
                                                   const at::Tensor& x, bool per_member_input) {
  if (stacked_params.batch_dims() == 0) return std::nullopt;
  const int64_t n = stacked_params.batch_size()[0];
  std::vector<Step> steps;
  if (auto* lin = dynamic_cast<const tnn::LinearImpl*>(&module)) {
    steps.push_back({lin, stacked_params, nullptr});
    if (!LinearKeysOnly(stacked_params)) return std::nullopt;
  } else if (auto* seq = dynamic_cast<tnn::SequentialImpl*>(&module)) {
    std::vector<std::string> covered;
    size_t index = 0;
    for (tnn::AnyModule& any : *seq) {
      const std::string name = std::to_string(index++);
      std::shared_ptr<tnn::Module> child = any.ptr();
      if (auto* child_lin = dynamic_cast<const tnn::LinearImpl*>(child.get())) {
        std::optional<TensorDict> p;
        if (std::optional<Value> v = stacked_params.find(name)) {
          if (!v->is_tensordict()) return std::nullopt;
          p = v->tensordict();
          covered.push_back(name);
        }
        if (!LinearKeysOnly(p)) return std::nullopt;
        steps.push_back({child_lin, std::move(p), nullptr});
      } else if (IsElementwise(*child)) {
        steps.push_back({nullptr, std::nullopt, &any});
      } else {
        return std::nullopt;
      }
    }
    if (covered.size() != stacked_params.size()) return std::nullopt;  // keys it does not have
  } else {
    return std::nullopt;
  }
  // Rows: x is [*B, in] (shared) or [N, *B, in]; computed as [M, in] / [N, M, in].
  if (x.dim() < 1 || (per_member_input && x.dim() < 2)) return std::nullopt;
  const int64_t lead = per_member_input ? 1 : 0;
  std::vector<int64_t> batch_dims(x.sizes().begin() + lead, x.sizes().end() - 1);
  at::Tensor h = per_member_input ? x.reshape({n, -1, x.size(-1)}) : x.reshape({-1, x.size(-1)});
  bool has_member_dim = per_member_input;
  for (Step& step : steps) {
    if (step.elementwise) {
      h = step.elementwise->forward(h);
      continue;
    }
    const at::Tensor w = StackedOrOwn(step.params, "weight", step.linear->weight, n);  // [N,o,i]
    const at::Tensor b = StackedOrOwn(step.params, "bias", step.linear->bias, n);      // [N,o]
    const at::Tensor wt = w.transpose(1, 2);
    if (!has_member_dim) {
      h = at::matmul(h, wt);  // [M, i] x [N, i, o] -> [N, M, o]
      if (b.defined()) h = h + b.unsqueeze(1);
      has_member_dim = true;
    } else if (b.defined()) {
      h = at::baddbmm(b.unsqueeze(1), h, wt);
    } else {
      h = at::bmm(h, wt);
    }
  }
  if (!has_member_dim) {
    std::vector<int64_t> shape = {n};
    shape.insert(shape.end(), h.sizes().begin(), h.sizes().end());
    h = h.unsqueeze(0).expand(shape);
  }
  std::vector<int64_t> out_shape = {n};
  out_shape.insert(out_shape.end(), batch_dims.begin(), batch_dims.end());
  out_shape.push_back(h.size(-1));
  return h.reshape(out_shape);
}

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

void EnsembleModuleImpl::reset() {
  params_ = register_module("params_td", TensorDictParams(initial_));
}

TensorDict EnsembleModuleImpl::forward(const TensorDict& td) {
  const TensorDict params = params_->params();
  std::vector<int64_t> batch = {num_members_};
  batch.insert(batch.end(), td.batch_size().begin(), td.batch_size().end());
  auto* tdm = dynamic_cast<TensorDictModuleImpl*>(module_.get());
  if (options_.batched() && tdm && tdm->module() && in_keys_.size() == 1 &&
      out_keys_.size() == 1 && out_keys_[0] != NestedKey("_") && params.contains("module")) {
    const at::Tensor x = td.get(in_keys_[0]);
    if (std::optional<at::Tensor> y = batched_ensemble_forward(
            *tdm->module(), params.get_tensordict("module"), x, /*per_member_input=*/false)) {
      TensorDict result = td.expand(batch);
      result.set(out_keys_[0], *std::move(y));
      return result;
    }
  }
  std::vector<TensorDict> outs;
  outs.reserve(static_cast<size_t>(num_members_));
  for (const TensorDict& member : params.unbind(0)) {
    ModuleParamsGuard guard = to_module(member, *module_);
    outs.push_back(module_->forward(td.copy()));
  }
  TensorDict result = td.expand(batch);
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
