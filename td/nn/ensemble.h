// Ensembles: run one module for every member of a stacked parameter TensorDict (from_modules)
// and stack the results — all members at once through td::vmap (td/functional/vmap.h), for any
// module, or member by member.
//
//   td::TensorDict stacked = td::nn::from_modules(m0, m1, m2);            // batch [3]
//   at::Tensor y = td::nn::ensemble_forward(m0, stacked, x);                // [3, *x[:-1], out]
//   at::Tensor z = td::nn::ensemble_map(stacked, *m0, [&] { return m0->forward(x); });
//
//   td::nn::EnsembleModule ensemble(std::vector<td::nn::TensorDictModule>{a, b, c});
//   ensemble(data);   // batch [B] -> [3, B]; the members' parameters are ensemble->parameters()
//
// Gradients: the members' parameters are used as they are (slices of the stacked tensors, or the
// stacked tensors themselves seen one member at a time inside vmap), so backward() reaches the
// stacked TensorDict — its leaves, or through from_modules' stack the modules it was built from
// (see NOTE [ Swapping tensors into LibTorch modules ]). Random operations (dropout, sampling)
// draw independently for each member in both paths.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "td/core/dtype.h"
#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/functional/vmap.h"
#include "td/nn/common.h"
#include "td/nn/functional.h"
#include "td/nn/params.h"

namespace td::nn {

// Calls fn() once per member of `stacked_params` (batch size [N, ...]; member i is
// stacked_params.index({i})) with that member's tensors swapped into `module`, and stacks the
// results along a new dim 0: at::stack for tensors, td::stack for TensorDicts. Throws ValueError
// when `stacked_params` has no batch dim, and what to_module and fn throw.
//   at::Tensor y = td::nn::ensemble_map(stacked, *model, [&] { return model->forward(x); });
template <class Fn>
auto ensemble_map(const TensorDict& stacked_params, torch::nn::Module& module, Fn&& fn);

struct EnsembleOptions {
  // Run all members in one td::vmap call (any module; see docs/functional.md for the layers
  // LibTorch batches natively); false: loop over the members (ensemble_map).
  TORCH_ARG(bool, batched) = true;
  // `x` holds one input per member along dim 0 ([N, ...]) instead of one input shared by all.
  TORCH_ARG(bool, per_member_input) = false;
};

// Runs the module held by `module` (a holder like torch::nn::Sequential, whose forward takes one
// tensor) for every member of `stacked_params` on `x` and returns the outputs stacked: [N, ...].
// All members at once through td::vmap unless EnsembleOptions::batched is false (or the module
// uses an op LibTorch cannot run inside vmap: then member by member). Throws
// ValueError when `stacked_params` has no batch dim or per_member_input is set and x's dim 0 is
// not N, and what the module throws.
template <class Holder>
at::Tensor ensemble_forward(Holder module, const TensorDict& stacked_params,
                            const at::Tensor& x, const EnsembleOptions& options = {});

// A TensorDict module running N copies of one TensorDict module (parameters stacked and
// registered as a TensorDictParams child "params_td", so optimizers train every member). The
// input TensorDict (batch B) is expanded to [N, *B] (views, no copy) and each member's outputs
// are stacked under the module's out_keys. All members run in one td::vmap call over the
// stacked parameters (the input shared), unless EnsembleOptions::batched is false.
class EnsembleModuleImpl : public Cloneable<EnsembleModuleImpl> {
 public:
  // Members built independently (so they start from different initializations): the first one
  // runs the computation, every member contributes its parameters. Throws ValueError for an
  // empty list and from_modules' errors when the members differ.
  explicit EnsembleModuleImpl(std::vector<std::shared_ptr<TensorDictModuleBase>> members,
                              EnsembleOptions options = {});
  // `num_copies` copies of `module`'s current parameters (all members start equal).
  EnsembleModuleImpl(std::shared_ptr<TensorDictModuleBase> module, int64_t num_copies,
                     EnsembleOptions options = {});

  TensorDict forward(const TensorDict& td) override;
  // The stacked parameters (the registered leaves; batch [N]).
  TensorDict params() const { return params_->params(); }
  int64_t num_members() const { return num_members_; }
  // Upstream's EnsembleModule.reset_parameters_recursive: draws fresh parameters for every
  // member, each its own draw (reset_parameters_recursive of td/nn/wrappers.h on the module,
  // member by member), written in place into the registered stacked tensors (optimizers keep
  // them). Returns params(). Members that hold no resettable module keep their values.
  TensorDict reset_parameters_recursive();
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

 private:
  void init(TensorDict stacked);
  std::shared_ptr<TensorDictModuleBase> module_;  // runs every member; not registered
  TensorDictParams params_{nullptr};
  TensorDict initial_;
  int64_t num_members_ = 0;
  EnsembleOptions options_;
};

class EnsembleModule : public torch::nn::ModuleHolder<EnsembleModuleImpl> {
 public:
  EnsembleModule(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  EnsembleModule(std::shared_ptr<EnsembleModuleImpl> impl)  // NOLINT
      : ModuleHolder(std::move(impl)) {}
  template <class M>
  EnsembleModule(const std::vector<M>& members, EnsembleOptions options = {})
      : ModuleHolder(std::make_shared<EnsembleModuleImpl>(ToBases(members), options)) {}
  template <class M>
  EnsembleModule(M&& module, int64_t num_copies, EnsembleOptions options = {})
      : ModuleHolder(std::make_shared<EnsembleModuleImpl>(
            AsTensorDictModule(std::forward<M>(module)), num_copies, options)) {}

 private:
  template <class M>
  static std::vector<std::shared_ptr<TensorDictModuleBase>> ToBases(const std::vector<M>& ms) {
    std::vector<std::shared_ptr<TensorDictModuleBase>> out;
    for (const M& m : ms) out.push_back(AsTensorDictModule(m));
    return out;
  }
};

// ---- implementation of the templates above ---------------------------------------------------

namespace internal {
// Member i of a stacked TensorDict (views), checking that there is a batch dim.
std::vector<TensorDict> EnsembleMembers(const TensorDict& stacked_params);
// The number of members (batch dim 0); ValueError when there is no batch dim.
int64_t EnsembleSize(const TensorDict& stacked_params);
// Whether `e` is LibTorch refusing an op inside vmap that it can neither batch nor run member by
// member (LSTMCell's aten::lstm_cell, see docs/functional.md): the ensemble then loops.
bool IsUnbatchable(const c10::Error& e);
}  // namespace internal

template <class Fn>
auto ensemble_map(const TensorDict& stacked_params, torch::nn::Module& module, Fn&& fn) {
  using R = std::decay_t<decltype(fn())>;
  static_assert(std::is_same_v<R, at::Tensor> || std::is_same_v<R, TensorDict>,
                "ensemble_map: fn must return an at::Tensor or a td::TensorDict");
  const std::vector<TensorDict> members = internal::EnsembleMembers(stacked_params);
  std::vector<R> results;
  results.reserve(members.size());
  for (const TensorDict& member : members) {
    ModuleParamsGuard guard = to_module(member, module);
    results.push_back(fn());
  }
  if constexpr (std::is_same_v<R, at::Tensor>) {
    return at::stack(results, 0);
  } else {
    return stack(results, 0);
  }
}

template <class Holder>
at::Tensor ensemble_forward(Holder module, const TensorDict& stacked_params,
                            const at::Tensor& x, const EnsembleOptions& options) {
  const int64_t n = internal::EnsembleSize(stacked_params);
  if (options.per_member_input() && (x.dim() == 0 || x.size(0) != n)) {
    TD_FAIL(ValueError, "ensemble_forward: per_member_input needs x with ", n,
                     " (members) as its dim 0; got x of shape ", SizeRepr(x.sizes()));
  }
  if (options.batched()) {
    auto run = [&module](const at::Tensor& input, const TensorDict& member) {
      ModuleParamsGuard guard = to_module(member, *module.ptr());
      return module->forward(input);
    };
    try {
      return vmap(run, {options.per_member_input() ? InDim(0) : InDim(kNone), 0}, 0,
                  VmapOptions().randomness(Randomness::kDifferent))(x, stacked_params);
    } catch (const c10::Error& e) {
      if (!internal::IsUnbatchable(e)) throw;
    }
  }
  int64_t i = 0;
  return ensemble_map(stacked_params, *module.ptr(), [&] {
    return module->forward(options.per_member_input() ? x[i++] : x);
  });
}

}  // namespace td::nn
