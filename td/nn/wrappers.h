// Module utilities from Python's tensordict.nn: TensorDictModuleWrapper (a module that behaves as
// the TensorDict module it wraps, for subclasses that change part of it), WrapModule (a
// TensorDict -> TensorDict function as a module), reset_parameters_recursive, and dispatch, the
// C++ form of calling a module with tensors by name (Python's module(obs=..., action=...)).
//
//   td::nn::TensorDictModule actor(torch::nn::Linear(4, 2), {"obs"}, {"action"});
//   std::vector<at::Tensor> out = td::nn::dispatch(actor, {{"obs", at::randn({8, 4})}});
//   td::nn::reset_parameters_recursive(*actor);   // fresh Linear weights
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "td/nn/common.h"

namespace td::nn {

// Python's TensorDictModuleWrapper: forwards everything to the wrapped TensorDict module
// (registered as the child "td_module", so parameters() and from_module() list its parameters
// under "td_module"); in_keys() and out_keys() are its. Derive from it and override forward()
// to change what the module does around the wrapped one (torchrl's exploration wrappers do);
// override make_like() so that clone() keeps your type. Throws ValueError for a null module.
//   struct Noisy : td::nn::TensorDictModuleWrapperImpl {
//     using TensorDictModuleWrapperImpl::TensorDictModuleWrapperImpl;
//     td::TensorDict forward(const td::TensorDict& td) override {
//       td::TensorDict out = td_module()->forward(td);
//       out.set("action", out.get("action") + 0.1 * at::randn_like(out.get("action")));
//       return out;
//     }
//   };
class TensorDictModuleWrapperImpl : public TensorDictModuleBase {
 public:
  explicit TensorDictModuleWrapperImpl(std::shared_ptr<TensorDictModuleBase> td_module);
  // Any TensorDict module holder (TensorDictModule, TensorDictSequential, ...).
  template <class M, class = std::enable_if_t<
                         std::is_base_of_v<torch::detail::ModuleHolderIndicator, std::decay_t<M>>>>
  explicit TensorDictModuleWrapperImpl(const M& holder)
      : TensorDictModuleWrapperImpl(AsTensorDictModule(holder)) {}

  TensorDict forward(const TensorDict& td) override { return td_module_->forward(td); }
  std::vector<at::Tensor> forward_tensors(const std::vector<at::Tensor>& inputs) override {
    return td_module_->forward_tensors(inputs);
  }
  // Selects on the wrapped module too, and mirrors its keys.
  TensorDictModuleBase& select_out_keys(const std::vector<NestedKey>& keys) override;
  TensorDictModuleBase& reset_out_keys() override;

  const std::shared_ptr<TensorDictModuleBase>& td_module() const { return td_module_; }

  // A copy around a clone of the wrapped module (on `device` when given), built by make_like().
  std::shared_ptr<torch::nn::Module> clone(
      const td::compat::OptionalDevice& device = td::compat::kNullopt) const override;
  void pretty_print(std::ostream& stream) const override;

 protected:
  // A new wrapper of this one's type around `td_module` (used by clone()).
  virtual std::shared_ptr<TensorDictModuleWrapperImpl> make_like(
      std::shared_ptr<TensorDictModuleBase> td_module) const;
  // Copies the wrapped module's keys.
  void mirror_keys();

 private:
  std::shared_ptr<TensorDictModuleBase> td_module_;
};
TORCH_MODULE(TensorDictModuleWrapper);

struct WrapModuleOptions {
  // Write the function's result into the input (update) and return the input, when the function
  // returned another TensorDict.
  TORCH_ARG(bool, inplace) = false;
  // What the function reads and writes, declared for TensorDictSequential (not checked).
  TORCH_ARG(std::vector<NestedKey>, in_keys) = {};
  TORCH_ARG(std::vector<NestedKey>, out_keys) = {};
};

// Python's WrapModule: a TensorDict -> TensorDict function as a TensorDict module (to put a
// whole-TensorDict step, e.g. a reshape, inside a TensorDictSequential). Throws ValueError for
// an empty function.
//   td::nn::WrapModule flatten([](const td::TensorDict& td) { return td.reshape({-1}); });
class WrapModuleImpl : public Cloneable<WrapModuleImpl> {
 public:
  using Function = std::function<TensorDict(const TensorDict&)>;
  explicit WrapModuleImpl(Function fn, WrapModuleOptions options = {});
  TensorDict forward(const TensorDict& td) override;
  void reset() override {}
  void pretty_print(std::ostream& stream) const override;

 private:
  Function fn_;
  WrapModuleOptions options_;
};
TORCH_MODULE(WrapModule);

// Python's as_tensordict_module(in_keys=..., out_keys=...): a decorator turning a callable into a
// TensorDictModule. Here it returns the decorator; applying it to a function, lambda or module
// gives TensorDictModule(fn, in_keys, out_keys), with that constructor's checks and errors.
//   auto plus_one = td::nn::as_tensordict_module({"c"}, {"d"})([](at::Tensor c) { return c + 1; });
//   plus_one(data);   // writes "d"
struct TensorDictModuleDecorator {
  Keys in_keys;
  Keys out_keys;
  template <class F>
  TensorDictModule operator()(F&& fn) const {
    return TensorDictModule(std::forward<F>(fn), in_keys, out_keys);
  }
};
inline TensorDictModuleDecorator as_tensordict_module(Keys in_keys, Keys out_keys) {
  return TensorDictModuleDecorator{std::move(in_keys), std::move(out_keys)};
}

// A module of yours that reset_parameters_recursive() should reset: derive from this too.
//   struct MyImpl : torch::nn::Cloneable<MyImpl>, td::nn::ResetsParameters {
//     void reset_parameters() override { torch::nn::init::zeros_(w); }
//   };
class ResetsParameters {
 public:
  virtual ~ResetsParameters() = default;
  virtual void reset_parameters() = 0;
};

// Python's reset_parameters_recursive: calls reset_parameters() on `module` and every module
// below it that has one — LibTorch's Linear, Bilinear, Conv*/ConvTranspose*, Embedding(Bag),
// BatchNorm*/InstanceNorm*, LayerNorm, GroupNorm, RNN/LSTM/GRU and their cells,
// MultiheadAttention, td::nn::AddStateIndependentNormalScale, and modules deriving from
// ResetsParameters. Returns whether any module was reset (Python warns when none is).
//   td::nn::reset_parameters_recursive(*policy);
bool reset_parameters_recursive(torch::nn::Module& module);
template <class Impl>
bool reset_parameters_recursive(const torch::nn::ModuleHolder<Impl>& module) {
  return reset_parameters_recursive(*module.ptr());
}

// The functional form: new values for `params` (a from_module() TensorDict of `module`, batch
// size []), drawn by the same reset_parameters() calls; `module` keeps its own tensors. The
// result's leaves are detached from `params` but share its memory (as in Python: `params` is
// reset in place too), floating-point ones require grad. Throws ValueError when params has batch
// dims, and what to_module throws for a layout that does not fit the module.
//   td::TensorDict fresh = td::nn::reset_parameters_recursive(*policy, params.clone());
TensorDict reset_parameters_recursive(torch::nn::Module& module, const TensorDict& params);

struct DispatchOptions {
  // Joins the components of a nested in key into its argument name: ("a", "c") is "a_c".
  TORCH_ARG(std::string, separator) = "_";
  // The batch size of the TensorDict built from the inputs: their common leading dims
  // (auto_batch_size_()) when true, [] when false.
  TORCH_ARG(bool, auto_batch_size) = true;
};

// Tensors by argument name, in order: {{"obs", obs}, {"hidden", h}}.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Python's dispatch: runs `module` on a TensorDict built from tensors passed by argument name —
// each in key's components joined by the separator ("obs", ("next", "obs") -> "next_obs") — and
// returns its out_keys() entries (without "_"), in order. `positional` fill the first in keys,
// in order; `named` the rest. Throws KeyError naming an argument that is no in key's name (and
// the names expected) or an in key that got no tensor (and its name); ValueError when there are
// more positional tensors than in keys, or an in key gets a tensor twice; KeyError naming an out
// key the module did not write; and what the module throws.
//   std::vector<at::Tensor> out = td::nn::dispatch(policy, {{"obs", obs}, {"hidden", h}});
//   std::vector<at::Tensor> same = td::nn::dispatch(policy, {obs}, {{"hidden", h}});
std::vector<at::Tensor> dispatch(TensorDictModuleBase& module, const NamedTensors& named,
                                 const DispatchOptions& options = {});
std::vector<at::Tensor> dispatch(TensorDictModuleBase& module,
                                 const std::vector<at::Tensor>& positional,
                                 const NamedTensors& named, const DispatchOptions& options = {});
template <class Impl>
std::vector<at::Tensor> dispatch(const torch::nn::ModuleHolder<Impl>& module,
                                 const NamedTensors& named, const DispatchOptions& options = {}) {
  return dispatch(*module.ptr(), named, options);
}
template <class Impl>
std::vector<at::Tensor> dispatch(const torch::nn::ModuleHolder<Impl>& module,
                                 const std::vector<at::Tensor>& positional,
                                 const NamedTensors& named, const DispatchOptions& options = {}) {
  return dispatch(*module.ptr(), positional, named, options);
}

}  // namespace td::nn
