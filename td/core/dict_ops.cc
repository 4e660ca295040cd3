// TensorDict's dict verbs declared in td/core/dict_members.inc: set / update with options,
// set_at_ / get_at / update_at_, popitem / setdefault / clear, sorted keys and is_leaf listing,
// is_empty, filter_non_tensor_data, where with a pad value, fill_ of one key, and the state dict
// with batch-size / device metadata.
#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "td/core/internal/dict_util.h"
#include "td/core/internal/in_place.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::WithKeyContext;

// Depth-first listing of `td`'s entries under `prefix` following `o` (is_leaf decides leaves).
void Walk(const TensorDict& td, const NestedKey* prefix, const KeysOptions& o,
          std::vector<TensorDict::Item>* out) {
  for (TensorDict::Item& item : td.items()) {
    NestedKey key = prefix ? *prefix + item.first : item.first;
    const Value& v = item.second;
    const bool leaf = o.is_leaf() ? o.is_leaf()(v) : !v.is_tensordict();
    if (leaf || !o.leaves_only()) out->emplace_back(key, v);
    if (!leaf && v.is_tensordict() && o.include_nested()) Walk(v.tensordict(), &key, o, out);
  }
}

// The tensor under `key`, or the errors of get() (KeyError, TypeError).
at::Tensor TensorAt(const TensorDict& td, const NestedKey& key) { return td.get(key); }

}  // namespace

namespace internal {

std::vector<TensorDict::Item> ListEntries(const TensorDict& td, const KeysOptions& options) {
  std::vector<TensorDict::Item> out;
  Walk(td, nullptr, options, &out);
  if (options.sort()) {
    std::stable_sort(out.begin(), out.end(), [](const TensorDict::Item& a, const TensorDict::Item& b) {
      return a.first.join(".") < b.first.join(".");
    });
  }
  return out;
}

}  // namespace internal

// ---- set / update with options ------------------------------------------------------------

TensorDict& TensorDict::set(const NestedKey& key, Value value, const SetOptions& options) {
  if (options.inplace() && value.is_tensor()) {
    std::optional<Value> existing = find(key);
    if (existing && existing->is_tensor()) return set_(key, value.tensor());
  }
  return set(key, std::move(value));
}

TensorDict& TensorDict::update(const TensorDict& other, const UpdateOptions& options) {
  std::vector<Item> entries;
  const KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true);
  if (options.keys_to_update()) {
    const std::vector<Item> all = other.items(leaves);
    for (const NestedKey& k : *options.keys_to_update()) {
      if (!other.contains(k)) {
        TD_FAIL(KeyError, "update: key ", k.repr(), " of keys_to_update is not in the other TensorDict");
      }
      for (const Item& item : all) {
        if (item.first.starts_with(k)) entries.push_back(item);
      }
    }
  } else {
    entries = other.items(leaves);
  }
  // Check every write first (NOTE [ Leaf-wise math ]: a failing call changes nothing).
  std::vector<bool> inplace(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    Item& item = entries[i];
    if (options.clone() && item.second.is_tensor()) item.second = item.second.tensor().clone();
    std::optional<Value> mine = find(item.first);
    if (options.inplace() && mine && mine->is_tensor() && item.second.is_tensor()) {
      const at::Tensor& dst = mine->tensor();
      const at::Tensor& src = item.second.tensor();
      if (dst.sizes() != src.sizes()) {
        TD_FAIL(ValueError, "update(inplace): key ", item.first.repr(), " has shape ",
                         SizeRepr(dst.sizes()), " but the new value has shape ",
                         SizeRepr(src.sizes()));
      }
      inplace[i] = true;
    } else if (is_locked() && !mine) {
      TD_FAIL(LockedError, "update: cannot add key ", item.first.repr(),
                        " to a locked TensorDict (unlock_() first)");
    } else if (item.second.is_tensor()) {
      // The batch size of the level the tensor goes to (when that level exists already).
      std::optional<TensorDict> level;
      if (!item.first.is_nested()) {
        level = *this;
      } else if (std::optional<Value> p = find(item.first.parent()); p && p->is_tensordict()) {
        level = p->tensordict();
      }
      const at::Tensor& t = item.second.tensor();
      if (level && !internal::StartsWith(t.sizes(), level->batch_size())) {
        TD_FAIL(BatchSizeError, "update: batch size mismatch for key ", item.first.repr(),
                             ": the value's shape ", SizeRepr(t.sizes()),
                             " does not start with the batch size ",
                             SizeRepr(level->batch_size()));
      }
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (inplace[i]) {
      set_(entries[i].first, entries[i].second.tensor());
    } else {
      set(entries[i].first, entries[i].second);
    }
  }
  return *this;
}

// ---- indexed access -----------------------------------------------------------------------

TensorDict& TensorDict::set_at_(const NestedKey& key, const at::Tensor& value,
                                at::ArrayRef<at::indexing::TensorIndex> index) {
  // KeyError / TypeError come from TensorAt on the written TensorDict (td itself, or the dense
  // copy of `key` when a level is lazy: one read of a lazy entry, not two).
  WithKeyContext(key, "set_at_ of", [&] {
    internal::WriteInPlace(
        *this,
        [&](TensorDict& dst) {
          at::Tensor t = TensorAt(dst, key);
          t.index_put_(index, value);
        },
        [&] { return std::vector<NestedKey>{key}; });
  });
  return *this;
}

at::Tensor TensorDict::get_at(const NestedKey& key,
                              at::ArrayRef<at::indexing::TensorIndex> index) const {
  const at::Tensor t = TensorAt(*this, key);
  return WithKeyContext(key, "get_at of", [&] { return t.index(index); });
}

at::Tensor TensorDict::get_at(const NestedKey& key, at::ArrayRef<at::indexing::TensorIndex> index,
                              const at::Tensor& default_value) const {
  if (!contains(key)) return default_value;
  return get_at(key, index);
}

TensorDict& TensorDict::update_at_(const TensorDict& other,
                                   at::ArrayRef<at::indexing::TensorIndex> index) {
  std::vector<NestedKey> missing;
  for (const NestedKey& k : other.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!contains(k)) missing.push_back(k);
  }
  if (!missing.empty()) {
    std::string names;
    for (const NestedKey& k : missing) names += (names.empty() ? "" : ", ") + k.repr();
    TD_FAIL(KeyError, "update_at_: keys [", names,
                   "] of the other TensorDict are not in this one (update_at_ writes existing "
                   "keys only)");
  }
  return index_put_(index, other);
}

// ---- dict verbs ---------------------------------------------------------------------------

TensorDict::Item TensorDict::popitem() {
  std::vector<NestedKey> ks = keys();
  if (ks.empty()) TD_FAIL(KeyError, "popitem(): the TensorDict is empty");
  NestedKey last = ks.back();
  Value v = pop(last);
  return Item(std::move(last), std::move(v));
}

Value TensorDict::setdefault(const NestedKey& key, Value default_value) {
  if (std::optional<Value> v = find(key)) return *v;
  set(key, std::move(default_value));
  return get_value(key);
}

TensorDict& TensorDict::clear() {
  if (is_locked() && size() > 0) {
    TD_FAIL(LockedError, "clear(): cannot remove the entries of a locked TensorDict (unlock_() first)");
  }
  for (const NestedKey& k : keys()) del_(k);
  return *this;
}

std::vector<NestedKey> TensorDict::sorted_keys() const {
  return keys(KeysOptions().include_nested(true).leaves_only(true).sort(true));
}

bool TensorDict::is_empty() const {
  for (const Item& item : items()) {
    if (!item.second.is_tensordict() || !item.second.tensordict().is_empty()) return false;
  }
  return true;
}

TensorDict TensorDict::filter_non_tensor_data() const {
  TensorDict out = copy();
  for (const NestedKey& k : out.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    if (out.get_value(k).is_non_tensor()) out.del_(k);
  }
  return out;
}

TensorDict TensorDict::where(const at::Tensor& condition, const TensorDict& other,
                             const at::Scalar& pad) const {
  const KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true);
  TensorDict self_p = copy();
  TensorDict other_p = other.copy();
  for (const Item& item : other.items(leaves)) {
    if (item.second.is_tensor() && !contains(item.first)) {
      self_p.set(item.first, at::full_like(item.second.tensor(), pad));
    }
  }
  for (const Item& item : items(leaves)) {
    if (item.second.is_tensor() && !other.contains(item.first)) {
      other_p.set(item.first, at::full_like(item.second.tensor(), pad));
    }
  }
  return self_p.where(condition, other_p);
}

TensorDict& TensorDict::fill_(const NestedKey& key, const at::Scalar& value) {
  const at::Tensor t = TensorAt(*this, key);
  return set_(key, WithKeyContext(key, "fill_ of", [&] { return at::full_like(t, value); }));
}

// ---- state dict with metadata -------------------------------------------------------------

StateDict TensorDict::state_dict_with_metadata(std::string_view separator) const {
  StateDict out;
  out.tensors = state_dict(separator);
  out.metadata.insert("", LevelMetadata{batch_size().vec(), device()});
  for (const Item& item : items(KeysOptions().include_nested(true))) {
    if (!item.second.is_tensordict()) continue;
    const TensorDict& sub = item.second.tensordict();
    out.metadata.insert(item.first.join(separator),
                        LevelMetadata{sub.batch_size().vec(), sub.device()});
  }
  return out;
}

TensorDict& TensorDict::load_state_dict(const StateDict& state, bool strict,
                                        std::string_view separator) {
  for (const auto& entry : state.metadata) {
    const std::optional<at::Device>& d = entry.value().device;
    if (entry.key().empty() && d && device() && *d != *device()) {
      TD_FAIL(ValueError, "load_state_dict: the state dict was saved on device ", d->str(),
                       " but this TensorDict is on ", device()->str());
    }
  }
  load_state_dict(state.tensors, strict, separator);
  // Root first, then each nested level (whose batch size starts with its parent's).
  for (const auto& entry : state.metadata) {
    TensorDict level = *this;
    if (!entry.key().empty()) {
      std::vector<std::string> parts;
      std::string_view rest = entry.key();
      for (size_t p; (p = rest.find(separator)) != std::string_view::npos;
           rest.remove_prefix(p + separator.size())) {
        parts.emplace_back(rest.substr(0, p));
      }
      parts.emplace_back(rest);
      const NestedKey k(parts);
      if (!contains(k)) continue;
      level = get_tensordict(k);
    }
    if (level.batch_size() != at::IntArrayRef(entry.value().batch_size)) {
      level.set_batch_size(entry.value().batch_size);
    }
  }
  return *this;
}

TensorDict TensorDict::from_state_dict(const StateDict& state, std::string_view separator) {
  std::optional<at::Device> device;
  if (state.metadata.contains("")) device = state.metadata[""].device;
  TensorDict out({}, {}, device);
  out.load_state_dict(state, /*strict=*/false, separator);
  return out;
}

}  // namespace td
