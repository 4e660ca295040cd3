// Functional use of LibTorch modules through TensorDicts: `from_module` reads a module's
// parameters and buffers into a nested TensorDict, `to_module` puts a TensorDict's tensors into a
// module for a scope (RAII), `from_modules` stacks the parameters of several modules for an
// ensemble.
//
//   torch::nn::Sequential model(torch::nn::Linear(3, 4), torch::nn::Linear(4, 4));
//   td::TensorDict params = td::nn::from_module(*model);     // {"0": {weight, bias}, "1": {...}}
//   td::TensorDict zeros = params.apply([](const at::Tensor& t) { return at::zeros_like(t); });
//   {
//     auto guard = td::nn::to_module(zeros, *model);          // forward() now reads `zeros`
//     at::Tensor y = model->forward(x);                       // == bias of layer 1 (all zeros)
//   }                                                         // the old tensors are back
//
// NOTE [ Swapping tensors into LibTorch modules ]
// A LibTorch module keeps each parameter twice: in its registry (`parameters_` / `buffers_`, what
// named_parameters(), state dicts and optimizers see) and in a member handle its forward() reads
// (`LinearImpl::weight`, `MultiheadAttentionImpl::in_proj_weight`, the `flat_weights_` vector of
// RNN/LSTM/GRU, ...). Both are `at::Tensor` handles to one TensorImpl. `to_module` therefore
// re-points BOTH handles to the swapped-in tensor, and the guard re-points both back:
//  * the registry slot is reached through the module's own OrderedDicts (see functional.cc);
//  * the member handle is set through a per-type table of members (`register_tensor_members`),
//    filled for every LibTorch module that owns tensors (Linear, Bilinear, Conv*/ConvTranspose*,
//    LayerNorm, GroupNorm, BatchNorm*/InstanceNorm*, Embedding(Bag), PReLU, MultiheadAttention,
//    RNNCell/LSTMCell/GRUCell, RNN/LSTM/GRU, the weighted losses, ParameterDict/ParameterList,
//    and td::nn's own modules). Containers (Sequential, ModuleList, Transformer, ...) own no
//    tensors; their children are visited recursively.
// A module type that owns tensors but is not in the table is refused with a TypeError that says
// how to register it: swapping only the registry would leave forward() reading the old tensors,
// which is silently wrong.
// Why not `set_data` or swapping TensorImpl contents: both change the tensor the module already
// holds, so (1) gradients would reach the module's own parameter, not the swapped-in tensor, and
// (2) a graph built inside the scope saves that TensorImpl, whose data changes back when the
// scope ends — `backward()` after the scope would silently use the restored values.
// Autograd with handle swapping: forward() uses the swapped-in tensors themselves, so they are
// what autograd records. Gradients flow into them (into `.grad` for leaves that require grad,
// through their `grad_fn` otherwise, e.g. slices of a stacked ensemble tensor); the module's own
// parameters get no gradient. A graph built inside the scope stays valid after it ends
// (backward() may run later). The swapped-in tensors are used as they are: their dtype and device
// are not converted; shapes must match the tensors they replace.
// `ToModuleOptions().inplace(true)` instead copies the values into the module's own tensors
// (under NoGradGuard) and copies the old values back at the end: the module keeps its
// TensorImpls (optimizers stay attached), gradients go to the module's parameters, and a graph
// that saved them must run backward() before the scope ends (afterwards autograd reports the
// in-place modification).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <typeindex>
#include <utility>
#include <vector>

#include "td/core/tensordict.h"

namespace td::nn {

struct FromModuleOptions {
  // Also read registered buffers (BatchNorm's running stats, ...).
  TORCH_ARG(bool, include_buffers) = true;
  // Also read the submodules (as nested TensorDicts named like the submodules).
  TORCH_ARG(bool, recurse) = true;
  // Keep an empty sub-TensorDict for submodules without tensors (ReLU, Dropout, ...).
  TORCH_ARG(bool, keep_empty) = false;
  // Lock the result (no keys added or removed; in-place writes still work), as Python's
  // from_module(module, lock=True) does by default. lock(false) for an editable copy of the
  // key structure.
  TORCH_ARG(bool, lock) = true;
};

// The module's parameters and buffers as a nested TensorDict with batch size []: a submodule's
// tensors live under its name, so "0.weight" in named_parameters() is the key {"0", "weight"}.
// The leaves are the module's own tensors (no copy): writing into them in place writes into the
// module. Undefined registered tensors (e.g. Linear's bias with bias=false) are skipped.
// The result is locked unless FromModuleOptions::lock is false (as upstream). Throws nothing
// beyond what the TensorDict calls throw.
//   auto params = td::nn::from_module(*model);
//   params.get({"0", "weight"}).sizes();   // [4, 3]
TensorDict from_module(const torch::nn::Module& module, const FromModuleOptions& options = {});
template <class Impl>
TensorDict from_module(const torch::nn::ModuleHolder<Impl>& module,
                       const FromModuleOptions& options = {}) {
  return from_module(*module, options);
}

struct ToModuleOptions {
  // Copy the values into the module's own tensors instead of swapping the handles (see
  // NOTE [ Swapping tensors into LibTorch modules ]).
  TORCH_ARG(bool, inplace) = false;
};

// Sets the member handle(s) of `module` that mirror its registered tensor `name` to `value`.
// Returns false when no member mirrors `name` (the registry slot alone is then swapped).
using TensorMemberSetter =
    std::function<bool(torch::nn::Module& module, const std::string& name, const at::Tensor& value)>;

// Restores the tensors a to_module() call replaced: in its destructor, in restore(), or never if
// release() is called. Movable, not copyable. Restoring happens in the reverse order of the
// swaps, so a module reached twice (shared submodule) ends up as it was.
class [[nodiscard]] ModuleParamsGuard {
 public:
  ModuleParamsGuard() = default;
  ModuleParamsGuard(ModuleParamsGuard&& other) noexcept;
  ModuleParamsGuard& operator=(ModuleParamsGuard&& other) noexcept;
  ModuleParamsGuard(const ModuleParamsGuard&) = delete;
  ModuleParamsGuard& operator=(const ModuleParamsGuard&) = delete;
  // Restores (never throws; an error while restoring is reported on stderr).
  ~ModuleParamsGuard();

  // Puts the previous tensors back now. A second call does nothing.
  void restore();
  // Keeps the new tensors in the module and returns the previous ones, laid out like the
  // TensorDict given to to_module (batch size []). The guard becomes inactive.
  TensorDict release();
  // The previous tensors, laid out like the TensorDict given to to_module, without restoring.
  TensorDict swapped_out() const;
  // Number of tensors swapped (0 once restored or released).
  size_t size() const { return slots_.size(); }
  bool active() const { return !slots_.empty(); }

 private:
  friend class ModuleSwapper;
  struct Slot {
    std::shared_ptr<torch::nn::Module> keep_alive;  // null for a root not owned by a shared_ptr
    torch::nn::Module* module = nullptr;
    std::shared_ptr<const TensorMemberSetter> setter;  // null in in-place mode
    int32_t node = 0;               // index into nodes_: where `module` sits in the TensorDict
    bool buffer = false;
    std::string name;
    at::Tensor previous;
  };
  struct Node {
    int32_t parent = -1;
    std::string name;
  };
  void restore_slots();

  std::vector<Slot> slots_;
  std::vector<Node> nodes_;
  bool inplace_ = false;
};

// Puts every tensor of `params` into `module` (a nested key names a submodule path, the last
// component a parameter or buffer) until the returned guard is destroyed; entries of the module
// that `params` does not mention are left alone. Throws, with nothing swapped: KeyError naming the
// path and the module's parameters, buffers and submodules for a key that matches none;
// ValueError naming the key and both shapes when a tensor's shape differs from the one it
// replaces; TypeError for a key whose kind does not match (a TensorDict for a parameter, a tensor
// for a submodule, non-tensor data), and for a module type whose member handles are unknown (see
// NOTE [ Swapping tensors into LibTorch modules ] and register_tensor_members).
//   {
//     auto guard = td::nn::to_module(params, *model);
//     y = model->forward(x);
//   }
ModuleParamsGuard to_module(const TensorDict& params, torch::nn::Module& module,
                            const ToModuleOptions& options = {});
template <class Impl>
ModuleParamsGuard to_module(const TensorDict& params, const torch::nn::ModuleHolder<Impl>& module,
                            const ToModuleOptions& options = {}) {
  return to_module(params, *module.ptr(), options);
}

// The non-scoped form: puts `params` into `module` for good and returns the tensors it replaced
// (same layout as `params`), so that swap_into_module(previous, module) undoes it. Throws as
// to_module does.
//   td::TensorDict old = td::nn::swap_into_module(loaded, *model);
TensorDict swap_into_module(const TensorDict& params, torch::nn::Module& module,
                            const ToModuleOptions& options = {});

// Declares which members of module type `Impl` hold its registered tensors, so that to_module
// can re-point them. Call once (e.g. at start-up) for each of your module types that registers
// parameters or buffers itself; an empty list declares that forward() reads them by name
// (named_parameters()) only. Re-registering a type replaces its entry. Thread-safe.
//   struct ScaleImpl : torch::nn::Cloneable<ScaleImpl> {
//     at::Tensor w;
//     void reset() override { w = register_parameter("w", torch::ones({3})); }
//     at::Tensor forward(const at::Tensor& x) { return x * w; }
//   };
//   td::nn::register_tensor_members<ScaleImpl>({{"w", &ScaleImpl::w}});
template <class Impl>
void register_tensor_members(std::vector<std::pair<std::string, at::Tensor Impl::*>> members);
// The general form: `setter` is called for every swapped tensor of a module of type `type`.
void register_tensor_members(std::type_index type, TensorMemberSetter setter);
// True when to_module knows the member handles of modules of type `type`.
bool has_tensor_members(std::type_index type);

// The parameters (and buffers) of several modules with the same structure, stacked along a new
// leading dim: batch size [N] (td::stack of their from_module()). The leaves are new tensors;
// when the modules' parameters require grad, the stacked tensors carry a StackBackward history
// back to them (detach the result, or wrap it in TensorDictParams, for independent leaves).
// Throws ValueError for an empty list or a null module, KeyError naming the keys when the
// modules' parameter sets differ, c10::Error naming the key and the shapes when shapes differ.
//   std::vector<std::shared_ptr<torch::nn::Module>> members = {a.ptr(), b.ptr(), c.ptr()};
//   td::TensorDict stacked = td::nn::from_modules(members);    // batch [3]
TensorDict from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules,
                        const FromModuleOptions& options = {});
template <class... Holders>
TensorDict from_modules(const Holders&... modules) {
  return from_modules(std::vector<std::shared_ptr<torch::nn::Module>>{modules.ptr()...});
}

// ---- implementation of the template above --------------------------------------------------

namespace internal {

// The setter that assigns `Impl`'s tensor members by name (the built-in registrations use it too).
template <class Impl>
TensorMemberSetter MemberSetter(std::vector<std::pair<std::string, at::Tensor Impl::*>> members) {
  return [members = std::move(members)](torch::nn::Module& module, const std::string& name,
                                        const at::Tensor& value) {
    for (const auto& [member_name, member] : members) {
      if (member_name == name) {
        dynamic_cast<Impl&>(module).*member = value;
        return true;
      }
    }
    return false;
  };
}

}  // namespace internal

template <class Impl>
void register_tensor_members(std::vector<std::pair<std::string, at::Tensor Impl::*>> members) {
  register_tensor_members(std::type_index(typeid(Impl)),
                          internal::MemberSetter<Impl>(std::move(members)));
}

}  // namespace td::nn
