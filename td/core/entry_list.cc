#include "td/core/internal/entry_list.h"

#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace td {

// NOTE [ Nesting depth ]
// TensorDicts nest at most kMaxNestingDepth levels (td/core/errors.h). Each EntryList (the
// entries of one in-memory level: dense, memmap, shared memory) records its depth: 0 for a
// root, and when a sub-TensorDict is set into a level at depth d, the sub-TensorDict's levels
// are raised to d + 1, d + 2, ... (never lowered: a level keeps the deepest position it was set
// at, so a handle to a deep child still knows it is deep). The check runs before the write:
// the core calls PlaceNested(record=false) while validating a value (so a backend that writes
// files first never starts), and EntryList::set / append_new call it again with record=true
// just before storing. Writes through a handle to a child (`c = td.get_tensordict("n");
// c.set(...)`) and nested keys that create levels are therefore refused at the level that
// would be too deep, with a NestingError naming the key and the depth; a TensorDict can never
// be built deeper, so destruction and every recursive walk stay within kMaxNestingDepth frames.
// The walk below is iterative and skips levels already recorded at least as deep (their own
// sub-levels were checked when they got there), so placing a TensorDict costs one visit per
// level that actually moves deeper. Levels computed by lazy backends (stacks, views) hold no
// EntryList: they are walked through keys()/get() for the check, and their own data lives in
// EntryLists whose depths are those of the TensorDicts they come from.

void PlaceNested(const EntryList* into, int into_depth, const TensorDict& sub,
                 std::string_view key, bool record) {
  struct Pending {
    std::shared_ptr<const Storage> storage;
    int depth;
  };
  std::vector<Pending> stack;
  stack.push_back({sub.storage_ptr(), into_depth + 1});
  while (!stack.empty()) {
    Pending p = std::move(stack.back());
    stack.pop_back();
    if (p.depth > kMaxNestingDepth) {
      TD_FAIL(NestingError, "cannot set key ", key, ": it would nest a TensorDict ", p.depth,
                         " levels deep, and TensorDicts nest at most ", kMaxNestingDepth,
                         " levels (td::kMaxNestingDepth; the level written into is at depth ",
                         into_depth, ")");
    }
    const EntryList* held = p.storage->held_entries();
    if (held != nullptr) {
      if (held == into) {
        TD_FAIL(NestingError, "cannot set key ", key,
                           ": the value contains the TensorDict it is set into (a TensorDict "
                           "cannot contain itself)");
      }
      if (held->depth_ >= p.depth) continue;  // already at least this deep: checked then
      if (record) held->depth_ = p.depth;
      for (const EntryList::Entry& e : held->entries_) {
        if (e.second.is_tensordict()) {
          stack.push_back({e.second.tensordict().storage_ptr(), p.depth + 1});
        }
      }
      continue;
    }
    const Storage& s = *p.storage;
    for (const std::string& k : s.keys()) {
      std::optional<EntryMeta> m = s.meta(k);
      if (!m || m->kind != EntryMeta::Kind::kTensorDict) continue;
      std::optional<Value> v = s.get(k);
      if (v && v->is_tensordict()) stack.push_back({v->tensordict().storage_ptr(), p.depth + 1});
    }
  }
}

int64_t EntryList::indexed_position(std::string_view key) const {
  if (!indexed_.load(std::memory_order_acquire)) build_index();
  auto it = index_.find(key);
  return it == index_.end() ? -1 : static_cast<int64_t>(*it);
}

std::vector<std::string> EntryList::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back(e.first);
  return out;
}

size_t EntryList::set(std::string_view key, Value&& value) {
  if (value.is_tensordict()) {
    const std::string quoted = c10::str("'", key, "'");
    PlaceNested(this, depth_, value.tensordict(), quoted, /*record=*/false);
    PlaceNested(this, depth_, value.tensordict(), quoted, /*record=*/true);
  }
  const int64_t i = position(key);
  if (i >= 0) {
    entries_[i].second = std::move(value);
    return static_cast<size_t>(i);
  }
  if (entries_.capacity() == 0) entries_.reserve(kInitialCapacity);
  entries_.emplace_back(std::string(key), std::move(value));
  const size_t pos = entries_.size() - 1;
  if (indexed_.load(std::memory_order_relaxed)) index_.insert(static_cast<uint32_t>(pos));
  return pos;
}

void EntryList::append_new(std::vector<Entry> entries) {
  for (const Entry& e : entries) {
    if (e.second.is_tensordict()) {
      PlaceNested(this, depth_, e.second.tensordict(), c10::str("'", e.first, "'"),
                  /*record=*/false);
    }
  }
  for (const Entry& e : entries) {
    if (e.second.is_tensordict()) {
      PlaceNested(this, depth_, e.second.tensordict(), e.first, /*record=*/true);  // checked
    }
  }
  if (entries_.empty()) {
    entries_ = std::move(entries);
  } else {
    entries_.reserve(entries_.size() + entries.size());
    for (Entry& e : entries) entries_.push_back(std::move(e));
  }
  reset_index();
}

bool EntryList::erase(std::string_view key) {
  const int64_t i = position(key);
  if (i < 0) return false;
  entries_.erase(entries_.begin() + i);
  reset_index();
  return true;
}

void EntryList::reset_index() {
  indexed_.store(false, std::memory_order_relaxed);
  index_.clear();
}

void EntryList::build_index() const {
  std::lock_guard<std::mutex> lock(index_mu_);
  if (indexed_.load(std::memory_order_relaxed)) return;  // another reader built it
  index_.clear();
  index_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) index_.insert(static_cast<uint32_t>(i));
  indexed_.store(true, std::memory_order_release);
}

}  // namespace td
