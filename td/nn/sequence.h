// TensorDictSequential: runs TensorDict modules in order on one TensorDict, each reading what
// the previous ones (or the caller) wrote.
//
//   td::nn::TensorDictSequential seq(
//       td::nn::TensorDictModule([](at::Tensor x) { return x + 1; }, {"x"}, {"x+1"}),
//       td::nn::TensorDictModule(torch::nn::Linear(3, 4), {"x+1"}, {"w*(x+1)+b"}));
//   seq(td::TensorDict({{"x", torch::zeros({3})}}, {}));   // writes "x+1" and "w*(x+1)+b"
//   seq->in_keys();    // ['x']               (read before any module writes them)
//   seq->out_keys();   // ['x+1', 'w*(x+1)+b'] (every written key, once)
//
// The modules are registered under "module" as a torch::nn::ModuleList (as in Python), so
// from_module(seq) lists parameters under {"module", "<index>", ...}. Like torch::nn::Sequential,
// clone() deep-copies every module.
//
// With partial_tolerant, a module whose in keys are not all in the TensorDict is skipped — unless
// the TensorDict is a lazy stack (td::lazy_stack): then the module runs on each stacked
// TensorDict that holds all its in keys and writes there, as in Python.
//   auto s = td::lazy_stack({with_obs, without_obs});
//   tolerant(s);   // modules reading "obs" run on the first member only
#pragma once

#include <torch/nn/modules/container/modulelist.h>

#include <memory>
#include <optional>
#include <ostream>
#include <utility>
#include <vector>

#include "td/nn/common.h"

namespace td::nn {

// Where TensorDictSequential::forward writes (upstream's inplace=).
enum class SequentialOutput {
  kModules,  // inplace=None: what the modules do (a TensorDictModule writes into its input)
  kInput,    // inplace=True: the input TensorDict, which forward returns
  kNew,      // inplace=False: a new TensorDict of batch size [] holding the out keys only
  kEmpty,    // inplace="empty": input.empty() (same batch size and device) with the out keys
};

struct TensorDictSequentialOptions {
  // Skip the modules whose in_keys are not all present, instead of failing (on a lazy stack: run
  // them on the members that hold them all).
  TORCH_ARG(bool, partial_tolerant) = false;
  // Keep only these out keys (see TensorDictModuleBase::select_out_keys).
  TORCH_ARG(std::optional<std::vector<NestedKey>>, selected_out_keys) = std::nullopt;
  // kNew and kEmpty leave the input unchanged (forward_into a new TensorDict).
  TORCH_ARG(SequentialOutput, inplace) = SequentialOutput::kModules;
};

class TensorDictSequential;

class TensorDictSequentialImpl : public TensorDictModuleBase {
 public:
  // Throws ValueError when a module is null, KeyError when a selected out key is not written
  // by any module.
  explicit TensorDictSequentialImpl(std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
                                    TensorDictSequentialOptions options = {});

  // Runs every module in order on `td` (each gets what the previous returned) and returns the
  // result. With partial_tolerant, modules with a missing input are skipped (on a lazy stack, run
  // on the members that hold their inputs; all of them write, or none). Errors of a module get
  // its index added to their message.
  TensorDict forward(const TensorDict& td) override;
  // Python's seq(td, tensordict_out=out): runs the chain reading from `td` and writes every
  // out key (the selected ones) into `out`, which it returns. `td` is left unchanged unless
  // `out` is `td` (then this is forward(td)). Keys a skipped module did not produce are not
  // written; on a lazy-stack input, keys written into only some members go into the matching
  // members of `out` when it is a lazy stack of as many members. On an error `out` is unchanged.
  //   td::TensorDict out = seq->forward_into(data, data.empty());
  TensorDict forward_into(const TensorDict& td, TensorDict out);

  // Number of modules, the i-th one (throws IndexError naming i and size()), and all of them.
  size_t size() const { return modules_.size(); }
  std::shared_ptr<TensorDictModuleBase> operator[](size_t i) const;
  const std::vector<std::shared_ptr<TensorDictModuleBase>>& modules() const { return modules_; }
  // Adds a module at the end and recomputes in_keys/out_keys.
  //   seq->append(td::nn::TensorDictModule(torch::nn::ReLU(), {"y"}, {"z"}));
  template <class M>
  void append(M&& module) {
    append_module(AsTensorDictModule(std::forward<M>(module)));
  }
  void append_module(std::shared_ptr<TensorDictModuleBase> module);

  bool partial_tolerant() const { return options_.partial_tolerant(); }

  // The minimal sub-pipeline that computes `out_keys` from `in_keys` (each defaults to this
  // module's own): a module is kept when one of its inputs depends on `in_keys` and one of its
  // outputs is needed for `out_keys`; nested sequences are reduced the same way. The modules
  // are shared with this one, not copied. Throws ValueError when no module is left.
  //   seq->select_subsequence(std::nullopt, std::vector<td::NestedKey>{"c"});
  TensorDictSequential select_subsequence(
      std::optional<std::vector<NestedKey>> in_keys = std::nullopt,
      std::optional<std::vector<NestedKey>> out_keys = std::nullopt) const;

  TensorDictModuleBase& select_out_keys(const std::vector<NestedKey>& keys) override;
  TensorDictModuleBase& reset_out_keys() override;

  // A deep copy: every module cloned, same options.
  std::shared_ptr<torch::nn::Module> clone(
      const td::compat::OptionalDevice& device = td::compat::kNullopt) const override;
  // td::nn::TensorDictSequential(in_keys=[...], out_keys=[...]), then the modules.
  void pretty_print(std::ostream& stream) const override;

 protected:
  // A new module of this one's type around `modules` (same options): used by clone().
  virtual std::shared_ptr<TensorDictSequentialImpl> make_like(
      std::vector<std::shared_ptr<TensorDictModuleBase>> modules) const;
  void recompute_keys();
  // Runs module i on `td` (partial_tolerant and lazy stacks as in forward()), adding the
  // module's index to its errors; returns what the next module reads.
  TensorDict run_module(size_t i, const TensorDict& td);
  // Runs modules [0, end) in order from `td`.
  TensorDict run_chain(TensorDict td, size_t end);

  std::vector<std::shared_ptr<TensorDictModuleBase>> modules_;
  torch::nn::ModuleList list_;
  TensorDictSequentialOptions options_;
};

// The module holder. Modules may be given one by one (holders or shared_ptrs):
//   td::nn::TensorDictSequential seq(m1, m2, m3);
//   td::nn::TensorDictSequential tolerant(
//       td::nn::TensorDictSequentialOptions().partial_tolerant(true), m1, m2);
class TensorDictSequential : public torch::nn::ModuleHolder<TensorDictSequentialImpl> {
 public:
  TensorDictSequential(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  TensorDictSequential(std::shared_ptr<TensorDictSequentialImpl> impl)  // NOLINT
      : ModuleHolder(std::move(impl)) {}
  TensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
                       TensorDictSequentialOptions options = {})
      : ModuleHolder(std::make_shared<TensorDictSequentialImpl>(std::move(modules),
                                                                std::move(options))) {}
  template <class First, class... Rest,
            class = std::enable_if_t<
                !std::is_same_v<std::decay_t<First>, TensorDictSequentialOptions> &&
                !std::is_same_v<std::decay_t<First>, std::nullptr_t> &&
                !(sizeof...(Rest) == 0 &&
                  std::is_same_v<std::decay_t<First>, TensorDictSequential>) &&
                !std::is_same_v<std::decay_t<First>,
                                std::vector<std::shared_ptr<TensorDictModuleBase>>> &&
                !std::is_same_v<std::decay_t<First>, std::shared_ptr<TensorDictSequentialImpl>>>>
  explicit TensorDictSequential(First&& first, Rest&&... rest)
      : TensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>>{
            AsTensorDictModule(std::forward<First>(first)),
            AsTensorDictModule(std::forward<Rest>(rest))...}) {}
  template <class... M>
  explicit TensorDictSequential(TensorDictSequentialOptions options, M&&... modules)
      : TensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>>{
                                 AsTensorDictModule(std::forward<M>(modules))...},
                             std::move(options)) {}
};

}  // namespace td::nn
