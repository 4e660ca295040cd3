#include "td/nn/common.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "td/backends/lazy_stack/lazy_stack.h"

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

thread_local std::optional<bool> current_skip_existing;

// {'obs': 'x', ('a', 'b'): 'h'}
std::string ByNameRepr(const std::vector<NestedKey>& keys, const std::vector<std::string>& args) {
  std::string out = "{";
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", keys[i].repr(), ": '", args[i], "'");
  }
  return out + "}";
}

// `key` read from the lazy stack that holds it (`td` or a sub-TensorDict on the key's path) as
// get_kwargs asks (padded or nested), or nullopt when no lazy stack holds it.
std::optional<at::Tensor> ReadStacked(const TensorDict& td, const NestedKey& key,
                                      const GetKwargs& get) {
  TensorDict level = td;
  for (size_t d = 0; d < key.size(); ++d) {
    if (std::optional<LazyStackedTensorDict> s = LazyStackedTensorDict::from(level)) {
      const NestedKey rest(NestedKey::Parts(key.begin() + static_cast<int64_t>(d), key.end()));
      if (!s->contains(rest)) return std::nullopt;
      if (get.as_nested_tensor()) return s->get_nestedtensor(rest);
      return s->get_padded(
          rest, PadOptions().padding_value(get.padding_value()).padding_side(get.padding_side()));
    }
    if (d + 1 == key.size()) break;
    std::optional<Value> sub = level.find(NestedKey(*(key.begin() + static_cast<int64_t>(d))));
    if (!sub || !sub->is_tensordict()) return std::nullopt;
    level = sub->tensordict();
  }
  return std::nullopt;
}

}  // namespace

// ---- Kwargs -------------------------------------------------------------------------------------

Kwargs::Kwargs(std::vector<Item> items) : items_(std::move(items)) {
  for (size_t i = 0; i < items_.size(); ++i) {
    for (size_t j = i + 1; j < items_.size(); ++j) {
      if (items_[i].first == items_[j].first) {
        TD_FAIL(ValueError, "Kwargs: argument '", items_[i].first, "' is given twice");
      }
    }
  }
}

const at::Tensor* Kwargs::find(std::string_view name) const {
  for (const Item& item : items_) {
    if (item.first == name) return &item.second;
  }
  return nullptr;
}

const at::Tensor& Kwargs::at(std::string_view name) const {
  if (const at::Tensor* t = find(name)) return *t;
  TD_FAIL(KeyError, "Kwargs: no argument named '", name, "'; the arguments are ",
                 KeysRepr(names()));
}

Kwargs& Kwargs::set(std::string name, at::Tensor value) {
  for (Item& item : items_) {
    if (item.first == name) {
      item.second = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
  return *this;
}

std::vector<std::string> Kwargs::names() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const Item& item : items_) out.push_back(item.first);
  return out;
}

// ---- skip existing ------------------------------------------------------------------------------

std::optional<bool> skip_existing() { return current_skip_existing; }

SetSkipExisting::SetSkipExisting(bool mode) : previous_(current_skip_existing) {
  current_skip_existing = mode;
}

SetSkipExisting::~SetSkipExisting() { current_skip_existing = previous_; }

// ---- TensorDictModuleBase -----------------------------------------------------------------------

std::vector<at::Tensor> TensorDictModuleBase::forward_tensors(
    const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != in_keys_.size()) {
    TD_FAIL(ValueError, name(), ": got ", inputs.size(), " input tensor(s) but in_keys lists ",
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

bool TensorDictModuleBase::should_skip(const TensorDict& td, bool module_default) const {
  if (!current_skip_existing.value_or(module_default)) return false;
  for (const NestedKey& k : out_keys_) {
    if (k == Discard()) continue;
    if (Contains(in_keys_, k) || !td.contains(k)) return false;
  }
  return true;
}

bool TensorDictModuleBase::skip_into(const TensorDict& td, TensorDict& out,
                                     bool module_default) const {
  if (!should_skip(td, module_default)) return false;
  if (!out.is_same(td)) {
    internal::WriteTransaction tx;
    for (const NestedKey& k : out_keys_) {
      if (k != Discard()) tx.set(out, k, td.get_value(k));
    }
    tx.commit();
  }
  return true;
}

bool TensorDictModuleBase::writes_out_key(const NestedKey& k) const {
  return k != Discard() &&
         (out_keys_.size() == out_keys_source_.size() || Contains(out_keys_, k));
}

TensorDict TensorDictModuleBase::OutputTarget(const TensorDict& td, OutputMode mode) {
  switch (mode) {
    case OutputMode::kInput:
      return td;
    case OutputMode::kCopy:
      return td.copy();
    case OutputMode::kEmpty:
      break;
  }
  return td.empty();
}

void TensorDictModuleBase::check_selection(const std::vector<NestedKey>& keys) const {
  for (const NestedKey& k : keys) {
    if (!Contains(out_keys_source_, k)) {
      TD_FAIL(KeyError, name(), ": cannot select out key ", k.repr(),
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

namespace internal {

void WriteTransaction::set(TensorDict td, const NestedKey& key, Value value) {
  Undo u{td, key, td.find(key), std::nullopt};
  if (!u.old && key.is_nested()) {
    for (size_t d = 1; d < key.size(); ++d) {
      NestedKey prefix(NestedKey::Parts(key.begin(), key.begin() + d));
      if (!td.contains(prefix)) {
        u.created = std::move(prefix);
        break;
      }
    }
  }
  undo_.push_back(std::move(u));
  td.set(key, std::move(value));
}

void WriteTransaction::rollback() noexcept {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    try {
      TensorDict& td = it->td;
      if (it->old) {
        td.set(it->key, *it->old);
      } else if (it->created) {
        if (td.contains(*it->created)) td.del_(*it->created);
      } else if (td.contains(it->key)) {
        td.del_(it->key);
      }
    } catch (...) {
      // Undoing a write that was itself valid cannot fail; nothing more to do.
    }
  }
  undo_.clear();
}

ResolvedInKeys ResolvePlain(std::vector<NestedKey> keys,
                            const std::vector<std::string>& arg_names) {
  ResolvedInKeys r;
  if (!arg_names.empty()) {
    if (arg_names.size() < keys.size()) {
      TD_FAIL(ValueError, "TensorDictModule: arg_names ", KeysRepr(arg_names), " names ",
                       arg_names.size(), " argument(s) but in_keys lists ", keys.size(), ": ",
                       KeysRepr(keys));
    }
    r.args.assign(arg_names.begin(), arg_names.begin() + static_cast<int64_t>(keys.size()));
  }
  r.keys = std::move(keys);
  return r;
}

ResolvedInKeys ResolveByName(const std::vector<std::pair<NestedKey, std::string>>& entries,
                             const std::vector<std::string>& arg_names, bool keyword) {
  ResolvedInKeys r;
  for (const auto& [key, name] : entries) {
    for (size_t i = 0; i < r.keys.size(); ++i) {
      if (r.keys[i] == key) {
        TD_FAIL(ValueError, "TensorDictModule: in key ", key.repr(), " is given twice (as '",
                         r.args[i], "' and '", name, "')");
      }
      if (r.args[i] == name) {
        TD_FAIL(ValueError, "TensorDictModule: argument '", name, "' is filled by two in keys, ",
                         r.keys[i].repr(), " and ", key.repr());
      }
    }
    r.keys.push_back(key);
    r.args.push_back(name);
  }
  const std::string given = ByNameRepr(r.keys, r.args);
  if (!keyword && arg_names.empty()) {
    TD_FAIL(ValueError, "TensorDictModule: in_keys by argument name ", given,
                     " need the module's argument names, in order, to place them: pass "
                     "TensorDictModuleOptions().arg_names({...}) (or wrap a callable taking "
                     "const td::nn::Kwargs&)");
  }
  std::vector<size_t> position(r.args.size());
  for (size_t i = 0; i < r.args.size(); ++i) {
    if (arg_names.empty()) break;
    auto it = std::find(arg_names.begin(), arg_names.end(), r.args[i]);
    if (it == arg_names.end()) {
      TD_FAIL(ValueError, "TensorDictModule: in key ", r.keys[i].repr(), " names argument '",
                       r.args[i], "', which is not among the module's arguments ",
                       KeysRepr(arg_names));
    }
    position[i] = static_cast<size_t>(it - arg_names.begin());
  }
  if (keyword) return r;
  // Position j takes the input whose argument is arg_names[j]; the given arguments must be the
  // first r.args.size() ones (the rest may only be default arguments).
  r.call_order.assign(r.args.size(), 0);
  std::vector<bool> filled(arg_names.size(), false);
  for (size_t i = 0; i < position.size(); ++i) filled[position[i]] = true;
  for (size_t j = 0; j < r.args.size(); ++j) {
    if (!filled[j]) {
      TD_FAIL(ValueError, "TensorDictModule: argument '", arg_names[j], "' (position ", j,
                       " of ", KeysRepr(arg_names), ") gets no in key while a later argument "
                       "does; in_keys ", given, " may leave out only trailing (default) "
                       "arguments");
    }
  }
  bool identity = true;
  for (size_t i = 0; i < position.size(); ++i) {
    r.call_order[position[i]] = i;
    identity = identity && position[i] == i;
  }
  if (identity) r.call_order.clear();
  return r;
}

Kwargs MakeKwargs(const std::vector<std::string>& names, std::vector<at::Tensor>& inputs) {
  std::vector<Kwargs::Item> items;
  items.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) items.emplace_back(names[i], std::move(inputs[i]));
  return Kwargs(std::move(items));
}

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
      TD_FAIL(ValueError, "TensorDictModule: a type-erased module (AnyModule, Sequential) takes at "
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
  TD_FAIL(TypeError, "TensorDictModule: ", what, " returned a ", c10::demangle(v.type_info().name()),
                  "; expected a Tensor, a tuple, pair or vector of Tensors, or a TensorDict");
}

ModuleOutput SequentialForward(torch::nn::SequentialImpl& seq, std::vector<at::Tensor>& in) {
  if (seq.is_empty()) TD_FAIL(ValueError, "TensorDictModule: the wrapped Sequential is empty");
  auto it = seq.begin();
  torch::nn::AnyValue value = AnyForward(*it, in);
  for (++it; it != seq.end(); ++it) value = it->any_forward(std::move(value));
  return FromAnyValue(std::move(value), seq.name());
}

Wrapped WrapAny(torch::nn::AnyModule module) {
  if (module.is_empty()) TD_FAIL(ValueError, "TensorDictModule: the AnyModule is empty");
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

}  // namespace internal

// ---- TensorDictModuleImpl -------------------------------------------------------------------------

TensorDictModuleImpl::TensorDictModuleImpl(internal::Wrapped wrapped,
                                           const internal::ResolvedInKeys& in,
                                           std::vector<NestedKey> out_keys,
                                           TensorDictModuleOptions options)
    : wrapped_(std::move(wrapped)),
      options_(std::move(options)),
      in_args_(in.args),
      call_order_(in.call_order) {
  in_keys_ = in.keys;
  out_keys_source_ = std::move(out_keys);
  out_keys_ = out_keys_source_;
  for (size_t i = 0; i < out_keys_source_.size(); ++i) {
    const NestedKey& k = out_keys_source_[i];
    if (k != Discard() &&
        std::find(out_keys_source_.begin() + i + 1, out_keys_source_.end(), k) !=
            out_keys_source_.end()) {
      TD_FAIL(ValueError, "TensorDictModule: out key ", k.repr(), " appears twice in out_keys ",
                       KeysRepr(out_keys_source_));
    }
  }
  if (wrapped_.arity >= 0 && wrapped_.arity != static_cast<int64_t>(in_keys_.size())) {
    if (wrapped_.as_any && wrapped_.arity > static_cast<int64_t>(in_keys_.size())) {
      // Fewer inputs than forward() has parameters: maybe the rest have default arguments, which
      // only AnyModule knows; it checks at call time (invoke() names the in keys then).
      wrapped_ = wrapped_.as_any();
    } else {
      TD_FAIL(ValueError, "TensorDictModule: the ", wrapped_.what, " takes ", wrapped_.arity,
                       " tensor argument(s) but in_keys lists ", in_keys_.size(), ": ",
                       in_keys_repr());
    }
  }
  if (wrapped_.module) register_module("module", wrapped_.module);
  for (const auto& [name, module] : wrapped_.captured) register_module(name, module);
}

internal::Wrapped TensorDictModuleImpl::WithCaptured(internal::Wrapped wrapped,
                                                   const std::vector<CapturedModule>& modules) {
  for (const CapturedModule& m : modules) {
    if (m.module == nullptr) {
      TD_FAIL(ValueError, "TensorDictModule: captured module '", m.name, "' is null");
    }
    wrapped.captured.emplace_back(m.name, m.module);
  }
  return wrapped;
}

std::string TensorDictModuleImpl::in_keys_repr() const {
  return in_args_.empty() ? KeysRepr(in_keys_) : ByNameRepr(in_keys_, in_args_);
}

std::string TensorDictModuleImpl::describe() const {
  return absl::StrCat("TensorDictModule(module=", wrapped_.what, ", in_keys=", in_keys_repr(),
                      ", out_keys=", KeysRepr(out_keys_), ")");
}

internal::ModuleOutput TensorDictModuleImpl::invoke(std::vector<at::Tensor>& inputs) {
  try {
    if (!call_order_.empty()) {
      // by_name() in_keys of a positional module: position j takes input call_order_[j].
      std::vector<at::Tensor> args;
      args.reserve(call_order_.size());
      for (size_t i : call_order_) args.push_back(std::move(inputs[i]));
      return wrapped_.invoker(args);
    }
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

void TensorDictModuleImpl::write(const internal::ModuleOutput& r, TensorDict& out) const {
  absl::InlinedVector<std::pair<const NestedKey*, Value>, 4> writes;
  if (r.tensordict) {
    for (const NestedKey& k : out_keys_source_) {
      if (!writes_out_key(k)) continue;
      std::optional<Value> v = r.tensordict->find(k);
      if (!v) {
        TD_FAIL(KeyError, describe(), " returned a TensorDict without out key ", k.repr(),
                       "; it has keys ", LeafKeys(*r.tensordict));
      }
      writes.emplace_back(&k, *std::move(v));
    }
  } else {
    if (r.tensors.size() != out_keys_source_.size()) {
      TD_FAIL(ValueError, describe(), " returned ", r.tensors.size(), " tensor(s) but out_keys lists ",
                       out_keys_source_.size(), " key(s): ", KeysRepr(out_keys_source_),
                       "; every output needs a key (\"_\" discards one)");
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
      const NestedKey& k = out_keys_source_[i];
      if (!writes_out_key(k)) continue;
      writes.emplace_back(&k, r.tensors[i]);
    }
  }
  // Write everything or nothing: on an error, undo the writes of this call.
  internal::WriteTransaction tx;
  for (auto& [key, value] : writes) tx.set(out, *key, std::move(value));
  tx.commit();
}

TensorDict TensorDictModuleImpl::forward(const TensorDict& td) {
  return forward_into(td, OutputTarget(td, options_.output()));
}

TensorDict TensorDictModuleImpl::forward_into(const TensorDict& td, TensorDict out) {
  if (skip_into(td, out, options_.skip_existing())) return out;
  const GetKwargs& get = options_.get_kwargs();
  std::vector<at::Tensor> inputs;
  inputs.reserve(in_keys_.size());
  std::vector<NestedKey> missing;
  for (size_t i = 0; i < in_keys_.size(); ++i) {
    const NestedKey& k = in_keys_[i];
    auto arg = [&] {
      return in_args_.empty() ? std::string() : absl::StrCat(" (argument '", in_args_[i], "')");
    };
    if (get.as_padded_tensor() || get.as_nested_tensor()) {
      if (std::optional<at::Tensor> t = ReadStacked(td, k, get)) {
        inputs.push_back(*std::move(t));
        continue;
      }
    }
    std::optional<Value> v = td.find(k);
    if (!v) {
      if (options_.strict()) {
        TD_FAIL(KeyError, describe(), ": input key ", k.repr(), arg(),
                " is missing from the TensorDict; it has keys ", LeafKeys(td),
                " (TensorDictModuleOptions().strict(false) passes a missing input as "
                "get_kwargs.default_value, an undefined tensor unless set)");
      }
      missing.push_back(k);
      inputs.push_back(get.default_value());
      continue;
    }
    if (!v->is_tensor()) {
      TD_FAIL(TypeError, describe(), ": input key ", k.repr(), arg(), " is a ", v->kind(),
                      ", not a Tensor");
    }
    at::Tensor t = v->tensor();
    if (get.as_padded_tensor() && t.is_nested()) {
      if (get.padding_side() != "right") {
        TD_FAIL(ValueError, describe(), ": input key ", k.repr(), arg(),
                " is a nested tensor, which pads only on the right; get_kwargs.padding_side is '",
                get.padding_side(), "'");
      }
      t = at::nested_to_padded_tensor(t, get.padding_value());
    }
    inputs.push_back(std::move(t));
  }
  if (missing.empty()) {
    write(invoke(inputs), out);
    return out;
  }
  try {
    write(invoke(inputs), out);
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("the in keys ", KeysRepr(missing),
                               " are missing from the input TensorDict (strict(false) passed ",
                               get.default_value().defined() ? "get_kwargs.default_value"
                                                             : "undefined tensors",
                               " in their place)"));
    throw;
  }
  return out;
}

std::vector<at::Tensor> TensorDictModuleImpl::forward_tensors(
    const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != in_keys_.size()) {
    TD_FAIL(ValueError, describe(), ": got ", inputs.size(), " input tensor(s) but in_keys lists ",
                     in_keys_.size());
  }
  std::vector<at::Tensor> args = inputs;
  const internal::ModuleOutput r = invoke(args);
  std::vector<at::Tensor> result;
  if (r.tensordict) {
    for (const NestedKey& k : out_keys_) {
      if (k == Discard()) continue;
      std::optional<Value> v = r.tensordict->find(k);
      if (!v || !v->is_tensor()) {
        TD_FAIL(KeyError, describe(), " returned a TensorDict without tensor out key ", k.repr(),
                       "; it has keys ", LeafKeys(*r.tensordict));
      }
      result.push_back(v->tensor());
    }
    return result;
  }
  if (r.tensors.size() != out_keys_source_.size()) {
    TD_FAIL(ValueError, describe(), " returned ", r.tensors.size(), " tensor(s) but out_keys lists ",
                     out_keys_source_.size(), " key(s): ", KeysRepr(out_keys_source_));
  }
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const NestedKey& k = out_keys_source_[i];
    if (!writes_out_key(k)) continue;
    result.push_back(r.tensors[i]);
  }
  return result;
}

void TensorDictModuleImpl::reset() {
  if (!wrapped_.captured.empty()) {
    TD_FAIL(ValueError, "TensorDictModule: cannot clone a module whose callable captured modules (",
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
  stream << "in_keys=" << in_keys_repr() << ", out_keys=" << KeysRepr(out_keys_) << ")";
}

}  // namespace td::nn
