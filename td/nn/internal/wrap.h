// How TensorDictModule wraps what it is given (a module holder, a shared_ptr to a module, an
// AnyModule, a Sequential, a callable, a member function of a module) behind one run-time calling
// convention, and the all-or-nothing writes of its outputs. Included by td/nn/common.h; not an
// interface of its own.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "td/core/tensordict.h"

namespace td::nn::internal {

// Writes into one or more TensorDicts, all or nothing: entries written through a transaction that
// is destroyed before commit() are put back as they were (new nested TensorDicts removed).
class WriteTransaction {
 public:
  WriteTransaction() = default;
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  ~WriteTransaction() {
    if (!committed_) rollback();
  }
  // td.set(key, value), remembering what to undo. Throws what set() throws (the transaction
  // still undoes its earlier writes).
  void set(TensorDict td, const NestedKey& key, Value value);
  void commit() { committed_ = true; }
  void rollback() noexcept;

 private:
  struct Undo {
    TensorDict td;
    NestedKey key;
    std::optional<Value> old;
    std::optional<NestedKey> created;  // the outermost sub-TensorDict this write creates
  };
  absl::InlinedVector<Undo, 4> undo_;
  bool committed_ = false;
};

// The keys of in_keys, their argument names (empty when not named) and the order in which the
// inputs (in in_keys order) are passed to a positional module (empty: as they are).
struct ResolvedInKeys {
  std::vector<NestedKey> keys;
  std::vector<std::string> args;
  std::vector<size_t> call_order;
};
// Plain in_keys, named by `arg_names` when given. Throws ValueError when arg_names is shorter.
ResolvedInKeys ResolvePlain(std::vector<NestedKey> keys, const std::vector<std::string>& arg_names);
// {key: argument name} in_keys. `keyword`: the callable takes Kwargs (names are passed as such);
// otherwise `arg_names` lists the positional module's arguments. Throws ValueError naming a
// repeated key or name, a name arg_names lacks, missing arg_names, and an argument left out
// before one that is given.
ResolvedInKeys ResolveByName(const std::vector<std::pair<NestedKey, std::string>>& entries,
                             const std::vector<std::string>& arg_names, bool keyword);

// What the wrapped module returned: tensors in out_keys order, or a TensorDict.
struct ModuleOutput {
  std::vector<at::Tensor> tensors;
  std::optional<TensorDict> tensordict;
};
using Invoker = std::function<ModuleOutput(std::vector<at::Tensor>& inputs)>;

// An at::Tensor parameter taken by value, const reference or rvalue reference.
template <class T>
constexpr bool kTensorLike =
    std::is_same_v<std::decay_t<T>, at::Tensor> &&
    (!std::is_lvalue_reference_v<T> || std::is_const_v<std::remove_reference_t<T>>);

inline void Flatten(at::Tensor t, std::vector<at::Tensor>& out) { out.push_back(std::move(t)); }
inline void Flatten(std::vector<at::Tensor> v, std::vector<at::Tensor>& out) {
  for (auto& t : v) out.push_back(std::move(t));
}
template <class... T>
void Flatten(std::tuple<T...> t, std::vector<at::Tensor>& out);
template <class A, class B>
void Flatten(std::pair<A, B> p, std::vector<at::Tensor>& out) {
  Flatten(std::move(p.first), out);
  Flatten(std::move(p.second), out);
}
template <class... T>
void Flatten(std::tuple<T...> t, std::vector<at::Tensor>& out) {
  std::apply([&out](auto&... e) { (Flatten(std::move(e), out), ...); }, t);
}

template <class R>
ModuleOutput ToOutput(R&& r) {
  ModuleOutput o;
  if constexpr (std::is_same_v<std::decay_t<R>, TensorDict>) {
    o.tensordict = std::forward<R>(r);
  } else {
    static_assert(std::is_same_v<std::decay_t<R>, at::Tensor> ||
                      !std::is_void_v<std::decay_t<R>>,
                  "TensorDictModule: the wrapped module must return tensors or a TensorDict");
    Flatten(std::forward<R>(r), o.tensors);
  }
  return o;
}

// Converts what an AnyModule / Sequential returned (a type known only at run time).
ModuleOutput FromAnyValue(torch::nn::AnyValue&& value, const std::string& what);
// Calls `module.any_forward(inputs...)` with a run-time number of inputs (at most 8).
torch::nn::AnyValue AnyForward(torch::nn::AnyModule& module, std::vector<at::Tensor>& inputs);
// Runs a torch::nn::Sequential on a run-time number of inputs.
ModuleOutput SequentialForward(torch::nn::SequentialImpl& seq, std::vector<at::Tensor>& inputs);

template <class T>
struct FnTraits : FnTraits<decltype(&T::operator())> {};
template <class R, class... A>
struct FnTraits<R (*)(A...)> {
  using Ret = R;
  using Args = std::tuple<A...>;
  static constexpr size_t kArity = sizeof...(A);
  static constexpr bool kAllTensors = (kTensorLike<A> && ...);
};
template <class R, class... A>
struct FnTraits<R(A...)> : FnTraits<R (*)(A...)> {};
template <class C, class R, class... A>
struct FnTraits<R (C::*)(A...)> : FnTraits<R (*)(A...)> {};
template <class C, class R, class... A>
struct FnTraits<R (C::*)(A...) const> : FnTraits<R (*)(A...)> {};
template <class R, class... A>
struct FnTraits<std::function<R(A...)>> : FnTraits<R (*)(A...)> {};

template <class T, class = void>
struct HasPlainForward : std::false_type {};
template <class T>
struct HasPlainForward<T, std::void_t<decltype(&T::forward)>> : std::true_type {};

template <class F, class = void>
struct HasCallTraits : std::false_type {};
template <class F>
struct HasCallTraits<F, std::void_t<decltype(&F::operator())>> : std::true_type {};

template <class Fn, size_t... I>
ModuleOutput CallWith(Fn& fn, std::vector<at::Tensor>& in, std::index_sequence<I...>) {
  return ToOutput(fn(std::move(in[I])...));
}

// An Invoker calling impl->forward(in[0], ..., in[N-1]) directly (no AnyValue boxing).
template <class Impl>
Invoker DirectInvoker(std::shared_ptr<Impl> impl) {
  using Traits = FnTraits<decltype(&Impl::forward)>;
  return [impl = std::move(impl)](std::vector<at::Tensor>& in) {
    auto call = [&impl](auto&&... args) {
      return impl->forward(std::forward<decltype(args)>(args)...);
    };
    return CallWith(call, in, std::make_index_sequence<Traits::kArity>());
  };
}

// The pieces TensorDictModuleImpl needs from whatever it wraps.
struct Wrapped {
  std::shared_ptr<torch::nn::Module> module;  // null for callables
  Invoker invoker;
  // A Wrapped around a deep copy of `module` (null for callables): used by clone().
  std::function<Wrapped()> clone;
  // The same module behind a torch::nn::AnyModule (which fills forward()'s default arguments);
  // null when not available.
  std::function<Wrapped()> as_any;
  int64_t arity = -1;  // number of tensor arguments when known at compile time, else -1
  // forward()'s number of parameters when it may have default arguments (the AnyModule path):
  // the call-time error of a count mismatch names it. -1 when unknown.
  int64_t declared_arity = -1;
  std::string what;    // "torch::nn::Linear", "<callable>"
  // Modules a callable captured, registered as children under these names.
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> captured;
};

Wrapped WrapAny(torch::nn::AnyModule module);
Wrapped WrapSequential(std::shared_ptr<torch::nn::SequentialImpl> seq);

template <class Impl>
Wrapped WrapModule(std::shared_ptr<Impl> impl) {
  static_assert(std::is_base_of_v<torch::nn::Module, Impl>, "not a torch::nn::Module");
  if constexpr (std::is_base_of_v<torch::nn::SequentialImpl, Impl>) {
    return WrapSequential(std::move(impl));
  } else {
    static_assert(HasPlainForward<Impl>::value,
                  "TensorDictModule: the module's forward() is overloaded or a template; wrap "
                  "a lambda that calls it instead");
    using Traits = FnTraits<decltype(&Impl::forward)>;
    if constexpr (Traits::kAllTensors) {
      Wrapped w;
      w.what = impl->name();
      w.arity = static_cast<int64_t>(Traits::kArity);
      w.invoker = DirectInvoker(impl);
      w.clone = [impl] { return WrapModule(std::dynamic_pointer_cast<Impl>(impl->clone())); };
      w.as_any = [impl] {
        Wrapped any = WrapAny(torch::nn::AnyModule(impl));
        any.declared_arity = static_cast<int64_t>(Traits::kArity);
        return any;
      };
      w.module = std::move(impl);
      return w;
    } else {
      // Non-tensor parameters (e.g. LSTM's optional state): AnyModule fills defaults.
      return WrapAny(torch::nn::AnyModule(std::move(impl)));
    }
  }
}

// A member function of a module and the arguments bound after its tensor inputs (built by
// td::nn::method, td/nn/common.h).
template <class Ptr, class... Bound>
struct MethodCall {
  Ptr ptr;
  std::tuple<Bound...> bound;
};

// The module behind a module holder or a shared_ptr to a module.
template <class M>
auto SharedImpl(M&& m) {
  using D = std::decay_t<M>;
  if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, D>) {
    return m.ptr();
  } else {
    static_assert(std::is_base_of_v<torch::nn::Module, typename D::element_type>,
                  "TensorDictModule: a method needs its module as a holder or a shared_ptr");
    return std::forward<M>(m);
  }
}

template <class Traits, size_t... I>
constexpr bool LeadingTensors(std::index_sequence<I...>) {
  return (kTensorLike<std::tuple_element_t<I, typename Traits::Args>> && ...);
}

template <class Impl, class Ptr, class Tuple, size_t... I, size_t... J>
ModuleOutput CallMethod(Impl& obj, Ptr ptr, std::vector<at::Tensor>& in, const Tuple& bound,
                        std::index_sequence<I...>, std::index_sequence<J...>) {
  return ToOutput((obj.*ptr)(std::move(in[I])..., std::get<J>(bound)...));
}

// An Invoker calling (impl->*ptr)(in[0], ..., in[N-1], bound...), and a clone() that copies the
// module and keeps calling the same method with the same bound arguments.
template <class Impl, class Ptr, class... Bound>
Wrapped WrapMethod(std::shared_ptr<Impl> impl, MethodCall<Ptr, Bound...> call) {
  static_assert(std::is_member_function_pointer_v<Ptr>,
                "td::nn::method: pass a member function pointer, e.g. &NetImpl::act");
  using Traits = FnTraits<Ptr>;
  static_assert(sizeof...(Bound) <= Traits::kArity,
                "td::nn::method: more bound arguments than the method has parameters");
  constexpr size_t kTensors = Traits::kArity - sizeof...(Bound);
  static_assert(LeadingTensors<Traits>(std::make_index_sequence<kTensors>()),
                "td::nn::method: the parameters before the bound arguments must be at::Tensor");
  if (impl == nullptr) TD_FAIL(ValueError, "TensorDictModule: the module of the method is null");
  Wrapped w;
  w.what = impl->name() + " method";
  w.arity = static_cast<int64_t>(kTensors);
  w.invoker = [impl, call](std::vector<at::Tensor>& in) {
    return CallMethod(*impl, call.ptr, in, call.bound, std::make_index_sequence<kTensors>(),
                      std::index_sequence_for<Bound...>());
  };
  w.clone = [impl, call] {
    return WrapMethod(std::dynamic_pointer_cast<Impl>(impl->clone()), call);
  };
  w.module = std::move(impl);
  return w;
}

// How a callable prints (module=...): "<callable>", unless it names itself with a member
// `std::string td_callable_name() const` (script_module's callables name the scripted type).
template <class F, class = void>
struct HasCallableName : std::false_type {};
template <class F>
struct HasCallableName<F, std::void_t<decltype(std::declval<const F&>().td_callable_name())>>
    : std::true_type {};
template <class F>
std::string CallableName(const F& fn) {
  if constexpr (HasCallableName<F>::value) {
    return fn.td_callable_name();
  } else {
    return "<callable>";
  }
}

template <class F>
Wrapped WrapCallable(F fn) {
  Wrapped w;
  w.what = CallableName(fn);
  if constexpr (std::is_invocable_v<F&, const std::vector<at::Tensor>&>) {
    w.invoker = [fn = std::move(fn)](std::vector<at::Tensor>& in) mutable {
      return ToOutput(fn(static_cast<const std::vector<at::Tensor>&>(in)));
    };
  } else {
    static_assert(HasCallTraits<F>::value || std::is_pointer_v<F> || std::is_function_v<F>,
                  "TensorDictModule: cannot see the callable's arguments (a generic lambda?); "
                  "give its parameters the type at::Tensor, or take const "
                  "std::vector<at::Tensor>&");
    using Traits = FnTraits<std::conditional_t<std::is_function_v<F>, F*, F>>;
    static_assert(Traits::kAllTensors,
                  "TensorDictModule: every parameter of the callable must be an at::Tensor");
    w.arity = static_cast<int64_t>(Traits::kArity);
    w.invoker = [fn = std::move(fn)](std::vector<at::Tensor>& in) mutable {
      return CallWith(fn, in, std::make_index_sequence<Traits::kArity>());
    };
  }
  return w;
}

template <class M>
Wrapped Wrap(M&& m) {
  using D = std::decay_t<M>;
  if constexpr (std::is_same_v<D, torch::nn::AnyModule>) {
    return WrapAny(std::forward<M>(m));
  } else if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, D>) {
    return WrapModule(m.ptr());
  } else if constexpr (std::is_base_of_v<torch::nn::Module, D>) {
    static_assert(!std::is_base_of_v<torch::nn::Module, D>,
                  "TensorDictModule: pass the module as a holder or a shared_ptr, not by value");
  } else {
    return WrapCallable(std::forward<M>(m));
  }
}

template <class T>
struct IsSharedModule : std::false_type {};
template <class T>
struct IsSharedModule<std::shared_ptr<T>> : std::is_base_of<torch::nn::Module, T> {};

template <class M>
Wrapped WrapOrShared(M&& m) {
  if constexpr (IsSharedModule<std::decay_t<M>>::value) {
    return WrapModule(std::forward<M>(m));
  } else {
    return Wrap(std::forward<M>(m));
  }
}
}  // namespace td::nn::internal
