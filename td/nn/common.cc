#include "td/nn/common.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace td::nn {
namespace {

const NestedKey& Discard() {
  static const auto* key = new NestedKey("_");
  return *key;
}

bool Contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string LeafKeys(const TensorDict& td) {
  return KeysRepr(td.keys(KeysOptions().include_nested(true).leaves_only(true)));
}

}  // namespace

// ---- TensorDictModuleBase -----------------------------------------------------------------------

std::vector<at::Tensor> TensorDictModuleBase::forward_tensors(
    const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != in_keys_.size()) {
    Fail<ValueError>(name(), ": got ", inputs.size(), " input tensor(s) but in_keys lists ",
                     in_keys_.size(), ": ", KeysRepr(in_keys_));
  }
  TensorDict td;
  for (size_t i = 0; i < inputs.size(); ++i) td.set(in_keys_[i], inputs[i]);
  const TensorDict out = forward(td);
  std::vector<at::Tensor> result;
  result.reserve(out_keys_.size());
  for (const NestedKey& k : out_keys_) {
    if (k != Discard()) result.push_back(out.get(k));
  }
  return result;
}

void TensorDictModuleBase::check_selection(const std::vector<NestedKey>& keys) const {
  for (const NestedKey& k : keys) {
    if (!Contains(out_keys_source_, k)) {
      Fail<KeyError>(name(), ": cannot select out key ", k.repr(),
                     ": it is not among the out keys ", KeysRepr(out_keys_source_));
    }
  }
}

TensorDictModuleBase& TensorDictModuleBase::select_out_keys(const std::vector<NestedKey>& keys) {
  check_selection(keys);
  std::vector<NestedKey> selected;
  for (const NestedKey& k : out_keys_source_) {
    if (Contains(keys, k) && !Contains(selected, k)) selected.push_back(k);
  }
  out_keys_ = std::move(selected);
  return *this;
}

TensorDictModuleBase& TensorDictModuleBase::reset_out_keys() {
  out_keys_ = out_keys_source_;
  return *this;
}

// ---- run-time dispatch helpers ------------------------------------------------------------------

namespace detail {

torch::nn::AnyValue AnyForward(torch::nn::AnyModule& m, std::vector<at::Tensor>& in) {
  switch (in.size()) {
    case 0:
      return m.any_forward();
    case 1:
      return m.any_forward(in[0]);
    case 2:
      return m.any_forward(in[0], in[1]);
    case 3:
      return m.any_forward(in[0], in[1], in[2]);
    case 4:
      return m.any_forward(in[0], in[1], in[2], in[3]);
    case 5:
      return m.any_forward(in[0], in[1], in[2], in[3], in[4]);
    case 6:
      return m.any_forward(in[0], in[1], in[2], in[3], in[4], in[5]);
    case 7:
      return m.any_forward(in[0], in[1], in[2], in[3], in[4], in[5], in[6]);
    case 8:
      return m.any_forward(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]);
    default:
      Fail<ValueError>("TensorDictModule: a type-erased module (AnyModule, Sequential) takes at "
                       "most 8 inputs, got ",
                       in.size(), "; wrap a callable taking const std::vector<at::Tensor>&");
  }
}

namespace {
template <class Tuple>
bool TryTuple(torch::nn::AnyValue& v, ModuleOutput& out) {
  if (auto* t = v.try_get<Tuple>()) {
    Flatten(std::move(*t), out.tensors);
    return true;
  }
  return false;
}
}  // namespace

ModuleOutput FromAnyValue(torch::nn::AnyValue&& v, const std::string& what) {
  using at::Tensor;
  ModuleOutput out;
  if (auto* t = v.try_get<Tensor>()) {
    out.tensors.push_back(std::move(*t));
    return out;
  }
  if (auto* td = v.try_get<TensorDict>()) {
    out.tensordict = std::move(*td);
    return out;
  }
  if (TryTuple<std::vector<Tensor>>(v, out) || TryTuple<std::tuple<Tensor, Tensor>>(v, out) ||
      TryTuple<std::pair<Tensor, Tensor>>(v, out) ||
      TryTuple<std::tuple<Tensor, Tensor, Tensor>>(v, out) ||
      TryTuple<std::tuple<Tensor, Tensor, Tensor, Tensor>>(v, out) ||
      TryTuple<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>>(v, out) ||
      TryTuple<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>>(v, out) ||
      TryTuple<std::tuple<Tensor, std::tuple<Tensor, Tensor>>>(v, out) ||
      TryTuple<std::tuple<Tensor>>(v, out)) {
    return out;
  }
  Fail<TypeError>("TensorDictModule: ", what, " returned a ", c10::demangle(v.type_info().name()),
                  "; expected a Tensor, a tuple, pair or vector of Tensors, or a TensorDict");
}

ModuleOutput SequentialForward(torch::nn::SequentialImpl& seq, std::vector<at::Tensor>& in) {
  if (seq.is_empty()) Fail<ValueError>("TensorDictModule: the wrapped Sequential is empty");
  auto it = seq.begin();
  torch::nn::AnyValue value = AnyForward(*it, in);
  for (++it; it != seq.end(); ++it) value = it->any_forward(std::move(value));
  return FromAnyValue(std::move(value), seq.name());
}

Wrapped WrapAny(torch::nn::AnyModule module) {
  if (module.is_empty()) Fail<ValueError>("TensorDictModule: the AnyModule is empty");
  Wrapped w;
  w.module = module.ptr();
  w.what = w.module->name();
  auto holder = std::make_shared<torch::nn::AnyModule>(std::move(module));
  w.invoker = [holder, what = w.what](std::vector<at::Tensor>& in) {
    return FromAnyValue(AnyForward(*holder, in), what);
  };
  w.clone = [holder] { return WrapAny(holder->clone()); };
  return w;
}

Wrapped WrapSequential(std::shared_ptr<torch::nn::SequentialImpl> seq) {
  Wrapped w;
  w.module = seq;
  w.what = seq->name();
  w.invoker = [seq](std::vector<at::Tensor>& in) { return SequentialForward(*seq, in); };
  w.clone = [seq] {
    return WrapSequential(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(seq->clone()));
  };
  return w;
}

}  // namespace detail

// ---- TensorDictModuleImpl -------------------------------------------------------------------------

TensorDictModuleImpl::TensorDictModuleImpl(detail::Wrapped wrapped,
                                           std::vector<NestedKey> in_keys,
                                           std::vector<NestedKey> out_keys, OutputMode output)
    : wrapped_(std::move(wrapped)), output_(output) {
  in_keys_ = std::move(in_keys);
  out_keys_source_ = std::move(out_keys);
  out_keys_ = out_keys_source_;
  for (size_t i = 0; i < out_keys_source_.size(); ++i) {
    const NestedKey& k = out_keys_source_[i];
    if (k != Discard() &&
        std::find(out_keys_source_.begin() + i + 1, out_keys_source_.end(), k) !=
            out_keys_source_.end()) {
      Fail<ValueError>("TensorDictModule: out key ", k.repr(), " appears twice in out_keys ",
                       KeysRepr(out_keys_source_));
    }
  }
  if (wrapped_.arity >= 0 && wrapped_.arity != static_cast<int64_t>(in_keys_.size())) {
    if (wrapped_.as_any && wrapped_.arity > static_cast<int64_t>(in_keys_.size())) {
      // Fewer inputs than forward() has parameters: maybe the rest have default arguments, which
      // only AnyModule knows; it checks at call time (invoke() names the in keys then).
      wrapped_ = wrapped_.as_any();
    } else {
      Fail<ValueError>("TensorDictModule: the ", wrapped_.what, " takes ", wrapped_.arity,
                       " tensor argument(s) but in_keys lists ", in_keys_.size(), ": ",
                       KeysRepr(in_keys_));
    }
  }
  if (wrapped_.module) register_module("module", wrapped_.module);
  for (const auto& [name, module] : wrapped_.captured) register_module(name, module);
}

detail::Wrapped TensorDictModuleImpl::WithCaptured(detail::Wrapped wrapped,
                                                   const std::vector<CapturedModule>& modules) {
  for (const CapturedModule& m : modules) {
    if (m.module == nullptr) {
      Fail<ValueError>("TensorDictModule: captured module '", m.name, "' is null");
    }
    wrapped.captured.emplace_back(m.name, m.module);
  }
  return wrapped;
}

std::string TensorDictModuleImpl::describe() const {
  return absl::StrCat("TensorDictModule(module=", wrapped_.what, ", in_keys=", KeysRepr(in_keys_),
                      ", out_keys=", KeysRepr(out_keys_), ")");
}

detail::ModuleOutput TensorDictModuleImpl::invoke(std::vector<at::Tensor>& inputs) {
  try {
    return wrapped_.invoker(inputs);
  } catch (c10::Error& e) {
    if (wrapped_.declared_arity >= 0) {
      e.add_context(absl::StrCat("the ", wrapped_.what, "'s forward() takes ",
                                 wrapped_.declared_arity, " tensor argument(s) (fewer only when "
                                 "the rest have default arguments); in_keys lists ",
                                 in_keys_.size(), ": ", KeysRepr(in_keys_)));
    }
    e.add_context(absl::StrCat("in ", describe()));
    throw;
  }
}

void TensorDictModuleImpl::write(const detail::ModuleOutput& r, TensorDict& out) const {
  const bool all_selected = out_keys_.size() == out_keys_source_.size();
  absl::InlinedVector<std::pair<const NestedKey*, Value>, 4> writes;
  if (r.tensordict) {
    for (const NestedKey& k : out_keys_source_) {
      if (k == Discard() || (!all_selected && !Contains(out_keys_, k))) continue;
      std::optional<Value> v = r.tensordict->find(k);
      if (!v) {
        Fail<KeyError>(describe(), " returned a TensorDict without out key ", k.repr(),
                       "; it has keys ", LeafKeys(*r.tensordict));
      }
      writes.emplace_back(&k, *std::move(v));
    }
  } else {
    if (r.tensors.size() != out_keys_source_.size()) {
      Fail<ValueError>(describe(), " returned ", r.tensors.size(), " tensor(s) but out_keys lists ",
                       out_keys_source_.size(), " key(s): ", KeysRepr(out_keys_source_),
                       "; every output needs a key (\"_\" discards one)");
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
      const NestedKey& k = out_keys_source_[i];
      if (k == Discard() || (!all_selected && !Contains(out_keys_, k))) continue;
      writes.emplace_back(&k, r.tensors[i]);
    }
  }
  // Write everything or nothing: on an error, undo the writes of this call.
  struct Undo {
    const NestedKey* key;
    std::optional<Value> old;
    std::optional<NestedKey> created;  // the outermost sub-TensorDict this write creates
  };
  absl::InlinedVector<Undo, 4> undo;
  try {
    for (auto& [key, value] : writes) {
      Undo u{key, out.find(*key), std::nullopt};
      if (!u.old && key->is_nested()) {
        for (size_t d = 1; d < key->size(); ++d) {
          NestedKey prefix(NestedKey::Parts(key->begin(), key->begin() + d));
          if (!out.contains(prefix)) {
            u.created = std::move(prefix);
            break;
          }
        }
      }
      undo.push_back(std::move(u));
      out.set(*key, std::move(value));
    }
  } catch (...) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      try {
        if (it->old) {
          out.set(*it->key, *it->old);
        } else if (it->created) {
          if (out.contains(*it->created)) out.del_(*it->created);
        } else if (out.contains(*it->key)) {
          out.del_(*it->key);
        }
      } catch (...) {
        // Undoing a write that was itself valid cannot fail; nothing more to do.
      }
    }
    throw;
  }
}

TensorDict TensorDictModuleImpl::forward(const TensorDict& td) {
  switch (output_) {
    case OutputMode::kInput:
      return forward_into(td, td);
    case OutputMode::kCopy:
      return forward_into(td, td.copy());
    case OutputMode::kEmpty:
      break;
  }
  return forward_into(td, td.empty());
}

TensorDict TensorDictModuleImpl::forward_into(const TensorDict& td, TensorDict out) {
  std::vector<at::Tensor> inputs;
  inputs.reserve(in_keys_.size());
  for (const NestedKey& k : in_keys_) {
    std::optional<Value> v = td.find(k);
    if (!v) {
      Fail<KeyError>(describe(), ": input key ", k.repr(),
                     " is missing from the TensorDict; it has keys ", LeafKeys(td));
    }
    if (!v->is_tensor()) {
      Fail<TypeError>(describe(), ": input key ", k.repr(), " is a ", v->kind(),
                      ", not a Tensor");
    }
    inputs.push_back(v->tensor());
  }
  const detail::ModuleOutput result = invoke(inputs);
  write(result, out);
  return out;
}

std::vector<at::Tensor> TensorDictModuleImpl::forward_tensors(
    const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != in_keys_.size()) {
    Fail<ValueError>(describe(), ": got ", inputs.size(), " input tensor(s) but in_keys lists ",
                     in_keys_.size());
  }
  std::vector<at::Tensor> args = inputs;
  const detail::ModuleOutput r = invoke(args);
  const bool all_selected = out_keys_.size() == out_keys_source_.size();
  std::vector<at::Tensor> result;
  if (r.tensordict) {
    for (const NestedKey& k : out_keys_) {
      if (k == Discard()) continue;
      std::optional<Value> v = r.tensordict->find(k);
      if (!v || !v->is_tensor()) {
        Fail<KeyError>(describe(), " returned a TensorDict without tensor out key ", k.repr(),
                       "; it has keys ", LeafKeys(*r.tensordict));
      }
      result.push_back(v->tensor());
    }
    return result;
  }
  if (r.tensors.size() != out_keys_source_.size()) {
    Fail<ValueError>(describe(), " returned ", r.tensors.size(), " tensor(s) but out_keys lists ",
                     out_keys_source_.size(), " key(s): ", KeysRepr(out_keys_source_));
  }
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const NestedKey& k = out_keys_source_[i];
    if (k == Discard() || (!all_selected && !Contains(out_keys_, k))) continue;
    result.push_back(r.tensors[i]);
  }
  return result;
}

void TensorDictModuleImpl::reset() {
  if (!wrapped_.captured.empty()) {
    Fail<ValueError>("TensorDictModule: cannot clone a module whose callable captured modules (",
                     wrapped_.captured.front().first,
                     ", ...): the copy's callable would still use the original modules; build a "
                     "new TensorDictModule around copies instead");
  }
  if (wrapped_.clone) {
    wrapped_ = wrapped_.clone();
    register_module("module", wrapped_.module);
  }
}

void TensorDictModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::TensorDictModule(";
  if (!wrapped_.module) stream << "module=" << wrapped_.what << ", ";
  stream << "in_keys=" << KeysRepr(in_keys_) << ", out_keys=" << KeysRepr(out_keys_) << ")";
}

}  // namespace td::nn
