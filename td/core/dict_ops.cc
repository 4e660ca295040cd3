// TensorDict's dict verbs beyond tensordict.cc (declared in td/core/ops.def): set_at_ / get_at /
// update_at_, popitem / setdefault / clear, sorted keys and the is_leaf listing, is_empty and
// filter_non_tensor_data.
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

// ---- dict verbs ---------------------------------------------------------------------------

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

}  // namespace td
