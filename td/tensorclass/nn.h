// td::nn modules called on TensorClasses: a TensorDictModule (or TensorDictSequential, or any
// td::nn::TensorDictModuleBase) reads its in_keys from a TensorClass's fields and writes its
// out_keys into fields, keys being field names (`{"next", "obs"}` reaches a nested class's
// field); the outputs may fill required fields the input leaves unset. Link //td/tensorclass:nn
// (it brings //td/nn).
//
//   class Transition : public td::TensorClass<Transition> {
//    public:
//     TD_TENSORCLASS(Transition, (at::Tensor, obs), (at::Tensor, action))
//   };
//   td::nn::TensorDictModule actor(torch::nn::Linear(4, 2), "obs", "action");
//   Transition data = Transition::unset({8});
//   data.set_obs(obs);
//   Transition out = td::nn::forward(*actor, data);   // out.action() is set
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "td/core/errors.h"
#include "td/core/tensordict.h"
#include "td/nn/common.h"
#include "td/tensorclass/tensorclass.h"

namespace td {
namespace internal::tensorclass {

// Appends to `missing` the required fields of D that `level` lacks (null: the whole level is
// absent) and that no key of `written` (relative to the level) writes, at the field or under it;
// a nested class written in part is looked into for its own required fields. `prefix`: the
// components leading to `level`.
template <class D>
void MissingUnlessWritten(const TensorDict* level, const std::vector<NestedKey>& written,
                          const std::vector<std::string>& prefix, std::vector<NestedKey>& missing) {
  D::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
    using T = typename decltype(tag)::type;
    using Inner = typename IsOptional<T>::Inner;
    if (level != nullptr && level->contains(key)) return;
    bool whole = false;
    std::vector<NestedKey> under;
    for (const NestedKey& k : written) {
      if (k.front() != name) continue;
      if (k.size() == 1) {
        whole = true;
      } else {
        under.emplace_back(NestedKey::Parts(k.begin() + 1, k.end()));
      }
    }
    if (whole) return;
    std::vector<std::string> here = prefix;
    here.emplace_back(name);
    if (!under.empty()) {
      // A TensorDict field (or a field of another kind, which the result's check names) is
      // filled by whatever is written under it; a class must get its own required fields.
      if constexpr (kIsTensorClass<Inner>) {
        MissingUnlessWritten<Inner>(nullptr, under, here, missing);
      }
      return;
    }
    if (FieldTraits<T>::kRequired) missing.emplace_back(here);
  });
}

}  // namespace internal::tensorclass

namespace nn {

// Runs `module` on `data`'s fields and returns the class holding the inputs and the outputs.
// The module's outputs fill fields: a required field may be unset in `data` (a class made with
// D::unset and setters) when the module writes it, at the field or, for a nested class, under
// it ({"next", "obs"}, ...). `data` itself is not modified: the module writes into a shallow
// copy (tensors shared), so a failing call leaves nothing half-written. Checked before the
// module runs: every out key starts with a field name (KeyError naming the keys that do not,
// and the fields) and every required field is either set or written (KeyError naming the
// missing fields and the out keys). The result is checked as D::from_tensordict (KeyError when
// a required field is still missing, e.g. an out key the module did not write; TypeError when
// an output lands in a non-tensor field), the message starting with "td::nn::forward".
// Throws whatever the module throws.
//   Transition step = Transition::unset({8}).set_obs(obs);   // action and next: written below
//   Transition out = td::nn::forward(*policy_and_env, step);
template <class D, std::enable_if_t<::td::internal::tensorclass::kIsTensorClass<D>, int> = 0>
D forward(TensorDictModuleBase& module, const D& data) {
  std::vector<std::string> bad;
  for (const NestedKey& k : module.out_keys()) {
    if (!D::has_field(k.front())) bad.push_back(k.repr());
  }
  std::string fields;
  for (std::string_view f : D::field_names()) {
    fields += (fields.empty() ? "'" : ", '") + std::string(f) + "'";
  }
  if (!bad.empty()) {
    std::string list;
    for (const std::string& b : bad) list += (list.empty() ? "" : ", ") + b;
    TD_FAIL(KeyError, "td::nn::forward: the module writes ", list, ", which ",
            bad.size() > 1 ? "are not fields" : "is not a field", " of ", D::kClassName,
            " (fields: [", fields, "])");
  }
  std::vector<NestedKey> missing;
  ::td::internal::tensorclass::MissingUnlessWritten<D>(&data.tensordict(), module.out_keys(), {}, missing);
  if (!missing.empty()) {
    TD_FAIL(KeyError, "td::nn::forward: ", D::kClassName, " requires ",
            missing.size() > 1 ? "fields " : "field ", KeysRepr(missing),
            ", which the input does not set and the module does not write (its out keys: ",
            KeysRepr(module.out_keys()), "); set ", missing.size() > 1 ? "them" : "it",
            " before the call, write ", missing.size() > 1 ? "them" : "it",
            " in the module, or declare ", missing.size() > 1 ? "them" : "it",
            " std::optional");
  }
  TensorDict out = module.forward(data.tensordict().copy());
  try {
    return D::from_tensordict(std::move(out));
  } catch (const KeyError& e) {
    TD_FAIL(KeyError, "td::nn::forward: the module's result is not a ", D::kClassName, ": ",
            e.what_without_backtrace());
  } catch (const TypeError& e) {
    TD_FAIL(TypeError, "td::nn::forward: the module's result is not a ", D::kClassName, ": ",
            e.what_without_backtrace());
  }
}

// The keys of D's fields, a nested class's fields expanded ({"step", "obs"}): what upstream's
// TensorClassModuleWrapper takes as in_keys / out_keys.
template <class D>
std::vector<NestedKey> tensorclass_keys() {
  std::vector<NestedKey> out;
  D::td_for_each_field([&](auto tag, std::string_view, const NestedKey& key) {
    using Inner = typename ::td::internal::tensorclass::IsOptional<typename decltype(tag)::type>::Inner;
    if constexpr (::td::internal::tensorclass::kIsTensorClass<Inner>) {
      for (const NestedKey& sub : tensorclass_keys<Inner>()) out.push_back(key + sub);
    } else {
      out.push_back(key);
    }
  });
  return out;
}

template <class In, class Out>
class TensorClassModuleWrapperImpl;
// The handle as_td_module() returns.
template <class In, class Out>
using TensorClassModuleWrapper = std::shared_ptr<TensorClassModuleWrapperImpl<In, Out>>;

// Upstream's TensorClassModuleBase[In, Out]: a module whose forward takes one TensorClass `In`
// and returns an `Out` (typed where a TensorDictModule is keyed). as_td_module() wraps it for
// TensorDict pipelines. Hold it in a std::shared_ptr (as every LibTorch module).
//   struct AddOne : td::nn::TensorClassModuleBase<Input, Output> {
//     Output forward(const Input& in) override { return Output(in.x() + 1, in.batch_size()); }
//   };
//   auto m = std::make_shared<AddOne>();
//   Output y = (*m)(input);
//   td::TensorDict out = m->as_td_module()->forward(td);   // reads "x", writes "y"
template <class In, class Out>
class TensorClassModuleBase : public torch::nn::Module {
  static_assert(::td::internal::tensorclass::kIsTensorClass<In> && ::td::internal::tensorclass::kIsTensorClass<Out>,
                "TensorClassModuleBase<In, Out>: In and Out must be td::TensorClass types");

 public:
  using InputType = In;
  using OutputType = Out;
  virtual Out forward(const In& x) = 0;
  Out operator()(const In& x) { return forward(x); }
  // A TensorDict module running this one (shared, not copied): in_keys are In's field keys,
  // out_keys Out's. Throws ValueError when this module is not held by a std::shared_ptr.
  TensorClassModuleWrapper<In, Out> as_td_module() {
    std::shared_ptr<TensorClassModuleBase> self;
    try {
      self = std::dynamic_pointer_cast<TensorClassModuleBase>(shared_from_this());
    } catch (const std::bad_weak_ptr&) {
      TD_FAIL(ValueError, "TensorClassModuleBase::as_td_module: the module must be held by a "
              "std::shared_ptr (std::make_shared<YourModule>(...))");
    }
    return std::make_shared<TensorClassModuleWrapperImpl<In, Out>>(std::move(self));
  }
};

// Upstream's TensorClassModuleWrapper: a TensorDict module around a TensorClassModuleBase. Its
// forward reads In's fields from the TensorDict (other keys are ignored; In::from_tensordict:
// KeyError naming missing fields, TypeError for a field of the wrong kind), runs the module and returns the output as a new
// TensorDict (Out's fields; the input is not written, as upstream). The module is registered
// as the child "tc_module".
template <class In, class Out>
class TensorClassModuleWrapperImpl : public TensorDictModuleBase {
 public:
  explicit TensorClassModuleWrapperImpl(std::shared_ptr<TensorClassModuleBase<In, Out>> module)
      : module_(std::move(module)) {
    if (!module_) TD_FAIL(ValueError, "TensorClassModuleWrapper: the module is null");
    register_module("tc_module", module_);
    in_keys_ = tensorclass_keys<In>();
    out_keys_ = tensorclass_keys<Out>();
    out_keys_source_ = out_keys_;
  }
  TensorDict forward(const TensorDict& td) override {
    // The input's other keys (a pipeline's) are not In's business: only its fields are read.
    std::vector<NestedKey> fields;
    for (std::string_view f : In::field_names()) fields.emplace_back(std::string(f));
    return module_->forward(In::from_tensordict(td.select(fields, /*strict=*/false))).to_tensordict();
  }
  const std::shared_ptr<TensorClassModuleBase<In, Out>>& tc_module() const { return module_; }

 private:
  std::shared_ptr<TensorClassModuleBase<In, Out>> module_;
};

}  // namespace nn
}  // namespace td
