// TensorDict's dict verbs beyond tensordict.cc (declared in td/core/ops.def): set_at_ / get_at /
// update_at_, copy_ / copy_at_, popitem / setdefault / clear, create_nested, filter_empty_,
// replace, separates, sorted keys and the is_leaf listing, is_empty, filter_non_tensor_data,
// non_tensor_items and the tensors joined along a dim (cat_tensors, stack_tensors,
// cat_from_tensordict, stack_from_tensordict).
#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "td/core/internal/dict_util.h"
#include "td/core/internal/entry_list.h"
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
at::Tensor TensorAt(const TensorDict& td, const KeyRef& key) { return td.get(key); }

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

// ---- indexed access -----------------------------------------------------------------------

TensorDict& TensorDict::set_at_(KeyRef key, const at::Tensor& value,
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
        [&] { return std::vector<NestedKey>{key.key()}; });
  });
  return *this;
}

at::Tensor TensorDict::get_at(KeyRef key,
                              at::ArrayRef<at::indexing::TensorIndex> index) const {
  const at::Tensor t = TensorAt(*this, key);
  return WithKeyContext(key, "get_at of", [&] { return t.index(index); });
}

at::Tensor TensorDict::get_at(KeyRef key, at::ArrayRef<at::indexing::TensorIndex> index,
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

TensorDict TensorDict::fromkeys(const std::vector<NestedKey>& keys, const Value& value) {
  TensorDict out;
  for (const NestedKey& k : keys) out.set(k, value);
  return out;
}

TensorDict& TensorDict::copy_(const TensorDict& other) { return update_(other); }

TensorDict& TensorDict::copy_at_(const TensorDict& other,
                                 at::ArrayRef<at::indexing::TensorIndex> index) {
  // Every key, kind and indexed shape first; index_put_ then writes (and checks again).
  std::vector<NestedKey> missing;
  for (const Item& item : other.items(KeysOptions().include_nested(true).leaves_only(true))) {
    std::optional<Value> dest = find(item.first);
    if (!dest) {
      missing.push_back(item.first);
      continue;
    }
    if (!item.second.is_tensor()) continue;  // non-tensor data: index_put_ checks it is equal
    if (!dest->is_tensor()) {
      TD_FAIL(TypeError, "copy_at_: the entry ", item.first.repr(), " of the destination is ",
              dest->kind(), ", the source's is a Tensor");
    }
    const at::Tensor target = WithKeyContext(item.first, "indexing",
                                             [&] { return dest->tensor().index(index); });
    if (target.sizes() != item.second.tensor().sizes()) {
      TD_FAIL(ValueError, "copy_at_: the source's ", item.first.repr(), " has shape ",
              item.second.tensor().sizes(), ", the destination at the index has shape ",
              target.sizes(), " (copy_at_ does not broadcast; update_at_ does)");
    }
  }
  if (!missing.empty()) {
    TD_FAIL(KeyError, "copy_at_: keys ", KeysRepr(missing),
            " of the source are not in this TensorDict (copy_at_ writes existing keys only)");
  }
  return index_put_(index, other);
}

// ---- dict verbs ---------------------------------------------------------------------------

TensorDict& TensorDict::create_nested(KeyRef key) {
  if (is_locked()) {
    TD_FAIL(LockedError, "create_nested(", key.repr(), "): the TensorDict is locked (unlock_() first)");
  }
  TensorDict level = *this;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    std::optional<Value> v = level.find(key[i]);
    if (!v || !v->is_tensordict()) {
      level.set(key[i], TensorDict({}, level.batch_size(), level.device()));
      v = level.find(key[i]);
    }
    level = v->tensordict();
  }
  level.set(key.back(), TensorDict({}, level.batch_size(), level.device()));
  return *this;
}

TensorDict& TensorDict::filter_empty_() {
  // The outermost nested TensorDicts without a leaf (their empty children go with them).
  std::vector<NestedKey> empty;
  for (const Item& item : items(KeysOptions().include_nested(true))) {
    const bool inside = std::any_of(empty.begin(), empty.end(), [&](const NestedKey& e) {
      return item.first.size() > e.size() &&
             std::equal(e.parts().begin(), e.parts().end(), item.first.parts().begin());
    });
    if (!inside && item.second.is_tensordict() && item.second.tensordict().is_empty()) {
      empty.push_back(item.first);
    }
  }
  if (!empty.empty() && is_locked()) {
    TD_FAIL(LockedError, "filter_empty_(): the TensorDict is locked and ", KeysRepr(empty),
            " would be removed (unlock_() first)");
  }
  for (const NestedKey& k : empty) del_(k);
  return *this;
}

TensorDict TensorDict::replace(const TensorDict& other) const {
  TensorDict out = copy();
  out.update(other);
  return out;
}

TensorDict TensorDict::replace(std::initializer_list<Item> items) const {
  TensorDict out = copy();
  out.update(items);
  return out;
}

TensorDict TensorDict::separates(const std::vector<NestedKey>& keys, bool strict,
                                 bool filter_empty) {
  std::vector<NestedKey> missing, present;
  for (const NestedKey& k : keys) (contains(k) ? present : missing).push_back(k);
  if (strict && !missing.empty()) {
    TD_FAIL(KeyError, "separates: no entry ", KeysRepr(missing), " in the TensorDict (keys: ",
            KeysRepr(this->keys()), "); pass strict=false to skip missing keys");
  }
  if (!present.empty() && is_locked()) {
    TD_FAIL(LockedError, "separates: the TensorDict is locked (unlock_() first)");
  }
  TensorDict out = empty(/*recurse=*/true);
  for (const NestedKey& k : present) {
    if (contains(k)) out.set(k, pop(k));  // a key listed twice is moved once
  }
  out.filter_empty_();
  if (filter_empty) filter_empty_();
  return out;
}

TensorDict::Item TensorDict::popitem() {
  std::vector<NestedKey> ks = keys();
  if (ks.empty()) TD_FAIL(KeyError, "popitem(): the TensorDict is empty");
  NestedKey last = ks.back();
  Value v = pop(last);
  return Item(std::move(last), std::move(v));
}

Value TensorDict::setdefault(KeyRef key, Value default_value) {
  if (std::optional<Value> v = find(key)) return *v;
  set(key, std::move(default_value));
  return get_value(key);
}

TensorDict& TensorDict::clear() {
  if (is_locked() && num_keys() > 0) {
    TD_FAIL(LockedError, "clear(): cannot remove the entries of a locked TensorDict (unlock_() first)");
  }
  for (const NestedKey& k : keys()) del_(k);
  return *this;
}

std::vector<NestedKey> TensorDict::sorted_keys() const {
  return keys(KeysOptions().include_nested(true).leaves_only(true).sort(true));
}

bool TensorDict::is_empty() const {
  // Reads the entries where the level holds them (no item list, no key copies).
  auto empty_value = [](const Value& v) { return v.is_tensordict() && v.tensordict().is_empty(); };
  if (const EntryList* held = storage_->held_entries()) {
    for (const auto& entry : held->entries()) {
      if (!empty_value(entry.second)) return false;
    }
    return true;
  }
  for (const std::string& k : storage_->keys()) {
    std::optional<Value> v = storage_->get(k);
    if (v && !empty_value(*v)) return false;
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


// ---- tensors joined along a dim -----------------------------------------------------------

namespace {

// cat_tensors / stack_tensors: `join` of the tensors under `keys`, set under `out_key`.
TensorDict& JoinTensors(TensorDict& td, const std::vector<NestedKey>& keys, const KeyRef& out_key,
                        bool keep_entries, const char* op,
                        const std::function<at::Tensor(const std::vector<at::Tensor>&)>& join) {
  std::vector<at::Tensor> tensors;
  for (const NestedKey& k : keys) tensors.push_back(TensorAt(td, k));  // KeyError / TypeError
  if (td.is_locked() && (!keep_entries || !td.contains(out_key))) {
    TD_FAIL(LockedError, op, ": the TensorDict is locked (unlock_() first)");
  }
  at::Tensor joined = WithKeyContext(out_key, op, [&] { return join(tensors); });
  // The result must fit where it goes before any entry is removed.
  TensorDict level = td;
  if (out_key.is_nested()) {
    const std::vector<std::string> parent(out_key.begin(), out_key.end() - 1);
    if (std::optional<Value> v = td.find(NestedKey(parent)); v && v->is_tensordict()) {
      level = v->tensordict();
    }
  }
  if (!internal::StartsWith(joined.sizes(), level.batch_size())) {
    TD_FAIL(BatchSizeError, op, ": the result for ", out_key.repr(), " has shape ",
            joined.sizes(), ", which does not start with the batch size ",
            SizeRepr(level.batch_size()));
  }
  if (!keep_entries) {
    for (const NestedKey& k : keys) {
      if (td.contains(k)) td.del_(k);  // a key listed twice is removed once
    }
  }
  td.set(out_key, std::move(joined));
  return td;
}

// The tensor leaves of `td` in key order (sorted by key with `sorted`), or in the order of
// `keys`, which must be exactly the tensor leaf keys.
std::vector<at::Tensor> TensorLeaves(const TensorDict& td, bool sorted,
                                     const std::vector<NestedKey>* keys, const char* op) {
  std::vector<NestedKey> leaf_keys;
  std::vector<at::Tensor> leaves;
  for (const TensorDict::Item& item :
       td.items(KeysOptions().include_nested(true).leaves_only(true).sort(sorted))) {
    if (!item.second.is_tensor()) continue;
    leaf_keys.push_back(item.first);
    leaves.push_back(item.second.tensor());
  }
  if (keys == nullptr) return leaves;
  std::vector<NestedKey> missing, extra;
  for (const NestedKey& k : leaf_keys) {
    if (std::find(keys->begin(), keys->end(), k) == keys->end()) missing.push_back(k);
  }
  for (const NestedKey& k : *keys) {
    if (std::find(leaf_keys.begin(), leaf_keys.end(), k) == leaf_keys.end()) extra.push_back(k);
  }
  if (!missing.empty() || !extra.empty()) {
    TD_FAIL(ValueError, op, ": the keys must be the tensor leaves of the TensorDict; missing ",
            KeysRepr(missing), ", not tensor leaves ", KeysRepr(extra));
  }
  std::vector<at::Tensor> ordered;
  for (const NestedKey& k : *keys) ordered.push_back(td.get(k));
  return ordered;
}

}  // namespace

TensorDict& TensorDict::cat_tensors(const std::vector<NestedKey>& keys, KeyRef out_key,
                                    int64_t dim, bool keep_entries) {
  return JoinTensors(*this, keys, out_key, keep_entries, "cat_tensors",
                     [dim](const std::vector<at::Tensor>& t) { return at::cat(t, dim); });
}

TensorDict& TensorDict::stack_tensors(const std::vector<NestedKey>& keys, KeyRef out_key,
                                      int64_t dim, bool keep_entries) {
  return JoinTensors(*this, keys, out_key, keep_entries, "stack_tensors",
                     [dim](const std::vector<at::Tensor>& t) { return at::stack(t, dim); });
}

at::Tensor TensorDict::cat_from_tensordict(int64_t dim, bool sorted) const {
  return at::cat(TensorLeaves(*this, sorted, nullptr, "cat_from_tensordict"), dim);
}

at::Tensor TensorDict::cat_from_tensordict(const std::vector<NestedKey>& keys, int64_t dim) const {
  return at::cat(TensorLeaves(*this, false, &keys, "cat_from_tensordict"), dim);
}

at::Tensor TensorDict::stack_from_tensordict(int64_t dim, bool sorted) const {
  return at::stack(TensorLeaves(*this, sorted, nullptr, "stack_from_tensordict"), dim);
}

at::Tensor TensorDict::stack_from_tensordict(const std::vector<NestedKey>& keys,
                                             int64_t dim) const {
  return at::stack(TensorLeaves(*this, false, &keys, "stack_from_tensordict"), dim);
}

std::vector<TensorDict::Item> TensorDict::non_tensor_items(bool include_nested) const {
  std::vector<Item> out;
  for (Item& item : items(KeysOptions().include_nested(include_nested).leaves_only(true))) {
    if (item.second.is_non_tensor()) out.push_back(std::move(item));
  }
  return out;
}

}  // namespace td
