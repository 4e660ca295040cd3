// TensorDict structure: select, exclude, split_keys, (un)flatten_keys, empty, clone, copy,
// locking.
#include "td/core/tensordict.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "td/core/dtype.h"
#include "td/core/internal/entry_list.h"
#include "td/core/internal/leafwise.h"
#include "td/core/internal/leaves.h"
#include "td/core/internal/storage_access.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/storage.h"

namespace td {
namespace {

// NOTE [ Locks span levels ]
// lock_() locks every level below the TensorDict it is called on, and each sub-TensorDict
// records the parent level that locked it and its key there (Storage::lock_parents(), weak
// references). unlock_() on a level that a still-alive, still-locked parent locked is a
// LockedError naming the locked TensorDict's key path to it, as in Python tensordict ("a
// TensorDict that belongs to a locked parent cannot be unlocked on its own"); unlock_() on the
// TensorDict lock_() was called on unlocks every level below and clears their records, except
// a level that also belongs to another still-alive, still-locked TensorDict (a level shared by
// two locked parents, or the TensorDict of a frozen TensorClass, which td/tensorclass keeps
// under a locked owner: NOTE [ Frozen classes ] in td/tensorclass/declare.h): that level and
// everything below it stay locked. Records of parents that no longer exist are dropped when
// lock_() records a new one.
// Sub-TensorDicts that lazy backends compute on each read (stacks, views) are fresh objects that
// lock_() never reached: the core records the locked parent on them when it hands them out
// (NoteLockParent, called by find()), so they refuse unlock_() the same way. The records and the
// walks here are iterative, guarded by one (recursive: a lazy stack locks its members) mutex, as
// reads on several threads may record at once; a read finds a level already recorded through an
// atomic flag (Storage::has_lock_parents()) without taking it, so reading a locked TensorDict's
// held sub-TensorDicts (from_module results, on every read) takes no lock.
std::recursive_mutex& LockRecordsMutex() {
  static std::recursive_mutex mu;
  return mu;
}

bool IsLockedParent(const Storage::LockParent& r, std::shared_ptr<const Storage>* out) {
  std::shared_ptr<const Storage> p = r.parent.lock();
  if (p == nullptr || !p->locked()) return false;
  if (out) *out = std::move(p);
  return true;
}

// The key path from the outermost locked TensorDict to `s` through lock records, or nullopt
// when no alive, locked parent holds `s`.
std::optional<NestedKey> LockedPath(Storage& s) {
  std::optional<NestedKey> path;
  Storage* cur = &s;
  for (int steps = 0; steps <= kMaxNestingDepth; ++steps) {
    std::shared_ptr<const Storage> parent;
    const NestedKey* key = nullptr;
    for (const Storage::LockParent& r : cur->lock_parents()) {
      if (IsLockedParent(r, &parent)) {
        key = &r.key;
        break;
      }
    }
    if (key == nullptr) break;
    path = path ? *key + *path : *key;
    cur = const_cast<Storage*>(parent.get());
  }
  return path;
}

// fn(key, sub-TensorDict) for each sub-TensorDict entry of `td`'s level: straight from the
// entries where the level holds them (no key list, no Value copies), else through meta() and
// get() of the sub-TensorDicts only.
template <class Fn>
void ForEachSubTensorDict(const TensorDict& td, Fn&& fn) {
  const Storage& s = td.storage();
  if (const EntryList* held = s.held_entries()) {
    for (const auto& [k, v] : held->entries()) {
      if (v.is_tensordict()) fn(k, v.tensordict());
    }
    return;
  }
  for (const std::string& k : s.keys()) {
    // meta() first: a lazy backend computes a leaf on get() (a ragged lazy stack cannot).
    std::optional<EntryMeta> meta = s.meta(k);
    if (!meta || meta->kind != EntryMeta::Kind::kTensorDict) continue;
    std::optional<Value> v = s.get(k);
    if (v && v->is_tensordict()) fn(k, v->tensordict());
  }
}

void LockTree(const TensorDict& root) {
  std::lock_guard<std::recursive_mutex> guard(LockRecordsMutex());
  std::vector<TensorDict> todo{root};
  while (!todo.empty()) {
    TensorDict td = std::move(todo.back());
    todo.pop_back();
    internal::MutableStorage(td).set_locked(true);
    ForEachSubTensorDict(td, [&](const std::string& k, const TensorDict& child) {
      std::vector<Storage::LockParent>& records = internal::MutableStorage(child).lock_parents();
      records.erase(std::remove_if(records.begin(), records.end(),
                                   [](const auto& r) { return r.parent.expired(); }),
                    records.end());
      const bool known = std::any_of(records.begin(), records.end(), [&](const auto& r) {
        return r.parent.lock() == td.storage_ptr();
      });
      if (!known) records.push_back({td.storage_ptr(), NestedKey(k)});
      internal::MutableStorage(child).set_has_lock_parents(true);
      todo.push_back(child);
    });
  }
}

void UnlockTree(const TensorDict& root) {
  std::lock_guard<std::recursive_mutex> guard(LockRecordsMutex());
  if (std::optional<NestedKey> path = LockedPath(internal::MutableStorage(root))) {
    TD_FAIL(LockedError, "cannot unlock the TensorDict at key ", path->repr(),
                      " on its own: it belongs to a locked TensorDict (unlock_() that one, which "
                      "unlocks every level below it)");
  }
  internal::MutableStorage(root).lock_parents().clear();
  internal::MutableStorage(root).set_has_lock_parents(false);
  std::vector<TensorDict> todo{root};
  while (!todo.empty()) {
    TensorDict td = std::move(todo.back());
    todo.pop_back();
    internal::MutableStorage(td).set_locked(false);
    ForEachSubTensorDict(td, [&](const std::string&, const TensorDict& child) {
      std::vector<Storage::LockParent>& records = internal::MutableStorage(child).lock_parents();
      // Still held by another locked TensorDict: it stays locked, and so does what is below it.
      if (std::any_of(records.begin(), records.end(),
                      [](const auto& r) { return IsLockedParent(r, nullptr); })) {
        return;
      }
      records.clear();
      internal::MutableStorage(child).set_has_lock_parents(false);
      todo.push_back(child);
    });
  }
}

}  // namespace

void internal::NoteLockParent(const TensorDict& parent, const KeyRef& key,
                              const TensorDict& child) {
  if (!parent.is_locked() || child.storage().has_lock_parents()) return;
  std::lock_guard<std::recursive_mutex> guard(LockRecordsMutex());
  std::vector<Storage::LockParent>& records = internal::MutableStorage(child).lock_parents();
  if (records.empty()) records.push_back({parent.storage_ptr(), key.key()});
  internal::MutableStorage(child).set_has_lock_parents(true);
}

// ---- structure ----------------------------------------------------------------------------

TensorDict TensorDict::select(const std::vector<NestedKey>& keys, bool strict) const {
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  out.storage_->set_names(storage_->shared_names());
  for (const NestedKey& key : keys) {
    std::optional<Value> v = find(key);
    if (!v) {
      if (strict) get_value(key);  // throws KeyError
      continue;
    }
    // Mirror the intermediate levels with their own batch sizes.
    TensorDict src = *this;
    TensorDict dst = out;
    for (size_t i = 0; i + 1 < key.size(); ++i) {
      TensorDict sub_src = src.storage_->get(key[i])->tensordict();
      std::optional<Value> existing = dst.storage_->get(key[i]);
      TensorDict sub_dst = existing ? existing->tensordict()
                                    : TensorDict(MakeDenseStorage(sub_src.batch_size().vec(),
                                                                  sub_src.device()));
      if (!existing) sub_dst.storage_->set_names(sub_src.storage_->shared_names());
      if (!existing) dst.storage_->set(key[i], sub_dst);
      src = std::move(sub_src);
      dst = std::move(sub_dst);
    }
    dst.storage_->set(key.back(), v->is_tensordict() ? Value(v->tensordict().copy()) : *v);
  }
  return out;
}

TensorDict TensorDict::exclude(const std::vector<NestedKey>& keys) const {
  TensorDict out = copy();
  for (const NestedKey& key : keys) {
    if (!out.contains(key)) continue;
    auto [parent, last] = out.parent_of(key, false);
    parent.storage_->erase(last);
  }
  return out;
}

std::vector<TensorDict> TensorDict::split_keys(
    const std::vector<std::vector<NestedKey>>& groups) const {
  std::vector<TensorDict> out;
  std::vector<NestedKey> all;
  for (const auto& g : groups) {
    out.push_back(select(g, /*strict=*/false));
    all.insert(all.end(), g.begin(), g.end());
  }
  out.push_back(exclude(all));
  return out;
}

TensorDict TensorDict::flatten_keys(std::string_view separator) const {
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  out.storage_->set_names(storage_->shared_names());
  std::function<void(const TensorDict&, const std::string&)> visit =
      [&](const TensorDict& level, const std::string& prefix) {
        const Storage& s = *level.storage_;
        for (const std::string& k : s.keys()) {
          Value v = *s.get(k);
          std::string name = prefix.empty() ? k : absl::StrCat(prefix, std::string(separator), k);
          if (v.is_tensordict() && !v.tensordict().is_empty()) {
            visit(v.tensordict(), name);
            continue;
          }
          if (out.storage_->contains(name)) {
            TD_FAIL(ValueError, "flatten_keys: two entries flatten to the same key '", name,
                             "' with separator '", separator, "'");
          }
          out.storage_->set(name, std::move(v));
        }
      };
  visit(*this, "");
  return out;
}

TensorDict TensorDict::unflatten_keys(std::string_view separator) const {
  TORCH_CHECK(!separator.empty(), "unflatten_keys needs a non-empty separator");
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  out.storage_->set_names(storage_->shared_names());
  const Storage& s = *storage_;
  for (const std::string& k : s.keys()) {
    Value v = *s.get(k);
    std::vector<std::string> parts = absl::StrSplit(k, absl::string_view(separator.data(), separator.size()));
    NestedKey key(parts);
    // Collision: the key (or one of its prefixes) is already a leaf, or the key is a level.
    for (size_t i = 1; i <= key.size(); ++i) {
      NestedKey::Parts p(key.parts().begin(), key.parts().begin() + i);
      std::optional<Value> existing = out.find(NestedKey(std::move(p)));
      if (existing && (i == key.size() || !existing->is_tensordict())) {
        TD_FAIL(ValueError, "unflatten_keys: key '", k, "' collides with another entry at ",
                         NestedKey(NestedKey::Parts(key.parts().begin(), key.parts().begin() + i))
                             .repr());
      }
    }
    out.set(key, std::move(v));
  }
  return out;
}

TensorDict TensorDict::empty(bool recurse) const {
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  out.storage_->set_names(storage_->shared_names());
  if (recurse) {
    const Storage& s = *storage_;
    for (const std::string& k : s.keys()) {
      std::optional<Value> v = s.get(k);
      if (v && v->is_tensordict()) out.storage_->set(k, v->tensordict().empty(true));
    }
  }
  return out;
}

TensorDict TensorDict::clone() const {
  internal::LeafTree tree(*this);
  // NOTE [ One buffer, one kernel ] (td/core/leafwise.cc): one copy of a buffer the leaves span.
  std::optional<std::vector<at::Tensor>> out =
      internal::CopyOneBuffer(tree.leaves(), at::TensorOptions());
  if (!out) {
    out = internal::MapEach(
        tree, [](size_t, const at::Tensor& t) { return t.clone(); }, "cloning",
        parallel::ParallelOptions());
  }
  return tree.Rebuild(std::move(*out), batch_size(), /*check=*/false);
}

TensorDict TensorDict::copy() const {
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  out.storage_->set_names(storage_->shared_names());
  const Storage& s = *storage_;
  for (const std::string& k : s.keys()) {
    Value v = *s.get(k);
    out.storage_->set(k, v.is_tensordict() ? Value(v.tensordict().copy()) : std::move(v));
  }
  return out;
}

TensorDict& TensorDict::lock_() {
  LockTree(*this);
  return *this;
}

TensorDict& TensorDict::unlock_() {
  UnlockTree(*this);
  return *this;
}

bool TensorDict::is_locked() const { return storage_->locked(); }

}  // namespace td
