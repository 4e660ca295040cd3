// TensorDictModule: a LibTorch module (or any callable) that reads its inputs from a TensorDict
// and writes its outputs back into it, and TensorDictModuleBase, the interface every TensorDict
// module implements (TensorDictSequential, the probabilistic modules, ensembles).
//
//   td::nn::TensorDictModule linear(torch::nn::Linear(3, 10), {"a"}, {"a_out"});
//   td::TensorDict data({{"a", torch::randn({5, 3})}}, {5});
//   linear(data);                                   // data now holds "a_out", shape [5, 10]
//   std::vector<at::Tensor> out = linear->forward_tensors({torch::randn({5, 3})});  // tensors in,
//                                                                                  // tensors out
//
// The wrapped object may be a module holder (torch::nn::Linear, a TORCH_MODULE of yours), a
// shared_ptr to a module, a torch::nn::AnyModule, a torch::nn::Sequential, or a callable
// (lambda, function pointer, std::function). Its arguments are the `in_keys` entries, in order;
// what it returns — one tensor, a tuple / pair / vector of tensors (nested tuples are flattened,
// so LSTM's (out, (h, c)) fills three keys), or a TensorDict — fills the `out_keys`, in order.
// The out key "_" discards that output. A TensorDictModule is a torch::nn::Module: it prints
// the wrapped module and the keys, its parameters() are the wrapped module's (so optimizers see
// them, and from_module() lists them under "module", as in Python), to(device) moves them, and
// it works inside torch::nn::Sequential (its forward takes and returns a TensorDict).
//
// Python's keyword form in_keys={"obs": "x", "hidden": "h"} (call fn(x=td["obs"], h=td["hidden"]))
// has two C++ spellings: a callable taking `const td::nn::Kwargs&` with in_keys given as
// {key, argument name} pairs, or any module with td::nn::by_name({...}) in_keys and the module's
// argument names in TensorDictModuleOptions().arg_names(...):
//   td::nn::TensorDictModule f([](const td::nn::Kwargs& kw) { return kw.at("x") - kw.at("h"); },
//                              {{"obs", "x"}, {"hidden", "h"}}, {"y"});
//   td::nn::TensorDictModule g(torch::nn::GRUCell(4, 8),
//                              td::nn::by_name({{"h0", "hx"}, {"obs", "input"}}), {"h1"},
//                              td::nn::TensorDictModuleOptions().arg_names({"input", "hx"}));
//
// Skipping modules whose outputs exist (Python's set_skip_existing): while a SetSkipExisting(true)
// scope lives on this thread (or, outside any scope, when the module's option skip_existing is
// set), a module whose out keys are all in its input is not run.
//   { td::nn::SetSkipExisting skip(true); policy(data); }
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>
#include <torch/utils.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "td/compat/module_access.h"
#include "td/core/tensordict.h"
#include "td/nn/internal/wrap.h"

namespace td::nn {

// The keyword arguments a TensorDictModule passes to a callable taking `const Kwargs&`: argument
// name -> tensor, in in_keys order (Python's fn(x=td["obs"], h=td["hidden"])).
//   td::nn::TensorDictModule m([](const td::nn::Kwargs& kw) { return kw.at("x") + kw.at("h"); },
//                              {{"obs", "x"}, {"hidden", "h"}}, {"y"});
class Kwargs {
 public:
  using Item = std::pair<std::string, at::Tensor>;
  Kwargs() = default;
  // Throws ValueError naming a name that appears twice.
  //   td::nn::Kwargs kw({{"x", at::ones({2})}, {"h", at::zeros({2})}});
  explicit Kwargs(std::vector<Item> items);
  // The tensor passed as `name`. Throws KeyError naming `name` and the arguments present.
  //   at::Tensor h = kw.at("h");
  const at::Tensor& at(std::string_view name) const;
  // The tensor passed as `name`, or nullptr.
  const at::Tensor* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // Adds the argument, or replaces the tensor of an existing one (keeping its place).
  Kwargs& set(std::string name, at::Tensor value);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // The argument names, in order.
  std::vector<std::string> names() const;
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
};

// in_keys given as {key: argument name} pairs for any module (Python's in_keys={"obs": "x"}),
// built by by_name(). A separate type because a braced {{"obs", "x"}} already means the nested
// key ("obs", "x") in every other in_keys list.
class InKeysByName {
 public:
  using Entry = std::pair<NestedKey, std::string>;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  struct Tag {
    explicit Tag() = default;
  };
  InKeysByName(Tag, std::vector<Entry> entries) : entries_(std::move(entries)) {}
  friend InKeysByName by_name(std::vector<std::pair<NestedKey, std::string>> entries);
  std::vector<Entry> entries_;
};

// in_keys by argument name: key -> the argument of the wrapped module it fills.
//   td::nn::script_module(policy, td::nn::by_name({{"obs", "x"}, {"hidden", "h"}}), {"action"});
inline InKeysByName by_name(std::vector<std::pair<NestedKey, std::string>> entries) {
  return InKeysByName(InKeysByName::Tag(), std::move(entries));
}

// A list of keys as TensorDict modules take their in_keys and out_keys: a braced list
// ({"obs", {"next", "obs"}}: two keys, the second nested), a std::vector<NestedKey>, or one key
// alone ("loc", a std::string, a NestedKey), as Python accepts out_keys="loc". A braced pair of
// strings is a list of two keys; one nested key alone is {{"next", "obs"}} or a NestedKey.
//   td::nn::TensorDictModule policy(torch::nn::Linear(4, 2), "obs", "loc");
class Keys {
 public:
  Keys() = default;
  Keys(std::initializer_list<NestedKey> keys) : keys_(keys) {}   // NOLINT
  Keys(std::vector<NestedKey> keys) : keys_(std::move(keys)) {}  // NOLINT
  Keys(NestedKey key) : keys_{std::move(key)} {}                 // NOLINT
  Keys(const char* key) : keys_{NestedKey(key)} {}               // NOLINT
  Keys(std::string key) : keys_{NestedKey(std::move(key))} {}    // NOLINT
  Keys(std::string_view key) : keys_{NestedKey(key)} {}          // NOLINT
  const std::vector<NestedKey>& keys() const { return keys_; }
  std::vector<NestedKey> take() && { return std::move(keys_); }

 private:
  std::vector<NestedKey> keys_;
};

// Whether modules skip their work when their outputs already exist, as set on this thread by the
// innermost live SetSkipExisting, or nullopt outside any.
std::optional<bool> skip_existing();

// Python's set_skip_existing: while it lives, a TensorDictModule or ProbabilisticTensorDictModule
// run on this thread whose out keys are all present in its input returns without running (a
// module whose out keys include one of its in keys always runs). TensorDictSequential checks
// each of its modules on its own. Scopes nest; SetSkipExisting(false) turns it off inside, also
// for modules built with the skip_existing option.
//   { td::nn::SetSkipExisting skip(true); seq(data); }   // only the missing outputs are computed
class SetSkipExisting {
 public:
  explicit SetSkipExisting(bool mode = true);
  ~SetSkipExisting();
  SetSkipExisting(const SetSkipExisting&) = delete;
  SetSkipExisting& operator=(const SetSkipExisting&) = delete;

 private:
  std::optional<bool> previous_;
};

// Where TensorDictModule writes its outputs.
enum class OutputMode {
  kInput,  // into the input TensorDict (the default, as in Python)
  kCopy,   // into a shallow copy of the input: the input is left unchanged
  kEmpty,  // into a new, empty TensorDict with the input's batch size and device
};

// The interface of every module that reads and writes a TensorDict.
class TensorDictModuleBase : public virtual torch::nn::Module {
 public:
  TensorDictModuleBase() = default;
  // Copies only: torch::nn::Module is a virtual base, which a defaulted move assignment would
  // move once per path to it (GCC's -Wvirtual-move-assign); td::nn::Cloneable copy-assigns.
  TensorDictModuleBase(const TensorDictModuleBase&) = default;
  TensorDictModuleBase& operator=(const TensorDictModuleBase&) = default;

  // Reads in_keys() from `td`, writes out_keys(), returns the TensorDict written to (the input
  // itself unless the module was told otherwise).
  virtual TensorDict forward(const TensorDict& td) = 0;

  // The tensor calling convention: `inputs` are the in_keys() entries, in order; returns the
  // out_keys() entries, in order (without "_"). The default builds a TensorDict with batch size
  // [] from the inputs and calls forward(). Throws ValueError when the number of inputs is not
  // the number of in_keys.
  //   std::vector<at::Tensor> out = module->forward_tensors({x});
  virtual std::vector<at::Tensor> forward_tensors(const std::vector<at::Tensor>& inputs);

  // The keys read, in the order they are passed to the wrapped module.
  const std::vector<NestedKey>& in_keys() const { return in_keys_; }
  // The keys written (after select_out_keys()).
  const std::vector<NestedKey>& out_keys() const { return out_keys_; }
  // The keys the module was built with, before select_out_keys().
  const std::vector<NestedKey>& out_keys_source() const { return out_keys_source_; }

  // Keeps only `keys` among the outputs: the others are not written (TensorDictModule) or are
  // removed after the run unless they were inputs (TensorDictSequential). Throws KeyError naming
  // a key that is not in out_keys_source().
  //   mod->select_out_keys({"d"});
  virtual TensorDictModuleBase& select_out_keys(const std::vector<NestedKey>& keys);
  // Undoes select_out_keys().
  virtual TensorDictModuleBase& reset_out_keys();

 protected:
  // Checks `keys` against out_keys_source() (see select_out_keys).
  void check_selection(const std::vector<NestedKey>& keys) const;
  // True when this module should not run on `td`: skip-existing is on (the innermost live
  // SetSkipExisting, else `module_default`), every out key but "_" is in `td`, and none of them
  // is also an in key.
  bool should_skip(const TensorDict& td, bool module_default) const;
  // When should_skip(td, module_default): copies the out keys (but "_") from `td` into `out`,
  // all or none, and returns true.
  bool skip_into(const TensorDict& td, TensorDict& out, bool module_default) const;
  // True when an output keyed `k` (one of out_keys_source()) is written: it is not "_" and
  // select_out_keys() kept it.
  bool writes_out_key(const NestedKey& k) const;
  // What forward() writes into for `mode`: `td`, a shallow copy of it, or an empty TensorDict
  // like it.
  static TensorDict OutputTarget(const TensorDict& td, OutputMode mode);

  std::vector<NestedKey> in_keys_;
  std::vector<NestedKey> out_keys_;
  std::vector<NestedKey> out_keys_source_;
};

// NOTE [ Cloning TensorDict modules ]
// The base of a TensorDict module that clone() can copy: what torch::nn::Cloneable<Derived> is to
// a torch::nn::Module. Derive `struct MyImpl : td::nn::Cloneable<MyImpl>` (not from both
// torch::nn::Cloneable and TensorDictModuleBase: from LibTorch 2.0 on, torch::nn::Cloneable has a
// non-virtual torch::nn::Module base, and the class would hold two). clone() copies the object,
// calls reset() on the copy to build fresh parameters, buffers and submodules, then copies this
// module's values into them (onto `device` when given), exactly as torch::nn::Cloneable does;
// a parent's clone() deep-copies a child that derives from this class the same way.
template <class Derived>
class Cloneable : public TensorDictModuleBase {
 public:
  // Builds the module's parameters, buffers and submodules (called on the copy by clone()).
  virtual void reset() = 0;

  std::shared_ptr<torch::nn::Module> clone(
      const compat::OptionalDevice& device = compat::OptionalDevice()) const override {
    torch::NoGradGuard no_grad;
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    compat::ParametersOf(*copy).clear();
    compat::BuffersOf(*copy).clear();
    compat::ChildrenOf(*copy).clear();
    copy->reset();
    CheckSameRegistry(*copy);
    for (const auto& item : compat::ParametersOf(*this)) {
      const at::Tensor& t = item.value();
      if (!t.defined()) continue;
      compat::ParametersOf(*copy)[item.key()].set_data(CopyOf(t, device));
    }
    for (const auto& item : compat::BuffersOf(*this)) {
      const at::Tensor& t = item.value();
      if (!t.defined()) continue;
      compat::BuffersOf(*copy)[item.key()].set_data(CopyOf(t, device));
    }
    for (const auto& item : compat::ChildrenOf(*this)) {
      compat::CloneInto(*compat::ChildrenOf(*copy)[item.key()], *item.value(), device);
    }
    return copy;
  }

 private:
  static at::Tensor CopyOf(const at::Tensor& t, const compat::OptionalDevice& device) {
    return device && t.device() != *device ? t.to(*device) : t.clone();
  }
  // reset() must rebuild what the module had, or the values have nowhere to go.
  void CheckSameRegistry(const torch::nn::Module& copy) const {
    const size_t p = compat::ParametersOf(*this).size(), b = compat::BuffersOf(*this).size(),
                 c = compat::ChildrenOf(*this).size();
    if (compat::ParametersOf(copy).size() != p || compat::BuffersOf(copy).size() != b ||
        compat::ChildrenOf(copy).size() != c) {
      TD_FAIL(c10::Error, name(), "::clone: reset() built ", compat::ParametersOf(copy).size(),
              " parameters, ", compat::BuffersOf(copy).size(), " buffers and ",
              compat::ChildrenOf(copy).size(), " submodules, but the module has ", p, ", ", b,
              " and ", c, "; reset() must register everything the module holds");
    }
  }
  // Called by a parent's clone() on the child its reset() built: becomes a copy of `other`.
  void clone_(torch::nn::Module& other, const compat::OptionalDevice& device) final {
    auto copy = std::dynamic_pointer_cast<Derived>(other.clone(device));
    if (!copy) {
      TD_FAIL(c10::Error, name(), "::clone: the submodule to copy is a ", other.name(),
              ", not a ", name());
    }
    static_cast<Derived&>(*this) = *copy;
  }
};

// How a TensorDictModule reads its in keys (Python's get_kwargs=, passed to td.get()): a default
// for missing keys, and how ragged entries (a lazy stack's, or nested-tensor leaves) are given to
// the module.
//   td::nn::TensorDictModuleOptions().get_kwargs(td::nn::GetKwargs().as_padded_tensor(true))
struct GetKwargs {
  // What a missing in key becomes when the module is not strict. Undefined (LibTorch's None)
  // unless set.
  TORCH_ARG(at::Tensor, default_value) = at::Tensor();
  // A ragged entry of a lazy stack as LazyStackedTensorDict::get_padded() gives it (padded with
  // padding_value on padding_side), a nested-tensor leaf as at::nested_to_padded_tensor();
  // regular entries are read as they are.
  TORCH_ARG(bool, as_padded_tensor) = false;
  TORCH_ARG(double, padding_value) = 0.0;
  TORCH_ARG(std::string, padding_side) = "right";
  // A lazy stack's entry as LazyStackedTensorDict::get_nestedtensor() gives it (one nested
  // tensor over the members); other entries are read as they are. LibTorch's nested tensors have
  // one layout, so upstream's layout= has no counterpart.
  TORCH_ARG(bool, as_nested_tensor) = false;
};

// How a TensorDictModule is called and where it writes.
struct TensorDictModuleOptions {
  // Where the outputs are written.
  TORCH_ARG(OutputMode, output) = OutputMode::kInput;
  // Skip the run when every out key is already in the input (see SetSkipExisting, which
  // overrides this while it lives).
  TORCH_ARG(bool, skip_existing) = false;
  // The wrapped module's argument names, in order. With by_name() in_keys they decide which key
  // fills which position; with plain in_keys they name the arguments in error messages.
  TORCH_ARG(std::vector<std::string>, arg_names) = {};
  // Python's strict=: true throws KeyError naming a missing in key; false passes
  // get_kwargs.default_value (an undefined tensor unless set) in its place. True by default,
  // where Python's default is false (see docs/porting.md).
  TORCH_ARG(bool, strict) = true;
  // How the in keys are read (Python's get_kwargs=).
  TORCH_ARG(GetKwargs, get_kwargs) = {};
};

namespace internal {

// A callable (not a module) that takes `const Kwargs&`.
// (std::conjunction: a module holder's operator() must not be instantiated with Kwargs.)
template <class D>
constexpr bool kIsKwargsCallable = std::conjunction_v<
    std::negation<std::is_base_of<torch::detail::ModuleHolderIndicator, D>>,
    std::negation<IsSharedModule<D>>, std::negation<std::is_base_of<torch::nn::Module, D>>,
    std::negation<std::is_same<D, torch::nn::AnyModule>>, std::is_invocable<D&, const Kwargs&>>;

// Kwargs{names[i]: inputs[i]}; the names are known to be distinct.
Kwargs MakeKwargs(const std::vector<std::string>& names, std::vector<at::Tensor>& inputs);

template <class F>
Wrapped WrapKwargsCallable(F fn, std::vector<std::string> names) {
  Wrapped w;
  w.what = CallableName(fn);
  w.arity = static_cast<int64_t>(names.size());
  w.invoker = [fn = std::move(fn), names = std::move(names)](std::vector<at::Tensor>& in) mutable {
    return ToOutput(fn(static_cast<const Kwargs&>(MakeKwargs(names, in))));
  };
  return w;
}

template <class M>
Wrapped WrapFor(M&& m, const ResolvedInKeys& in) {
  if constexpr (kIsKwargsCallable<std::decay_t<M>>) {
    return WrapKwargsCallable(std::forward<M>(m), in.args);
  } else {
    return WrapOrShared(std::forward<M>(m));
  }
}

template <class M>
using IfPositional = std::enable_if_t<!kIsKwargsCallable<std::decay_t<M>>>;
template <class F>
using IfKwargs = std::enable_if_t<kIsKwargsCallable<std::decay_t<F>>>;

}  // namespace internal

// Python's method= and method_kwargs=: a member function of the wrapped module, called instead
// of forward() with the in keys' tensors first and `bound` after them (upstream's method_kwargs,
// given positionally). The module stays registered (its parameters are the TensorDictModule's)
// and clone() copies it and keeps calling the method. The bound arguments' types are checked
// when the module is built (a compile error names the mismatch).
//   td::nn::TensorDictModule m(net, td::nn::method(&NetImpl::act, 2), {"obs"}, {"action"});
//   // m(data) writes net->act(data["obs"], 2) to "action"
template <class Ptr, class... Bound>
internal::MethodCall<Ptr, std::decay_t<Bound>...> method(Ptr ptr, Bound&&... bound) {
  return {ptr, std::make_tuple(std::forward<Bound>(bound)...)};
}

// A module a callable uses, with the name it is registered under (see TensorDictModuleImpl's
// constructor taking captured modules). Built from a module holder or a shared_ptr to a module.
struct CapturedModule {
  template <class M>
  CapturedModule(std::string name, const M& module)  // NOLINT: braced {"name", module}
      : name(std::move(name)) {
    if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, M>) {
      this->module = module.ptr();
    } else {
      static_assert(internal::IsSharedModule<M>::value,
                    "CapturedModule: pass a module holder or a shared_ptr to a module");
      this->module = module;
    }
  }
  std::string name;
  std::shared_ptr<torch::nn::Module> module;
};

class TensorDictModuleImpl : public Cloneable<TensorDictModuleImpl> {
 public:
  // Wraps `module` (see the file comment for what it may be). Throws ValueError when the
  // callable's or the module's number of tensor arguments is known and differs from the number
  // of in_keys, or when out_keys repeats a key.
  //   TensorDictModuleImpl(torch::nn::Linear(3, 4), {"x"}, {"y"});
  //   TensorDictModuleImpl([](at::Tensor x) { return std::make_tuple(x - 1, x + 1); },
  //                        {{"input", "x"}}, {{"output", "x-1"}, {"output", "x+1"}});
  template <class M, class = internal::IfPositional<M>>
  TensorDictModuleImpl(M&& module, Keys in_keys, Keys out_keys,
                       OutputMode output = OutputMode::kInput)
      : TensorDictModuleImpl(std::forward<M>(module), std::move(in_keys), std::move(out_keys),
                             TensorDictModuleOptions().output(output)) {}
  // The same with options (output mode, skip_existing, arg_names naming the arguments in error
  // messages). Throws ValueError as above, and when arg_names is shorter than in_keys.
  //   TensorDictModuleImpl(net, {"obs"}, {"y"}, TensorDictModuleOptions().skip_existing(true));
  template <class M, class = internal::IfPositional<M>>
  TensorDictModuleImpl(M&& module, Keys in_keys, Keys out_keys,
                       TensorDictModuleOptions options)
      : TensorDictModuleImpl(internal::WrapOrShared(std::forward<M>(module)),
                             internal::ResolvePlain(std::move(in_keys).take(), options.arg_names()),
                             std::move(out_keys).take(), options) {}
  // A callable taking `const Kwargs&`, with in_keys as {key, argument name} pairs: the call gets
  // Kwargs{name: td[key]} in this order. Throws ValueError naming a repeated key or name, or a
  // name that options.arg_names (when given) lacks.
  //   TensorDictModuleImpl([](const Kwargs& kw) { return kw.at("x") * kw.at("h"); },
  //                        {{"obs", "x"}, {"hidden", "h"}}, {"y"});
  template <class F, class = internal::IfKwargs<F>>
  TensorDictModuleImpl(F&& fn, const std::vector<std::pair<NestedKey, std::string>>& in_keys,
                       Keys out_keys, TensorDictModuleOptions options = {})
      : TensorDictModuleImpl(std::forward<F>(fn), by_name(in_keys), std::move(out_keys),
                             std::move(options)) {}
  // in_keys by argument name for any module: a Kwargs callable gets them as keyword arguments; a
  // positional module (or callable) needs its argument names in options.arg_names, which decide
  // the position each key fills whatever the order of the pairs (arguments may be left out only
  // at the end, for default arguments). in_keys() lists the keys in the order given. Throws
  // ValueError naming a repeated key or name, a name arg_names lacks, missing arg_names, an
  // argument left out before one that is given, and as the first constructor.
  //   TensorDictModuleImpl(MergeLinear(3, 4, 10), by_name({{"c", "x_2"}, {"a", "x_1"}}), {"out"},
  //                        TensorDictModuleOptions().arg_names({"x_1", "x_2"}));
  template <class M>
  TensorDictModuleImpl(M&& module, const InKeysByName& in_keys, Keys out_keys,
                       TensorDictModuleOptions options = {})
      : TensorDictModuleImpl(
            internal::ResolveByName(in_keys.entries(), options.arg_names(),
                                  internal::kIsKwargsCallable<std::decay_t<M>>),
            std::forward<M>(module), std::move(out_keys).take(), options) {}

  // Calls a member function of `module` (a module holder or a shared_ptr to a module) instead
  // of forward(): `method` is a member function pointer, or td::nn::method(pointer, bound...) to
  // pass arguments after the tensors. Throws ValueError when the method's number of tensor
  // parameters (those before the bound arguments) differs from the number of in_keys, and as the
  // first constructor.
  //   TensorDictModuleImpl(net, &NetImpl::act, {"obs"}, {"action"});
  template <class M, class Ptr, class... B>
  TensorDictModuleImpl(M&& module, internal::MethodCall<Ptr, B...> method, Keys in_keys,
                       Keys out_keys, TensorDictModuleOptions options = {})
      : TensorDictModuleImpl(
            internal::WrapMethod(internal::SharedImpl(std::forward<M>(module)), std::move(method)),
            internal::ResolvePlain(std::move(in_keys).take(), options.arg_names()),
            std::move(out_keys).take(), options) {}
  template <class M, class Ptr, class = std::enable_if_t<std::is_member_function_pointer_v<Ptr>>>
  TensorDictModuleImpl(M&& module, Ptr method, Keys in_keys, Keys out_keys,
                       TensorDictModuleOptions options = {})
      : TensorDictModuleImpl(std::forward<M>(module), internal::MethodCall<Ptr>{method, {}},
                             std::move(in_keys), std::move(out_keys), std::move(options)) {}

  // Wraps a callable that uses modules it captured, registering `modules` as children under
  // their names: parameters() lists theirs (so an optimizer built from it trains them), to()
  // moves them and from_module() sees them. Without this constructor a lambda's captured modules
  // are invisible to the TensorDictModule. Throws ValueError as the constructor above, and
  // c10::Error for a repeated or empty name. clone() of such a module throws ValueError: the
  // callable would still use the original modules.
  //   torch::nn::Linear lin(3, 4);
  //   td::nn::TensorDictModule policy({{"lin", lin}},
  //                                   [lin](at::Tensor x) mutable { return lin(x).tanh(); },
  //                                   {"obs"}, {"action"});
  //   torch::optim::SGD sgd(policy->parameters(), 0.1);   // trains lin
  template <class F>
  TensorDictModuleImpl(std::vector<CapturedModule> modules, F&& fn, Keys in_keys, Keys out_keys,
                       OutputMode output = OutputMode::kInput)
      : TensorDictModuleImpl(WithCaptured(internal::WrapCallable(std::forward<F>(fn)), modules),
                             internal::ResolvePlain(std::move(in_keys).take(), {}),
                             std::move(out_keys).take(),
                             TensorDictModuleOptions().output(output)) {}

  // Reads in_keys from `td`, calls the wrapped module, writes out_keys into the TensorDict
  // chosen by the output mode and returns it. Throws KeyError naming the missing key (and its
  // argument name, when named), the module and the keys that exist; ValueError naming out_keys
  // and the number of outputs when they differ (never truncated); BatchSizeError from the write
  // (nothing is written then: entries already written by this call are rolled back). Errors
  // thrown by the wrapped module get the module and its keys added to their message. When
  // skipping (see SetSkipExisting) the module is not called and the existing outputs stand (in
  // kCopy / kEmpty mode they are copied into the result).
  TensorDict forward(const TensorDict& td) override;
  // Like forward(), but writes into `out` (which may be `td` itself) and returns it.
  //   module->forward_into(data, out);   // Python's module(data, tensordict_out=out)
  TensorDict forward_into(const TensorDict& td, TensorDict out);
  // Calls the wrapped module on `inputs` (in_keys order) and returns the out_keys entries
  // (without "_" and the keys not selected). Throws ValueError on a count mismatch.
  //   auto outs = module->forward_tensors({at::zeros({}), at::ones({})});
  std::vector<at::Tensor> forward_tensors(const std::vector<at::Tensor>& inputs) override;

  // The wrapped module (null for a callable).
  const std::shared_ptr<torch::nn::Module>& module() const { return wrapped_.module; }
  // The argument name of each in key (by_name() / Kwargs in_keys, or options.arg_names); empty
  // when the keys are plainly positional.
  const std::vector<std::string>& in_key_args() const { return in_args_; }
  const TensorDictModuleOptions& options() const { return options_; }
  OutputMode output_mode() const { return options_.output(); }
  TensorDictModuleImpl& set_output_mode(OutputMode output) {
    options_.output(output);
    return *this;
  }
  // The module's default for skipping when its outputs exist (SetSkipExisting overrides it).
  //   module->set_skip_existing(true);
  TensorDictModuleImpl& set_skip_existing(bool skip) {
    options_.skip_existing(skip);
    return *this;
  }

  // Clones the wrapped module (used by clone(); a callable is copied).
  void reset() override;
  // td::nn::TensorDictModule(in_keys=['a'], out_keys=['b']) — the wrapped module is printed
  // as the child "module" (a callable as module=<callable>); named in keys print as
  // in_keys={'obs': 'x'}.
  void pretty_print(std::ostream& stream) const override;

 private:
  // (The options are taken by reference: the caller also reads them for the first argument.)
  template <class M>
  TensorDictModuleImpl(const internal::ResolvedInKeys& in, M&& module,
                       std::vector<NestedKey> out_keys, const TensorDictModuleOptions& options)
      : TensorDictModuleImpl(internal::WrapFor(std::forward<M>(module), in), in,
                             std::move(out_keys), options) {}
  TensorDictModuleImpl(internal::Wrapped wrapped, const internal::ResolvedInKeys& in,
                       std::vector<NestedKey> out_keys, TensorDictModuleOptions options);
  static internal::Wrapped WithCaptured(internal::Wrapped wrapped,
                                      const std::vector<CapturedModule>& modules);
  internal::ModuleOutput invoke(std::vector<at::Tensor>& inputs);
  void write(const internal::ModuleOutput& result, TensorDict& out) const;
  std::string describe() const;
  std::string in_keys_repr() const;

  internal::Wrapped wrapped_;
  TensorDictModuleOptions options_;
  std::vector<std::string> in_args_;
  std::vector<size_t> call_order_;
};

// The module holder (like torch::nn::Linear for LinearImpl), with constructors that take braced
// key lists or one key alone (td::nn::Keys):
//   td::nn::TensorDictModule m(torch::nn::Linear(3, 4), {"x"}, {"y"});
//   td::nn::TensorDictModule policy(torch::nn::Linear(4, 2), "obs", "loc");
//   td::TensorDict out = m(data);
class TensorDictModule : public torch::nn::ModuleHolder<TensorDictModuleImpl> {
 public:
  TensorDictModule(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  TensorDictModule(std::shared_ptr<TensorDictModuleImpl> impl)  // NOLINT
      : ModuleHolder(std::move(impl)) {}
  template <class M, class = internal::IfPositional<M>>
  TensorDictModule(M&& module, Keys in_keys, Keys out_keys,
                   OutputMode output = OutputMode::kInput)
      : ModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::forward<M>(module), std::move(in_keys), std::move(out_keys), output)) {}
  //   td::nn::TensorDictModule m(net, {"obs"}, {"y"},
  //                              td::nn::TensorDictModuleOptions().skip_existing(true));
  template <class M, class = internal::IfPositional<M>>
  TensorDictModule(M&& module, Keys in_keys, Keys out_keys, TensorDictModuleOptions options)
      : ModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::forward<M>(module), std::move(in_keys), std::move(out_keys),
            std::move(options))) {}
  // A Kwargs callable with {key, argument name} in_keys (Python's in_keys={"obs": "x"}):
  //   td::nn::TensorDictModule m([](const td::nn::Kwargs& kw) { return kw.at("x") + 1; },
  //                              {{"obs", "x"}}, {"y"});
  template <class F, class = internal::IfKwargs<F>>
  TensorDictModule(F&& fn, const std::vector<std::pair<NestedKey, std::string>>& in_keys,
                   Keys out_keys, TensorDictModuleOptions options = {})
      : ModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::forward<F>(fn), in_keys, std::move(out_keys), std::move(options))) {}
  // Any module with by_name() in_keys (see TensorDictModuleImpl):
  //   td::nn::TensorDictModule m(merge, td::nn::by_name({{"c", "x_2"}, {"a", "x_1"}}), {"out"},
  //                              td::nn::TensorDictModuleOptions().arg_names({"x_1", "x_2"}));
  template <class M>
  TensorDictModule(M&& module, const InKeysByName& in_keys, Keys out_keys,
                   TensorDictModuleOptions options = {})
      : ModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::forward<M>(module), in_keys, std::move(out_keys), std::move(options))) {}
  // A member function of the module instead of forward() (Python's method=, method_kwargs=):
  //   td::nn::TensorDictModule m(net, &NetImpl::act, {"obs"}, {"action"});
  //   td::nn::TensorDictModule k(net, td::nn::method(&NetImpl::shift, 2), {"obs"}, {"y"});
  template <class M, class Ptr, class... B>
  TensorDictModule(M&& module, internal::MethodCall<Ptr, B...> method, Keys in_keys,
                   Keys out_keys, TensorDictModuleOptions options = {})
      : ModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::forward<M>(module), std::move(method), std::move(in_keys), std::move(out_keys),
            std::move(options))) {}
  template <class M, class Ptr, class = std::enable_if_t<std::is_member_function_pointer_v<Ptr>>>
  TensorDictModule(M&& module, Ptr method, Keys in_keys, Keys out_keys,
                   TensorDictModuleOptions options = {})
      : ModuleHolder(std::make_shared<TensorDictModuleImpl>(
            std::forward<M>(module), internal::MethodCall<Ptr>{method, {}}, std::move(in_keys),
            std::move(out_keys), std::move(options))) {}
  // A callable using modules it captured, registered under their names (see
  // TensorDictModuleImpl).
  //   td::nn::TensorDictModule m({{"lin", lin}}, [lin](at::Tensor x) mutable { return lin(x); },
  //                              {"x"}, {"y"});
  template <class F>
  TensorDictModule(std::vector<CapturedModule> modules, F&& fn, Keys in_keys, Keys out_keys,
                   OutputMode output = OutputMode::kInput)
      : ModuleHolder(std::make_shared<TensorDictModuleImpl>(std::move(modules),
                                                            std::forward<F>(fn),
                                                            std::move(in_keys),
                                                            std::move(out_keys), output)) {}
};

// Any TensorDict module as a shared_ptr<TensorDictModuleBase>: a holder (TensorDictModule,
// TensorDictSequential, ...) or a shared_ptr to an implementation.
template <class M>
std::shared_ptr<TensorDictModuleBase> AsTensorDictModule(M&& m) {
  using D = std::decay_t<M>;
  if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, D>) {
    return m.ptr();
  } else {
    return std::forward<M>(m);
  }
}

}  // namespace td::nn
