// TensorDict: Value, construction, batch size and device, reading and writing entries.
// (Structure: structure.cc; apply: apply.cc; comparison: comparison.cc; printing and torch
// interop: interop.cc.)
#include "td/core/tensordict.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"
#include "td/core/internal/dict_util.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/internal/entry_list.h"
#include "td/core/internal/leaves.h"
#include "td/core/internal/storage_access.h"
#include "td/core/storage.h"
#include "td/core/internal/names.h"
#include "td/core/internal/non_tensor_stack.h"

namespace td {
namespace {

using internal::CheckedBatch;
using internal::StartsWith;
using internal::WithKeyContext;

// Walks the parts of `key`; nullptr when any level is missing or is not a TensorDict. The
// result is valid while `holders` lives and the TensorDict is not written. Inlined: every get,
// get_tensordict and contains starts here, and most keys have one part.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline const Value* LookupNested(const Storage& root,
                                                              const KeyRef& key,
                                                              std::optional<Value> (&holders)[2]) {
  const Value* v = FindEntry(root, key[0], &holders[0]);
  for (size_t i = 1; v != nullptr && i < key.size(); ++i) {
    if (!v->is_tensordict()) return nullptr;  // the previous part named a leaf
    v = FindEntry(v->tensordict().storage(), key[i], &holders[i % 2]);
  }
  return v;
}

// The tensor `v` points to: moved out of `holder` when the entry was computed into it (a lazy
// level's fresh tensor: no reference count traffic), else copied from the held entry.
at::Tensor TakeTensor(const Value* v, std::optional<Value>& holder) {
  if (holder && v == &*holder) return std::move(holder->mutable_tensor());
  return v->tensor();
}

// Calls fn(full_key, value) for each entry of `td` as KeysOptions asks, depth first.
template <class Fn>
void ForEachEntry(const TensorDict& td, const KeysOptions& options, const NestedKey* prefix,
                  const Fn& fn) {
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    const bool is_td = v->is_tensordict();
    if (!(is_td && options.leaves_only())) fn(full, *v);
    if (is_td && options.include_nested()) ForEachEntry(v->tensordict(), options, &full, fn);
  }
}

// Checks that every entry of `td` fits batch size `nb` (nested TensorDicts either start with it
// or can be given it); throws BatchSizeError naming the first that does not.
void CheckBatchFits(const TensorDict& td, at::IntArrayRef nb, const NestedKey* prefix) {
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<EntryMeta> m = s.meta(k);  // never materialises a lazy entry
    if (!m) continue;
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    if (m->kind == EntryMeta::Kind::kTensor) {
      if (!StartsWith(m->shape, nb)) {
        TD_FAIL(BatchSizeError, "batch size ", SizeRepr(nb), " does not fit key ", full.repr(),
                             ": its shape ", SizeRepr(m->shape), " does not start with ",
                             SizeRepr(nb));
      }
    } else if (m->kind == EntryMeta::Kind::kTensorDict && !StartsWith(m->shape, nb)) {
      CheckBatchFits(s.get(k)->tensordict(), nb, &full);
    } else if (m->kind == EntryMeta::Kind::kNonTensor && nb != s.batch_size()) {
      // NOTE [ Non-tensor stacks ]: one value per element of the old batch size.
      std::optional<Value> v = s.get(k);
      if (v && v->non_tensor_data().is_stack()) {
        TD_FAIL(BatchSizeError, "batch size ", SizeRepr(nb), " does not fit the NonTensorStack ",
                full.repr(), ": it holds one value per element of batch size ",
                SizeRepr(s.batch_size()));
      }
    }
  }
  internal::RequireBatchResize(s, nb, "set_batch_size");  // every level, before any changes
}

// This level first: a backend that refuses the batch size (a lazy stack losing its stack dim)
// throws before anything changed.
void ApplyBatch(const TensorDict& td, const std::vector<int64_t>& nb) {
  internal::MutableStorage(td).set_batch_size(nb);
  internal::ResizeNames(internal::MutableStorage(td));
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<EntryMeta> m = s.meta(k);
    if (m && m->kind == EntryMeta::Kind::kTensorDict && !StartsWith(m->shape, nb)) {
      ApplyBatch(s.get(k)->tensordict(), nb);
    }
  }
}

// NOTE [ Dim names ] (td/core/names.cc): a TensorDict set under a named parent carries the
// parent's names on its leading dims; when its own differ it is stored as a shallow copy so
// named (the caller's TensorDict is left as it is). ValueError when a leading dim is named
// otherwise.
void NameNested(Value& value, const DimNames& parent, const KeyRef& full_key) {
  const TensorDict& sub = value.tensordict();
  const DimNames* own = sub.storage().names();
  const int64_t n = static_cast<int64_t>(parent.size());
  bool same = own != nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const std::optional<std::string> mine = own ? (*own)[i] : std::nullopt;
    if (mine && parent[i] && *mine != *parent[i]) {
      TD_FAIL(ValueError, "cannot set key ", full_key.repr(), ": its batch dim ", i, " is named '",
              *mine, "' but the TensorDict's dim ", i, " is named '", *parent[i], "'");
    }
    same = same && mine == parent[i];
  }
  if (same) return;
  std::shared_ptr<const DimNames> names = internal::WithLeading(own, sub.batch_dims(), &parent, n);
  // The parent's names over the value's own may repeat one (['t'] over [None, 't']).
  if (names) internal::CheckedNames(*names, sub.batch_size(), "set key " + full_key.repr());
  TensorDict named = sub.copy();
  internal::ApplyNames(named, std::move(names));
  value = std::move(named);
}

}  // namespace

// ---- Value --------------------------------------------------------------------------------

Value::Value(std::initializer_list<TensorDict::Item> items)
    : v_(std::make_shared<const Items>(items)) {}

std::string_view Value::kind() const {
  switch (v_.index()) {
    case 0:
      return "Tensor";
    case 1:
      return "TensorDict";
    case 2:
      switch (std::get<2>(v_).kind) {
        case NonTensorData::Kind::kData:
          return "NonTensorData";
        case NonTensorData::Kind::kMetaData:
          return "MetaData";
        case NonTensorData::Kind::kStack:
          return "NonTensorStack";
      }
      return "NonTensorData";
    default:
      return "dict";
  }
}

void Value::fail_kind(const char* expected) const {
  TD_FAIL(TypeError, "expected ", expected, ", but the entry is a ", kind());
}

const nlohmann::json& Value::non_tensor() const { return non_tensor_data().data; }

const NonTensorData& Value::non_tensor_data() const {
  if (!is_non_tensor()) fail_kind("non-tensor data");
  return std::get<2>(v_);
}

// ---- construction -------------------------------------------------------------------------

TensorDict::TensorDict() : storage_(MakeDenseStorage({}, std::nullopt)) {}

TensorDict::TensorDict(std::initializer_list<Item> items, at::IntArrayRef batch_size,
                       std::optional<at::Device> device, const DimNames& names)
    : storage_(MakeDenseStorage(CheckedBatch(batch_size), device)) {
  if (!names.empty()) storage_->set_names(internal::CheckedNames(names, batch_size, "TensorDict"));
  for (const Item& item : items) set(item.first, item.second);
}

TensorDict::TensorDict(const std::vector<Item>& items, at::IntArrayRef batch_size,
                       std::optional<at::Device> device, const DimNames& names)
    : storage_(MakeDenseStorage(CheckedBatch(batch_size), device)) {
  if (!names.empty()) storage_->set_names(internal::CheckedNames(names, batch_size, "TensorDict"));
  for (const Item& item : items) set(item.first, item.second);
}

TensorDict::TensorDict(std::shared_ptr<Storage> storage) : storage_(std::move(storage)) {
  TORCH_CHECK(storage_ != nullptr, "TensorDict needs a storage, got nullptr");
  // Every operation's result passes here: a batch whose product overflows (a stack or expand
  // of a huge batch, a backend's own batch size) is refused as the constructors refuse it.
  internal::CheckedNumel(storage_->batch_size());
}

// ---- metadata -----------------------------------------------------------------------------

at::IntArrayRef TensorDict::batch_size() const { return storage_->batch_size(); }

int64_t TensorDict::numel() const { return internal::CheckedNumel(batch_size()); }

std::optional<at::Device> TensorDict::device() const { return storage_->device(); }

std::string_view TensorDict::backend() const { return storage_->backend_id(); }

TensorDict& TensorDict::set_batch_size(at::IntArrayRef batch_size) {
  std::vector<int64_t> nb = CheckedBatch(batch_size);
  CheckBatchFits(*this, nb, nullptr);
  ApplyBatch(*this, nb);
  return *this;
}

TensorDict& TensorDict::auto_batch_size_(std::optional<int64_t> batch_dims) {
  std::optional<std::vector<int64_t>> common;
  auto narrow = [&](at::IntArrayRef shape) {
    if (!common) {
      common = shape.vec();
      return;
    }
    size_t n = 0;
    while (n < common->size() && n < shape.size() && (*common)[n] == shape[n]) ++n;
    common->resize(n);
  };
  const Storage& s = *storage_;
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    if (v->is_tensor()) {
      narrow(v->tensor().sizes());
    } else if (v->is_tensordict()) {
      TensorDict sub = v->tensordict();
      sub.auto_batch_size_();
      narrow(sub.batch_size());
    } else if (v->non_tensor_data().is_stack()) {
      narrow(s.batch_size());  // its values are nested as the current batch size
    }
  }
  std::vector<int64_t> nb = common.value_or(std::vector<int64_t>{});
  if (batch_dims && static_cast<int64_t>(nb.size()) > *batch_dims) nb.resize(*batch_dims);
  internal::RequireBatchResize(*storage_, nb, "auto_batch_size_");
  storage_->set_batch_size(std::move(nb));
  internal::ResizeNames(*storage_);
  return *this;
}


// ---- reading ------------------------------------------------------------------------------

std::pair<TensorDict, std::string_view> TensorDict::parent_of(const KeyRef& key,
                                                              bool create) const {
  TensorDict cur = *this;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    std::optional<Value> v = cur.storage_->get(key[i]);
    if (!v) {
      if (!create) fail_missing(key, i);
      if (cur.is_locked()) {
        TD_FAIL(LockedError, "cannot create ", NestedKey(key[i]).repr(), " for key ", key.repr(),
                          ": the TensorDict is locked (call unlock_() first)");
      }
      TensorDict sub(MakeDenseStorage(cur.batch_size().vec(), cur.device()));
      sub.storage_->set_names(cur.storage_->shared_names());  // NOTE [ Dim names ]
      cur.storage_->set(key[i], sub);
      // Read it back: a backend may store its own form of the value (a lazy stack splits it
      // between its members).
      cur = cur.storage_->get(key[i])->tensordict();
      continue;
    }
    if (!v->is_tensordict()) {
      TD_FAIL(KeyError, "key ", key.repr(), " not found: ", NestedKey(key.parts()[i]).repr(),
                     " at depth ", i, " is a ", v->kind(), ", not a TensorDict");
    }
    cur = v->tensordict();
  }
  return {std::move(cur), std::string_view(key.back())};
}

void TensorDict::fail_missing(const KeyRef& key, size_t depth) const {
  // Re-walk to report the level where the lookup failed and the keys that exist there.
  const TensorDict* level = this;
  TensorDict holder;
  for (size_t i = 0; i < depth; ++i) {
    holder = level->storage_->get(key[i])->tensordict();
    level = &holder;
  }
  std::string where;
  if (depth > 0) {
    NestedKey::Parts p(key.parts().begin(), key.parts().begin() + depth);
    where = absl::StrCat(" under ", NestedKey(std::move(p)).repr());
  }
  TD_FAIL(KeyError, "key ", key.repr(), " not found in TensorDict: no entry ",
                 NestedKey(key[depth]).repr(), where, "; existing keys",
                 depth > 0 ? " there" : "", ": ", KeysRepr(level->storage_->keys()));
}

std::optional<Value> TensorDict::find(KeyRef key) const {
  std::optional<Value> holders[2];
  const Value* v = LookupNested(*storage_, key, holders);
  if (v == nullptr) return std::nullopt;
  if (v->is_tensordict() && storage_->locked()) {  // NOTE [ Locks span levels ]
    internal::NoteLockParent(*this, key, v->tensordict());
  }
  return *v;
}

Value TensorDict::get_value(KeyRef key) const {
  std::optional<Value> v = find(key);
  if (!v) {
    parent_of(key, /*create=*/false);  // throws for a missing intermediate level
    fail_missing(key, key.size() - 1);
  }
  return *std::move(v);
}

at::Tensor TensorDict::get(KeyRef key) const {
  std::optional<Value> holders[2];
  const Value* v = LookupNested(*storage_, key, holders);
  if (v == nullptr) get_value(key);  // throws the KeyError
  if (!v->is_tensor()) {
    TD_FAIL(TypeError, "entry ", key.repr(), " is a ", v->kind(), ", not a Tensor",
                    v->is_tensordict() ? " (use get_tensordict())" : " (use get_non_tensor())");
  }
  return TakeTensor(v, holders[(key.size() - 1) % 2]);
}

at::Tensor TensorDict::get(KeyRef key, const at::Tensor& default_value) const {
  std::optional<Value> holders[2];
  const Value* v = LookupNested(*storage_, key, holders);
  if (v == nullptr) return default_value;
  if (!v->is_tensor()) {
    TD_FAIL(TypeError, "entry ", key.repr(), " is a ", v->kind(), ", not a Tensor");
  }
  return v->tensor();
}

TensorDict TensorDict::get_tensordict(KeyRef key) const {
  std::optional<Value> holders[2];
  const Value* v = LookupNested(*storage_, key, holders);
  if (v == nullptr) get_value(key);  // throws the KeyError
  if (!v->is_tensordict()) {
    TD_FAIL(TypeError, "entry ", key.repr(), " is a ", v->kind(), ", not a TensorDict");
  }
  if (storage_->locked()) {  // NOTE [ Locks span levels ]
    internal::NoteLockParent(*this, key, v->tensordict());
  }
  return v->tensordict();
}

nlohmann::json TensorDict::get_non_tensor(KeyRef key) const {
  Value v = get_value(key);
  if (!v.is_non_tensor()) {
    TD_FAIL(TypeError, "entry ", key.repr(), " is a ", v.kind(), ", not non-tensor data");
  }
  return v.non_tensor();
}

bool TensorDict::contains(KeyRef key) const {
  if (!key.is_nested()) return storage_->contains(key.front());
  std::optional<Value> holders[2];
  return LookupNested(*storage_, key, holders) != nullptr;
}

at::IntArrayRef TensorDict::size() const { return batch_size(); }

int64_t TensorDict::size(int64_t dim) const {
  return batch_size()[internal::WrapBatchDim(dim, batch_dims(), batch_size(), "size")];
}

size_t TensorDict::num_keys() const { return storage_->size(); }

void TensorDict::for_each_entry(
    absl::FunctionRef<void(const std::string& key, const Value& value)> fn) const {
  for (const std::string& k : storage_->keys()) {
    std::optional<Value> v = storage_->get(k);
    if (v) fn(k, *v);
  }
}

std::vector<NestedKey> TensorDict::keys(const KeysOptions& options) const {
  std::vector<NestedKey> out;
  if (options.sort() || options.is_leaf()) {  // td/core/dict_ops.cc
    for (Item& item : internal::ListEntries(*this, options)) out.push_back(std::move(item.first));
    return out;
  }
  ForEachEntry(*this, options, nullptr,
               [&](const NestedKey& k, const Value&) { out.push_back(k); });
  return out;
}

std::vector<Value> TensorDict::values(const KeysOptions& options) const {
  std::vector<Value> out;
  if (options.sort() || options.is_leaf()) {  // td/core/dict_ops.cc
    for (Item& item : internal::ListEntries(*this, options)) out.push_back(std::move(item.second));
    return out;
  }
  ForEachEntry(*this, options, nullptr, [&](const NestedKey&, const Value& v) { out.push_back(v); });
  return out;
}

std::vector<TensorDict::Item> TensorDict::items(const KeysOptions& options) const {
  if (options.sort() || options.is_leaf()) return internal::ListEntries(*this, options);
  std::vector<Item> out;
  ForEachEntry(*this, options, nullptr,
               [&](const NestedKey& k, const Value& v) { out.emplace_back(k, v); });
  return out;
}

// ---- writing ------------------------------------------------------------------------------

void TensorDict::validate(Value& value, const KeyRef& full_key) const {
  const at::IntArrayRef bs = storage_->batch_size();
  const std::optional<at::Device>& device = storage_->device();
  if (value.is_tensor()) {
    const at::Tensor& t = value.tensor();
    if (!t.defined()) TD_FAIL(ValueError, "cannot set key ", full_key.repr(), " to an undefined tensor");
    if (!internal::TensorStartsWith(t, bs)) {
      TD_FAIL(BatchSizeError, "batch size mismatch for key ", full_key.repr(), ": the value's shape ",
                           SizeRepr(internal::ShapeOf(t)), " does not start with the batch size ",
                           SizeRepr(bs), t.is_nested() ? " (-1: a ragged dim of a nested tensor)" : "");
    }
    if (device && t.device() != *device) value = t.to(*device);
    return;
  }
  if (value.is_non_tensor()) {
    // NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h
    if (value.non_tensor_data().is_stack()) {
      internal::CheckStackShape(value.non_tensor(), bs, full_key.key());
    }
    return;
  }
  if (value.is_plain_dict()) {
    TensorDict sub(MakeDenseStorage(bs.vec(), device));
    sub.storage_->set_names(storage_->shared_names());  // NOTE [ Dim names ]
    for (const Item& item : value.plain_dict()) {
      WithKeyContext(full_key.key(), "setting", [&] { sub.set(item.first, item.second); });
    }
    value = std::move(sub);
    return;
  }
  if (value.is_tensordict()) {
    const TensorDict& sub = value.tensordict();
    if (sub.storage_ == storage_) {
      TD_FAIL(ValueError, "cannot set key ", full_key.repr(), " to the TensorDict itself");
    }
    if (!StartsWith(sub.batch_size(), bs)) {
      TD_FAIL(BatchSizeError, "batch size mismatch for key ", full_key.repr(),
                           ": the nested TensorDict's batch size ", SizeRepr(sub.batch_size()),
                           " does not start with the batch size ", SizeRepr(bs));
    }
    const EntryList* held = storage_->held_entries();  // NOTE [ Nesting depth ]
    PlaceNested(held, held ? held->depth() : 0, sub, full_key.repr(), /*record=*/false);
    if (device && sub.device() != device) value = sub.to(*device);
    if (const DimNames* names = storage_->names()) NameNested(value, *names, full_key);
  }
}

void TensorDict::set_at_level(std::string_view key, Value&& value,
                              const KeyRef& full_key) {
  Storage& s = *storage_;
  const Capabilities caps = s.capabilities();
  if (s.locked() || !caps.has(Capability::kNewKeys)) {
    std::optional<Value> current = s.get(key);
    if (!current) {
      if (s.locked()) {
        TD_FAIL(LockedError, "cannot add key ", full_key.repr(),
                          ": the TensorDict is locked (call unlock_() first)");
      }
      TD_FAIL(KeyError, "cannot add key ", full_key.repr(), ": the '", s.backend_id(),
                     "' backend does not take new keys");
    }
    if (s.locked()) {
      // A locked TensorDict keeps its structure: same-shaped tensors are written in place.
      if (current->is_tensor() && value.is_tensor() &&
          current->tensor().sizes() == value.tensor().sizes()) {
        s.set_(key, value.tensor());
        return;
      }
      if (current->kind() != value.kind() || !value.is_non_tensor()) {
        TD_FAIL(LockedError, "cannot replace key ", full_key.repr(), " (", current->kind(),
                          ") with a ", value.kind(),
                          " of another shape: the TensorDict is locked (call unlock_() first)");
      }
      // Non-tensor data has no storage to write in place: an equal value changes nothing,
      // another one would replace the entry.
      if (current->non_tensor_data() == value.non_tensor_data()) return;
      TD_FAIL(LockedError, "cannot replace key ", full_key.repr(),
              " (NonTensorData) with a different NonTensorData value: the TensorDict is locked "
              "(call unlock_() first)");
    }
  }
  if (!caps.has(Capability::kReplaceEntries)) {
    internal::RequireReplaceable(s, key, value, "set", full_key);
  }
  s.set(key, std::move(value));
}

TensorDict& TensorDict::set(KeyRef key, Value value) {
  if (!key.is_nested()) {
    validate(value, key);
    set_at_level(key.front(), std::move(value), key);
    return *this;
  }
  // Levels a nested key would create beyond the depth limit are refused before any is created
  // (NOTE [ Nesting depth ] in td/core/entry_list.cc).
  const EntryList* held = storage_->held_entries();
  const int depth = held ? held->depth() : 0;
  if (depth + static_cast<int64_t>(key.size()) - 1 > kMaxNestingDepth) {
    TD_FAIL(NestingError, "cannot set key ", key.repr(), ": its ", key.size(),
                       " parts would nest TensorDicts ", depth + key.size() - 1,
                       " levels deep, and TensorDicts nest at most ", kMaxNestingDepth,
                       " levels (td::kMaxNestingDepth)");
  }
  if (value.is_tensordict()) {
    PlaceNested(nullptr, depth + static_cast<int>(key.size()) - 1, value.tensordict(), key.repr(),
                /*record=*/false);
  }
  auto [parent, last] = parent_of(key, /*create=*/true);
  parent.validate(value, key);
  parent.set_at_level(last, std::move(value), key);
  return *this;
}

TensorDict& TensorDict::set_non_tensor(KeyRef key, nlohmann::json data) {
  return set(key, NonTensorData(std::move(data)));
}

TensorDict& TensorDict::set_(KeyRef key, const at::Tensor& value) {
  auto [parent, last] = parent_of(key, /*create=*/false);
  std::optional<EntryMeta> current = parent.storage_->meta(last);
  if (!current) fail_missing(key, key.size() - 1);
  if (current->kind != EntryMeta::Kind::kTensor) {
    TD_FAIL(TypeError, "set_ needs a Tensor under key ", key.repr(), ", but the entry is a ",
                    current->kind == EntryMeta::Kind::kTensorDict ? "TensorDict" : "NonTensorData");
  }
  if (!value.defined()) TD_FAIL(ValueError, "set_ of key ", key.repr(), " with an undefined tensor");
  if (at::IntArrayRef(current->shape) != value.sizes()) {
    TD_FAIL(ValueError, "set_ of key ", key.repr(), ": the value's shape ", SizeRepr(value.sizes()),
                     " differs from the existing tensor's shape ", SizeRepr(current->shape),
                     current->ragged() ? " (-1: the size differs between the stacked parts)"
                                       : " (set_ does not broadcast: expand the value first)");
  }
  if (current->device.is_meta() && !value.is_meta()) {
    TD_FAIL(ValueError, "set_ of key ", key.repr(), ": the existing tensor of shape ",
                     SizeRepr(current->shape),
                     " is on the meta device and holds no data to copy into (use set() to "
                     "replace it)");
  }
  internal::WithKeyContext(key, "copying (set_) into", [&] { parent.storage_->set_(last, value); });
  return *this;
}

TensorDict& TensorDict::update(const TensorDict& other) {
  const Storage& so = *other.storage_;
  for (const std::string& k : so.keys()) {
    std::optional<Value> v = so.get(k);
    if (!v) continue;
    if (v->is_tensordict()) {
      std::optional<Value> mine = storage_->get(k);
      if (mine && mine->is_tensordict()) {
        TensorDict target = mine->tensordict();
        target.update(v->tensordict());
        continue;
      }
    }
    set(NestedKey(k), *std::move(v));
  }
  return *this;
}

TensorDict& TensorDict::update(std::initializer_list<Item> items) {
  for (const Item& item : items) {
    if (item.second.is_plain_dict()) {
      std::optional<Value> mine = find(item.first);
      if (mine && mine->is_tensordict()) {
        TensorDict target = mine->tensordict();
        for (const Item& sub : item.second.plain_dict()) {
          target.update({sub});
        }
        continue;
      }
    }
    set(item.first, item.second);
  }
  return *this;
}

TensorDict& TensorDict::update_(const TensorDict& other) {
  std::vector<Item> leaves = other.items(KeysOptions().include_nested(true).leaves_only(true));
  std::vector<at::Tensor> targets;
  targets.reserve(leaves.size());
  std::vector<bool> unchanged(leaves.size(), false);
  for (const Item& item : leaves) {  // validate everything before writing anything
    std::optional<Value> mine = find(item.first);
    if (!item.second.is_tensor()) {
      // An equal non-tensor entry is left as it is: rewriting it would move it to the end of
      // its level on a backend that deletes and recreates entries (HDF5 links).
      unchanged[targets.size()] = mine && mine->is_non_tensor() &&
                                  mine->non_tensor_data() == item.second.non_tensor_data();
      targets.emplace_back();
      continue;
    }
    if (!mine) fail_missing(item.first, item.first.size() - 1);
    if (!mine->is_tensor()) {
      TD_FAIL(TypeError, "update_: entry ", item.first.repr(), " is a ", mine->kind(),
                      ", not a Tensor");
    }
    if (mine->tensor().sizes() != item.second.tensor().sizes()) {
      TD_FAIL(ValueError, "update_ of key ", item.first.repr(), ": the value's shape ",
                       SizeRepr(item.second.tensor().sizes()),
                       " differs from the existing tensor's shape ",
                       SizeRepr(mine->tensor().sizes()));
    }
    targets.push_back(mine->tensor());
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (targets[i].defined()) {
      set_(leaves[i].first, leaves[i].second.tensor());
    } else if (!unchanged[i]) {
      set(leaves[i].first, leaves[i].second);
    }
  }
  return *this;
}

TensorDict& TensorDict::del_(KeyRef key) {
  auto [parent, last] = parent_of(key, /*create=*/false);
  if (!parent.storage_->contains(last)) fail_missing(key, key.size() - 1);
  if (parent.is_locked()) {
    TD_FAIL(LockedError, "cannot delete key ", key.repr(),
                      ": the TensorDict is locked (call unlock_() first)");
  }
  parent.storage_->erase(last);
  return *this;
}

TensorDict& TensorDict::erase(KeyRef key) { return del_(key); }

Value TensorDict::pop(KeyRef key) {
  Value v = get_value(key);
  del_(key);
  return v;
}

Value TensorDict::pop(KeyRef key, Value default_value) {
  if (!contains(key)) return default_value;
  return pop(key);
}

TensorDict& TensorDict::rename_key_(KeyRef old_ref, KeyRef new_ref, bool safe) {
  const NestedKey old_key = old_ref.key();
  const NestedKey new_key = new_ref.key();
  if (old_key == new_key) return *this;
  if (!contains(old_key)) get_value(old_key);  // throws the KeyError
  if (safe && contains(new_key)) {
    TD_FAIL(KeyError, "rename_key_: key ", new_key.repr(),
                   " already exists (pass safe=false to overwrite it)");
  }
  if (is_locked()) {
    TD_FAIL(LockedError, "cannot rename key ", old_key.repr(), " to ", new_key.repr(),
                      ": the TensorDict is locked (call unlock_() first)");
  }
  // Within one level the backend may rename natively (a view renames in its source, a lazy
  // stack in every member, memmap as one crash-safe step). See NOTE [ Storage interface ].
  if (old_key.size() == new_key.size() &&
      (!old_key.is_nested() || old_key.parent() == new_key.parent())) {
    auto [parent, last] = parent_of(old_key, /*create=*/false);
    if (parent.storage_->rename_key(last, new_key.back())) return *this;
  }
  Value v = get_value(old_key);
  // Validate against the destination level before anything changes.
  if (new_key.is_nested() && contains(new_key.parent())) {
    Value probe = v;
    get_tensordict(new_key.parent()).validate(probe, new_key);
  } else if (!new_key.is_nested()) {
    Value probe = v;
    validate(probe, new_key);
  }
  del_(old_key);
  set(new_key, std::move(v));
  return *this;
}

// ---- set / update with options ------------------------------------------------------------

TensorDict& TensorDict::set(KeyRef key, Value value, const SetOptions& options) {
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

}  // namespace td
