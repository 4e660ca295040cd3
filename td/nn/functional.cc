#include "td/nn/functional.h"

#include <ATen/ATen.h>
#include <torch/nn.h>

#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "td/compat/module_access.h"
#include "td/core/dtype.h"
#include "td/core/stack.h"
#include "td/nn/params.h"

namespace td::nn {
namespace {

using torch::nn::Module;
using TensorMap = torch::OrderedDict<std::string, at::Tensor>;
using ChildMap = torch::OrderedDict<std::string, std::shared_ptr<Module>>;

// The registries themselves (see NOTE [ Swapping tensors into LibTorch modules ]: to_module must
// replace the registered slot); td/compat/module_access.h is the one place that reaches them.
TensorMap& ParamsOf(Module& m) { return compat::ParametersOf(m); }
TensorMap& BuffersOf(Module& m) { return compat::BuffersOf(m); }
ChildMap& ChildrenOf(Module& m) { return compat::ChildrenOf(m); }
const TensorMap& ParamsOf(const Module& m) { return compat::ParametersOf(m); }
const TensorMap& BuffersOf(const Module& m) { return compat::BuffersOf(m); }
const ChildMap& ChildrenOf(const Module& m) { return compat::ChildrenOf(m); }

// ---- the member table ------------------------------------------------------------------------

struct Registry {
  std::shared_mutex mu;
  std::unordered_map<std::type_index, std::shared_ptr<const TensorMemberSetter>> setters;
};

template <class Impl>
TensorMemberSetter Members(std::vector<std::pair<std::string, at::Tensor Impl::*>> members) {
  return internal::MemberSetter<Impl>(std::move(members));
}

// RNN/LSTM/GRU read their weights from a flat list filled from the registry when the module is
// built; to_module points that list's slot at the new tensor too.
TensorMemberSetter RnnMembers() {
  return [](Module& module, const std::string& name, const at::Tensor& value) {
    return compat::SetRnnFlatWeight(module, name, value);
  };
}

template <class Impl>
void Add(Registry& r, TensorMemberSetter setter) {
  r.setters[std::type_index(typeid(Impl))] =
      std::make_shared<const TensorMemberSetter>(std::move(setter));
}

template <class Impl>
void AddWeightBias(Registry& r) {
  Add<Impl>(r, Members<Impl>({{"weight", &Impl::weight}, {"bias", &Impl::bias}}));
}

template <class Impl>
void AddNorm(Registry& r) {
  Add<Impl>(r, Members<Impl>({{"weight", &Impl::weight},
                              {"bias", &Impl::bias},
                              {"running_mean", &Impl::running_mean},
                              {"running_var", &Impl::running_var},
                              {"num_batches_tracked", &Impl::num_batches_tracked}}));
}

template <class Impl>
void AddCell(Registry& r) {
  Add<Impl>(r, Members<Impl>({{"weight_ih", &Impl::weight_ih},
                              {"weight_hh", &Impl::weight_hh},
                              {"bias_ih", &Impl::bias_ih},
                              {"bias_hh", &Impl::bias_hh}}));
}

TensorMemberSetter NoMembers() {
  return [](Module&, const std::string&, const at::Tensor&) { return false; };
}

void AddBuiltins(Registry& r) {
  namespace tnn = torch::nn;
  AddWeightBias<tnn::LinearImpl>(r);
  AddWeightBias<tnn::BilinearImpl>(r);
  AddWeightBias<tnn::Conv1dImpl>(r);
  AddWeightBias<tnn::Conv2dImpl>(r);
  AddWeightBias<tnn::Conv3dImpl>(r);
  AddWeightBias<tnn::ConvTranspose1dImpl>(r);
  AddWeightBias<tnn::ConvTranspose2dImpl>(r);
  AddWeightBias<tnn::ConvTranspose3dImpl>(r);
  AddWeightBias<tnn::LayerNormImpl>(r);
  AddWeightBias<tnn::GroupNormImpl>(r);
  AddNorm<tnn::BatchNorm1dImpl>(r);
  AddNorm<tnn::BatchNorm2dImpl>(r);
  AddNorm<tnn::BatchNorm3dImpl>(r);
  AddNorm<tnn::InstanceNorm1dImpl>(r);
  AddNorm<tnn::InstanceNorm2dImpl>(r);
  AddNorm<tnn::InstanceNorm3dImpl>(r);
  Add<tnn::EmbeddingImpl>(r, Members<tnn::EmbeddingImpl>({{"weight", &tnn::EmbeddingImpl::weight}}));
  Add<tnn::EmbeddingBagImpl>(
      r, Members<tnn::EmbeddingBagImpl>({{"weight", &tnn::EmbeddingBagImpl::weight}}));
  Add<tnn::PReLUImpl>(r, Members<tnn::PReLUImpl>({{"weight", &tnn::PReLUImpl::weight}}));
  using Mha = tnn::MultiheadAttentionImpl;
  Add<Mha>(r, Members<Mha>({{"in_proj_weight", &Mha::in_proj_weight},
                            {"in_proj_bias", &Mha::in_proj_bias},
                            {"bias_k", &Mha::bias_k},
                            {"bias_v", &Mha::bias_v},
                            {"q_proj_weight", &Mha::q_proj_weight},
                            {"k_proj_weight", &Mha::k_proj_weight},
                            {"v_proj_weight", &Mha::v_proj_weight}}));
  AddCell<tnn::RNNCellImpl>(r);
  AddCell<tnn::LSTMCellImpl>(r);
  AddCell<tnn::GRUCellImpl>(r);
  Add<tnn::RNNImpl>(r, RnnMembers());
  Add<tnn::LSTMImpl>(r, RnnMembers());
  Add<tnn::GRUImpl>(r, RnnMembers());
  Add<tnn::NLLLossImpl>(r, Members<tnn::NLLLossImpl>({{"weight", &tnn::NLLLossImpl::weight}}));
  Add<tnn::CrossEntropyLossImpl>(
      r, Members<tnn::CrossEntropyLossImpl>({{"weight", &tnn::CrossEntropyLossImpl::weight}}));
  Add<tnn::BCEWithLogitsLossImpl>(
      r, Members<tnn::BCEWithLogitsLossImpl>({{"weight", &tnn::BCEWithLogitsLossImpl::weight},
                                              {"pos_weight",
                                               &tnn::BCEWithLogitsLossImpl::pos_weight}}));
  Add<tnn::FractionalMaxPool2dImpl>(
      r, Members<tnn::FractionalMaxPool2dImpl>(
             {{"_random_samples", &tnn::FractionalMaxPool2dImpl::_random_samples}}));
  Add<tnn::FractionalMaxPool3dImpl>(
      r, Members<tnn::FractionalMaxPool3dImpl>(
             {{"_random_samples", &tnn::FractionalMaxPool3dImpl::_random_samples}}));
  // These read their tensors by name, through the registry.
  Add<tnn::ParameterDictImpl>(r, NoMembers());
  Add<tnn::ParameterListImpl>(r, NoMembers());
  Add<TensorDictParamsImpl>(r, NoMembers());
}

Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    AddBuiltins(*r);
    return r;
  }();
  return *registry;
}

std::shared_ptr<const TensorMemberSetter> FindSetter(const Module& m) {
  Registry& r = GetRegistry();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  auto it = r.setters.find(std::type_index(typeid(m)));
  return it == r.setters.end() ? nullptr : it->second;
}

std::string ListKeys(const TensorMap& map) {
  std::vector<std::string> keys;
  for (const auto& item : map) {
    if (item.value().defined()) keys.push_back(item.key());
  }
  return KeysRepr(keys);
}

// ---- from_module ------------------------------------------------------------------------------

TensorDict FromModuleImpl(const Module& m, const FromModuleOptions& options) {
  TensorDict out;
  for (const auto& item : ParamsOf(m)) {
    if (item.value().defined()) out.set(item.key(), item.value());
  }
  if (options.include_buffers()) {
    for (const auto& item : BuffersOf(m)) {
      if (item.value().defined()) out.set(item.key(), item.value());
    }
  }
  if (options.recurse()) {
    for (const auto& item : ChildrenOf(m)) {
      TensorDict sub = FromModuleImpl(*item.value(), options);
      if (!sub.is_empty() || options.keep_empty()) out.set(item.key(), std::move(sub));
    }
  }
  return out;
}

}  // namespace

// ---- ModuleParamsGuard --------------------------------------------------------------------------

// Builds a ModuleParamsGuard: walks the TensorDict and the module tree side by side.
class ModuleSwapper {
 public:
  static ModuleParamsGuard Swap(const TensorDict& params, Module& root,
                                const ToModuleOptions& options) {
    ModuleParamsGuard guard;
    guard.inplace_ = options.inplace();
    guard.nodes_.push_back({-1, std::string()});
    std::shared_ptr<Module> keep = root.weak_from_this().lock();
    try {
      Level(params, root, keep, 0, guard);
    } catch (...) {
      guard.restore_slots();
      throw;
    }
    return guard;
  }

  static NestedKey PathOf(const ModuleParamsGuard& g, int32_t node, const std::string& name) {
    std::vector<std::string> parts{name};
    for (int32_t n = node; n > 0; n = g.nodes_[n].parent) parts.push_back(g.nodes_[n].name);
    std::reverse(parts.begin(), parts.end());
    return NestedKey(parts);
  }

 private:
  static std::string Where(const ModuleParamsGuard& g, int32_t node, const Module& m) {
    std::string where = node == 0 ? std::string("the root module")
                                  : "submodule " + PathOf(g, g.nodes_[node].parent,
                                                          g.nodes_[node].name).repr();
    return where + " (" + m.name() + ")";
  }

  [[noreturn]] static void FailUnknown(const ModuleParamsGuard& g, int32_t node, Module& m,
                                       const std::string& k) {
    TD_FAIL(KeyError, "to_module: key ", PathOf(g, node, k).repr(), " matches nothing in ",
                   Where(g, node, m), ": its parameters are ", ListKeys(ParamsOf(m)),
                   ", buffers ", ListKeys(BuffersOf(m)), ", submodules ",
                   KeysRepr(ChildrenOf(m).keys()));
  }

  static void Level(const TensorDict& params, Module& m, const std::shared_ptr<Module>& keep,
                    int32_t node, ModuleParamsGuard& g) {
    TensorMap& own_params = ParamsOf(m);
    TensorMap& own_buffers = BuffersOf(m);
    ChildMap& children = ChildrenOf(m);
    std::shared_ptr<const TensorMemberSetter> setter;
    bool setter_looked_up = false;
    params.for_each_entry([&](const std::string& k, const Value& entry) {
      const Value* v = &entry;
      if (v->is_tensordict()) {
        std::shared_ptr<Module>* child = children.find(k);
        if (child == nullptr) {
          if (own_params.find(k) || own_buffers.find(k)) {
            TD_FAIL(TypeError, "to_module: key ", PathOf(g, node, k).repr(),
                            " holds a TensorDict, but in ", Where(g, node, m),
                            " it names a tensor, not a submodule");
          }
          FailUnknown(g, node, m, k);
        }
        const int32_t child_node = static_cast<int32_t>(g.nodes_.size());
        g.nodes_.push_back({node, k});
        Level(v->tensordict(), **child, *child, child_node, g);
        return;
      }
      if (!v->is_tensor()) {
        TD_FAIL(TypeError, "to_module: key ", PathOf(g, node, k).repr(),
                        " holds non-tensor data; only tensors can go into a module");
      }
      bool buffer = false;
      at::Tensor* slot = own_params.find(k);
      if (slot == nullptr) {
        slot = own_buffers.find(k);
        buffer = true;
      }
      if (slot == nullptr) {
        if (children.find(k)) {
          TD_FAIL(TypeError, "to_module: key ", PathOf(g, node, k).repr(),
                          " holds a Tensor, but in ", Where(g, node, m),
                          " it names a submodule (expected a TensorDict)");
        }
        FailUnknown(g, node, m, k);
      }
      const at::Tensor& value = v->tensor();
      if (slot->defined() && slot->sizes() != value.sizes()) {
        TD_FAIL(ValueError, "to_module: key ", PathOf(g, node, k).repr(), " has shape ",
                         SizeRepr(value.sizes()), " but the ", buffer ? "buffer" : "parameter",
                         " it replaces in ", Where(g, node, m), " has shape ",
                         SizeRepr(slot->sizes()));
      }
      if (g.inplace_) {
        if (!slot->defined()) {
          TD_FAIL(ValueError, "to_module(inplace): key ", PathOf(g, node, k).repr(),
                           " names an undefined ", buffer ? "buffer" : "parameter", " of ",
                           Where(g, node, m), "; there is no tensor to copy into");
        }
        at::NoGradGuard no_grad;
        g.slots_.push_back({keep, &m, nullptr, node, buffer, k, slot->detach().clone()});
        slot->copy_(value);
        return;
      }
      if (!setter_looked_up) {
        setter = FindSetter(m);
        setter_looked_up = true;
        if (!setter) {
          TD_FAIL(TypeError, 
              "to_module: cannot swap key ", PathOf(g, node, k).repr(), " into ",
              Where(g, node, m), ": to_module does not know which member handles the forward() "
              "of ", c10::demangle(typeid(m).name()), " reads, and swapping only the registered "
              "tensor would leave forward() reading the old one. Declare them once with "
              "td::nn::register_tensor_members<", c10::demangle(typeid(m).name()),
              ">({{\"", k, "\", &", c10::demangle(typeid(m).name()), "::", k,
              "}, ...}) (an empty list if forward() reads its tensors by name), or use "
              "ToModuleOptions().inplace(true)");
        }
      }
      g.slots_.push_back({keep, &m, setter, node, buffer, k, *slot});
      *slot = value;
      (*setter)(m, k, value);
    });
  }
};

ModuleParamsGuard::ModuleParamsGuard(ModuleParamsGuard&& other) noexcept
    : slots_(std::move(other.slots_)), nodes_(std::move(other.nodes_)), inplace_(other.inplace_) {
  other.slots_.clear();
}

ModuleParamsGuard& ModuleParamsGuard::operator=(ModuleParamsGuard&& other) noexcept {
  if (this != &other) {
    try {
      restore_slots();
    } catch (const std::exception& e) {
      std::cerr << "td::nn::ModuleParamsGuard: restoring failed: " << e.what() << "\n";
    }
    slots_ = std::move(other.slots_);
    nodes_ = std::move(other.nodes_);
    inplace_ = other.inplace_;
    other.slots_.clear();
  }
  return *this;
}

ModuleParamsGuard::~ModuleParamsGuard() {
  try {
    restore_slots();
  } catch (const std::exception& e) {
    std::cerr << "td::nn::ModuleParamsGuard: restoring failed: " << e.what() << "\n";
  }
}

void ModuleParamsGuard::restore() { restore_slots(); }

void ModuleParamsGuard::restore_slots() {
  // Take the slots first so that a failure part-way cannot restore twice.
  std::vector<Slot> slots = std::move(slots_);
  slots_.clear();
  std::string failures;
  for (auto it = slots.rbegin(); it != slots.rend(); ++it) {
    Module& m = *it->module;
    at::Tensor* slot = (it->buffer ? BuffersOf(m) : ParamsOf(m)).find(it->name);
    if (slot == nullptr) {
      failures += " '" + it->name + "' (no longer registered in " + m.name() + ")";
      continue;
    }
    if (inplace_) {
      at::NoGradGuard no_grad;
      slot->copy_(it->previous);
    } else {
      *slot = it->previous;
      (*it->setter)(m, it->name, it->previous);
    }
  }
  if (!failures.empty()) TD_FAIL(c10::Error, "to_module: could not restore", failures);
}

TensorDict ModuleParamsGuard::swapped_out() const {
  TensorDict out;
  for (const Slot& s : slots_) {
    out.set(ModuleSwapper::PathOf(*this, s.node, s.name), s.previous);
  }
  return out;
}

TensorDict ModuleParamsGuard::release() {
  TensorDict out = swapped_out();
  slots_.clear();
  return out;
}

// ---- public functions -------------------------------------------------------------------------

TensorDict from_module(const torch::nn::Module& module, const FromModuleOptions& options) {
  TensorDict out = FromModuleImpl(module, options);
  if (options.lock()) out.lock_();
  return out;
}

ModuleParamsGuard to_module(const TensorDict& params, torch::nn::Module& module,
                            const ToModuleOptions& options) {
  return ModuleSwapper::Swap(params, module, options);
}

TensorDict swap_into_module(const TensorDict& params, torch::nn::Module& module,
                            const ToModuleOptions& options) {
  return ModuleSwapper::Swap(params, module, options).release();
}

void register_tensor_members(std::type_index type, TensorMemberSetter setter) {
  if (!setter) TD_FAIL(ValueError, "register_tensor_members: empty setter");
  Registry& r = GetRegistry();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.setters[type] = std::make_shared<const TensorMemberSetter>(std::move(setter));
}

bool has_tensor_members(std::type_index type) {
  Registry& r = GetRegistry();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  return r.setters.count(type) > 0;
}

TensorDict from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules,
                        const FromModuleOptions& options) {
  if (modules.empty()) TD_FAIL(ValueError, "from_modules needs at least one module");
  std::vector<TensorDict> tds;
  tds.reserve(modules.size());
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!modules[i]) TD_FAIL(ValueError, "from_modules: module ", i, " is null");
    tds.push_back(FromModuleImpl(*modules[i], FromModuleOptions(options).lock(false)));
  }
  TensorDict out;
  try {
    out = stack(tds, 0);
  } catch (c10::Error& e) {
    e.add_context("from_modules: the modules must have the same parameters, with the same shapes");
    throw;
  }
  if (options.lock()) out.lock_();
  return out;
}

}  // namespace td::nn
